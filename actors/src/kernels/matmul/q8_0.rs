//! GGML `q8_0` weights: blocks of 32 int8 values with one f16 scale `d`,
//! value `d * q`. Activations stay f32 (weight-only quantization).
//!
//! Packing splits GGML's 34-byte blocks into a dense `i8` matrix and an f32
//! scale per block (f16 → f32 is exact), so SIMD loads are plain and aligned
//! to the row.
//!
//! Accumulation order (every route reproduces it bit for bit): for block `b`
//! and lane `j` (0..16), `s = x[32b+j]·q[32b+j]`, then
//! `s = fma(x[32b+16+j], q[32b+16+j], s)`, then `acc[j] = fma(d_b, s, acc[j])`;
//! the 16 lanes are combined with `f32_matvec`'s fixed tree.

use super::dense_f32::MULTI_ROWS_M;
use super::{run_float, run_grouped};
use crate::kernels::cpu::{self, SimdLevel};
use crate::kernels::error::{check_len, KernelError};
use crate::kernels::f32_matvec::{reduce16, LANES};
use voxlane_runtime::Fork;

/// Values per q8_0 block.
pub const Q8_0_BLOCK: usize = 32;
/// Bytes per GGML q8_0 block (f16 scale + 32 × i8).
pub const Q8_0_BLOCK_BYTES: usize = 34;

/// Packed q8_0 weights.
#[derive(Debug, Clone)]
pub(super) struct Q8Weights {
    /// `N × K/32` scales, row-major.
    pub(super) scales: Vec<f32>,
    /// `N × K` quants, row-major.
    pub(super) quants: Vec<i8>,
}

fn check_k(k: usize) -> Result<(), KernelError> {
    if !k.is_multiple_of(Q8_0_BLOCK) {
        return Err(KernelError::Param {
            what: "k",
            detail: format!("q8_0 needs K divisible by {Q8_0_BLOCK} (got {k})"),
        });
    }
    Ok(())
}

impl Q8Weights {
    pub(super) fn from_ggml(bytes: &[u8], n: usize, k: usize) -> Result<Self, KernelError> {
        check_k(k)?;
        let blocks = n * k / Q8_0_BLOCK;
        check_len("q8_0 bytes", blocks * Q8_0_BLOCK_BYTES, bytes.len())?;
        let mut scales = Vec::with_capacity(blocks);
        let mut quants = Vec::with_capacity(n * k);
        for blk in bytes.chunks_exact(Q8_0_BLOCK_BYTES) {
            scales.push(::half::f16::from_bits(u16::from_le_bytes([blk[0], blk[1]])).to_f32());
            quants.extend(blk[2..].iter().map(|&b| b as i8));
        }
        Ok(Self { scales, quants })
    }
}

/// Quantize row-major f32 rows of length `k` to GGML q8_0 bytes (GGML's reference quantizer).
pub fn quantize_q8_0(w: &[f32], k: usize) -> Result<Vec<u8>, KernelError> {
    check_k(k)?;
    if k == 0 || !w.len().is_multiple_of(k) {
        return Err(KernelError::Param {
            what: "q8_0 source",
            detail: format!("{} values are not whole rows of {k}", w.len()),
        });
    }
    let mut out = Vec::with_capacity(w.len() / Q8_0_BLOCK * Q8_0_BLOCK_BYTES);
    for blk in w.chunks_exact(Q8_0_BLOCK) {
        let amax = blk.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let d = amax / 127.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        out.extend_from_slice(&::half::f16::from_f32(d).to_bits().to_le_bytes());
        // roundf: half away from zero, like GGML; `as` saturates.
        out.extend(blk.iter().map(|v| ((v * id).round() as i8) as u8));
    }
    Ok(out)
}

