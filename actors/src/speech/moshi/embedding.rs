//! Token embedding tables, kept as stored and read in place from the
//! checkpoint's memory map (a frame reads one row per stream, so bf16
//! tables cost no speed, and a 7B checkpoint's 34 tables are neither
//! converted nor copied).

use super::error::MoshiError;
use half::{bf16, f16};
use voxlane_runtime::weights::Buf;

#[derive(Debug, Clone)]
enum Rows {
    F32(Buf<f32>),
    F16(Buf<u16>),
    Bf16(Buf<u16>),
}

/// A `[rows, dim]` embedding table.
#[derive(Debug, Clone)]
pub struct Embedding {
    rows: usize,
    dim: usize,
    data: Rows,
}

impl Embedding {
    fn checked(
        name: &str,
        rows: usize,
        dim: usize,
        len: usize,
        data: Rows,
    ) -> Result<Self, MoshiError> {
        if rows.checked_mul(dim) != Some(len) || rows == 0 || dim == 0 {
            return Err(MoshiError::Shape {
                tensor: name.to_string(),
                expected: vec![rows, dim],
                found: vec![len],
            });
        }
        Ok(Self { rows, dim, data })
    }

    /// An f32 table.
    pub fn f32(name: &str, data: Buf<f32>, rows: usize, dim: usize) -> Result<Self, MoshiError> {
        let len = data.len();
        Self::checked(name, rows, dim, len, Rows::F32(data))
    }

    /// An f16 table (bit patterns).
    pub fn f16(name: &str, data: Buf<u16>, rows: usize, dim: usize) -> Result<Self, MoshiError> {
        let len = data.len();
        Self::checked(name, rows, dim, len, Rows::F16(data))
    }

    /// A bf16 table (bit patterns).
    pub fn bf16(name: &str, data: Buf<u16>, rows: usize, dim: usize) -> Result<Self, MoshiError> {
        let len = data.len();
        Self::checked(name, rows, dim, len, Rows::Bf16(data))
    }

    /// Rows (vocabulary + initial token).
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        let per = match self.data {
            Rows::F32(_) => 4,
            Rows::F16(_) | Rows::Bf16(_) => 2,
        };
        self.rows * self.dim * per
    }

    /// `out = row` (`set`) or `out += row` for `token`.
    pub fn apply_row(&self, token: u32, out: &mut [f32], set: bool) -> Result<(), MoshiError> {
        let t = token as usize;
        if t >= self.rows || out.len() != self.dim {
            return Err(MoshiError::Input(format!(
                "embedding row {t} of {} (width {}, out {})",
                self.rows,
                self.dim,
                out.len()
            )));
        }
        let r = t * self.dim..(t + 1) * self.dim;
        fn go(out: &mut [f32], row: impl Iterator<Item = f32>, set: bool) {
            if set {
                out.iter_mut().zip(row).for_each(|(o, v)| *o = v);
            } else {
                out.iter_mut().zip(row).for_each(|(o, v)| *o += v);
            }
        }
        match &self.data {
            Rows::F32(d) => go(out, d[r].iter().copied(), set),
            Rows::F16(d) => go(out, d[r].iter().map(|&v| f16::from_bits(v).to_f32()), set),
            Rows::Bf16(d) => go(out, d[r].iter().map(|&v| bf16::from_bits(v).to_f32()), set),
        }
        Ok(())
    }
}
