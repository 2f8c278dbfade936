//! Kokoro's small pointwise loops (back half) and PL-BERT's onnxruntime-exact
//! row kernels (LayerNorm, SkipLayerNorm, FastGelu, softmax attention),
//! compiled once per SIMD level.
//!
//! Each loop is plain Rust written so LLVM vectorises it; `dispatch!`
//! instantiates it inside a `#[target_feature]` trampoline for AVX-512 and
//! AVX2 (the crate itself targets baseline x86-64). Rust never contracts
//! `a·b + c` into an FMA; where onnxruntime fuses, the code says so with
//! `mul_add` (an FMA instruction on those routes, exact `fmaf` elsewhere), so
//! every route performs the same IEEE operations and returns the same bits.

use crate::kernels::cpu::{simd_level, SimdLevel};

/// `1.5 · 2²³`: adding and subtracting it rounds half to even for |v| < 2²².
const ROUND_MAGIC: f32 = 12_582_912.0;

/// Run `$body` (an `#[inline(always)]` fn call) on the best SIMD level.
macro_rules! dispatch {
    ($name:ident ( $($arg:ident : $ty:ty),* ) $body:block) => {{
        #[inline(always)]
        fn generic($($arg: $ty),*) $body

        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")]
        unsafe fn avx512($($arg: $ty),*) {
            generic($($arg),*)
        }

        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn avx2($($arg: $ty),*) {
            generic($($arg),*)
        }

        match simd_level() {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the level was detected on this CPU.
            SimdLevel::Avx512 => unsafe { avx512($($arg),*) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above.
            SimdLevel::Avx2 => unsafe { avx2($($arg),*) },
            _ => generic($($arg),*),
        }
    }};
}

/// `[min(0, x…), max(0, x…)]` (NaNs ignored, as `f32::min`/`max`).
pub fn range(x: &[f32]) -> [f32; 2] {
    let mut out = [0.0f32; 2];
    range_into(x, &mut out);
    out
}

fn range_into(x: &[f32], out: &mut [f32; 2]) {
    dispatch!(range(x: &[f32], out: &mut [f32; 2]) {
        // Sixteen independent lanes: a vector register's worth.
        let (mut lo, mut hi) = ([0.0f32; 16], [0.0f32; 16]);
        let mut it = x.chunks_exact(16);
        for c in &mut it {
            for j in 0..16 {
                lo[j] = if c[j] < lo[j] { c[j] } else { lo[j] };
                hi[j] = if c[j] > hi[j] { c[j] } else { hi[j] };
            }
        }
        for (j, &v) in it.remainder().iter().enumerate() {
            lo[j] = if v < lo[j] { v } else { lo[j] };
            hi[j] = if v > hi[j] { v } else { hi[j] };
        }
        *out = [
            lo.iter().fold(0.0f32, |a, &b| a.min(b)),
            hi.iter().fold(0.0f32, |a, &b| a.max(b)),
        ];
    })
}

/// `q = clamp(round_half_even(x / scale) + zp, 0, 255)` (`DynamicQuantizeLinear`).
pub fn quantize(x: &[f32], scale: f32, zp: f32, q: &mut [u8]) {
    dispatch!(quantize(x: &[f32], scale: f32, zp: f32, q: &mut [u8]) {
        for (d, &v) in q.iter_mut().zip(x) {
            // |v / scale| ≤ 255, so the magic-number rounding is exact.
            let r = (v / scale + ROUND_MAGIC) - ROUND_MAGIC;
            // `max` first maps NaN to 0, so the value is finite and in
            // 0..=255: the unchecked conversion (one vector instruction,
            // unlike the saturating `as`) is exact and sound.
            #[allow(clippy::manual_clamp)] // clamp would keep NaN
            let c = (r + zp).max(0.0).min(255.0);
            // SAFETY: `c` is finite and within i32 range (see above).
            *d = unsafe { c.to_int_unchecked::<i32>() } as u8;
        }
    })
}

/// `out = (acc + bias_q) as f32 · s` (the export's dequantization of `ConvInteger`).
pub fn dequantize(acc: &[i32], bias_q: i32, s: f32, out: &mut [f32]) {
    dispatch!(dequantize(acc: &[i32], bias_q: i32, s: f32, out: &mut [f32]) {
        for (d, &a) in out.iter_mut().zip(acc) {
            *d = a.wrapping_add(bias_q) as f32 * s;
        }
    })
}

/// `out ← (acc + bias_q) as f32 · s + out` (dequantization, then the residual `Add`).
pub fn dequantize_add(acc: &[i32], bias_q: i32, s: f32, out: &mut [f32]) {
    dispatch!(dequantize_add(acc: &[i32], bias_q: i32, s: f32, out: &mut [f32]) {
        for (d, &a) in out.iter_mut().zip(acc) {
            *d += a.wrapping_add(bias_q) as f32 * s;
        }
    })
}

/// `a ← a + b`.
pub fn add(a: &mut [f32], b: &[f32]) {
    dispatch!(add(a: &mut [f32], b: &[f32]) {
        for (x, &y) in a.iter_mut().zip(b) {
            *x += y;
        }
    })
}

/// `a ← (a + b) / d` (residual sum then the graph's `Div`).
pub fn add_div(a: &mut [f32], b: &[f32], d: f32) {
    dispatch!(add_div(a: &mut [f32], b: &[f32], d: f32) {
        for (x, &y) in a.iter_mut().zip(b) {
            *x = (y + *x) / d;
        }
    })
}

/// onnxruntime's `LayerNormalization` (float, last axis) on each `dim`-row of
/// `x`, bit for bit: MLAS's AVX2 LayerNorm kernel (`MlasLayerNormKernelAvx2`,
/// which onnxruntime 1.32 runs on AVX2 CPUs for rows of 8 or more).
///
/// * mean: `x` widened to f64 in 4 lanes, lanes reduced `(l0 + l2) + (l1 + l3)`,
///   `/ n` in f64, rounded to f32;
/// * variance: `Σ (x − mean)²` in 8 f32 lanes with FMA, reduced
///   `((v0+v4) + (v2+v6)) + ((v1+v5) + (v3+v7))`, then `/ n`;
/// * `inv = 1 / sqrt(var + eps)`, `y = fma((x − mean) · inv, γ, β)`.
///
/// Rows that are not a multiple of 8 finish with a plain scalar tail (never
/// the case for Kokoro's 128/768-wide rows).
pub fn layer_norm(x: &mut [f32], dim: usize, gamma: &[f32], beta: &[f32], eps: f32) {
    dispatch!(layer_norm(x: &mut [f32], dim: usize, gamma: &[f32], beta: &[f32], eps: f32) {
        if dim == 0 || gamma.len() < dim || beta.len() < dim {
            return;
        }
        let n = dim as f32;
        for row in x.chunks_exact_mut(dim) {
            let mut d = [0.0f64; 4];
            let mut it = row.chunks_exact(4);
            for c in &mut it {
                for j in 0..4 {
                    d[j] += f64::from(c[j]);
                }
            }
            let mut dsum = (d[0] + d[2]) + (d[1] + d[3]);
            for &v in it.remainder() {
                dsum += f64::from(v);
            }
            let mean = (dsum / dim as f64) as f32;
            let mut v = [0.0f32; 8];
            let mut it = row.chunks_exact(8);
            for c in &mut it {
                for j in 0..8 {
                    let e = c[j] - mean;
                    v[j] = e.mul_add(e, v[j]);
                }
            }
            let r = [v[0] + v[4], v[1] + v[5], v[2] + v[6], v[3] + v[7]];
            let mut var = (r[0] + r[2]) + (r[1] + r[3]);
            for &x in it.remainder() {
                let e = x - mean;
                var += e * e;
            }
            let inv = 1.0 / (var / n + eps).sqrt();
            for ((y, &g), &b) in row.iter_mut().zip(gamma).zip(beta) {
                *y = ((*y - mean) * inv).mul_add(g, b);
            }
        }
    })
}

/// onnxruntime's com.microsoft `SkipLayerNormalization` (float, no bias) on
/// rows of `x` that already hold `input + skip`, bit for bit: a scalar
/// Welford pass in f32 (`mean += d / k`, `m2 += d · (x − mean)`), then
/// `y = ((x − mean) / sqrt(m2 / n + eps)) · γ + β` without FMA.
///
/// The Welford recurrence is serial within a row, so 16 rows run it side by
/// side (one per SIMD lane, each doing exactly the scalar row's operations);
/// [`skip_layer_norm_reference`] is the one-row-at-a-time original.
pub fn skip_layer_norm(x: &mut [f32], dim: usize, gamma: &[f32], beta: &[f32], eps: f32) {
    dispatch!(skip_layer_norm(x: &mut [f32], dim: usize, gamma: &[f32], beta: &[f32], eps: f32) {
        /// Rows per batch (one 512-bit register of lanes).
        const R: usize = 16;
        /// Elements of each row transposed per step (a 4 KiB tile).
        const KT: usize = 64;
        if dim == 0 || gamma.len() < dim || beta.len() < dim {
            return;
        }
        for block in x.chunks_mut(R * dim) {
            let rows = block.len() / dim;
            let (mut mean, mut m2) = ([0.0f32; R], [0.0f32; R]);
            let mut tile = [[0.0f32; R]; KT];
            let mut k0 = 0;
            while k0 < dim {
                let kn = KT.min(dim - k0);
                for (j, row) in block.chunks_exact(dim).enumerate() {
                    for (k, &v) in row[k0..k0 + kn].iter().enumerate() {
                        tile[k][j] = v;
                    }
                }
                for (k, col) in tile[..kn].iter().enumerate() {
                    let count = (k0 + k + 1) as f32;
                    for j in 0..R {
                        let v = col[j];
                        let d = v - mean[j];
                        mean[j] += d / count;
                        m2[j] += d * (v - mean[j]);
                    }
                }
                k0 += kn;
            }
            for (j, row) in block.chunks_exact_mut(dim).enumerate().take(rows) {
                let den = (m2[j] / dim as f32 + eps).sqrt();
                let m = mean[j];
                for ((y, &g), &b) in row.iter_mut().zip(gamma).zip(beta) {
                    *y = (*y - m) / den * g + b;
                }
            }
        }
    })
}

/// [`skip_layer_norm`] one row at a time: the readable reference.
pub fn skip_layer_norm_reference(x: &mut [f32], dim: usize, gamma: &[f32], beta: &[f32], eps: f32) {
    if dim == 0 {
        return;
    }
    for row in x.chunks_exact_mut(dim) {
        let (mut mean, mut m2) = (0.0f32, 0.0f32);
        for (k, &v) in row.iter().enumerate() {
            let d = v - mean;
            mean += d / (k + 1) as f32;
            m2 += d * (v - mean);
        }
        let den = (m2 / dim as f32 + eps).sqrt();
        for ((y, &g), &b) in row.iter_mut().zip(gamma).zip(beta) {
            *y = (*y - mean) / den * g + b;
        }
    }
}

// MLAS's `MlasTanhKernelFma3` rational approximation (Eigen's coefficients).
#[allow(clippy::excessive_precision)]
const TANH_ALPHA: [f32; 7] = [
    -2.760_768_477_423_55e-16,
    2.000_187_904_824_77e-13,
    -8.604_671_522_137_35e-11,
    5.122_297_090_371_14e-08,
    1.485_722_357_179_79e-05,
    6.372_619_288_754_36e-04,
    4.893_524_558_917_86e-03,
];
#[allow(clippy::excessive_precision)]
const TANH_BETA: [f32; 4] = [
    1.198_258_394_667_02e-06,
    1.185_347_056_866_54e-04,
    2.268_434_632_439_00e-03,
    4.893_525_185_543_85e-03,
];

/// onnxruntime's `FastGelu` with bias on `[rows, bias.len()]`, bit for bit:
/// `v = x + b`, `u = v · ((C·v)·v + B)`, MLAS's FMA3 `tanh(u)` (clamp to
/// ±9, odd degree-13 / even degree-6 rational with FMA steps, one division),
/// then `(v · 0.5) · (tanh + 1)`.
pub fn fast_gelu(x: &mut [f32], bias: &[f32]) {
    dispatch!(fast_gelu(x: &mut [f32], bias: &[f32]) {
        // The kernel's `static constexpr float` constants.
        #[allow(clippy::excessive_precision)]
        const B: f32 = 0.797_884_560_802_865_4;
        #[allow(clippy::excessive_precision)]
        const C: f32 = 0.035_677_408_136_300_125;
        if bias.is_empty() {
            return;
        }
        for row in x.chunks_exact_mut(bias.len()) {
            for (y, &b) in row.iter_mut().zip(bias) {
                let v = *y + b;
                let u = v * (C * v * v + B);
                let t = u.clamp(-9.0, 9.0);
                let t2 = t * t;
                let mut p = t2.mul_add(TANH_ALPHA[0], TANH_ALPHA[1]);
                for &a in &TANH_ALPHA[2..] {
                    p = p.mul_add(t2, a);
                }
                let p = p * t;
                let mut q = t2.mul_add(TANH_BETA[0], TANH_BETA[1]);
                for &c in &TANH_BETA[2..] {
                    q = q.mul_add(t2, c);
                }
                *y = (v * 0.5) * (p / q + 1.0);
            }
        }
    })
}

/// MLAS's exp constants (`MlasExpConstants`), as bits.
const EXP_LOWER: u32 = 0xc2cf_f1b5; // -103.9720840454
const EXP_BIAS: u32 = 0x4b40_0000; // 1.5 · 2²³
const EXP_LOG2E: u32 = 0x3fb8_aa3b;
const EXP_LN2_HI: u32 = 0xbf31_7200; // −ln 2, high part
const EXP_LN2_LO: u32 = 0xb5bf_be8e; // −ln 2, low part
const EXP_POLY: [u32; 5] = [
    0x3ab4_a000,
    0x3c09_2f6e,
    0x3d2a_adad,
    0x3e2a_aa28,
    0x3eff_fffb,
];

/// onnxruntime's `Softmax` (float, last axis) of each `dim`-row of `x`, bit
/// for bit: MLAS's AVX-512F route (`MlasComputeSumExpF32KernelAvx512F`):
/// `e = exp(x − max)` (clamp, `m = fma(x, log2e, 1.5·2²³) − 1.5·2²³`, two-step
/// FMA range reduction, degree-6 FMA polynomial, `vscalefps` by `2^m`),
/// summed in 16 lanes (48 elements per step as three 16-lane adds, then
/// masked 16-lane steps), lanes reduced `hi + lo` then pairwise
/// (`vhaddps` twice), and each `e` multiplied by `1 / sum`.
pub fn softmax(x: &mut [f32], dim: usize) {
    #[cfg(target_arch = "x86_64")]
    if simd_level() == SimdLevel::Avx512 {
        // SAFETY: AVX-512 detected.
        unsafe { attention_x86::softmax(x, dim) };
        return;
    }
    softmax_generic(x, dim);
}

/// [`softmax`] in portable code (`vscalefps` emulated in f64): the reference
/// of the AVX-512 route and the route of other CPUs.
fn softmax_generic(x: &mut [f32], dim: usize) {
    dispatch!(softmax(x: &mut [f32], dim: usize) {
        if dim == 0 {
            return;
        }
        let lower = f32::from_bits(EXP_LOWER);
        let bias = f32::from_bits(EXP_BIAS);
        let log2e = f32::from_bits(EXP_LOG2E);
        let (hi, lo) = (f32::from_bits(EXP_LN2_HI), f32::from_bits(EXP_LN2_LO));
        let poly = EXP_POLY.map(f32::from_bits);
        for row in x.chunks_exact_mut(dim) {
            let max = row.iter().fold(f32::MIN, |m, &v| if v > m { v } else { m });
            let neg = -max;
            let mut acc = [0.0f32; 16];
            for chunk in row.chunks_mut(16) {
                for (a, y) in acc.iter_mut().zip(chunk.iter_mut()) {
                    let v = (*y + neg).max(lower);
                    let m = v.mul_add(log2e, bias) - bias;
                    let r = m.mul_add(hi, v);
                    let r = m.mul_add(lo, r);
                    let mut p = poly[0];
                    for &c in &poly[1..] {
                        p = p.mul_add(r, c);
                    }
                    p = p.mul_add(r, 1.0);
                    p = p.mul_add(r, 1.0);
                    // vscalefps: p · 2^m rounded once (m is an integer in [−150, 0]).
                    let scale = f64::from_bits(((m as i64 + 1023) as u64) << 52);
                    let e = (f64::from(p) * scale) as f32;
                    *y = e;
                    *a += e;
                }
            }
            let h: [f32; 8] = std::array::from_fn(|j| acc[j + 8] + acc[j]);
            let sum = ((h[0] + h[1]) + (h[2] + h[3])) + ((h[4] + h[5]) + (h[6] + h[7]));
            let inv = 1.0 / sum;
            for y in row.iter_mut() {
                *y *= inv;
            }
        }
    })
}

/// MLAS's SGEMM splits K into slices of this many for `N < K` (`StrideN`
/// 128 → 64 for N = 64 doubles `StrideK` 128 → 256).
const PV_STRIDE_K: usize = 256;

/// Columns per register block of [`attention_head`] (one 512-bit vector).
const BLOCK: usize = 16;

/// Rows of [`attention_head`] computed side by side (independent FMA chains).
const ROWS: usize = 8;

/// One attention head's `softmax(q·kᵀ)·v` as onnxruntime computes it, bit for
/// bit: `q [t, d]` and `kt [d, kt_stride]` (already scaled; columns `t..` of
/// each row are padding, `kt_stride ≥ t` rounded up to 16), `v` rows of `d`
/// at `v_stride`. Each score is one FMA chain over `d` from 0 (MLAS SGEMM,
/// one K slice); [`softmax`] per row; each output is an FMA chain over the
/// tokens in slices of 256, slice sums added in order (MLAS accumulating
/// into C). Chains run 16 columns × 8 rows at a time in registers: the order inside
/// each chain is the same. `scores` holds `t·t`, `out` `t·d`.
#[allow(clippy::too_many_arguments)]
pub fn attention_head(
    q: &[f32],
    kt: &[f32],
    kt_stride: usize,
    v: &[f32],
    v_stride: usize,
    t: usize,
    d: usize,
    scores: &mut [f32],
    out: &mut [f32],
) {
    assert!(kt_stride >= t.next_multiple_of(BLOCK) && kt.len() >= d * kt_stride);
    assert!(q.len() >= t * d && scores.len() >= t * t && out.len() >= t * d);
    assert!(t == 0 || v.len() >= (t - 1) * v_stride + d);
    #[cfg(target_arch = "x86_64")]
    if simd_level() == SimdLevel::Avx512 {
        // SAFETY: AVX-512 detected; the asserts above bound every access.
        unsafe {
            attention_x86::qk(q, kt, kt_stride, t, d, scores);
            softmax(scores, t);
            attention_x86::pv(scores, v, v_stride, t, d, out);
        }
        return;
    }
    attention_head_generic(q, kt, kt_stride, v, v_stride, t, d, scores, out);
}

/// [`attention_head`] in portable code (auto-vectorised): the reference the
/// AVX-512 route is tested against, and the route of other CPUs.
#[allow(clippy::too_many_arguments)]
fn attention_head_generic(
    q: &[f32],
    kt: &[f32],
    kt_stride: usize,
    v: &[f32],
    v_stride: usize,
    t: usize,
    d: usize,
    scores: &mut [f32],
    out: &mut [f32],
) {
    dispatch!(qk(q: &[f32], kt: &[f32], kt_stride: usize, t: usize, d: usize, scores: &mut [f32]) {
        // ROWS query rows share each kᵀ vector: independent chains in flight.
        for i0 in (0..t).step_by(ROWS) {
            let rn = ROWS.min(t - i0);
            // Rows past the end repeat the last one (computed, not written).
            let qr: [&[f32]; ROWS] = std::array::from_fn(|r| &q[(i0 + r.min(rn - 1)) * d..][..d]);
            for j0 in (0..t).step_by(BLOCK) {
                let mut acc = [[0.0f32; BLOCK]; ROWS];
                for c in 0..d {
                    let kr = &kt[c * kt_stride + j0..c * kt_stride + j0 + BLOCK];
                    for (row, qi) in acc.iter_mut().zip(&qr) {
                        let a = qi[c];
                        for (s, &b) in row.iter_mut().zip(kr) {
                            *s = a.mul_add(b, *s);
                        }
                    }
                }
                let n = BLOCK.min(t - j0);
                for (r, row) in acc.iter().enumerate().take(rn) {
                    scores[(i0 + r) * t + j0..][..n].copy_from_slice(&row[..n]);
                }
            }
        }
    });
    softmax(scores, t);
    dispatch!(pv(scores: &[f32], v: &[f32], v_stride: usize, t: usize, d: usize, out: &mut [f32]) {
        for i0 in (0..t).step_by(ROWS) {
            let rn = ROWS.min(t - i0);
            let pr: [&[f32]; ROWS] = std::array::from_fn(|r| &scores[(i0 + r.min(rn - 1)) * t..][..t]);
            for c0 in (0..d).step_by(BLOCK) {
                let w = BLOCK.min(d - c0);
                let mut k0 = 0;
                while k0 < t {
                    let k1 = (k0 + PV_STRIDE_K).min(t);
                    let mut acc = [[0.0f32; BLOCK]; ROWS];
                    if w == BLOCK {
                        for k in k0..k1 {
                            let vr = &v[k * v_stride + c0..k * v_stride + c0 + BLOCK];
                            for (row, pi) in acc.iter_mut().zip(&pr) {
                                let a = pi[k];
                                for (s, &b) in row.iter_mut().zip(vr) {
                                    *s = a.mul_add(b, *s);
                                }
                            }
                        }
                    } else {
                        for k in k0..k1 {
                            let vr = &v[k * v_stride + c0..k * v_stride + c0 + w];
                            for (row, pi) in acc.iter_mut().zip(&pr) {
                                let a = pi[k];
                                for (s, &b) in row[..w].iter_mut().zip(vr) {
                                    *s = a.mul_add(b, *s);
                                }
                            }
                        }
                    }
                    for (r, row) in acc.iter().enumerate().take(rn) {
                        let dst = &mut out[(i0 + r) * d + c0..][..w];
                        if k0 == 0 {
                            dst.copy_from_slice(&row[..w]);
                        } else {
                            for (x, &y) in dst.iter_mut().zip(&row[..w]) {
                                *x += y;
                            }
                        }
                    }
                    k0 = k1;
                }
            }
        }
    });
}

/// [`attention_head`]'s two products with the accumulators pinned in
/// registers (the portable loops spill them): the same FMA chains in the
/// same order, so the same bits.
#[cfg(target_arch = "x86_64")]
mod attention_x86 {
    use super::{BLOCK, PV_STRIDE_K, ROWS};
    use std::arch::x86_64::*;

    /// [`super::softmax`] with MLAS's own instructions (`vscalefps`, masked
    /// tail): the same operations per element and the same sum order.
    ///
    /// # Safety
    /// AVX-512F must be available.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn softmax(x: &mut [f32], dim: usize) {
        use super::{EXP_BIAS, EXP_LN2_HI, EXP_LN2_LO, EXP_LOG2E, EXP_LOWER, EXP_POLY};
        if dim == 0 {
            return;
        }
        let bits = |b: u32| _mm512_set1_ps(f32::from_bits(b));
        let (lower, bias, log2e) = (bits(EXP_LOWER), bits(EXP_BIAS), bits(EXP_LOG2E));
        let (hi, lo) = (bits(EXP_LN2_HI), bits(EXP_LN2_LO));
        let poly = EXP_POLY.map(bits);
        let one = _mm512_set1_ps(1.0);
        for row in x.chunks_exact_mut(dim) {
            let p = row.as_mut_ptr();
            let mut mx = _mm512_set1_ps(f32::MIN);
            for j0 in (0..dim).step_by(BLOCK) {
                let m = lanes(dim - j0);
                // Lanes past the row (and NaNs) keep the running max.
                mx = _mm512_mask_max_ps(mx, m, _mm512_maskz_loadu_ps(m, p.add(j0)), mx);
            }
            let neg = _mm512_set1_ps(-_mm512_reduce_max_ps(mx));
            let mut acc = _mm512_setzero_ps();
            for j0 in (0..dim).step_by(BLOCK) {
                let m = lanes(dim - j0);
                let y = _mm512_maskz_loadu_ps(m, p.add(j0));
                let v = _mm512_max_ps(_mm512_add_ps(y, neg), lower);
                let e2 = _mm512_sub_ps(_mm512_fmadd_ps(v, log2e, bias), bias);
                let r = _mm512_fmadd_ps(e2, hi, v);
                let r = _mm512_fmadd_ps(e2, lo, r);
                let mut q = poly[0];
                for c in &poly[1..] {
                    q = _mm512_fmadd_ps(q, r, *c);
                }
                q = _mm512_fmadd_ps(q, r, one);
                q = _mm512_fmadd_ps(q, r, one);
                let e = _mm512_scalef_ps(q, e2);
                _mm512_mask_storeu_ps(p.add(j0), m, e);
                acc = _mm512_mask_add_ps(acc, m, acc, e);
            }
            let mut a = [0.0f32; BLOCK];
            _mm512_storeu_ps(a.as_mut_ptr(), acc);
            let h: [f32; 8] = std::array::from_fn(|j| a[j + 8] + a[j]);
            let sum = ((h[0] + h[1]) + (h[2] + h[3])) + ((h[4] + h[5]) + (h[6] + h[7]));
            let inv = _mm512_set1_ps(1.0 / sum);
            for j0 in (0..dim).step_by(BLOCK) {
                let m = lanes(dim - j0);
                let y = _mm512_maskz_loadu_ps(m, p.add(j0));
                _mm512_mask_storeu_ps(p.add(j0), m, _mm512_mul_ps(y, inv));
            }
        }
    }

    /// Mask of the first `n ≤ 16` lanes.
    fn lanes(n: usize) -> __mmask16 {
        if n >= BLOCK {
            !0
        } else {
            (1u16 << n) - 1
        }
    }

    /// `scores[i, j] = Σ_c q[i, c]·kt[c, j]`, one FMA chain per score from 0.
    ///
    /// # Safety
    /// AVX-512F; `q` holds `t·d`, `kt` `d` rows of `kt_stride ≥ t` rounded up
    /// to 16, `scores` `t·t`.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn qk(
        q: &[f32],
        kt: &[f32],
        kt_stride: usize,
        t: usize,
        d: usize,
        scores: &mut [f32],
    ) {
        let (qp, kp, sp) = (q.as_ptr(), kt.as_ptr(), scores.as_mut_ptr());
        for i0 in (0..t).step_by(ROWS) {
            let rn = ROWS.min(t - i0);
            // Rows past the end repeat the last one (computed, not written).
            let rows: [*const f32; ROWS] =
                std::array::from_fn(|r| qp.add((i0 + r.min(rn - 1)) * d));
            for j0 in (0..t).step_by(BLOCK) {
                let mut acc = [_mm512_setzero_ps(); ROWS];
                for c in 0..d {
                    let kv = _mm512_loadu_ps(kp.add(c * kt_stride + j0));
                    for (a, row) in acc.iter_mut().zip(&rows) {
                        *a = _mm512_fmadd_ps(_mm512_set1_ps(*row.add(c)), kv, *a);
                    }
                }
                let m = lanes(t - j0);
                for (r, a) in acc.iter().enumerate().take(rn) {
                    _mm512_mask_storeu_ps(sp.add((i0 + r) * t + j0), m, *a);
                }
            }
        }
    }

    /// `out[i, c] = Σ_k p[i, k]·v[k, c]`: FMA chains over slices of
    /// `PV_STRIDE_K` tokens from 0, slice sums added in order.
    ///
    /// # Safety
    /// AVX-512F; `p` holds `t·t`, `v` `t` rows of `d` at `v_stride`, `out` `t·d`.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn pv(
        p: &[f32],
        v: &[f32],
        v_stride: usize,
        t: usize,
        d: usize,
        out: &mut [f32],
    ) {
        let (pp, vp, op) = (p.as_ptr(), v.as_ptr(), out.as_mut_ptr());
        for i0 in (0..t).step_by(ROWS) {
            let rn = ROWS.min(t - i0);
            let rows: [*const f32; ROWS] =
                std::array::from_fn(|r| pp.add((i0 + r.min(rn - 1)) * t));
            for c0 in (0..d).step_by(BLOCK) {
                let m = lanes(d - c0);
                let mut k0 = 0;
                while k0 < t {
                    let k1 = (k0 + PV_STRIDE_K).min(t);
                    let mut acc = [_mm512_setzero_ps(); ROWS];
                    for k in k0..k1 {
                        let vv = _mm512_maskz_loadu_ps(m, vp.add(k * v_stride + c0));
                        for (a, row) in acc.iter_mut().zip(&rows) {
                            *a = _mm512_fmadd_ps(_mm512_set1_ps(*row.add(k)), vv, *a);
                        }
                    }
                    for (r, a) in acc.iter().enumerate().take(rn) {
                        let dst = op.add((i0 + r) * d + c0);
                        let y = if k0 == 0 {
                            *a
                        } else {
                            _mm512_add_ps(_mm512_maskz_loadu_ps(m, dst), *a)
                        };
                        _mm512_mask_storeu_ps(dst, m, y);
                    }
                    k0 = k1;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantize_rounds_half_to_even_like_the_reference() {
        let x: Vec<f32> = (-600..600).map(|i| i as f32 * 0.25).collect();
        let mut q = vec![0u8; x.len()];
        quantize(&x, 0.5, 128.0, &mut q);
        for (&v, &got) in x.iter().zip(&q) {
            let want = ((v / 0.5).round_ties_even() + 128.0).clamp(0.0, 255.0) as u8;
            assert_eq!(got, want, "x = {v}");
        }
    }

    #[test]
    fn range_includes_zero() {
        assert_eq!(range(&[1.0, 2.0, 3.0]), [0.0, 3.0]);
        assert_eq!(range(&[-1.0; 40]), [-1.0, 0.0]);
    }

    /// Inputs of the onnxruntime-pinned tests (exact in any f32 arithmetic).
    fn ort_inputs() -> [[f32; 16]; 4] {
        let col = |m: usize, k: usize, a: f32, b: f32| -> [f32; 16] {
            std::array::from_fn(|i| ((i * m) % k) as f32 * a + b)
        };
        [
            col(37, 23, 0.37, -4.0),
            col(5, 7, 0.25, 0.5),
            col(3, 5, 0.1, -0.2),
            col(11, 13, 0.3, -1.9),
        ]
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    // Expected bits: onnxruntime 1.32 (CPU EP, 1 thread, AVX-512 host) on the
    // single-op models LayerNormalization / SkipLayerNormalization /
    // FastGelu / Softmax with these inputs and epsilon 1e-12.
    #[test]
    fn layer_norm_matches_onnxruntime() {
        let [x, g, b, _] = ort_inputs();
        let mut y = x.to_vec();
        layer_norm(&mut y, 16, &g, &b, 1e-12);
        let want = [
            0xbf735d65, 0x3f8d80c4, 0xbf8662c2, 0x3f97ee3a, 0xbd17d586, 0xc00eb06f, 0x3f52a5ca,
            0xbecfc75c, 0x4030cae1, 0x3e261183, 0xbf8d4138, 0x3febce5b, 0xbf4b87c7, 0x3fe7ffce,
            0x3e0e5824, 0xc0031fab,
        ];
        assert_eq!(bits(&y), want);
    }

    #[test]
    fn skip_layer_norm_matches_onnxruntime() {
        let [x, g, b, skip] = ort_inputs();
        let mut y: Vec<f32> = x.iter().zip(&skip).map(|(a, s)| a + s).collect();
        skip_layer_norm(&mut y, 16, &g, &b, 1e-12);
        let want = [
            0xbf98f130, 0x3ff3fae2, 0xbf0f7a4c, 0x3f92e9b0, 0xbe8c0725, 0xc0205e3a, 0x3e478d8e,
            0xbd6d3013, 0x404d0484, 0x3eca1de9, 0xbf81b913, 0x3f98f121, 0xbfb09310, 0x3f7aa318,
            0x3ec4b34e, 0xbfa72e78,
        ];
        assert_eq!(bits(&y), want);
    }

    #[test]
    fn batched_skip_layer_norm_equals_the_row_reference() {
        // Row counts around the 16-row batch, widths around the 64-wide tile.
        for &(rows, dim) in &[(1, 1), (3, 16), (16, 64), (17, 65), (54, 768), (33, 130)] {
            let x: Vec<f32> = (0..rows * dim)
                .map(|i| ((i * 7919) % 1013) as f32 * 0.013 - 6.5)
                .collect();
            let g: Vec<f32> = (0..dim).map(|i| 0.5 + (i % 7) as f32 * 0.1).collect();
            let b: Vec<f32> = (0..dim).map(|i| (i % 5) as f32 * 0.2 - 0.4).collect();
            let (mut got, mut want) = (x.clone(), x);
            skip_layer_norm(&mut got, dim, &g, &b, 1e-12);
            skip_layer_norm_reference(&mut want, dim, &g, &b, 1e-12);
            assert_eq!(bits(&got), bits(&want), "rows={rows} dim={dim}");
        }
    }

    #[test]
    fn fast_gelu_matches_onnxruntime() {
        let [x, _, b, _] = ort_inputs();
        let mut y = x.to_vec();
        fast_gelu(&mut y, &b);
        let want = [
            0xb7da6666, 0x3f9361d8, 0xbcded560, 0x404e9cbd, 0xbdeac2a5, 0xb921755d, 0x3fc8bb29,
            0xbd677223, 0x40665fa5, 0x3d175c5b, 0xba3cc948, 0x3ffcf756, 0xbdcb10ac, 0x407e1328,
            0x3e96f06f, 0xbb31f253,
        ];
        assert_eq!(bits(&y), want);
    }

    #[test]
    fn softmax_matches_onnxruntime() {
        let [x, ..] = ort_inputs();
        let mut y = x.to_vec();
        softmax(&mut y, 16);
        let want = [
            0x392a2a86, 0x3cec3733, 0x3a874738, 0x3e3bc93d, 0x3bd71619, 0x39765af7, 0x3d2afd1f,
            0x3ac3d8d0, 0x3e87eea5, 0x3c1bb1a6, 0x39b25421, 0x3d778bdc, 0x3b0dc469, 0x3ec4cb31,
            0x3c61674a, 0x3a011615,
        ];
        assert_eq!(bits(&y), want);
    }

    /// Long rows: the value slices of 256 tokens change the sum order, not
    /// the value (within f32 rounding of a naive f64 reference).
    #[test]
    fn softmax_routes_agree_bit_for_bit() {
        for dim in [1usize, 5, 16, 17, 48, 54, 300] {
            let x: Vec<f32> = (0..3 * dim)
                .map(|i| ((i * 7919) % 211) as f32 * 0.37 - 40.0)
                .chain((0..dim).map(|i| -90.0 - i as f32))
                .collect();
            let (mut a, mut b) = (x.clone(), x);
            softmax(&mut a, dim);
            softmax_generic(&mut b, dim);
            let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&a), bits(&b), "dim {dim}");
        }
    }

    #[test]
    fn attention_routes_agree_bit_for_bit() {
        // t across the 8-row and 16-column blocks and past one 256-token
        // slice; d below, at and past one vector; v rows wider than d.
        for &(t, d) in &[(1usize, 1usize), (7, 16), (54, 64), (300, 20), (17, 33)] {
            let stride = t.next_multiple_of(16);
            let q: Vec<f32> = (0..t * d)
                .map(|i| ((i * 7919) % 97) as f32 * 0.01 - 0.5)
                .collect();
            let mut kt = vec![0.0f32; d * stride];
            for (i, x) in kt.iter_mut().enumerate() {
                if i % stride < t {
                    *x = ((i * 104_729) % 89) as f32 * 0.01 - 0.4;
                }
            }
            let vs = d + 3;
            let v: Vec<f32> = (0..t * vs)
                .map(|i| ((i * 31) % 23) as f32 * 0.05 - 0.5)
                .collect();
            let (mut p1, mut o1) = (vec![0.0f32; t * t], vec![0.0f32; t * d]);
            let (mut p2, mut o2) = (p1.clone(), o1.clone());
            attention_head(&q, &kt, stride, &v, vs, t, d, &mut p1, &mut o1);
            attention_head_generic(&q, &kt, stride, &v, vs, t, d, &mut p2, &mut o2);
            let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&p1), bits(&p2), "scores t={t} d={d}");
            assert_eq!(bits(&o1), bits(&o2), "out t={t} d={d}");
        }
    }

    #[test]
    fn attention_head_is_softmax_times_v() {
        let (t, d): (usize, usize) = (300, 8);
        let q: Vec<f32> = (0..t * d)
            .map(|i| ((i * 7) % 19) as f32 * 0.05 - 0.4)
            .collect();
        let kt: Vec<f32> = (0..d * t)
            .map(|i| ((i * 5) % 17) as f32 * 0.05 - 0.4)
            .collect();
        // The kernel takes kᵀ rows padded to a multiple of 16 columns.
        let stride = t.next_multiple_of(16);
        let mut ktp = vec![0.0f32; d * stride];
        for (dst, src) in ktp.chunks_exact_mut(stride).zip(kt.chunks_exact(t)) {
            dst[..t].copy_from_slice(src);
        }
        let v: Vec<f32> = (0..t * d)
            .map(|i| ((i * 3) % 11) as f32 * 0.1 - 0.5)
            .collect();
        let (mut p, mut out) = (vec![0.0f32; t * t], vec![0.0f32; t * d]);
        attention_head(&q, &ktp, stride, &v, d, t, d, &mut p, &mut out);
        for i in [0, 150, 299] {
            let s: Vec<f64> = (0..t)
                .map(|j| {
                    (0..d)
                        .map(|c| f64::from(q[i * d + c]) * f64::from(kt[c * t + j]))
                        .sum()
                })
                .collect();
            let m = s.iter().cloned().fold(f64::MIN, f64::max);
            let e: Vec<f64> = s.iter().map(|x| (x - m).exp()).collect();
            let z: f64 = e.iter().sum();
            for c in 0..d {
                let want: f64 = (0..t).map(|j| e[j] / z * f64::from(v[j * d + c])).sum();
                let got = f64::from(out[i * d + c]);
                assert!(
                    (got - want).abs() < 1e-5,
                    "row {i} col {c}: {got} vs {want}"
                );
            }
        }
    }
}
