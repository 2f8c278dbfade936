//! PersonaPlex sessions saved after their prompt phase, one file per
//! (model, voice prompt, text prompt) under `$VOXLANE_HOME/personas`: a
//! repeated persona maps its KV state back instead of re-running the
//! prompt. Files are written atomically; a damaged or foreign one is a miss
//! (and is replaced).

use crate::speech::moshi_executor::PersonaSnapshot;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use voxlane_actors::speech::moshi::LmSnapshot;

const MAGIC: &[u8] = b"VXLPERSONA1\n";

/// A folder of saved persona sessions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PersonaCache {
    dir: PathBuf,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A digest of a file's bytes (the voice prompt's identity in a cache key).
pub fn file_digest(path: &Path) -> std::io::Result<[u8; 32]> {
    let bytes = std::fs::read(path)?;
    Ok(Sha256::digest(&bytes).into())
}

impl PersonaCache {
    /// The cache in `dir` (created on the first store).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The key of a persona: the model's identity, the voice prompt's
    /// digest, the text prompt's ids.
    pub fn key(model: &str, voice: Option<&[u8; 32]>, text_ids: &[u32]) -> String {
        let mut h = Sha256::new();
        h.update(model.as_bytes());
        h.update([u8::from(voice.is_some())]);
        h.update(voice.copied().unwrap_or([0; 32]));
        for t in text_ids {
            h.update(t.to_le_bytes());
        }
        hex(&h.finalize()[..16])
    }

    /// Where `key`'s session lives.
    pub fn path(&self, key: &str) -> PathBuf {
        self.dir.join(format!("persona-{key}.vxlstate"))
    }

    /// The saved session of `key`, if a sound one is there.
    pub fn load(&self, key: &str) -> Option<PersonaSnapshot> {
        let bytes = std::fs::read(self.path(key)).ok()?;
        decode(&bytes, key)
    }

    /// Save `snap` under `key`; returns the file.
    pub fn store(&self, key: &str, snap: &PersonaSnapshot) -> std::io::Result<PathBuf> {
        std::fs::create_dir_all(&self.dir)?;
        let path = self.path(key);
        voxlane_runtime::io::write_atomic(&path, &encode(snap, key))?;
        Ok(path)
    }
}

fn encode(s: &PersonaSnapshot, key: &str) -> Vec<u8> {
    let header = serde_json::json!({
        "key": key,
        "frames": s.lm.frames,
        "positions": s.lm.positions,
        "cache": s.cache,
        "provided": s.provided,
        "offset": s.offset,
        "floats": s.lm.data.len(),
    })
    .to_string();
    let mut out = Vec::with_capacity(MAGIC.len() + 8 + header.len() + 4 * s.lm.data.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(header.len() as u64).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for v in &s.lm.data {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

fn decode(bytes: &[u8], key: &str) -> Option<PersonaSnapshot> {
    let rest = bytes.strip_prefix(MAGIC)?;
    let (len, rest) = rest.split_at_checked(8)?;
    let len = usize::try_from(u64::from_le_bytes(len.try_into().ok()?)).ok()?;
    let (header, data) = rest.split_at_checked(len)?;
    let h: serde_json::Value = serde_json::from_slice(header).ok()?;
    if h["key"].as_str() != Some(key) {
        return None;
    }
    let usizes = |v: &serde_json::Value| -> Option<Vec<usize>> {
        v.as_array()?
            .iter()
            .map(|x| x.as_u64().and_then(|x| usize::try_from(x).ok()))
            .collect()
    };
    let floats = usize::try_from(h["floats"].as_u64()?).ok()?;
    if data.len() != floats.checked_mul(4)? {
        return None;
    }
    Some(PersonaSnapshot {
        lm: LmSnapshot {
            frames: usize::try_from(h["frames"].as_u64()?).ok()?,
            positions: usizes(&h["positions"])?,
            data: data
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        },
        cache: h["cache"]
            .as_array()?
            .iter()
            .map(serde_json::Value::as_i64)
            .collect::<Option<_>>()?,
        provided: h["provided"]
            .as_array()?
            .iter()
            .map(serde_json::Value::as_bool)
            .collect::<Option<_>>()?,
        offset: usize::try_from(h["offset"].as_u64()?).ok()?,
    })
}
