//! voxlane's packed-weights container: buffers already in a kernel's own
//! layout, written once and mapped back in place.
//!
//! Converting and packing a large model (f32/bf16 → q8_0, the i16 route's
//! row groups) costs seconds to minutes; mapping the result back costs a
//! header parse. safetensors cannot hold this directly (its tensors must
//! follow each other without holes, so their data cannot all be aligned),
//! hence a small container of its own:
//!
//! ```text
//! 0   magic  "VXLPACK\0"                      8 bytes
//! 8   version (u32 LE) = 1, flags (u32) = 0   8 bytes
//! 16  header offset (u64 LE)                  8 bytes
//! 24  header length (u64 LE)                  8 bytes
//! 32  FNV-1a 64 of the header bytes (u64 LE)  8 bytes
//! 40  zero                                    24 bytes
//! 64  data: every part at a multiple of 64, zero bytes between parts
//! H   header: JSON, the file ends right after it
//! ```
//!
//! The header is `{"metadata": {k: v}, "entries": [{"name", "format",
//! "shape": [..], "parts": [{"name", "dtype", "offset", "len"}]}]}` with
//! absolute byte offsets. It is checked in full (hash, bounds, alignment,
//! overlaps, names) before any part is handed out; the data is not hashed,
//! so a load stays a header parse. The header sits at the end so the writer
//! streams parts as they come and patches the fixed preamble last.

use super::buf::Buf;
use super::dtype::DType;
use super::error::WeightError;
use memmap2::Mmap;
use std::collections::{BTreeMap, HashSet};
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The first 8 bytes of a packed-weights file.
pub const PACKED_MAGIC: [u8; 8] = *b"VXLPACK\0";
/// The container version this build writes and reads.
pub const PACKED_VERSION: u32 = 1;
/// Every part's data starts at a multiple of this many bytes (a cache line,
/// enough for any SIMD element type).
pub const PACKED_ALIGN: usize = 64;

/// Bytes before the data section.
const PREAMBLE: usize = 64;
/// Largest header accepted.
const MAX_HEADER: u64 = 100 * 1024 * 1024;

/// FNV-1a, 64-bit: enough to catch a damaged header (not an adversary).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// One borrowed buffer to write: a name within its entry, a dtype and the raw little-endian bytes.
#[derive(Debug, Clone, Copy)]
pub struct PartRef<'a> {
    /// Name within the entry (e.g. `"scales"`).
    pub name: &'a str,
    /// Element type of the bytes.
    pub dtype: DType,
    /// The bytes, little-endian.
    pub bytes: &'a [u8],
}

/// Writes a packed-weights file entry by entry, streaming each part's bytes
/// (nothing is gathered in memory) into a temp file that [`finish`]
/// renames into place; dropped unfinished, it removes the temp file.
///
/// [`finish`]: PackedWriter::finish
#[derive(Debug)]
pub struct PackedWriter {
    path: PathBuf,
    tmp: PathBuf,
    out: Option<std::io::BufWriter<std::fs::File>>,
    pos: u64,
    entries: Vec<serde_json::Value>,
    names: HashSet<String>,
    poisoned: bool,
}

