//! Readable references for [`super::matmul`], working from the *unpacked*
//! source weights so a packing mistake cannot hide in both sides of a test.

use super::int8::ActivationQuant;
use super::{IntWeights, Q4_0_BLOCK_BYTES, Q8_0_BLOCK, Q8_0_BLOCK_BYTES};
use crate::kernels::error::{check_len, KernelError};

/// `C = A·Wᵀ (+ bias)` with f64 accumulation, rounded once to f32.
pub fn matmul_f32(
    a: &[f32],
    m: usize,
    k: usize,
    w: &[f32],
    n: usize,
    bias: Option<&[f32]>,
) -> Result<Vec<f32>, KernelError> {
    check_len("reference A", m * k, a.len())?;
    check_len("reference W", n * k, w.len())?;
    if let Some(b) = bias {
        check_len("reference bias", n, b.len())?;
    }
    let mut out = Vec::with_capacity(m * n);
    for r in 0..m {
        for c in 0..n {
            let mut acc = bias.map_or(0.0, |b| b[c] as f64);
            for i in 0..k {
                acc += a[r * k + i] as f64 * w[c * k + i] as f64;
            }
            out.push(acc as f32);
        }
    }
    Ok(out)
}

/// `Σ_k |a[r,k]·w[c,k]|` per output: the scale of the allowed float error.
pub fn magnitudes(a: &[f32], m: usize, k: usize, w: &[f32], n: usize) -> Vec<f32> {
    let mut out = Vec::with_capacity(m * n);
    for r in 0..m {
        for c in 0..n {
            let s: f64 = (0..k)
                .map(|i| (a[r * k + i] as f64 * w[c * k + i] as f64).abs())
                .sum();
            out.push(s as f32);
        }
    }
    out
}

/// Dequantize GGML q8_0 bytes to f32 (`d * q` per block).
pub fn dequantize_q8_0(bytes: &[u8]) -> Result<Vec<f32>, KernelError> {
    if !bytes.len().is_multiple_of(Q8_0_BLOCK_BYTES) {
        return Err(KernelError::Param {
            what: "q8_0 bytes",
            detail: format!("{} is not a whole number of blocks", bytes.len()),
        });
    }
    let mut out = Vec::with_capacity(bytes.len() / Q8_0_BLOCK_BYTES * Q8_0_BLOCK);
    for blk in bytes.chunks_exact(Q8_0_BLOCK_BYTES) {
        let d = ::half::f16::from_le_bytes([blk[0], blk[1]]).to_f32();
        out.extend(blk[2..].iter().map(|&q| d * (q as i8) as f32));
    }
    Ok(out)
}

/// Dequantize GGML q4_0 bytes (18 per block: f16 scale, 16 bytes holding
/// values `j` and `16 + j` as low and high nibbles, minus 8).
pub fn dequantize_q4_0(bytes: &[u8]) -> Result<Vec<f32>, KernelError> {
    if !bytes.len().is_multiple_of(Q4_0_BLOCK_BYTES) {
        return Err(KernelError::Param {
            what: "q4_0 bytes",
            detail: format!("{} is not a whole number of blocks", bytes.len()),
        });
    }
    let mut out = Vec::with_capacity(bytes.len() / Q4_0_BLOCK_BYTES * Q8_0_BLOCK);
    for blk in bytes.chunks_exact(Q4_0_BLOCK_BYTES) {
        let d = ::half::f16::from_le_bytes([blk[0], blk[1]]).to_f32();
        let q = &blk[2..];
        out.extend(q.iter().map(|&b| d * (i32::from(b & 0xF) - 8) as f32));
        out.extend(q.iter().map(|&b| d * (i32::from(b >> 4) - 8) as f32));
    }
    Ok(out)
}

/// onnxruntime dynamic-quantized matmul, straight from the definitions:
/// quantize A per tensor, `Σ (qa - za)(qw - zw[n])` in wrapping i32, dequantize.
#[allow(clippy::too_many_arguments)]
pub fn matmul_int8(
    a: &[f32],
    m: usize,
    k: usize,
    w: IntWeights<'_>,
    n: usize,
    scales: &[f32],
    zero_points: &[i32],
    bias: Option<&[f32]>,
) -> Result<Vec<f32>, KernelError> {
    check_len("reference A", m * k, a.len())?;
    let wv: Vec<i32> = match w {
        IntWeights::I8(d) => d.iter().map(|&v| v as i32).collect(),
        IntWeights::U8(d) => d.iter().map(|&v| v as i32).collect(),
    };
    check_len("reference W", n * k, wv.len())?;
    let pick = |v: &[f32], c: usize| if v.len() == 1 { v[0] } else { v[c] };
    let p = ActivationQuant::for_tensor(a);
    let qa: Vec<i32> = a.iter().map(|&v| p.quantize(v) as i32).collect();
    let za = p.zero_point as i32;
    let mut out = Vec::with_capacity(m * n);
    for r in 0..m {
        for c in 0..n {
            let zw = if zero_points.len() == 1 {
                zero_points[0]
            } else {
                zero_points[c]
            };
            let mut acc = 0i32;
            for i in 0..k {
                acc = acc.wrapping_add((qa[r * k + i] - za) * (wv[c * k + i] - zw));
            }
            out.push(super::int8::dequantize(
                acc,
                p.scale,
                pick(scales, c),
                bias.map(|b| b[c]),
            ));
        }
    }
    Ok(out)
}
