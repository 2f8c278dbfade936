//! Reading a memory-mapped safetensors file.

use super::buf::{Buf, Pod};
use super::dtype::DType;
use super::error::WeightError;
use half::{bf16, f16};
use memmap2::Mmap;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Largest header voxlane accepts (safetensors itself caps it at 100 MB).
const MAX_HEADER: u64 = 100 * 1024 * 1024;

#[derive(Debug, Clone)]
struct Entry {
    dtype: DType,
    shape: Vec<usize>,
    start: usize,
    end: usize,
}

/// A safetensors file mapped into memory, its header parsed and validated.
#[derive(Debug)]
pub struct WeightFile {
    path: PathBuf,
    /// Shared so [`Buf`]s handed out keep the mapping alive.
    map: Arc<Mmap>,
    data_start: usize,
    tensors: BTreeMap<String, Entry>,
    metadata: BTreeMap<String, String>,
}

/// A borrowed tensor: dtype, shape and raw little-endian bytes.
#[derive(Debug, Clone, Copy)]
pub struct TensorView<'a> {
    /// Tensor name.
    pub name: &'a str,
    /// Element type.
    pub dtype: DType,
    /// Shape, outermost first.
    pub shape: &'a [usize],
    /// The raw bytes (little-endian).
    pub bytes: &'a [u8],
}

impl TensorView<'_> {
    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// Convert any float dtype (and integers) to f32.
    pub fn to_f32(&self) -> Vec<f32> {
        let b = self.bytes;
        match self.dtype {
            DType::F32 => b
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
            DType::F16 => b
                .chunks_exact(2)
                .map(|c| f16::from_le_bytes([c[0], c[1]]).to_f32())
                .collect(),
            DType::BF16 => b
                .chunks_exact(2)
                .map(|c| bf16::from_le_bytes([c[0], c[1]]).to_f32())
                .collect(),
            DType::I8 => b.iter().map(|&x| x as i8 as f32).collect(),
            DType::U8 => b.iter().map(|&x| x as f32).collect(),
            DType::I32 => b
                .chunks_exact(4)
                .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f32)
                .collect(),
            DType::I64 => b
                .chunks_exact(8)
                .map(|c| {
                    i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]) as f32
                })
                .collect(),
        }
    }

    /// The raw bytes as i8 (for I8 tensors).
    pub fn as_i8(&self) -> Option<&[i8]> {
        (self.dtype == DType::I8).then(|| {
            // SAFETY: i8 and u8 have the same size and alignment.
            unsafe {
                std::slice::from_raw_parts(self.bytes.as_ptr().cast::<i8>(), self.bytes.len())
            }
        })
    }

    /// The bytes as 16-bit words (for F16/BF16 tensors), copied.
    pub fn to_u16(&self) -> Vec<u16> {
        self.bytes
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect()
    }

    /// Integer tensors as i64.
    pub fn to_i64(&self) -> Vec<i64> {
        let b = self.bytes;
        match self.dtype {
            DType::I64 => b
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
                .collect(),
            DType::I32 => b
                .chunks_exact(4)
                .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64)
                .collect(),
            _ => self.to_f32().into_iter().map(|x| x as i64).collect(),
        }
    }
}

