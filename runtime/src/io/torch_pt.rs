//! PyTorch `.pt` files (`torch.save` of a dict of tensors) read without
//! Python, because NVIDIA ships PersonaPlex voice prompts in this format.
//!
//! A `.pt` file is a zip: `<name>/data.pkl` (a pickle, read by the safe
//! machine in [`super::pickle`]), `<name>/data/<key>` (one raw storage per
//! key), `<name>/byteorder` and `<name>/version`. Each tensor is a view
//! (offset, size, stride) of a storage; it comes back contiguous and
//! little-endian, strided views gathered. Every size is checked before it
//! is used, and what is allocated is bounded by the file: a storage by its
//! record (at most deflate's 1032:1 ratio over its compressed bytes),
//! tensors by their storages plus the file's length.

use super::pickle::{self, PickleError, TensorRef, Value};
use half::{bf16, f16};
use std::collections::HashMap;
use std::io::{Cursor, Read};
use std::path::{Path, PathBuf};
use std::rc::Rc;

pub use super::pickle::TorchDType;

/// deflate's largest expansion: a record may not claim more than this many
/// bytes per compressed byte.
const MAX_DEFLATE_RATIO: u64 = 1032;

/// Why a `.pt` file could not be read; each names the file and the culprit.
#[derive(Debug, thiserror::Error)]
pub enum TorchPtError {
    /// The file could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// Not a zip archive, or a record of it is corrupt or truncated.
    #[error("{}: not a readable torch zip file: {detail}", path.display())]
    Zip {
        /// The file.
        path: PathBuf,
        /// What the zip reader or a size check found.
        detail: String,
    },
    /// A record the format needs is absent.
    #[error("{}: missing record `{record}`", path.display())]
    MissingRecord {
        /// The file.
        path: PathBuf,
        /// The record's name in the zip.
        record: String,
    },
    /// `data.pkl` is malformed or uses what the reader does not allow.
    #[error("{}: data.pkl: {source}", path.display())]
    Pickle {
        /// The file.
        path: PathBuf,
        /// What the pickle machine found.
        source: PickleError,
    },
    /// The saved object is not a dict.
    #[error("{}: the saved object is a {found}, not a dict of tensors", path.display())]
    NotADict {
        /// The file.
        path: PathBuf,
        /// The top-level type.
        found: &'static str,
    },
    /// A dict key is neither a string nor an int.
    #[error("{}: a dict key is a {found}, not a string", path.display())]
    Key {
        /// The file.
        path: PathBuf,
        /// The key's type.
        found: &'static str,
    },
    /// The `byteorder` record is neither `little` nor `big`.
    #[error("{}: unknown byte order {found:?}", path.display())]
    ByteOrder {
        /// The file.
        path: PathBuf,
        /// What the record says.
        found: String,
    },
    /// A storage record is shorter than its element count needs.
    #[error("{}: storage `{key}` of tensor `{tensor}` needs {needed} bytes, its record has {found}", path.display())]
    StorageTooSmall {
        /// The file.
        path: PathBuf,
        /// The tensor.
        tensor: String,
        /// The storage key.
        key: String,
        /// Bytes its numel × dtype needs.
        needed: u64,
        /// Bytes in the record.
        found: u64,
    },
    /// A tensor's view reaches outside its storage, or overlaps itself.
    #[error("{}: tensor `{tensor}`: {detail}", path.display())]
    View {
        /// The file.
        path: PathBuf,
        /// The tensor.
        tensor: String,
        /// What is wrong with offset, size or stride.
        detail: String,
    },
    /// Sizes that overflow, or more data than the file can account for.
    #[error("{}: too large: {detail}", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// What is too large.
        detail: String,
    },
}

/// A tensor read from a `.pt` file: contiguous, little-endian.
#[derive(Debug, Clone, PartialEq)]
pub struct TorchTensor {
    /// Its key in the saved dict (nested dicts and lists joined with `.`).
    pub name: String,
    /// Element type.
    pub dtype: TorchDType,
    /// Shape, outermost first.
    pub shape: Vec<usize>,
    /// `numel × dtype.size()` bytes, C order, little-endian.
    pub data: Vec<u8>,
}

