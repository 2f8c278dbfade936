//! GGML block-quantized weights: `q8_0` (blocks of 32 int8 values with one
//! f16 scale `d`, value `d * q`) and `q4_0` (32 values as 16 bytes of
//! nibbles, value `d * (q − 8)`; byte `j` holds values `j` and `16 + j`).
//! Activations stay f32 (weight-only quantization). Both run the same
//! kernels: only the widening of a block's two 16-value halves differs.
//!
//! Packing splits GGML's blocks into a dense quant matrix and an f32 scale
//! per block (f16 → f32 is exact), so SIMD loads are plain and aligned to
//! the row.
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
use voxlane_runtime::weights::Buf;
use voxlane_runtime::Fork;

/// Values per q8_0 block.
pub const Q8_0_BLOCK: usize = 32;
/// Bytes per GGML q8_0 block (f16 scale + 32 × i8).
pub const Q8_0_BLOCK_BYTES: usize = 34;
/// Bytes per GGML q4_0 block (f16 scale + 16 bytes of nibbles).
pub const Q4_0_BLOCK_BYTES: usize = 18;

/// Packed q8_0 or q4_0 weights (owned, or mapped from a packed-weights file).
#[derive(Debug, Clone)]
pub(super) struct Q8Weights {
    /// `N × K/32` scales, row-major.
    pub(super) scales: Buf<f32>,
    /// `N` rows of quants: `K` i8 (q8_0) or `K/2` nibble bytes (q4_0).
    pub(super) quants: Buf<u8>,
    /// q4_0 nibbles (else q8_0 bytes).
    pub(super) q4: bool,
}

pub(super) fn check_k(k: usize) -> Result<(), KernelError> {
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
            quants.extend_from_slice(&blk[2..]);
        }
        Ok(Self {
            scales: scales.into(),
            quants: quants.into(),
            q4: false,
        })
    }

    pub(super) fn from_ggml_q4(bytes: &[u8], n: usize, k: usize) -> Result<Self, KernelError> {
        check_k(k)?;
        let blocks = n * k / Q8_0_BLOCK;
        check_len("q4_0 bytes", blocks * Q4_0_BLOCK_BYTES, bytes.len())?;
        let mut scales = Vec::with_capacity(blocks);
        let mut quants = Vec::with_capacity(n * k / 2);
        for blk in bytes.chunks_exact(Q4_0_BLOCK_BYTES) {
            scales.push(::half::f16::from_bits(u16::from_le_bytes([blk[0], blk[1]])).to_f32());
            quants.extend_from_slice(&blk[2..]);
        }
        Ok(Self {
            scales: scales.into(),
            quants: quants.into(),
            q4: true,
        })
    }

    /// Quant bytes per row of `k` values.
    pub(super) fn row_bytes(&self, k: usize) -> usize {
        if self.q4 {
            k / 2
        } else {
            k
        }
    }
}

/// Value `j` (0..32) of the block at `q`: `q8_0` bytes or `q4_0` nibbles (`− 8`).
#[inline(always)]
fn value<const Q4: bool>(q: &[u8], j: usize) -> f32 {
    if Q4 {
        let b = q[j % 16];
        let nib = if j < 16 { b & 0xF } else { b >> 4 };
        (i32::from(nib) - 8) as f32
    } else {
        f32::from(q[j] as i8)
    }
}

/// Quant bytes per block.
const fn block_bytes<const Q4: bool>() -> usize {
    if Q4 {
        16
    } else {
        32
    }
}

/// `w` is whole rows of `k` values, `k` whole blocks (the quantizers' input).
fn check_rows(what: &'static str, w: &[f32], k: usize) -> Result<(), KernelError> {
    check_k(k)?;
    if k == 0 || !w.len().is_multiple_of(k) {
        return Err(KernelError::Param {
            what,
            detail: format!("{} values are not whole rows of {k}", w.len()),
        });
    }
    Ok(())
}