impl PackedWriter {
    /// Start writing `path` (a temp file beside it until [`Self::finish`]).
    pub fn create(path: impl AsRef<Path>) -> Result<Self, WeightError> {
        let path = path.as_ref().to_path_buf();
        let io = |source| WeightError::Io {
            path: path.clone(),
            source,
        };
        if cfg!(target_endian = "big") {
            return Err(io(std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "packed-weights files are little-endian",
            )));
        }
        let mut name = path.file_name().unwrap_or_default().to_os_string();
        // Unique per writer, not only per process: threads of one process
        // may write the same file at once (the last rename wins, whole).
        static WRITERS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = WRITERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        name.push(format!(".{}.{n}.partial", std::process::id()));
        let tmp = path.with_file_name(name);
        let file = std::fs::File::create(&tmp).map_err(io)?;
        let mut w = Self {
            path,
            tmp,
            out: Some(std::io::BufWriter::with_capacity(1 << 20, file)),
            pos: 0,
            entries: Vec::new(),
            names: HashSet::new(),
            poisoned: false,
        };
        // The preamble is written for real by `finish`; zeros until then.
        w.write(&[0u8; PREAMBLE])?;
        Ok(w)
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), WeightError> {
        let r = match self.out.as_mut() {
            Some(out) if !self.poisoned => out.write_all(bytes),
            _ => Err(std::io::Error::other("an earlier write failed")),
        };
        match r {
            Ok(()) => {
                self.pos += bytes.len() as u64;
                Ok(())
            }
            Err(source) => {
                self.poisoned = true;
                Err(WeightError::Io {
                    path: self.path.clone(),
                    source,
                })
            }
        }
    }

    /// Append entry `name` (a `format` tag and `shape` for the reader to
    /// check, and its parts, each aligned to [`PACKED_ALIGN`]).
    pub fn push(
        &mut self,
        name: &str,
        format: &str,
        shape: &[usize],
        parts: &[PartRef<'_>],
    ) -> Result<(), WeightError> {
        let mismatch = |expected: &str, found: String| WeightError::Mismatch {
            tensor: name.to_string(),
            expected: expected.to_string(),
            found,
        };
        if self.names.contains(name) {
            return Err(mismatch("a unique entry name", "a second entry".into()));
        }
        let mut part_names = HashSet::new();
        for p in parts {
            if !part_names.insert(p.name) {
                return Err(mismatch("unique part names", format!("`{}` twice", p.name)));
            }
            if !p.bytes.len().is_multiple_of(p.dtype.size()) {
                return Err(mismatch(
                    "whole elements",
                    format!(
                        "{} bytes of {} in `{}`",
                        p.bytes.len(),
                        p.dtype.name(),
                        p.name
                    ),
                ));
            }
        }
        let mut descs = Vec::with_capacity(parts.len());
        for p in parts {
            let pad = (PACKED_ALIGN as u64 - self.pos % PACKED_ALIGN as u64) % PACKED_ALIGN as u64;
            self.write(&[0u8; PACKED_ALIGN][..pad as usize])?;
            descs.push(serde_json::json!({
                "name": p.name,
                "dtype": p.dtype.name(),
                "offset": self.pos,
                "len": p.bytes.len(),
            }));
            self.write(p.bytes)?;
        }
        self.names.insert(name.to_string());
        self.entries.push(serde_json::json!({
            "name": name,
            "format": format,
            "shape": shape,
            "parts": descs,
        }));
        Ok(())
    }

    /// Write the header and preamble with `metadata`, sync, and rename the
    /// file into place (the only moment `path` changes).
    pub fn finish(mut self, metadata: &[(&str, &str)]) -> Result<(), WeightError> {
        let meta: serde_json::Map<String, serde_json::Value> = metadata
            .iter()
            .map(|(k, v)| (k.to_string(), serde_json::Value::from(*v)))
            .collect();
        let header = serde_json::json!({
            "metadata": meta,
            "entries": std::mem::take(&mut self.entries),
        })
        .to_string()
        .into_bytes();
        let header_offset = self.pos;
        self.write(&header)?;
        let mut pre = [0u8; PREAMBLE];
        pre[..8].copy_from_slice(&PACKED_MAGIC);
        pre[8..12].copy_from_slice(&PACKED_VERSION.to_le_bytes());
        pre[16..24].copy_from_slice(&header_offset.to_le_bytes());
        pre[24..32].copy_from_slice(&(header.len() as u64).to_le_bytes());
        pre[32..40].copy_from_slice(&fnv1a(&header).to_le_bytes());
        let out = self.out.take();
        let result = (|| {
            let mut file = out
                .ok_or_else(|| std::io::Error::other("writer already closed"))?
                .into_inner()
                .map_err(|e| e.into_error())?;
            file.seek(SeekFrom::Start(0))?;
            file.write_all(&pre)?;
            file.sync_all()?;
            drop(file);
            std::fs::rename(&self.tmp, &self.path)?;
            // Best effort: make the rename itself durable.
            if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
                if let Ok(d) = std::fs::File::open(dir) {
                    let _ = d.sync_all();
                }
            }
            Ok(())
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&self.tmp);
        }
        result.map_err(|source| WeightError::Io {
            path: self.path.clone(),
            source,
        })
    }
}

