//! A borrowed view of one tensor's elements, wherever the file keeps them.

use super::dtype::DataType;
use super::error::OnnxError;
use super::model::{Payload, TensorInfo};
use half::{bf16, f16};

/// The elements of a tensor: bytes borrowed from the map, or decoded typed fields.
#[derive(Debug, Clone, Copy)]
enum Elems<'a> {
    Raw(&'a [u8]),
    F32(&'a [f32]),
    I32(&'a [i32]),
    I64(&'a [i64]),
    F64(&'a [f64]),
    U64(&'a [u64]),
    External,
    Empty,
}

/// A tensor of an [`super::OnnxModel`]: name, dims, type and its elements.
#[derive(Debug, Clone, Copy)]
pub struct Tensor<'a> {
    /// Tensor name.
    pub name: &'a str,
    /// Dimensions, outermost first.
    pub dims: &'a [i64],
    /// Element type.
    pub data_type: DataType,
    elems: Elems<'a>,
}

impl<'a> Tensor<'a> {
    pub(crate) fn new(info: &'a TensorInfo, data: &'a [u8]) -> Self {
        let elems = match &info.payload {
            // Ranges were cut from this same buffer at parse time.
            Payload::Raw(r) => Elems::Raw(data.get(r.clone()).unwrap_or(&[])),
            Payload::F32(v) => Elems::F32(v),
            Payload::I32(v) => Elems::I32(v),
            Payload::I64(v) => Elems::I64(v),
            Payload::F64(v) => Elems::F64(v),
            Payload::U64(v) => Elems::U64(v),
            Payload::External => Elems::External,
            Payload::Empty => Elems::Empty,
        };
        Self {
            name: &info.name,
            dims: &info.dims,
            data_type: info.data_type,
            elems,
        }
    }

    /// Dimensions as `usize` (they are checked non-negative when parsed).
    pub fn shape(&self) -> Vec<usize> {
        self.dims.iter().map(|&d| d as usize).collect()
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.dims.iter().map(|&d| d as usize).product()
    }

    /// The `raw_data` bytes (little-endian), borrowed from the file, if stored raw.
    pub fn raw(&self) -> Option<&'a [u8]> {
        match self.elems {
            Elems::Raw(b) => Some(b),
            _ => None,
        }
    }

    /// INT8 elements borrowed from the file (raw storage only).
    pub fn as_i8(&self) -> Option<&'a [i8]> {
        let b = self.raw().filter(|_| self.data_type == DataType::Int8)?;
        // SAFETY: i8 and u8 have the same size and alignment.
        Some(unsafe { std::slice::from_raw_parts(b.as_ptr().cast::<i8>(), b.len()) })
    }

    /// UINT8 elements borrowed from the file (raw storage only).
    pub fn as_u8(&self) -> Option<&'a [u8]> {
        self.raw().filter(|_| self.data_type == DataType::Uint8)
    }

    fn unsupported(&self, detail: String) -> OnnxError {
        OnnxError::Unsupported {
            tensor: self.name.to_string(),
            detail,
        }
    }

    /// Every element as f32 (float types and integers), copied.
    pub fn to_f32(&self) -> Result<Vec<f32>, OnnxError> {
        let t = self.data_type;
        Ok(match self.elems {
            Elems::Raw(b) => match t {
                DataType::Float => le4(b).map(f32::from_bits).collect(),
                DataType::Float16 => le2(b).map(|x| f16::from_bits(x).to_f32()).collect(),
                DataType::Bfloat16 => le2(b).map(|x| bf16::from_bits(x).to_f32()).collect(),
                DataType::Double => le8(b).map(|x| f64::from_bits(x) as f32).collect(),
                _ => self.to_i64()?.into_iter().map(|x| x as f32).collect(),
            },
            Elems::F32(v) => v.to_vec(),
            Elems::F64(v) => v.iter().map(|&x| x as f32).collect(),
            // Half types in int32_data hold their bit patterns.
            Elems::I32(v) if t == DataType::Float16 => v
                .iter()
                .map(|&x| f16::from_bits(x as u16).to_f32())
                .collect(),
            Elems::I32(v) if t == DataType::Bfloat16 => v
                .iter()
                .map(|&x| bf16::from_bits(x as u16).to_f32())
                .collect(),
            _ => self.to_i64()?.into_iter().map(|x| x as f32).collect(),
        })
    }

    /// Bit patterns of a half-precision tensor kept in `int32_data`.
    pub(crate) fn half_bits(&self) -> Result<Vec<i64>, OnnxError> {
        match self.elems {
            Elems::I32(v) => Ok(v.iter().map(|&x| i64::from(x as u16)).collect()),
            Elems::Raw(b) => Ok(le2(b).map(i64::from).collect()),
            Elems::Empty => Ok(Vec::new()),
            _ => Err(self.unsupported(format!(
                "{} bits are not stored as integers",
                self.data_type
            ))),
        }
    }

    /// Every element of an integer (or bool) tensor as i64, copied.
    pub fn to_i64(&self) -> Result<Vec<i64>, OnnxError> {
        let t = self.data_type;
        Ok(match self.elems {
            Elems::Raw(b) => match t {
                DataType::Int8 => b.iter().map(|&x| i64::from(x as i8)).collect(),
                DataType::Uint8 | DataType::Bool => b.iter().map(|&x| i64::from(x)).collect(),
                DataType::Int16 => le2(b).map(|x| i64::from(x as i16)).collect(),
                DataType::Uint16 => le2(b).map(i64::from).collect(),
                DataType::Int32 => le4(b).map(|x| i64::from(x as i32)).collect(),
                DataType::Uint32 => le4(b).map(i64::from).collect(),
                DataType::Int64 | DataType::Uint64 => le8(b).map(|x| x as i64).collect(),
                _ => return Err(self.unsupported(format!("{t} is not an integer type"))),
            },
            Elems::I32(v) => match t {
                DataType::Float16 | DataType::Bfloat16 => {
                    return Err(self.unsupported(format!("{t} is not an integer type")))
                }
                // int32_data holds int8/uint8/int16/uint16/bool/int32 values.
                _ => v.iter().map(|&x| i64::from(x)).collect(),
            },
            Elems::I64(v) => v.to_vec(),
            Elems::U64(v) => v.iter().map(|&x| x as i64).collect(),
            Elems::F32(_) | Elems::F64(_) => {
                return Err(self.unsupported(format!("{t} is not an integer type")))
            }
            Elems::External => {
                return Err(self.unsupported("data is stored in an external file".into()))
            }
            Elems::Empty => Vec::new(),
        })
    }
}

fn le2(b: &[u8]) -> impl Iterator<Item = u16> + '_ {
    b.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]]))
}

fn le4(b: &[u8]) -> impl Iterator<Item = u32> + '_ {
    b.chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
}

fn le8(b: &[u8]) -> impl Iterator<Item = u64> + '_ {
    b.chunks_exact(8).map(|c| {
        let mut a = [0u8; 8];
        a.copy_from_slice(c);
        u64::from_le_bytes(a)
    })
}