/// Quantize row-major f32 rows of length `k` to GGML q4_0 bytes (GGML's
/// reference quantizer: `d = v / −8` for the value `v` of largest magnitude,
/// `q = min(15, trunc(x / d + 8.5))`).
pub fn quantize_q4_0(w: &[f32], k: usize) -> Result<Vec<u8>, KernelError> {
    check_rows("q4_0 source", w, k)?;
    let mut out = Vec::with_capacity(w.len() / Q8_0_BLOCK * Q4_0_BLOCK_BYTES);
    for blk in w.chunks_exact(Q8_0_BLOCK) {
        let max = blk
            .iter()
            .fold(0.0f32, |m, &v| if v.abs() > m.abs() { v } else { m });
        let d = max / -8.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        out.extend_from_slice(&::half::f16::from_f32(d).to_bits().to_le_bytes());
        let q = |v: f32| ((v * id + 8.5) as i32).clamp(0, 15) as u8;
        out.extend((0..16).map(|j| q(blk[j]) | (q(blk[j + 16]) << 4)));
    }
    Ok(out)
}

/// Quantize row-major f32 rows of length `k` to GGML q8_0 bytes (GGML's reference quantizer).
pub fn quantize_q8_0(w: &[f32], k: usize) -> Result<Vec<u8>, KernelError> {
    check_rows("q8_0 source", w, k)?;
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
fn dot_scalar<const Q4: bool>(x: &[f32], q: &[u8], d: &[f32]) -> f32 {
    let mut acc = [0.0f32; LANES];
    for ((xb, qb), &db) in x
        .chunks_exact(Q8_0_BLOCK)
        .zip(q.chunks_exact(block_bytes::<Q4>()))
        .zip(d)
    {
        for j in 0..LANES {
            let s = xb[j] * value::<Q4>(qb, j);
            let s = xb[j + 16].mul_add(value::<Q4>(qb, j + 16), s);
            acc[j] = db.mul_add(s, acc[j]);
        }
    }
    reduce16(&acc)
}

fn rows(level: SimdLevel, x: &[f32], w: &Q8Weights, n0: usize, y: &mut [f32]) {
    if w.q4 {
        rows_of::<true>(level, x, w, n0, y)
    } else {
        rows_of::<false>(level, x, w, n0, y)
    }
}

fn rows_of<const Q4: bool>(level: SimdLevel, x: &[f32], w: &Q8Weights, n0: usize, y: &mut [f32]) {
    let k = x.len();
    let (nb, kr) = (k / Q8_0_BLOCK, w.row_bytes(k));
    let q = &w.quants[n0 * kr..(n0 + y.len()) * kr];
    let d = &w.scales[n0 * nb..(n0 + y.len()) * nb];
    match level {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the level is capped at the detected features; shapes checked by the caller.
        SimdLevel::Avx512 => unsafe { x86::rows_avx512::<Q4>(x, q, d, y) },
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx2 => {
            for (r, out) in y.iter_mut().enumerate() {
                // SAFETY: as above.
                *out = unsafe {
                    x86::dot_avx2::<Q4>(x, &q[r * kr..(r + 1) * kr], &d[r * nb..(r + 1) * nb])
                };
            }
        }
        _ => {
            for (r, out) in y.iter_mut().enumerate() {
                *out = dot_scalar::<Q4>(x, &q[r * kr..(r + 1) * kr], &d[r * nb..(r + 1) * nb]);
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
    let (nb, kr) = (k / Q8_0_BLOCK, w.row_bytes(k));
    let q = &w.quants[n0 * kr..(n0 + n) * kr];
    let d = &w.scales[n0 * nb..(n0 + n) * nb];
    let simd = if w.q4 {
        rows_multi_of::<true>(level, xs, m, k, q, d, y, ldy, n)
    } else {
        rows_multi_of::<false>(level, xs, m, k, q, d, y, ldy, n)
    };
    if !simd {
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

/// The SIMD route of [`rows_multi`] for one block format; `false` where
/// there is none (the caller then runs each row's matvec).
#[allow(clippy::too_many_arguments)]
fn rows_multi_of<const Q4: bool>(
    level: SimdLevel,
    xs: &[f32],
    m: usize,
    k: usize,
    q: &[u8],
    d: &[f32],
    y: &mut [f32],
    ldy: usize,
    n: usize,
) -> bool {
    match (level.min(cpu::simd_level()), m) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the level is capped by the detected features; shapes checked by the caller.
        (SimdLevel::Avx512, 2) => unsafe {
            x86::rows_multi_avx512::<2, Q4>(xs, k, q, d, y, ldy, n)
        },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above.
        (SimdLevel::Avx512, 3) => unsafe {
            x86::rows_multi_avx512::<3, Q4>(xs, k, q, d, y, ldy, n)
        },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above.
        (SimdLevel::Avx512, 4) => unsafe {
            x86::rows_multi_avx512::<4, Q4>(xs, k, q, d, y, ldy, n)
        },
        _ => return false,
    }
    true
}

/// Decode `W[n0..n0+nr, k0..k0+kb]` to f32 (`d * q` is exact in f32).
fn decode_tile(
    w: &Q8Weights,
    k: usize,
    (n0, nr, k0, kb): (usize, usize, usize, usize),
    dst: &mut [f32],
) {
    let (nb, kr, bb) = (k / Q8_0_BLOCK, w.row_bytes(k), w.row_bytes(Q8_0_BLOCK));
    for r in 0..nr {
        let row = n0 + r;
        let out = &mut dst[r * kb..(r + 1) * kb];
        for (i, o) in out.iter_mut().enumerate() {
            let (b, j) = ((k0 + i) / Q8_0_BLOCK, (k0 + i) % Q8_0_BLOCK);
            let q = &w.quants[row * kr + b * bb..row * kr + (b + 1) * bb];
            let v = if w.q4 {
                value::<true>(q, j)
            } else {
                value::<false>(q, j)
            };
            *o = w.scales[row * nb + b] * v;
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

    use super::block_bytes;

    /// A block's two halves (values 0..16, 16..32) widened to f32.
    #[inline(always)]
    unsafe fn halves<const Q4: bool>(p: *const u8) -> (__m512, __m512) {
        if Q4 {
            let b = _mm512_cvtepu8_epi32(_mm_loadu_si128(p as *const __m128i));
            let eight = _mm512_set1_epi32(8);
            let lo = _mm512_sub_epi32(_mm512_and_si512(b, _mm512_set1_epi32(0xF)), eight);
            let hi = _mm512_sub_epi32(_mm512_srli_epi32::<4>(b), eight);
            (_mm512_cvtepi32_ps(lo), _mm512_cvtepi32_ps(hi))
        } else {
            let w = |o: usize| {
                _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(
                    p.add(o) as *const __m128i
                )))
            };
            (w(0), w(16))
        }
    }

    /// One block of one row: `acc = fma(d, x0·q[0..16] ⊕ x1·q[16..32], acc)`.
    #[inline(always)]
    unsafe fn block<const Q4: bool>(
        x0: __m512,
        x1: __m512,
        q: *const u8,
        d: f32,
        acc: __m512,
    ) -> __m512 {
        let (w0, w1) = halves::<Q4>(q);
        let s = _mm512_mul_ps(x0, w0);
        let s = _mm512_fmadd_ps(x1, w1, s);
        _mm512_fmadd_ps(_mm512_set1_ps(d), s, acc)
    }

    /// Four rows at a time sharing each `x` load.
    ///
    /// # Safety
    /// Needs AVX-512F/BW/VL/DQ; `x.len()` a multiple of 32, `q`/`d` hold `y.len()` rows.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")]
    pub(super) unsafe fn rows_avx512<const Q4: bool>(
        x: &[f32],
        q: &[u8],
        d: &[f32],
        y: &mut [f32],
    ) {
        let k = x.len();
        let nb = k / 32;
        let (bb, kr) = (block_bytes::<Q4>(), nb * block_bytes::<Q4>());
        let xp = x.as_ptr();
        let n = y.len();
        let mut r = 0;
        while r + 4 <= n {
            let q0 = q.as_ptr().add(r * kr);
            let (q1, q2, q3) = (q0.add(kr), q0.add(2 * kr), q0.add(3 * kr));
            let d0 = &d[r * nb..(r + 4) * nb];
            let mut a0 = _mm512_setzero_ps();
            let mut a1 = _mm512_setzero_ps();
            let mut a2 = _mm512_setzero_ps();
            let mut a3 = _mm512_setzero_ps();
            for b in 0..nb {
                let o = b * 32;
                let (x0, x1) = (_mm512_loadu_ps(xp.add(o)), _mm512_loadu_ps(xp.add(o + 16)));
                let qo = b * bb;
                a0 = block::<Q4>(x0, x1, q0.add(qo), d0[b], a0);
                a1 = block::<Q4>(x0, x1, q1.add(qo), d0[nb + b], a1);
                a2 = block::<Q4>(x0, x1, q2.add(qo), d0[2 * nb + b], a2);
                a3 = block::<Q4>(x0, x1, q3.add(qo), d0[3 * nb + b], a3);
            }
            y[r] = reduce_avx512(a0);
            y[r + 1] = reduce_avx512(a1);
            y[r + 2] = reduce_avx512(a2);
            y[r + 3] = reduce_avx512(a3);
            r += 4;
        }
        while r < n {
            let q0 = q.as_ptr().add(r * kr);
            let mut a0 = _mm512_setzero_ps();
            for b in 0..nb {
                let o = b * 32;
                let x0 = _mm512_loadu_ps(xp.add(o));
                let x1 = _mm512_loadu_ps(xp.add(o + 16));
                a0 = block::<Q4>(x0, x1, q0.add(b * bb), d[r * nb + b], a0);
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
    pub(super) unsafe fn rows_multi_avx512<const M: usize, const Q4: bool>(
        xs: &[f32],
        k: usize,
        q: &[u8],
        d: &[f32],
        y: &mut [f32],
        ldy: usize,
        n: usize,
    ) {
        let nb = k / 32;
        let (bb, kr) = (block_bytes::<Q4>(), nb * block_bytes::<Q4>());
        let xp = xs.as_ptr();
        let mut r = 0;
        while r + 4 <= n {
            let qp: [*const u8; 4] = std::array::from_fn(|i| q.as_ptr().add((r + i) * kr));
            let dr: [&[f32]; 4] = std::array::from_fn(|i| &d[(r + i) * nb..(r + i + 1) * nb]);
            let mut acc = [[_mm512_setzero_ps(); 4]; M];
            #[allow(clippy::needless_range_loop)]
            for b in 0..nb {
                let o = b * 32;
                let mut w0 = [_mm512_setzero_ps(); 4];
                let mut w1 = [_mm512_setzero_ps(); 4];
                for i in 0..4 {
                    (w0[i], w1[i]) = halves::<Q4>(qp[i].add(b * bb));
                }
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
                rows_avx512::<Q4>(
                    &xs[j * k..(j + 1) * k],
                    &q[r * kr..n * kr],
                    &d[r * nb..n * nb],
                    &mut y[j * ldy + r..j * ldy + n],
                );
            }
        }
    }

    /// Values `o..o+8` (`o` in 0, 8, 16, 24) of the block at `p`, widened to f32.
    #[inline(always)]
    unsafe fn q8<const Q4: bool>(p: *const u8, o: usize) -> __m256 {
        if Q4 {
            let b = _mm256_cvtepu8_epi32(_mm_loadl_epi64(p.add(o % 16) as *const __m128i));
            let nib = if o < 16 {
                _mm256_and_si256(b, _mm256_set1_epi32(0xF))
            } else {
                _mm256_srli_epi32::<4>(b)
            };
            _mm256_cvtepi32_ps(_mm256_sub_epi32(nib, _mm256_set1_epi32(8)))
        } else {
            _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(
                p.add(o) as *const __m128i
            )))
        }
    }

    /// One row in the block order, lanes 0..8 and 8..16 in two registers.
    ///
    /// # Safety
    /// Needs AVX2+FMA; `x.len()` a multiple of 32, `q.len() >= x.len()`, `d` one scale per block.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn dot_avx2<const Q4: bool>(x: &[f32], q: &[u8], d: &[f32]) -> f32 {
        let nb = x.len() / 32;
        let (xp, qp) = (x.as_ptr(), q.as_ptr());
        let mut lo = _mm256_setzero_ps();
        let mut hi = _mm256_setzero_ps();
        for (b, &db) in d.iter().enumerate().take(nb) {
            let o = b * 32;
            let qb = qp.add(b * block_bytes::<Q4>());
            let dv = _mm256_set1_ps(db);
            let s = _mm256_mul_ps(_mm256_loadu_ps(xp.add(o)), q8::<Q4>(qb, 0));
            let s = _mm256_fmadd_ps(_mm256_loadu_ps(xp.add(o + 16)), q8::<Q4>(qb, 16), s);
            lo = _mm256_fmadd_ps(dv, s, lo);
            let s = _mm256_mul_ps(_mm256_loadu_ps(xp.add(o + 8)), q8::<Q4>(qb, 8));
            let s = _mm256_fmadd_ps(_mm256_loadu_ps(xp.add(o + 24)), q8::<Q4>(qb, 24), s);
            hi = _mm256_fmadd_ps(dv, s, hi);
        }
        reduce_avx2(lo, hi)
    }
}