impl WeightFile {
    /// Map and validate `path`: header length, JSON, dtypes and every tensor's byte range.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, WeightError> {
        let path = path.as_ref().to_path_buf();
        let io = |source| WeightError::Io {
            path: path.clone(),
            source,
        };
        let file = std::fs::File::open(&path).map_err(io)?;
        // SAFETY: the mapping is read-only; voxlane never writes model files
        // while they are mapped (converted files are written to a temp name
        // and renamed into place).
        let map = unsafe { Mmap::map(&file) }.map_err(io)?;
        Self::parse(path, map)
    }

    /// Validate safetensors bytes held in memory (`label` names them in
    /// errors), as [`Self::open`] validates a file: the bytes are copied into
    /// an anonymous map, so views and [`Buf`]s behave as for a mapped file.
    pub fn from_bytes(bytes: &[u8], label: impl Into<PathBuf>) -> Result<Self, WeightError> {
        let path = label.into();
        let map = super::buf::map_copy(bytes).map_err(|source| WeightError::Io {
            path: path.clone(),
            source,
        })?;
        Self::parse(path, map)
    }

    fn parse(path: PathBuf, map: Mmap) -> Result<Self, WeightError> {
        let foreign = |detail: String| WeightError::Foreign {
            path: path.clone(),
            detail,
        };
        let truncated = |detail: String| WeightError::Truncated {
            path: path.clone(),
            detail,
        };
        if map.len() < 8 {
            return Err(truncated(format!("{} bytes, need at least 8", map.len())));
        }
        let mut len8 = [0u8; 8];
        len8.copy_from_slice(&map[..8]);
        let header_len = u64::from_le_bytes(len8);
        if header_len > MAX_HEADER {
            return Err(foreign(format!(
                "header length {header_len} is implausible"
            )));
        }
        let header_end = 8 + header_len as usize;
        if map.len() < header_end {
            return Err(truncated(format!(
                "header needs {header_end} bytes, file has {}",
                map.len()
            )));
        }
        let header: serde_json::Value = serde_json::from_slice(&map[8..header_end])
            .map_err(|e| foreign(format!("header is not JSON: {e}")))?;
        let obj = header
            .as_object()
            .ok_or_else(|| foreign("header is not a JSON object".into()))?;
        let data_len = map.len() - header_end;
        let mut tensors = BTreeMap::new();
        let mut metadata = BTreeMap::new();
        for (name, v) in obj {
            if name == "__metadata__" {
                if let Some(m) = v.as_object() {
                    for (k, val) in m {
                        metadata.insert(k.clone(), val.as_str().unwrap_or_default().to_string());
                    }
                }
                continue;
            }
            let bad = |what: &str| foreign(format!("tensor `{name}`: {what}"));
            let dtype = DType::parse(v["dtype"].as_str().ok_or_else(|| bad("no dtype"))?, name)?;
            let shape: Vec<usize> = v["shape"]
                .as_array()
                .ok_or_else(|| bad("no shape"))?
                .iter()
                .map(|d| {
                    d.as_u64()
                        .map(|d| d as usize)
                        .ok_or_else(|| bad("bad shape"))
                })
                .collect::<Result<_, _>>()?;
            let offsets = v["data_offsets"]
                .as_array()
                .ok_or_else(|| bad("no data_offsets"))?;
            let (start, end) = match (
                offsets.first().and_then(|x| x.as_u64()),
                offsets.get(1).and_then(|x| x.as_u64()),
            ) {
                (Some(s), Some(e)) if s <= e => (s as usize, e as usize),
                _ => return Err(bad("bad data_offsets")),
            };
            // Checked: a hostile header's shape must not overflow.
            let bytes = shape
                .iter()
                .try_fold(dtype.size(), |acc, &d| acc.checked_mul(d))
                .ok_or_else(|| bad("shape overflows"))?;
            if end - start != bytes {
                return Err(bad(&format!(
                    "{} bytes for shape {shape:?} of {}",
                    end - start,
                    dtype.name()
                )));
            }
            if end > data_len {
                return Err(truncated(format!(
                    "tensor `{name}` ends at {end}, data has {data_len} bytes"
                )));
            }
            tensors.insert(
                name.clone(),
                Entry {
                    dtype,
                    shape,
                    start,
                    end,
                },
            );
        }
        Ok(Self {
            path,
            map: Arc::new(map),
            data_start: header_end,
            tensors,
            metadata,
        })
    }

    /// The file this was mapped from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Tensor names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tensors.keys().map(String::as_str)
    }

    /// The `__metadata__` entries.
    pub fn metadata(&self) -> &BTreeMap<String, String> {
        &self.metadata
    }

    /// A tensor, if present.
    pub fn get(&self, name: &str) -> Option<TensorView<'_>> {
        self.tensors.get_key_value(name).map(|(k, e)| TensorView {
            name: k,
            dtype: e.dtype,
            shape: &e.shape,
            bytes: &self.map[self.data_start + e.start..self.data_start + e.end],
        })
    }

    /// A tensor that must be present.
    pub fn require(&self, name: &str) -> Result<TensorView<'_>, WeightError> {
        self.get(name)
            .ok_or_else(|| WeightError::Missing(name.to_string()))
    }

    /// A tensor's bytes as a mapped [`Buf`] of `T` (no copy): its dtype must
    /// have `T`'s size and its data must start aligned for `T`.
    pub fn buf<T: Pod>(&self, name: &str) -> Result<Buf<T>, WeightError> {
        let e = self
            .tensors
            .get(name)
            .ok_or_else(|| WeightError::Missing(name.to_string()))?;
        if e.dtype.size() != std::mem::size_of::<T>() {
            return Err(WeightError::Mismatch {
                tensor: name.to_string(),
                expected: format!("{}-byte elements ({})", std::mem::size_of::<T>(), T::NAME),
                found: e.dtype.name().to_string(),
            });
        }
        let start = self.data_start + e.start;
        Buf::mapped(Arc::clone(&self.map), start, e.end - e.start).map_err(|err| match err {
            WeightError::Misaligned { detail, .. } => WeightError::Misaligned {
                what: format!("tensor `{name}`"),
                detail,
            },
            other => other,
        })
    }

    /// Tell the OS a tensor's pages are not needed now: a read-only file
    /// mapping drops them from this process's resident set and reads them
    /// again from the file if they are touched later. Loaders call this
    /// after converting a tensor, so converting a 16 GB checkpoint keeps
    /// only the converted copy resident.
    pub fn release(&self, name: &str) {
        if let Some(e) = self.tensors.get(name) {
            let start = self.data_start + e.start;
            // SAFETY: the map is read-only and file-backed, so dropped pages
            // are re-read from the file on the next access: no data is lost
            // and every live `Buf` or view stays valid.
            let _ = unsafe {
                self.map.unchecked_advise_range(
                    memmap2::UncheckedAdvice::DontNeed,
                    start,
                    e.end - e.start,
                )
            };
        }
    }

    /// A tensor that must be present with exactly `shape`.
    pub fn require_shape(
        &self,
        name: &str,
        shape: &[usize],
    ) -> Result<TensorView<'_>, WeightError> {
        let t = self.require(name)?;
        if t.shape != shape {
            return Err(WeightError::Mismatch {
                tensor: name.to_string(),
                expected: format!("shape {shape:?}"),
                found: format!("shape {:?}", t.shape),
            });
        }
        Ok(t)
    }
}

