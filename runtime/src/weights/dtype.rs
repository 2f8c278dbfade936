//! Element types a weight tensor may hold.

use super::error::WeightError;

/// A tensor element type, named as safetensors names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    /// 32-bit float.
    F32,
    /// IEEE half.
    F16,
    /// bfloat16.
    BF16,
    /// Signed 8-bit integer (quantized weights).
    I8,
    /// Unsigned 8-bit integer (quantized weights, zero points).
    U8,
    /// 32-bit signed integer.
    I32,
    /// 64-bit signed integer.
    I64,
}

impl DType {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Self::F32 | Self::I32 => 4,
            Self::F16 | Self::BF16 => 2,
            Self::I8 | Self::U8 => 1,
            Self::I64 => 8,
        }
    }

    /// The safetensors name (`"F32"`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Self::F32 => "F32",
            Self::F16 => "F16",
            Self::BF16 => "BF16",
            Self::I8 => "I8",
            Self::U8 => "U8",
            Self::I32 => "I32",
            Self::I64 => "I64",
        }
    }

    /// Parse a safetensors dtype name.
    pub fn parse(name: &str, tensor: &str) -> Result<Self, WeightError> {
        Ok(match name {
            "F32" => Self::F32,
            "F16" => Self::F16,
            "BF16" => Self::BF16,
            "I8" => Self::I8,
            "U8" => Self::U8,
            "I32" => Self::I32,
            "I64" => Self::I64,
            other => {
                return Err(WeightError::UnsupportedDtype {
                    tensor: tensor.to_string(),
                    dtype: other.to_string(),
                })
            }
        })
    }
}