impl Drop for PackedWriter {
    fn drop(&mut self) {
        // Unfinished (an error, or never finished): leave no partial file.
        if let Some(out) = self.out.take() {
            drop(out);
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// One stored buffer, mapped in place.
#[derive(Debug, Clone)]
pub struct PackedPart {
    /// Name within the entry.
    pub name: String,
    /// Element type of the bytes.
    pub dtype: DType,
    /// The bytes: a range of the file's map (64-byte aligned).
    pub data: Buf<u8>,
}

/// One stored entry: its name, format tag, shape and parts, as written.
#[derive(Debug, Clone)]
pub struct PackedEntry {
    /// Entry name (unique in the file).
    pub name: String,
    /// The writer's format tag.
    pub format: String,
    /// The writer's shape.
    pub shape: Vec<usize>,
    /// The parts, in the order written.
    pub parts: Vec<PackedPart>,
}

impl PackedEntry {
    /// The part called `name`, if present.
    pub fn part(&self, name: &str) -> Option<&PackedPart> {
        self.parts.iter().find(|p| p.name == name)
    }
}

/// A packed-weights file mapped into memory, its header checked in full.
#[derive(Debug)]
pub struct PackedFile {
    path: PathBuf,
    entries: Vec<PackedEntry>,
    metadata: BTreeMap<String, String>,
}

impl PackedFile {
    /// Map and validate `path`: preamble, header hash and JSON, and every
    /// part's bounds, alignment, dtype and overlap; the data is not read.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, WeightError> {
        let path = path.as_ref().to_path_buf();
        let io = |source| WeightError::Io {
            path: path.clone(),
            source,
        };
        let file = std::fs::File::open(&path).map_err(io)?;
        // SAFETY: read-only mapping; voxlane writes these files to a temp
        // name and renames them into place, never modifying a mapped file.
        let map = unsafe { Mmap::map(&file) }.map_err(io)?;
        Self::parse(path, Arc::new(map))
    }

    /// Validate packed-weights bytes held in memory (`label` names them in
    /// errors), as [`Self::open`] validates a file: the bytes are copied into
    /// an anonymous map, which the parts then read in place.
    pub fn from_bytes(bytes: &[u8], label: impl Into<PathBuf>) -> Result<Self, WeightError> {
        let path = label.into();
        let map = super::buf::map_copy(bytes).map_err(|source| WeightError::Io {
            path: path.clone(),
            source,
        })?;
        Self::parse(path, Arc::new(map))
    }

    fn parse(path: PathBuf, map: Arc<Mmap>) -> Result<Self, WeightError> {
        let len = map.len();
        let truncated = |detail: String| WeightError::Truncated {
            path: path.clone(),
            detail,
        };
        let corrupt = |detail: String| WeightError::Corrupt {
            path: path.clone(),
            detail,
        };
        let magic_len = len.min(PACKED_MAGIC.len());
        if map[..magic_len] != PACKED_MAGIC[..magic_len] {
            return Err(WeightError::Foreign {
                path: path.clone(),
                detail: "no VXLPACK magic: not a packed-weights file".into(),
            });
        }
        if len < PREAMBLE {
            return Err(truncated(format!(
                "{len} bytes, the preamble needs {PREAMBLE}"
            )));
        }
        let u32_at = |at: usize| {
            let mut b = [0u8; 4];
            b.copy_from_slice(&map[at..at + 4]);
            u32::from_le_bytes(b)
        };
        let u64_at = |at: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&map[at..at + 8]);
            u64::from_le_bytes(b)
        };
        let version = u32_at(8);
        if version != PACKED_VERSION {
            return Err(WeightError::Version {
                path: path.clone(),
                found: version,
                supported: PACKED_VERSION,
            });
        }
        if u32_at(12) != 0 || map[40..PREAMBLE].iter().any(|&b| b != 0) {
            return Err(corrupt("reserved preamble bytes are not zero".into()));
        }
        let (h_off, h_len) = (u64_at(16), u64_at(24));
        if h_len > MAX_HEADER || h_off < PREAMBLE as u64 {
            return Err(corrupt(format!(
                "header at {h_off} of {h_len} bytes is implausible"
            )));
        }
        let h_end = h_off
            .checked_add(h_len)
            .ok_or_else(|| corrupt("header range overflows".into()))?;
        if h_end > len as u64 {
            return Err(truncated(format!(
                "header ends at {h_end}, file has {len} bytes"
            )));
        }
        if h_end < len as u64 {
            return Err(corrupt(format!(
                "{} bytes after the header",
                len as u64 - h_end
            )));
        }
        // Both fit in the file's length, hence in usize.
        let (h_off, h_end) = (h_off as usize, h_end as usize);
        let header = &map[h_off..h_end];
        if fnv1a(header) != u64_at(32) {
            return Err(corrupt("header hash does not match".into()));
        }
        let json: serde_json::Value = serde_json::from_slice(header)
            .map_err(|e| corrupt(format!("header is not JSON: {e}")))?;
        let mut metadata = BTreeMap::new();
        if let Some(m) = json.get("metadata") {
            let m = m
                .as_object()
                .ok_or_else(|| corrupt("metadata is not an object".into()))?;
            for (k, v) in m {
                let v = v
                    .as_str()
                    .ok_or_else(|| corrupt(format!("metadata `{k}` is not a string")))?;
                metadata.insert(k.clone(), v.to_string());
            }
        }
        let list = json
            .get("entries")
            .and_then(|e| e.as_array())
            .ok_or_else(|| corrupt("no entries list".into()))?;
        let mut entries = Vec::with_capacity(list.len());
        let mut names = HashSet::new();
        let mut ranges: Vec<(usize, usize)> = Vec::new();
        for e in list {
            let name = e
                .get("name")
                .and_then(|v| v.as_str())
                .ok_or_else(|| corrupt("an entry has no name".into()))?;
            let bad = |what: String| corrupt(format!("entry `{name}`: {what}"));
            if !names.insert(name) {
                return Err(bad("appears twice".into()));
            }
            let format = e
                .get("format")
                .and_then(|v| v.as_str())
                .ok_or_else(|| bad("no format".into()))?;
            let shape = e
                .get("shape")
                .and_then(|v| v.as_array())
                .ok_or_else(|| bad("no shape".into()))?
                .iter()
                .map(|d| {
                    d.as_u64()
                        .and_then(|d| usize::try_from(d).ok())
                        .ok_or_else(|| bad("bad shape".into()))
                })
                .collect::<Result<Vec<usize>, _>>()?;
            let plist = e
                .get("parts")
                .and_then(|v| v.as_array())
                .ok_or_else(|| bad("no parts".into()))?;
            let mut parts = Vec::with_capacity(plist.len());
            for p in plist {
                let field = |key: &str| {
                    p.get(key)
                        .and_then(|v| v.as_u64())
                        .and_then(|v| usize::try_from(v).ok())
                        .ok_or_else(|| bad(format!("a part has no {key}")))
                };
                let pname = p
                    .get("name")
                    .and_then(|v| v.as_str())
                    .ok_or_else(|| bad("a part has no name".into()))?;
                if parts.iter().any(|q: &PackedPart| q.name == pname) {
                    return Err(bad(format!("part `{pname}` appears twice")));
                }
                let dtype = DType::parse(
                    p.get("dtype")
                        .and_then(|v| v.as_str())
                        .ok_or_else(|| bad(format!("part `{pname}` has no dtype")))?,
                    name,
                )?;
                let (offset, plen) = (field("offset")?, field("len")?);
                let end = offset
                    .checked_add(plen)
                    .filter(|&end| offset >= PREAMBLE && end <= h_off)
                    .ok_or_else(|| {
                        bad(format!(
                            "part `{pname}` at {offset}+{plen} is outside the data section 64..{h_off}"
                        ))
                    })?;
                if !offset.is_multiple_of(PACKED_ALIGN) {
                    return Err(bad(format!(
                        "part `{pname}` at {offset} is not {PACKED_ALIGN}-byte aligned"
                    )));
                }
                if !plen.is_multiple_of(dtype.size()) {
                    return Err(bad(format!(
                        "part `{pname}`: {plen} bytes are not whole {}",
                        dtype.name()
                    )));
                }
                if plen > 0 {
                    ranges.push((offset, end));
                }
                let data = Buf::mapped(Arc::clone(&map), offset, plen)?;
                parts.push(PackedPart {
                    name: pname.to_string(),
                    dtype,
                    data,
                });
            }
            entries.push(PackedEntry {
                name: name.to_string(),
                format: format.to_string(),
                shape,
                parts,
            });
        }
        ranges.sort_unstable();
        if let Some(w) = ranges.windows(2).find(|w| w[1].0 < w[0].1) {
            return Err(corrupt(format!(
                "parts at {}..{} and {}..{} overlap",
                w[0].0, w[0].1, w[1].0, w[1].1
            )));
        }
        Ok(Self {
            path,
            entries,
            metadata,
        })
    }