#[cfg(test)]
mod tests {
    use super::super::writer::{write_safetensors, TensorData};
    use super::*;

    fn tmp(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("voxlane-weights-{}-{name}", std::process::id()))
    }

    #[test]
    fn round_trip_all_dtypes() {
        let p = tmp("rt.safetensors");
        let halfs: Vec<u16> = [1.5f32, -2.0]
            .iter()
            .map(|x| f16::from_f32(*x).to_bits())
            .collect();
        let bhalfs: Vec<u16> = [0.25f32, 8.0]
            .iter()
            .map(|x| bf16::from_f32(*x).to_bits())
            .collect();
        let bhalfs_bits = bhalfs.clone();
        write_safetensors(
            &p,
            &[
                (
                    "a",
                    TensorData::F32(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
                    vec![2, 3],
                ),
                ("h", TensorData::F16(halfs), vec![2]),
                ("b", TensorData::BF16(bhalfs), vec![2]),
                ("q", TensorData::I8(vec![-3, 7]), vec![2]),
                ("z", TensorData::U8(vec![128]), vec![1]),
                ("i", TensorData::I64(vec![-5, 9]), vec![2]),
            ],
            &[("format", "voxlane-test")],
        )
        .unwrap();
        let w = WeightFile::open(&p).unwrap();
        assert_eq!(
            w.require_shape("a", &[2, 3]).unwrap().to_f32(),
            vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
        );
        assert_eq!(w.require("h").unwrap().to_f32(), vec![1.5, -2.0]);
        assert_eq!(w.require("b").unwrap().to_f32(), vec![0.25, 8.0]);
        assert_eq!(w.require("q").unwrap().as_i8().unwrap(), &[-3, 7]);
        assert_eq!(w.require("z").unwrap().to_f32(), vec![128.0]);
        assert_eq!(w.require("i").unwrap().to_i64(), vec![-5, 9]);
        assert_eq!(
            w.metadata().get("format").map(String::as_str),
            Some("voxlane-test")
        );
        assert!(matches!(w.require("nope"), Err(WeightError::Missing(n)) if n == "nope"));
        let a = w.buf::<f32>("a").unwrap();
        assert!(a.is_mapped());
        assert_eq!(&a[..], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        assert_eq!(a.as_bytes(), w.require("a").unwrap().bytes);
        assert_eq!(
            a.as_ptr().cast::<u8>(),
            w.require("a").unwrap().bytes.as_ptr()
        );
        assert_eq!(w.buf::<u16>("b").unwrap()[..], bhalfs_bits[..]);
        assert!(matches!(
            w.buf::<u16>("a"),
            Err(WeightError::Mismatch { .. })
        ));
        assert!(matches!(w.buf::<u8>("nope"), Err(WeightError::Missing(_))));
        assert!(matches!(
            w.require_shape("a", &[3, 2]),
            Err(WeightError::Mismatch { .. })
        ));
        std::fs::remove_file(&p).unwrap();
    }

    #[test]
    fn truncated_and_foreign_files_are_named() {
        let p = tmp("trunc.safetensors");
        write_safetensors(&p, &[("a", TensorData::F32(vec![0.0; 64]), vec![64])], &[]).unwrap();
        let full = std::fs::read(&p).unwrap();
        std::fs::write(&p, &full[..full.len() - 10]).unwrap();
        assert!(matches!(
            WeightFile::open(&p),
            Err(WeightError::Truncated { .. })
        ));
        std::fs::write(&p, &full[..4]).unwrap();
        assert!(matches!(
            WeightFile::open(&p),
            Err(WeightError::Truncated { .. })
        ));
        std::fs::write(
            &p,
            b"RIFF\x24\x00\x00\x00WAVEfmt this is a wav file not weights",
        )
        .unwrap();
        let err = WeightFile::open(&p).unwrap_err();
        assert!(matches!(err, WeightError::Foreign { .. }), "{err}");
        assert!(err.to_string().contains("not a safetensors file"));
        std::fs::remove_file(&p).unwrap();
        assert!(matches!(WeightFile::open(&p), Err(WeightError::Io { .. })));
    }
}
