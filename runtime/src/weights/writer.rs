//! Writing safetensors files (voxlane's converted weight files, test fixtures).

use super::dtype::DType;
use super::error::WeightError;
use std::io::Write;
use std::path::Path;

/// Owned tensor contents to write.
#[derive(Debug, Clone, PartialEq)]
pub enum TensorData {
    /// f32 values.
    F32(Vec<f32>),
    /// f16 bit patterns.
    F16(Vec<u16>),
    /// bf16 bit patterns.
    BF16(Vec<u16>),
    /// int8 values.
    I8(Vec<i8>),
    /// uint8 values.
    U8(Vec<u8>),
    /// int32 values.
    I32(Vec<i32>),
    /// int64 values.
    I64(Vec<i64>),
}

impl TensorData {
    fn dtype(&self) -> DType {
        match self {
            Self::F32(_) => DType::F32,
            Self::F16(_) => DType::F16,
            Self::BF16(_) => DType::BF16,
            Self::I8(_) => DType::I8,
            Self::U8(_) => DType::U8,
            Self::I32(_) => DType::I32,
            Self::I64(_) => DType::I64,
        }
    }

    fn bytes(&self) -> Vec<u8> {
        match self {
            Self::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Self::F16(v) | Self::BF16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Self::I8(v) => v.iter().map(|&x| x as u8).collect(),
            Self::U8(v) => v.clone(),
            Self::I32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Self::I64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        }
    }
}

/// Write `tensors` (name, data, shape) and `metadata` to `path` atomically
/// (a temp file renamed into place, so no partial file is ever left).
pub fn write_safetensors(
    path: &Path,
    tensors: &[(&str, TensorData, Vec<usize>)],
    metadata: &[(&str, &str)],
) -> Result<(), WeightError> {
    let io = |source| WeightError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut header = serde_json::Map::new();
    if !metadata.is_empty() {
        let m: serde_json::Map<String, serde_json::Value> = metadata
            .iter()
            .map(|(k, v)| (k.to_string(), serde_json::Value::from(*v)))
            .collect();
        header.insert("__metadata__".into(), m.into());
    }
    let mut blobs = Vec::with_capacity(tensors.len());
    let mut offset = 0usize;
    for (name, data, shape) in tensors {
        let bytes = data.bytes();
        let numel: usize = shape.iter().product();
        if bytes.len() != numel * data.dtype().size() {
            return Err(WeightError::Mismatch {
                tensor: name.to_string(),
                expected: format!("{numel} elements for shape {shape:?}"),
                found: format!("{} bytes of {}", bytes.len(), data.dtype().name()),
            });
        }
        header.insert(
            name.to_string(),
            serde_json::json!({ "dtype": data.dtype().name(), "shape": shape, "data_offsets": [offset, offset + bytes.len()] }),
        );
        offset += bytes.len();
        blobs.push(bytes);
    }
    let mut text = serde_json::Value::Object(header).to_string().into_bytes();
    // Pad so the data section starts 8-byte aligned.
    while !(8 + text.len()).is_multiple_of(8) {
        text.push(b' ');
    }
    let tmp = path.with_extension("partial");
    let result = (|| {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&tmp)?);
        f.write_all(&(text.len() as u64).to_le_bytes())?;
        f.write_all(&text)?;
        for b in &blobs {
            f.write_all(b)?;
        }
        f.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(io)
}