    /// The file this was mapped from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The writer's metadata.
    pub fn metadata(&self) -> &BTreeMap<String, String> {
        &self.metadata
    }

    /// The entries, in the order written.
    pub fn entries(&self) -> &[PackedEntry] {
        &self.entries
    }

    /// The entry called `name`, if present.
    pub fn get(&self, name: &str) -> Option<&PackedEntry> {
        self.entries.iter().find(|e| e.name == name)
    }

    /// The entries and metadata, moved out (the map lives on in their parts).
    pub fn into_parts(self) -> (Vec<PackedEntry>, BTreeMap<String, String>) {
        (self.entries, self.metadata)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn tmp(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("voxlane-packed-{}-{name}", std::process::id()))
    }

    fn map_of(bytes: &[u8]) -> Arc<Mmap> {
        let mut m = memmap2::MmapMut::map_anon(bytes.len().max(1)).unwrap();
        m[..bytes.len()].copy_from_slice(bytes);
        let m = m.make_read_only().unwrap();
        Arc::new(m)
    }

    /// Parse `bytes` as a file of exactly that length.
    fn parse(bytes: &[u8]) -> Result<PackedFile, WeightError> {
        if bytes.is_empty() {
            return PackedFile::open(tmp("does-not-exist"));
        }
        PackedFile::parse(PathBuf::from("mem"), map_of(bytes))
    }

