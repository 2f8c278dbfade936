//! ONNX tensor element types (`TensorProto.DataType`).

use crate::weights::DType;

/// An ONNX element type; codes voxlane does not name are kept as [`DataType::Other`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DataType {
    /// 1: f32.
    Float,
    /// 2: u8 (quantized weights, zero points).
    Uint8,
    /// 3: i8 (quantized weights).
    Int8,
    /// 4: u16.
    Uint16,
    /// 5: i16.
    Int16,
    /// 6: i32.
    Int32,
    /// 7: i64.
    Int64,
    /// 8: strings (no fixed size).
    String,
    /// 9: bool, one byte.
    Bool,
    /// 10: IEEE half.
    Float16,
    /// 11: f64.
    Double,
    /// 12: u32.
    Uint32,
    /// 13: u64.
    Uint64,
    /// 16: bfloat16.
    Bfloat16,
    /// Any other code (complex, float8, int4, ...).
    Other(i32),
}

impl DataType {
    /// The type for an ONNX code.
    pub fn from_code(code: i32) -> Self {
        match code {
            1 => Self::Float,
            2 => Self::Uint8,
            3 => Self::Int8,
            4 => Self::Uint16,
            5 => Self::Int16,
            6 => Self::Int32,
            7 => Self::Int64,
            8 => Self::String,
            9 => Self::Bool,
            10 => Self::Float16,
            11 => Self::Double,
            12 => Self::Uint32,
            13 => Self::Uint64,
            16 => Self::Bfloat16,
            other => Self::Other(other),
        }
    }

    /// The ONNX code.
    pub fn code(self) -> i32 {
        match self {
            Self::Float => 1,
            Self::Uint8 => 2,
            Self::Int8 => 3,
            Self::Uint16 => 4,
            Self::Int16 => 5,
            Self::Int32 => 6,
            Self::Int64 => 7,
            Self::String => 8,
            Self::Bool => 9,
            Self::Float16 => 10,
            Self::Double => 11,
            Self::Uint32 => 12,
            Self::Uint64 => 13,
            Self::Bfloat16 => 16,
            Self::Other(c) => c,
        }
    }

    /// Bytes per element in `raw_data`, for fixed-size types.
    pub fn size(self) -> Option<usize> {
        match self {
            Self::Uint8 | Self::Int8 | Self::Bool => Some(1),
            Self::Uint16 | Self::Int16 | Self::Float16 | Self::Bfloat16 => Some(2),
            Self::Float | Self::Int32 | Self::Uint32 => Some(4),
            Self::Int64 | Self::Double | Self::Uint64 => Some(8),
            Self::String | Self::Other(_) => None,
        }
    }

    /// The matching safetensors dtype of [`crate::weights`], where there is one.
    pub fn to_weights(self) -> Option<DType> {
        Some(match self {
            Self::Float => DType::F32,
            Self::Float16 => DType::F16,
            Self::Bfloat16 => DType::BF16,
            Self::Int8 => DType::I8,
            Self::Uint8 => DType::U8,
            Self::Int32 => DType::I32,
            Self::Int64 => DType::I64,
            _ => return None,
        })
    }
}

impl std::fmt::Display for DataType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Other(c) => write!(f, "data type {c}"),
            t => write!(f, "{}", format!("{t:?}").to_ascii_uppercase()),
        }
    }
}