/// Scalar form of the block order above for one row.
fn dot_scalar(x: &[f32], q: &[i8], d: &[f32]) -> f32 {
    let mut acc = [0.0f32; LANES];
    for ((xb, qb), &db) in x
        .chunks_exact(Q8_0_BLOCK)
        .zip(q.chunks_exact(Q8_0_BLOCK))
        .zip(d)
    {
        for j in 0..LANES {
            let s = xb[j] * qb[j] as f32;
            let s = xb[j + 16].mul_add(qb[j + 16] as f32, s);
            acc[j] = db.mul_add(s, acc[j]);
        }
    }
    reduce16(&acc)
}

fn rows(level: SimdLevel, x: &[f32], w: &Q8Weights, n0: usize, y: &mut [f32]) {
    let k = x.len();
    let nb = k / Q8_0_BLOCK;
    let q = &w.quants[n0 * k..(n0 + y.len()) * k];
    let d = &w.scales[n0 * nb..(n0 + y.len()) * nb];
    match level {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the level is capped at the detected features; shapes checked by the caller.
        SimdLevel::Avx512 => unsafe { x86::rows_avx512(x, q, d, y) },
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx2 => {
            for (r, out) in y.iter_mut().enumerate() {
                // SAFETY: as above.
                *out =
                    unsafe { x86::dot_avx2(x, &q[r * k..(r + 1) * k], &d[r * nb..(r + 1) * nb]) };
            }
        }
        _ => {
            for (r, out) in y.iter_mut().enumerate() {
                *out = dot_scalar(x, &q[r * k..(r + 1) * k], &d[r * nb..(r + 1) * nb]);
            }
        }
    }
}