    fn sample(path: &Path) -> Vec<u8> {
        let f: Vec<u8> = [1.0f32, -2.5, 3.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let q: Vec<u8> = (0..37u8).collect();
        let mut w = PackedWriter::create(path).unwrap();
        w.push(
            "a",
            "q8_0",
            &[3, 32],
            &[
                PartRef {
                    name: "scales",
                    dtype: DType::F32,
                    bytes: &f,
                },
                PartRef {
                    name: "quants",
                    dtype: DType::U8,
                    bytes: &q,
                },
            ],
        )
        .unwrap();
        w.push(
            "b",
            "f16",
            &[1, 1],
            &[PartRef {
                name: "bits",
                dtype: DType::F16,
                bytes: &[0, 0x3c],
            }],
        )
        .unwrap();
        w.push("empty", "none", &[], &[]).unwrap();
        w.finish(&[("source", "test"), ("options", "x=1")]).unwrap();
        std::fs::read(path).unwrap()
    }

    #[test]
    fn round_trip_in_place_and_aligned() {
        let p = tmp("rt.vxlpack");
        let bytes = sample(&p);
        let f = PackedFile::open(&p).unwrap();
        assert_eq!(f.metadata()["source"], "test");
        assert_eq!(f.metadata()["options"], "x=1");
        let names: Vec<_> = f.entries().iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "empty"]);
        let a = f.get("a").unwrap();
        assert_eq!((a.format.as_str(), &a.shape[..]), ("q8_0", &[3, 32][..]));
        let s = a.part("scales").unwrap();
        assert_eq!(s.dtype, DType::F32);
        assert!(s.data.is_mapped());
        assert_eq!(s.data.as_ptr() as usize % PACKED_ALIGN, 0);
        assert_eq!(&s.data.cast::<f32>().unwrap()[..], &[1.0, -2.5, 3.0]);
        let q = a.part("quants").unwrap();
        assert_eq!(&q.data[..], &(0..37u8).collect::<Vec<_>>()[..]);
        assert_eq!(q.data.as_ptr() as usize % PACKED_ALIGN, 0);
        let b = f.get("b").unwrap().part("bits").unwrap();
        assert_eq!(&b.data.cast::<u16>().unwrap()[..], &[0x3c00]);
        assert!(f.get("empty").unwrap().parts.is_empty());
        assert!(f.get("nope").is_none());
        // The parts outlive the file handle: the map is shared.
        let (entries, _) = f.into_parts();
        assert_eq!(entries[0].parts[1].data[36], 36);
        assert_eq!(&bytes[..8], &PACKED_MAGIC);
        std::fs::remove_file(&p).unwrap();
    }

    #[test]
    fn every_flipped_header_byte_is_an_error() {
        let p = tmp("flip.vxlpack");
        let bytes = sample(&p);
        std::fs::remove_file(&p).unwrap();
        let mut h = [0u8; 8];
        h.copy_from_slice(&bytes[16..24]);
        let h_off = u64::from_le_bytes(h) as usize;
        let positions = (0..PREAMBLE).chain(h_off..bytes.len());
        for i in positions {
            for bit in [0x01u8, 0x80] {
                let mut b = bytes.clone();
                b[i] ^= bit;
                assert!(
                    parse(&b).is_err(),
                    "flip of bit {bit:#x} at byte {i} went unnoticed"
                );
            }
        }
    }

    #[test]
    fn truncated_foreign_and_versioned_files_are_named() {
        let p = tmp("trunc.vxlpack");
        let bytes = sample(&p);
        std::fs::remove_file(&p).unwrap();
        for cut in [1, 10, 63, 64, 100, bytes.len() - 1] {
            let e = parse(&bytes[..cut]).unwrap_err();
            assert!(matches!(e, WeightError::Truncated { .. }), "cut {cut}: {e}");
        }
        let e = parse(b"PK\x03\x04 a zip, not weights").unwrap_err();
        assert!(matches!(e, WeightError::Foreign { .. }), "{e}");
        let mut v = bytes.clone();
        v[8] = 2;
        assert!(matches!(
            parse(&v),
            Err(WeightError::Version {
                found: 2,
                supported: 1,
                ..
            })
        ));
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(matches!(parse(&longer), Err(WeightError::Corrupt { .. })));
        assert!(matches!(parse(&[]), Err(WeightError::Io { .. })));
    }

    /// A file whose header is `header` (hash fixed up), data `data` bytes of zeros.
    fn with_header(header: &str, data: usize) -> Vec<u8> {
        let mut b = vec![0u8; PREAMBLE + data];
        b[..8].copy_from_slice(&PACKED_MAGIC);
        b[8..12].copy_from_slice(&PACKED_VERSION.to_le_bytes());
        b[16..24].copy_from_slice(&((PREAMBLE + data) as u64).to_le_bytes());
        b[24..32].copy_from_slice(&(header.len() as u64).to_le_bytes());
        b[32..40].copy_from_slice(&fnv1a(header.as_bytes()).to_le_bytes());
        b.extend_from_slice(header.as_bytes());
        b
    }

    #[test]
    fn hostile_headers_are_corrupt() {
        let part = |off: &str, len: &str, dtype: &str| {
            format!(
                r#"{{"entries":[{{"name":"a","format":"f32","shape":[1],"parts":[{{"name":"p","dtype":"{dtype}","offset":{off},"len":{len}}}]}}]}}"#
            )
        };
        assert!(parse(&with_header(&part("64", "128", "F32"), 128)).is_ok());
        for h in [
            part("0", "4", "F32"),
            part("96", "4", "F32"),
            part("64", "132", "F32"),
            part("64", "6", "F32"),
            part("64", "18446744073709551615", "U8"),
            part("18446744073709551552", "128", "U8"),
            part("-64", "4", "U8"),
            r#"{"entries":[{"name":"a","format":"f32","shape":[1],"parts":[{"name":"p","dtype":"U8","offset":64,"len":64},{"name":"q","dtype":"U8","offset":64,"len":4}]}]}"#.into(),
            r#"{"entries":[{"name":"a","format":"f32","shape":[1],"parts":[]},{"name":"a","format":"f32","shape":[1],"parts":[]}]}"#.into(),
            r#"{"entries":[{"name":"a","format":"f32","shape":[-1],"parts":[]}]}"#.into(),
            r#"{"metadata":{"k":1},"entries":[]}"#.into(),
            r#"{"metadata":[]}"#.into(),
            "[]".into(),
            "not json".into(),
        ] {
            let e = parse(&with_header(&h, 128));
            assert!(e.is_err(), "{h}");
        }
        assert!(matches!(
            parse(&with_header(&part("64", "4", "F64"), 128)),
            Err(WeightError::UnsupportedDtype { .. })
        ));
    }

    #[test]
    fn failed_writes_leave_nothing() {
        let dir = tmp("dir");
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("w.vxlpack");
        let mut w = PackedWriter::create(&p).unwrap();
        w.push("a", "x", &[1], &[]).unwrap();
        assert!(matches!(
            w.push("a", "x", &[1], &[]),
            Err(WeightError::Mismatch { .. })
        ));
        let odd = PartRef {
            name: "p",
            dtype: DType::F32,
            bytes: &[0; 6],
        };
        assert!(w.push("b", "x", &[1], &[odd]).is_err());
        drop(w);
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            0,
            "temp file left"
        );
        assert!(PackedWriter::create(dir.join("missing/w.vxlpack")).is_err());
        std::fs::remove_dir(&dir).unwrap();
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn damaged_files_never_panic(cut in 0usize..2000, flips in proptest::collection::vec((0usize..2000, any::<u8>()), 0..4)) {
            static SAMPLE: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
            let mut bytes = SAMPLE
                .get_or_init(|| {
                    let p = tmp("prop.vxlpack");
                    let b = sample(&p);
                    std::fs::remove_file(&p).unwrap();
                    b
                })
                .clone();
            for (at, x) in flips {
                let i = at % bytes.len();
                bytes[i] ^= x;
            }
            bytes.truncate(cut.min(bytes.len()).max(1));
            let _ = parse(&bytes);
        }

        #[test]
        fn random_bytes_never_panic(mut bytes in proptest::collection::vec(any::<u8>(), 1..512), magic in any::<bool>()) {
            if magic {
                let n = bytes.len().min(8);
                bytes[..n].copy_from_slice(&PACKED_MAGIC[..n]);
            }
            prop_assert!(parse(&bytes).is_err());
        }
    }
}