impl TorchTensor {
    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// The values as f32, for float dtypes (`None` otherwise).
    pub fn to_f32(&self) -> Option<Vec<f32>> {
        let b = &self.data;
        Some(match self.dtype {
            TorchDType::F32 => b
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
            TorchDType::F64 => b
                .chunks_exact(8)
                .map(|c| f64::from_bits(le_u64(c)) as f32)
                .collect(),
            TorchDType::F16 => b
                .chunks_exact(2)
                .map(|c| f16::from_le_bytes([c[0], c[1]]).to_f32())
                .collect(),
            TorchDType::BF16 => b
                .chunks_exact(2)
                .map(|c| bf16::from_le_bytes([c[0], c[1]]).to_f32())
                .collect(),
            _ => return None,
        })
    }

    /// The values as i64, for integer and bool dtypes (`None` for floats).
    pub fn to_i64(&self) -> Option<Vec<i64>> {
        let b = &self.data;
        Some(match self.dtype {
            TorchDType::I64 => b.chunks_exact(8).map(|c| le_u64(c) as i64).collect(),
            TorchDType::I32 => b
                .chunks_exact(4)
                .map(|c| i64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]])))
                .collect(),
            TorchDType::I16 => b
                .chunks_exact(2)
                .map(|c| i64::from(i16::from_le_bytes([c[0], c[1]])))
                .collect(),
            TorchDType::I8 => b.iter().map(|&x| i64::from(x as i8)).collect(),
            TorchDType::U8 | TorchDType::Bool => b.iter().map(|&x| i64::from(x)).collect(),
            _ => return None,
        })
    }
}

fn le_u64(c: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(c);
    u64::from_le_bytes(a)
}

/// The tensors of a `.pt` file, in the saved dict's order.
#[derive(Debug, Clone)]
pub struct TorchFile {
    path: PathBuf,
    tensors: Vec<TorchTensor>,
}

impl TorchFile {
    /// Read and decode `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, TorchPtError> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|source| TorchPtError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&bytes, path)
    }

    /// Decode the bytes of a `.pt` file (`path` names it in errors).
    pub fn parse(bytes: &[u8], path: &Path) -> Result<Self, TorchPtError> {
        Reader::new(bytes, path)?.read()
    }

    /// The file this came from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// All tensors.
    pub fn tensors(&self) -> &[TorchTensor] {
        &self.tensors
    }

    /// The tensors, owned.
    pub fn into_tensors(self) -> Vec<TorchTensor> {
        self.tensors
    }

    /// A tensor by name, if present.
    pub fn get(&self, name: &str) -> Option<&TorchTensor> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// The tensor names, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tensors.iter().map(|t| t.name.as_str())
    }
}