/// `y[j·ldy + r] = dot(xs[j·k..], W[n0 + r])` for `m ≤ MULTI_MAX` activation
/// rows and `n` weight rows: each weight block is widened once for every
/// activation row; the bits of [`rows`] per row.
#[allow(clippy::too_many_arguments)]
fn rows_multi(
    level: SimdLevel,
    xs: &[f32],
    m: usize,
    w: &Q8Weights,
    n0: usize,
    n: usize,
    y: &mut [f32],
    ldy: usize,
) {
    let k = xs.len() / m;
    let nb = k / Q8_0_BLOCK;
    let q = &w.quants[n0 * k..(n0 + n) * k];
    let d = &w.scales[n0 * nb..(n0 + n) * nb];
    match (level.min(cpu::simd_level()), m) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the level is capped by the detected features; shapes checked by the caller.
        (SimdLevel::Avx512, 2) => unsafe { x86::rows_multi_avx512::<2>(xs, k, q, d, y, ldy, n) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above.
        (SimdLevel::Avx512, 3) => unsafe { x86::rows_multi_avx512::<3>(xs, k, q, d, y, ldy, n) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above.
        (SimdLevel::Avx512, 4) => unsafe { x86::rows_multi_avx512::<4>(xs, k, q, d, y, ldy, n) },
        _ => {
            for j in 0..m {
                rows(
                    level,
                    &xs[j * k..(j + 1) * k],
                    w,
                    n0,
                    &mut y[j * ldy..j * ldy + n],
                );
            }
        }
    }
}

/// Decode `W[n0..n0+nr, k0..k0+kb]` to f32 (`d * q` is exact in f32).
fn decode_tile(
    w: &Q8Weights,
    k: usize,
    (n0, nr, k0, kb): (usize, usize, usize, usize),
    dst: &mut [f32],
) {
    let nb = k / Q8_0_BLOCK;
    for r in 0..nr {
        let row = n0 + r;
        let q = &w.quants[row * k + k0..row * k + k0 + kb];
        let out = &mut dst[r * kb..(r + 1) * kb];
        for (i, (o, &qv)) in out.iter_mut().zip(q).enumerate() {
            *o = w.scales[row * nb + (k0 + i) / Q8_0_BLOCK] * qv as f32;
        }
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) fn run(
    level: SimdLevel,
    a: &[f32],
    m: usize,
    k: usize,
    n: usize,
    w: &Q8Weights,
    bias: Option<&[f32]>,
    out: &mut [f32],
    lanes: &impl Fork,
) -> Result<(), KernelError> {
    if (2..=MULTI_ROWS_M).contains(&m) {
        // Streaming steps' few frames: grouped matvecs (no f32 tile decode, no
        // packing), each output the bits of its row's matvec.
        let group = |xs: &[f32], g: usize, n0: usize, nr: usize, y: &mut [f32]| {
            rows_multi(level, xs, g, w, n0, nr, y, nr);
        };
        return run_grouped(a, m, k, n, bias, out, lanes, group);
    }
    let row_fn = |x: &[f32], n0: usize, y: &mut [f32]| rows(level, x, w, n0, y);
    let tile = |n0: usize, nr: usize, k0: usize, kb: usize, dst: &mut [f32]| {
        decode_tile(w, k, (n0, nr, k0, kb), dst)
    };
    run_float(a, m, k, n, bias, out, lanes, row_fn, Some(tile))
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use crate::kernels::f32_matvec::x86::{reduce_avx2, reduce_avx512};
    use std::arch::x86_64::*;

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")]
    unsafe fn q16(p: *const i8) -> __m512 {
        _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(p as *const __m128i)))
    }

    /// One block of one row: `acc = fma(d, x0·q[0..16] ⊕ x1·q[16..32], acc)`.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")]
    unsafe fn block(x0: __m512, x1: __m512, q: *const i8, d: f32, acc: __m512) -> __m512 {
        let s = _mm512_mul_ps(x0, q16(q));
        let s = _mm512_fmadd_ps(x1, q16(q.add(16)), s);
        _mm512_fmadd_ps(_mm512_set1_ps(d), s, acc)
    }

    /// Four rows at a time sharing each `x` load.
    ///
    /// # Safety
    /// Needs AVX-512F/BW/VL/DQ; `x.len()` a multiple of 32, `q`/`d` hold `y.len()` rows.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")]
    pub(super) unsafe fn rows_avx512(x: &[f32], q: &[i8], d: &[f32], y: &mut [f32]) {
        let k = x.len();
        let nb = k / 32;
        let xp = x.as_ptr();
        let n = y.len();
        let mut r = 0;
        while r + 4 <= n {
            let q0 = q.as_ptr().add(r * k);
            let (q1, q2, q3) = (q0.add(k), q0.add(2 * k), q0.add(3 * k));
            let d0 = &d[r * nb..(r + 4) * nb];
            let mut a0 = _mm512_setzero_ps();
            let mut a1 = _mm512_setzero_ps();
            let mut a2 = _mm512_setzero_ps();
            let mut a3 = _mm512_setzero_ps();
            for b in 0..nb {
                let o = b * 32;
                let x0 = _mm512_loadu_ps(xp.add(o));
                let x1 = _mm512_loadu_ps(xp.add(o + 16));
                a0 = block(x0, x1, q0.add(o), d0[b], a0);
                a1 = block(x0, x1, q1.add(o), d0[nb + b], a1);
                a2 = block(x0, x1, q2.add(o), d0[2 * nb + b], a2);
                a3 = block(x0, x1, q3.add(o), d0[3 * nb + b], a3);
            }
            y[r] = reduce_avx512(a0);
            y[r + 1] = reduce_avx512(a1);
            y[r + 2] = reduce_avx512(a2);
            y[r + 3] = reduce_avx512(a3);
            r += 4;
        }
        while r < n {
            let q0 = q.as_ptr().add(r * k);
            let mut a0 = _mm512_setzero_ps();
            for b in 0..nb {
                let o = b * 32;
                let x0 = _mm512_loadu_ps(xp.add(o));
                let x1 = _mm512_loadu_ps(xp.add(o + 16));
                a0 = block(x0, x1, q0.add(o), d[r * nb + b], a0);
            }
            y[r] = reduce_avx512(a0);
            r += 1;
        }
    }

    /// `M` activation rows × four weight rows at a time: each block's quants
    /// are widened once and used by every activation row.
    ///
    /// # Safety
    /// Needs AVX-512F/BW/VL/DQ; `xs` holds `M` rows of `k` (a multiple of
    /// 32), `q`/`d` hold `n` weight rows, `y` rows of `ldy ≥ n` for `M` rows.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")]
    pub(super) unsafe fn rows_multi_avx512<const M: usize>(
        xs: &[f32],
        k: usize,
        q: &[i8],
        d: &[f32],
        y: &mut [f32],
        ldy: usize,
        n: usize,
    ) {
        let nb = k / 32;
        let xp = xs.as_ptr();
        let mut r = 0;
        while r + 4 <= n {
            let qp: [*const i8; 4] = std::array::from_fn(|i| q.as_ptr().add((r + i) * k));
            let dr: [&[f32]; 4] = std::array::from_fn(|i| &d[(r + i) * nb..(r + i + 1) * nb]);
            let mut acc = [[_mm512_setzero_ps(); 4]; M];
            #[allow(clippy::needless_range_loop)]
            for b in 0..nb {
                let o = b * 32;
                let w0: [__m512; 4] = std::array::from_fn(|i| q16(qp[i].add(o)));
                let w1: [__m512; 4] = std::array::from_fn(|i| q16(qp[i].add(o + 16)));
                for (j, aj) in acc.iter_mut().enumerate() {
                    let x0 = _mm512_loadu_ps(xp.add(j * k + o));
                    let x1 = _mm512_loadu_ps(xp.add(j * k + o + 16));
                    for i in 0..4 {
                        // `block`'s operations in its order.
                        let s = _mm512_mul_ps(x0, w0[i]);
                        let s = _mm512_fmadd_ps(x1, w1[i], s);
                        aj[i] = _mm512_fmadd_ps(_mm512_set1_ps(dr[i][b]), s, aj[i]);
                    }
                }
            }
            for (j, aj) in acc.iter().enumerate() {
                for (i, v) in aj.iter().enumerate() {
                    y[j * ldy + r + i] = reduce_avx512(*v);
                }
            }
            r += 4;
        }
        if r < n {
            for j in 0..M {
                rows_avx512(
                    &xs[j * k..(j + 1) * k],
                    &q[r * k..n * k],
                    &d[r * nb..n * nb],
                    &mut y[j * ldy + r..j * ldy + n],
                );
            }
        }
    }

    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn q8(p: *const i8) -> __m256 {
        _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(p as *const __m128i)))
    }

    /// One row in the block order, lanes 0..8 and 8..16 in two registers.
    ///
    /// # Safety
    /// Needs AVX2+FMA; `x.len()` a multiple of 32, `q.len() >= x.len()`, `d` one scale per block.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn dot_avx2(x: &[f32], q: &[i8], d: &[f32]) -> f32 {
        let nb = x.len() / 32;
        let (xp, qp) = (x.as_ptr(), q.as_ptr());
        let mut lo = _mm256_setzero_ps();
        let mut hi = _mm256_setzero_ps();
        for (b, &db) in d.iter().enumerate().take(nb) {
            let o = b * 32;
            let dv = _mm256_set1_ps(db);
            let s = _mm256_mul_ps(_mm256_loadu_ps(xp.add(o)), q8(qp.add(o)));
            let s = _mm256_fmadd_ps(_mm256_loadu_ps(xp.add(o + 16)), q8(qp.add(o + 16)), s);
            lo = _mm256_fmadd_ps(dv, s, lo);
            let s = _mm256_mul_ps(_mm256_loadu_ps(xp.add(o + 8)), q8(qp.add(o + 8)));
            let s = _mm256_fmadd_ps(_mm256_loadu_ps(xp.add(o + 24)), q8(qp.add(o + 24)), s);
            hi = _mm256_fmadd_ps(dv, s, hi);
        }
        reduce_avx2(lo, hi)
    }
}
