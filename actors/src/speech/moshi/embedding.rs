//! Token embedding tables, kept in the precision they were stored in
//! (a frame reads one row per stream, so bf16 tables cost no speed and
//! halve the memory of a 7B checkpoint's 34 tables).

use super::error::MoshiError;
use half::{bf16, f16};

#[derive(Debug, Clone)]
enum Rows {
    F32(Vec<f32>),
    F16(Vec<f16>),
    Bf16(Vec<bf16>),
}

/// A `[rows, dim]` embedding table.
#[derive(Debug, Clone)]
pub struct Embedding {
    rows: usize,
    dim: usize,
    data: Rows,
}

impl Embedding {
    fn check(name: &str, rows: usize, dim: usize, len: usize) -> Result<(), MoshiError> {
        if rows.checked_mul(dim) != Some(len) || rows == 0 || dim == 0 {
            return Err(MoshiError::Shape {
                tensor: name.to_string(),
                expected: vec![rows, dim],
                found: vec![len],
            });
        }
        Ok(())
    }

    /// An f32 table.
    pub fn f32(name: &str, data: Vec<f32>, rows: usize, dim: usize) -> Result<Self, MoshiError> {
        Self::check(name, rows, dim, data.len())?;
        Ok(Self {
            rows,
            dim,
            data: Rows::F32(data),
        })
    }

    /// An f16 table.
    pub fn f16(name: &str, data: Vec<f16>, rows: usize, dim: usize) -> Result<Self, MoshiError> {
        Self::check(name, rows, dim, data.len())?;
        Ok(Self {
            rows,
            dim,
            data: Rows::F16(data),
        })
    }

    /// A bf16 table.
    pub fn bf16(name: &str, data: Vec<bf16>, rows: usize, dim: usize) -> Result<Self, MoshiError> {
        Self::check(name, rows, dim, data.len())?;
        Ok(Self {
            rows,
            dim,
            data: Rows::Bf16(data),
        })
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

    /// `out = row` (`set`) or `out += row`, for a token already checked to be in range.
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
            Rows::F16(d) => go(out, d[r].iter().map(|v| v.to_f32()), set),
            Rows::Bf16(d) => go(out, d[r].iter().map(|v| v.to_f32()), set),
        }
        Ok(())
    }
}