struct Reader<'a> {
    path: &'a Path,
    len: u64,
    zip: zip::ZipArchive<Cursor<&'a [u8]>>,
    /// `<name>/`, the records' common prefix.
    prefix: String,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8], path: &'a Path) -> Result<Self, TorchPtError> {
        let zip = zip::ZipArchive::new(Cursor::new(bytes)).map_err(|e| TorchPtError::Zip {
            path: path.to_path_buf(),
            detail: e.to_string(),
        })?;
        // torch reads the first `*/data.pkl` record; its folder names the archive.
        let prefix = zip
            .file_names()
            .filter_map(|n| n.strip_suffix("data.pkl"))
            .find(|p| p.is_empty() || p.ends_with('/'))
            .map(str::to_string)
            .ok_or_else(|| TorchPtError::MissingRecord {
                path: path.to_path_buf(),
                record: "<name>/data.pkl".into(),
            })?;
        Ok(Self {
            path,
            len: bytes.len() as u64,
            zip,
            prefix,
        })
    }

    fn zip_err(&self, detail: impl Into<String>) -> TorchPtError {
        TorchPtError::Zip {
            path: self.path.to_path_buf(),
            detail: detail.into(),
        }
    }

    fn too_large(&self, detail: impl Into<String>) -> TorchPtError {
        TorchPtError::TooLarge {
            path: self.path.to_path_buf(),
            detail: detail.into(),
        }
    }

    /// The bytes of record `<prefix><name>`; `None` when it is absent.
    fn record(&mut self, name: &str) -> Result<Option<Vec<u8>>, TorchPtError> {
        let full = format!("{}{name}", self.prefix);
        let len = self.len;
        let mut file = match self.zip.by_name(&full) {
            Ok(f) => f,
            Err(zip::result::ZipError::FileNotFound) => return Ok(None),
            Err(e) => {
                return Err(TorchPtError::Zip {
                    path: self.path.to_path_buf(),
                    detail: format!("{full}: {e}"),
                })
            }
        };
        let declared = file.size();
        let limit = match file.compression() {
            zip::CompressionMethod::Stored => len,
            _ => file.compressed_size().saturating_mul(MAX_DEFLATE_RATIO),
        };
        if declared > limit {
            let detail = format!("{full} claims {declared} bytes, more than its data can hold");
            return Err(TorchPtError::Zip {
                path: self.path.to_path_buf(),
                detail,
            });
        }
        // Grows as bytes arrive: never more than the record really holds.
        // Reading one byte past the declared size reaches the end of the
        // record, where the zip reader checks its CRC.
        let mut out = Vec::new();
        let read = file
            .by_ref()
            .take(declared.saturating_add(1))
            .read_to_end(&mut out);
        drop(file);
        read.map_err(|e| self.zip_err(format!("{full}: {e}")))?;
        if (out.len() as u64) != declared {
            return Err(self.zip_err(format!(
                "{full} is truncated: {} of {declared} bytes",
                out.len()
            )));
        }
        Ok(Some(out))
    }

    fn read(mut self) -> Result<TorchFile, TorchPtError> {
        let path = self.path.to_path_buf();
        let big_endian = match self.record("byteorder")? {
            None => false,
            Some(b) => match b.as_slice() {
                b"little" => false,
                b"big" => true,
                other => {
                    return Err(TorchPtError::ByteOrder {
                        path,
                        found: String::from_utf8_lossy(&other[..other.len().min(32)]).into(),
                    })
                }
            },
        };
        let pkl = self
            .record("data.pkl")?
            .ok_or_else(|| TorchPtError::MissingRecord {
                path: path.clone(),
                record: format!("{}data.pkl", self.prefix),
            })?;
        let root = pickle::load(&pkl).map_err(|source| TorchPtError::Pickle {
            path: path.clone(),
            source,
        })?;
        if !matches!(root, Value::Dict(_)) {
            return Err(TorchPtError::NotADict {
                path,
                found: root.type_name(),
            });
        }
        let mut views = Vec::new();
        let mut visits = pkl.len().saturating_add(1024);
        self.flatten(&root, "", &mut views, &mut visits)?;
        drop(root);

        let mut storages: HashMap<String, Vec<u8>> = HashMap::new();
        // Tensor bytes may not exceed the storages read plus the file itself.
        let mut budget = self.len;
        let mut tensors: Vec<TorchTensor> = Vec::with_capacity(views.len());
        let mut index: HashMap<String, usize> = HashMap::new();
        for (name, view) in views {
            let key = &view.storage.key;
            if !storages.contains_key(key) {
                let bytes = self.record(&format!("data/{key}"))?.ok_or_else(|| {
                    TorchPtError::MissingRecord {
                        path: path.clone(),
                        record: format!("{}data/{key}", self.prefix),
                    }
                })?;
                budget = budget.saturating_add(bytes.len() as u64);
                storages.insert(key.clone(), bytes);
            }
            let storage = storages.get(key).map(Vec::as_slice).unwrap_or_default();
            let mut data = self.materialize(&name, &view, storage)?;
            budget = budget.checked_sub(data.len() as u64).ok_or_else(|| {
                self.too_large(format!(
                    "tensor `{name}` repeats storage data beyond the file's size"
                ))
            })?;
            let size = view.storage.kind.size();
            if big_endian && size > 1 {
                data.chunks_exact_mut(size).for_each(|c| c.reverse());
            }
            let tensor = TorchTensor {
                name: name.clone(),
                dtype: view.storage.kind,
                shape: view.shape.clone(),
                data,
            };
            // A repeated key replaces the earlier value, as in a dict.
            match index.get(&name) {
                Some(&i) => tensors[i] = tensor,
                None => {
                    index.insert(name, tensors.len());
                    tensors.push(tensor);
                }
            }
        }
        Ok(TorchFile { path, tensors })
    }

    /// Collects the tensors under `v`, named by their keys joined with `.`;
    /// other leaves (numbers, strings, None) are skipped.
    fn flatten(
        &self,
        v: &Value,
        prefix: &str,
        out: &mut Vec<(String, Rc<TensorRef>)>,
        visits: &mut usize,
    ) -> Result<(), TorchPtError> {
        *visits = visits
            .checked_sub(1)
            .ok_or_else(|| self.too_large("shared containers expand past the pickle's size"))?;
        let mut child = |name: String, v: &Value, out: &mut Vec<_>| match v {
            Value::Tensor(t) => {
                out.push((name, t.clone()));
                Ok(())
            }
            Value::Dict(_) | Value::List(_) | Value::Tuple(_) => {
                self.flatten(v, &format!("{name}."), out, visits)
            }
            _ => Ok(()),
        };
        match v {
            Value::Dict(m) => {
                for (k, v) in &m.entries {
                    let key = match k {
                        Value::Str(s) => s.to_string(),
                        Value::Int(i) => i.to_string(),
                        other => {
                            return Err(TorchPtError::Key {
                                path: self.path.to_path_buf(),
                                found: other.type_name(),
                            })
                        }
                    };
                    child(format!("{prefix}{key}"), v, out)?;
                }
            }
            Value::List(s) | Value::Tuple(s) => {
                for (i, v) in s.items.iter().enumerate() {
                    child(format!("{prefix}{i}"), v, out)?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// The tensor's elements, contiguous, from its storage's bytes.
    fn materialize(
        &self,
        name: &str,
        t: &TensorRef,
        record: &[u8],
    ) -> Result<Vec<u8>, TorchPtError> {
        let view_err = |detail: String| TorchPtError::View {
            path: self.path.to_path_buf(),
            tensor: name.to_string(),
            detail,
        };
        let size = t.storage.kind.size();
        let needed = t
            .storage
            .numel
            .checked_mul(size)
            .ok_or_else(|| self.too_large(format!("storage of `{name}`")))?;
        if needed > record.len() {
            return Err(TorchPtError::StorageTooSmall {
                path: self.path.to_path_buf(),
                tensor: name.to_string(),
                key: t.storage.key.clone(),
                needed: needed as u64,
                found: record.len() as u64,
            });
        }
        let storage = &record[..needed];
        let numel = t
            .shape
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .ok_or_else(|| self.too_large(format!("shape {:?} of `{name}`", t.shape)))?;
        if numel == 0 {
            return Ok(Vec::new());
        }
        if numel > t.storage.numel {
            return Err(view_err(format!(
                "shape {:?} has {numel} elements, its storage only {}",
                t.shape, t.storage.numel
            )));
        }
        let last = t
            .shape
            .iter()
            .zip(&t.stride)
            .try_fold(t.offset, |a, (&d, &s)| {
                (d - 1).checked_mul(s)?.checked_add(a)
            });
        match last {
            Some(last) if last < t.storage.numel => {}
            _ => {
                return Err(view_err(format!(
                "offset {} with shape {:?} and stride {:?} reaches past its {} storage elements",
                t.offset, t.shape, t.stride, t.storage.numel
            )))
            }
        }
        // Contiguous when every dim longer than 1 has the C-order stride.
        let mut want = 1usize;
        let mut contiguous = true;
        for (&d, &s) in t.shape.iter().zip(&t.stride).rev() {
            if d != 1 && s != want {
                contiguous = false;
                break;
            }
            want = want.saturating_mul(d);
        }
        if contiguous {
            return Ok(storage[t.offset * size..(t.offset + numel) * size].to_vec());
        }
        // Gather: every position stays within [offset, last], checked above.
        let mut out = Vec::with_capacity(numel * size);
        let mut idx = vec![0usize; t.shape.len()];
        let mut pos = t.offset;
        for _ in 0..numel {
            let bytes = storage
                .get(pos * size..(pos + 1) * size)
                .ok_or_else(|| view_err(format!("element {pos} is outside its storage")))?;
            out.extend_from_slice(bytes);
            // Wrapping: a size-1 dim may carry any stride; the sum returns exactly.
            for d in (0..idx.len()).rev() {
                idx[d] += 1;
                pos = pos.wrapping_add(t.stride[d]);
                if idx[d] < t.shape[d] {
                    break;
                }
                pos = pos.wrapping_sub(t.stride[d].wrapping_mul(t.shape[d]));
                idx[d] = 0;
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::weights::{DType, WeightFile};
    use proptest::prelude::*;
    use std::io::Write;
    use zip::write::SimpleFileOptions;
    use zip::CompressionMethod;

    const FIXTURE: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/fixtures/personaplex-tiny"
    );

    fn fixture_bytes() -> Vec<u8> {
        std::fs::read(format!("{FIXTURE}/voice_prompt.pt")).unwrap()
    }

    fn parse(bytes: &[u8]) -> Result<TorchFile, TorchPtError> {
        TorchFile::parse(bytes, Path::new("t.pt"))
    }

    fn zip_of(records: &[(&str, &[u8])], method: CompressionMethod) -> Vec<u8> {
        let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
        let opts = SimpleFileOptions::default().compression_method(method);
        for (name, data) in records {
            w.start_file(*name, opts).unwrap();
            w.write_all(data).unwrap();
        }
        w.finish().unwrap().into_inner()
    }

    /// A tensor entry of a hand-written `torch.save` pickle.
    struct Entry<'a> {
        name: &'a str,
        class: &'a str,
        key: &'a str,
        numel: usize,
        offset: usize,
        shape: &'a [usize],
        stride: &'a [usize],
    }

    fn unicode(p: &mut Vec<u8>, s: &str) {
        p.push(b'X');
        p.extend((s.len() as u32).to_le_bytes());
        p.extend(s.as_bytes());
    }

    fn int(p: &mut Vec<u8>, v: usize) {
        if v < 256 {
            p.extend([b'K', v as u8]);
        } else {
            p.extend([0x8a, 8]);
            p.extend((v as u64).to_le_bytes());
        }
    }

    fn ints(p: &mut Vec<u8>, vs: &[usize]) {
        p.push(b'(');
        vs.iter().for_each(|&v| int(p, v));
        p.push(b't');
    }

    /// The opcodes `torch.save` writes for a tensor (`_rebuild_tensor_v2`).
    fn tensor_ops(p: &mut Vec<u8>, e: &Entry) {
        p.extend(b"ctorch._utils\n_rebuild_tensor_v2\n((");
        unicode(p, "storage");
        p.extend(format!("ctorch\n{}\n", e.class).as_bytes());
        unicode(p, e.key);
        unicode(p, "cpu");
        int(p, e.numel);
        p.extend(b"tQ");
        int(p, e.offset);
        ints(p, e.shape);
        ints(p, e.stride);
        p.extend(b"\x89ccollections\nOrderedDict\n)RtR");
    }

    fn pickle_of(entries: &[Entry]) -> Vec<u8> {
        let mut p = vec![0x80, 2, b'}', b'('];
        for e in entries {
            unicode(&mut p, e.name);
            tensor_ops(&mut p, e);
        }
        p.extend(b"u.");
        p
    }

    fn pt(pkl: &[u8], storages: &[(&str, Vec<u8>)], byteorder: &[u8]) -> Vec<u8> {
        let mut records: Vec<(String, &[u8])> = vec![
            ("archive/data.pkl".into(), pkl),
            ("archive/byteorder".into(), byteorder),
        ];
        for (k, v) in storages {
            records.push((format!("archive/data/{k}"), v));
        }
        records.push(("archive/version".into(), b"3\n"));
        let refs: Vec<(&str, &[u8])> = records.iter().map(|(n, d)| (n.as_str(), *d)).collect();
        zip_of(&refs, CompressionMethod::Stored)
    }

    fn f32s(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    fn simple(name: &str, shape: &[usize], stride: &[usize], offset: usize) -> Vec<u8> {
        pickle_of(&[Entry {
            name,
            class: "FloatStorage",
            key: "0",
            numel: 6,
            offset,
            shape,
            stride,
        }])
    }

    fn six() -> Vec<(&'static str, Vec<u8>)> {
        vec![("0", f32s(&[0., 1., 2., 3., 4., 5.]))]
    }

    #[test]
    fn fixture_equals_its_safetensors_twin() {
        let pt = TorchFile::open(format!("{FIXTURE}/voice_prompt.pt")).unwrap();
        let st =
            WeightFile::open(format!("{FIXTURE}/voice_prompt_embeddings.safetensors")).unwrap();
        assert_eq!(pt.names().collect::<Vec<_>>(), ["embeddings", "cache"]);
        for (name, dtype, want) in [
            ("embeddings", TorchDType::F32, DType::F32),
            ("cache", TorchDType::I64, DType::I64),
        ] {
            let a = pt.get(name).unwrap();
            let b = st.require(name).unwrap();
            assert_eq!((a.dtype, b.dtype), (dtype, want));
            assert_eq!(a.shape, b.shape, "{name}");
            assert_eq!(a.data, b.bytes, "{name}");
        }
        let e = pt.get("embeddings").unwrap();
        assert_eq!(e.shape[1..], [1, 1, 64]);
        assert_eq!(
            e.to_f32().unwrap(),
            st.require("embeddings").unwrap().to_f32()
        );
        let c = pt.get("cache").unwrap();
        assert_eq!(c.shape, [1, 17, 4]);
        assert_eq!(c.to_i64().unwrap(), st.require("cache").unwrap().to_i64());
        assert_eq!(c.to_f32(), None);
        assert_eq!(e.to_i64(), None);
    }

    #[test]
    fn every_dtype_reads_back() {
        let cases: [(&str, TorchDType, Vec<u8>); 10] = [
            (
                "DoubleStorage",
                TorchDType::F64,
                [1.5f64, -2.0]
                    .iter()
                    .flat_map(|x| x.to_le_bytes())
                    .collect(),
            ),
            ("FloatStorage", TorchDType::F32, f32s(&[1.5, -2.0])),
            (
                "HalfStorage",
                TorchDType::F16,
                [1.5f32, -2.0]
                    .iter()
                    .flat_map(|x| f16::from_f32(*x).to_le_bytes())
                    .collect(),
            ),
            (
                "BFloat16Storage",
                TorchDType::BF16,
                [1.5f32, -2.0]
                    .iter()
                    .flat_map(|x| bf16::from_f32(*x).to_le_bytes())
                    .collect(),
            ),
            (
                "LongStorage",
                TorchDType::I64,
                [7i64, -3].iter().flat_map(|x| x.to_le_bytes()).collect(),
            ),
            (
                "IntStorage",
                TorchDType::I32,
                [7i32, -3].iter().flat_map(|x| x.to_le_bytes()).collect(),
            ),
            (
                "ShortStorage",
                TorchDType::I16,
                [7i16, -3].iter().flat_map(|x| x.to_le_bytes()).collect(),
            ),
            ("CharStorage", TorchDType::I8, vec![7, (-3i8) as u8]),
            ("ByteStorage", TorchDType::U8, vec![7, 253]),
            ("BoolStorage", TorchDType::Bool, vec![1, 0]),
        ];
        for (class, dtype, bytes) in cases {
            let pkl = pickle_of(&[Entry {
                name: "x",
                class,
                key: "k",
                numel: 2,
                offset: 0,
                shape: &[2],
                stride: &[1],
            }]);
            let f = parse(&pt(&pkl, &[("k", bytes.clone())], b"little")).unwrap();
            let t = f.get("x").unwrap();
            assert_eq!(
                (t.dtype, &t.shape[..], &t.data),
                (dtype, &[2usize][..], &bytes),
                "{class}"
            );
            assert_eq!(dtype.size() * 2, bytes.len());
            match (t.to_f32(), t.to_i64()) {
                (Some(v), None) => assert_eq!(v, [1.5, -2.0], "{class}"),
                (None, Some(v)) => {
                    let want: &[i64] = match dtype {
                        TorchDType::U8 => &[7, 253],
                        TorchDType::Bool => &[1, 0],
                        _ => &[7, -3],
                    };
                    assert_eq!(v, want, "{class}");
                }
                other => panic!("{class}: {other:?}"),
            }
        }
    }

    #[test]
    fn strided_views_are_gathered() {
        // The transpose of [[0,1,2],[3,4,5]].
        let f = parse(&pt(&simple("t", &[3, 2], &[1, 3], 0), &six(), b"little")).unwrap();
        let t = f.get("t").unwrap();
        assert_eq!(t.to_f32().unwrap(), [0., 3., 1., 4., 2., 5.]);
        // Offset and a size-1 dim with an arbitrary stride: still contiguous.
        let f = parse(&pt(
            &simple("t", &[1, 2], &[1 << 62, 1], 3),
            &six(),
            b"little",
        ))
        .unwrap();
        assert_eq!(f.get("t").unwrap().to_f32().unwrap(), [3., 4.]);
        // The same in a strided view.
        let f = parse(&pt(
            &simple("t", &[2, 1], &[2, 1 << 60], 1),
            &six(),
            b"little",
        ))
        .unwrap();
        assert_eq!(f.get("t").unwrap().to_f32().unwrap(), [1., 3.]);
        // Empty tensors need no storage bytes.
        let f = parse(&pt(&simple("t", &[0, 4], &[4, 1], 99), &six(), b"little")).unwrap();
        assert!(f.get("t").unwrap().data.is_empty());
    }

    #[test]
    fn big_endian_files_are_swapped() {
        let be: Vec<u8> = [0f32, 1., 2., 3., 4., 5.]
            .iter()
            .flat_map(|x| x.to_be_bytes())
            .collect();
        let f = parse(&pt(&simple("t", &[2, 3], &[3, 1], 0), &[("0", be)], b"big")).unwrap();
        assert_eq!(
            f.get("t").unwrap().to_f32().unwrap(),
            [0., 1., 2., 3., 4., 5.]
        );
    }

    #[test]
    fn nested_containers_parameters_and_ordered_dicts() {
        // OrderedDict(w=Parameter(t), meta=[tensor, 3, 'x']) with BUILD state,
        // as a state_dict with `_metadata` is saved.
        let e = Entry {
            name: "",
            class: "FloatStorage",
            key: "0",
            numel: 6,
            offset: 0,
            shape: &[6],
            stride: &[1],
        };
        let mut p = b"\x80\x02ccollections\nOrderedDict\nq\x00)R(".to_vec();
        unicode(&mut p, "w");
        p.extend(b"ctorch._utils\n_rebuild_parameter\n(");
        tensor_ops(&mut p, &e);
        p.extend(b"\x88ccollections\nOrderedDict\n)RtR");
        unicode(&mut p, "meta");
        p.extend(b"](");
        tensor_ops(&mut p, &e);
        p.extend(b"K\x03");
        unicode(&mut p, "x");
        p.extend(b"e");
        unicode(&mut p, "n");
        p.extend(b"}(");
        unicode(&mut p, "deep");
        tensor_ops(&mut p, &e);
        p.extend(b"K\x05");
        tensor_ops(&mut p, &e);
        p.extend(b"uu}(");
        unicode(&mut p, "_metadata");
        p.extend(b"Nub.");
        let f = parse(&pt(&p, &six(), b"little")).unwrap();
        assert_eq!(
            f.names().collect::<Vec<_>>(),
            ["w", "meta.0", "n.deep", "n.5"]
        );
        assert!(f
            .tensors()
            .iter()
            .all(|t| t.to_f32().unwrap() == [0., 1., 2., 3., 4., 5.]));
    }

    #[test]
    fn deflated_records_read() {
        let pkl = simple("t", &[6], &[1], 0);
        let bytes = zip_of(
            &[("a/data.pkl", &pkl), ("a/data/0", &six()[0].1)],
            CompressionMethod::Deflated,
        );
        let f = parse(&bytes).unwrap();
        assert_eq!(
            f.get("t").unwrap().to_f32().unwrap(),
            [0., 1., 2., 3., 4., 5.]
        );
    }

    #[test]
    fn malformed_files_name_what_is_wrong() {
        let ok = simple("t", &[2, 3], &[3, 1], 0);
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (b"not a zip".to_vec(), "not a readable torch zip"),
            (
                zip_of(&[("a/other", b"x")], CompressionMethod::Stored),
                "missing record `<name>/data.pkl`",
            ),
            (pt(&ok, &[], b"little"), "missing record `archive/data/0`"),
            (
                pt(&ok, &[("0", f32s(&[1.0; 5]))], b"little"),
                "needs 24 bytes, its record has 20",
            ),
            (pt(&ok, &six(), b"middle"), "unknown byte order \"middle\""),
            (
                pt(b"\x80\x02K\x01.", &six(), b"little"),
                "is a int, not a dict",
            ),
            (
                pt(b"\x80\x02cos\nsystem\n.", &six(), b"little"),
                "`os.system` is not allowed",
            ),
            (
                pt(b"\x80\x02}(NK\x02u.", &six(), b"little"),
                "a dict key is a None",
            ),
            (
                pt(&simple("t", &[2, 3], &[3, 1], 1), &six(), b"little"),
                "reaches past its 6 storage elements",
            ),
            (
                pt(&simple("t", &[7], &[0], 0), &six(), b"little"),
                "has 7 elements, its storage only 6",
            ),
            (
                pt(
                    &simple("t", &[1 << 40, 1 << 40], &[1, 1], 0),
                    &six(),
                    b"little",
                ),
                "too large",
            ),
            (
                pt(
                    &simple("t", &[2, 2], &[1 << 62, 1 << 62], 0),
                    &six(),
                    b"little",
                ),
                "reaches past",
            ),
        ];
        for (bytes, want) in cases {
            let err = parse(&bytes).unwrap_err().to_string();
            assert!(err.contains(want), "want {want:?}, got {err}");
        }
        // The key 1 is an int: allowed, but the value is no tensor.
        let f = parse(&pt(b"\x80\x02}(K\x01K\x02u.", &six(), b"little")).unwrap();
        assert_eq!(f.tensors().len(), 0);
    }

    #[test]
    fn views_repeating_a_storage_past_the_file_size_are_refused() {
        let big = f32s(&vec![0.5; 4096]);
        let e = |name| Entry {
            name,
            class: "FloatStorage",
            key: "0",
            numel: 4096,
            offset: 0,
            shape: &[4096],
            stride: &[1],
        };
        let two = pickle_of(&[e("a"), e("b")]);
        assert!(parse(&pt(&two, &[("0", big.clone())], b"little")).is_ok());
        let many = pickle_of(&[e("a"), e("b"), e("c"), e("d")]);
        let err = parse(&pt(&many, &[("0", big)], b"little"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("beyond the file's size"), "{err}");
    }

    #[test]
    fn a_corrupt_record_fails_its_crc() {
        let mut bytes = fixture_bytes();
        // Flip a bit of the first float of the stored record `data/0`.
        let mut z = zip::ZipArchive::new(Cursor::new(bytes.clone())).unwrap();
        let start = z.by_name("voice_prompt/data/0").unwrap().data_start() as usize;
        drop(z);
        bytes[start] ^= 1;
        let err = parse(&bytes).unwrap_err().to_string();
        assert!(err.contains("data/0"), "{err}");
    }

    #[test]
    fn every_truncation_is_an_error() {
        let bytes = fixture_bytes();
        for n in 0..bytes.len() {
            assert!(parse(&bytes[..n]).is_err(), "truncated to {n}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
            let _ = parse(&bytes);
            let _ = pickle::load(&bytes);
        }

        #[test]
        fn mutated_fixture_never_panics(
            edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
            cut in any::<prop::sample::Index>(),
        ) {
            let mut bytes = fixture_bytes();
            for (i, b) in &edits {
                let i = i.index(bytes.len());
                bytes[i] = *b;
            }
            let _ = parse(&bytes);
            let n = cut.index(bytes.len() + 1);
            let _ = parse(&bytes[..n]);
        }

        #[test]
        fn mutated_pickles_never_panic(
            edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
            cut in any::<prop::sample::Index>(),
        ) {
            // Rebuilt from the fixture's records, so the CRC matches the edit
            // and the pickle machine (not the zip check) sees it.
            let z = TorchFile::open(format!("{FIXTURE}/voice_prompt.pt")).unwrap();
            let storages: Vec<(&str, Vec<u8>)> =
                vec![("0", z.tensors()[0].data.clone()), ("1", z.tensors()[1].data.clone())];
            let mut zip = zip::ZipArchive::new(Cursor::new(fixture_bytes())).unwrap();
            let mut pkl = Vec::new();
            zip.by_name("voice_prompt/data.pkl").unwrap().read_to_end(&mut pkl).unwrap();
            for (i, b) in &edits {
                let i = i.index(pkl.len());
                pkl[i] = *b;
            }
            pkl.truncate(cut.index(pkl.len() + 1).max(pkl.len() / 2));
            let _ = parse(&pt(&pkl, &storages, b"little"));
        }
    }
}
