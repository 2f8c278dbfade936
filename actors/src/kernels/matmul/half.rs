//! f16 and bf16 weights: exact widening to f32 (F16C / shift by 16) feeding
//! the 16-lane contract of `f32_matvec`, so every route equals the scalar
//! route bit for bit. GEMM tiles are decoded to f32 and handed to `sgemm`.

use super::run_float;
use crate::kernels::cpu::{self, SimdLevel};
use crate::kernels::error::KernelError;
use crate::kernels::f32_matvec::dot16_scalar;
use voxlane_runtime::weights::Buf;
use voxlane_runtime::Fork;

/// Which 16-bit float format a [`super::Weights`] holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HalfKind {
    /// IEEE binary16.
    F16,
    /// bfloat16 (the top half of an f32).
    Bf16,
}

/// Row-major 16-bit weights, kept as raw bits so SIMD loads need no
/// conversion at run time (owned, or mapped from a packed-weights file).
#[derive(Debug, Clone)]
pub(super) struct HalfWeights {
    pub(super) kind: HalfKind,
    pub(super) bits: Buf<u16>,
}

#[inline]
fn f16_to_f32(b: u16) -> f32 {
    ::half::f16::from_bits(b).to_f32()
}

#[inline]
fn bf16_to_f32(b: u16) -> f32 {
    f32::from_bits((b as u32) << 16)
}

/// Fill `y` with `dot(x, W[n0 + r])` for each row `r` (no bias) on `level`.
fn rows(level: SimdLevel, kind: HalfKind, x: &[f32], w: &[u16], n0: usize, y: &mut [f32]) {
    let k = x.len();
    let w = &w[n0 * k..(n0 + y.len()) * k];
    #[cfg(target_arch = "x86_64")]
    {
        let f = cpu::features();
        match (level, kind) {
            // SAFETY: the level is capped at the detected features; shapes checked by the caller.
            (SimdLevel::Avx512, HalfKind::F16) => {
                return unsafe { x86::rows_avx512::<false>(x, w, y) }
            }
            // SAFETY: as above.
            (SimdLevel::Avx512, HalfKind::Bf16) => {
                return unsafe { x86::rows_avx512::<true>(x, w, y) }
            }
            (SimdLevel::Avx2, HalfKind::F16) if f.f16c => {
                for (r, out) in y.iter_mut().enumerate() {
                    // SAFETY: AVX2+FMA+F16C were detected.
                    *out = unsafe { x86::dot_avx2_f16(x, &w[r * k..(r + 1) * k]) };
                }
                return;
            }
            (SimdLevel::Avx2, HalfKind::Bf16) => {
                for (r, out) in y.iter_mut().enumerate() {
                    // SAFETY: AVX2+FMA were detected.
                    *out = unsafe { x86::dot_avx2_bf16(x, &w[r * k..(r + 1) * k]) };
                }
                return;
            }
            _ => {}
        }
    }
    let _ = level;
    for (r, out) in y.iter_mut().enumerate() {
        let wr = &w[r * k..(r + 1) * k];
        *out = match kind {
            HalfKind::F16 => dot16_scalar(x, wr, f16_to_f32),
            HalfKind::Bf16 => dot16_scalar(x, wr, bf16_to_f32),
        };
    }
}

/// Decode `W[n0..n0+nr, k0..k0+kb]` into row-major f32 `dst` (exact).
fn decode_tile(
    level: SimdLevel,
    kind: HalfKind,
    w: &[u16],
    k: usize,
    (n0, nr, k0, kb): (usize, usize, usize, usize),
    dst: &mut [f32],
) {
    for r in 0..nr {
        let src = &w[(n0 + r) * k + k0..(n0 + r) * k + k0 + kb];
        decode_row(level, kind, src, &mut dst[r * kb..(r + 1) * kb]);
    }
}

fn decode_row(level: SimdLevel, kind: HalfKind, src: &[u16], d: &mut [f32]) {
    match (level, kind) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the level is capped at the detected features; lengths match.
        (SimdLevel::Avx512, HalfKind::F16) => unsafe { x86::decode_avx512::<false>(src, d) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above.
        (SimdLevel::Avx512, HalfKind::Bf16) => unsafe { x86::decode_avx512::<true>(src, d) },
        (_, HalfKind::F16) => d.iter_mut().zip(src).for_each(|(o, b)| *o = f16_to_f32(*b)),
        (_, HalfKind::Bf16) => d
            .iter_mut()
            .zip(src)
            .for_each(|(o, b)| *o = bf16_to_f32(*b)),
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) fn run(
    level: SimdLevel,
    a: &[f32],
    m: usize,
    k: usize,
    n: usize,
    w: &HalfWeights,
    bias: Option<&[f32]>,
    out: &mut [f32],
    lanes: &impl Fork,
) -> Result<(), KernelError> {
    let (kind, bits) = (w.kind, &w.bits[..]);
    let row_fn = |x: &[f32], n0: usize, y: &mut [f32]| rows(level, kind, x, bits, n0, y);
    let tile = |n0: usize, nr: usize, k0: usize, kb: usize, dst: &mut [f32]| {
        decode_tile(level, kind, bits, k, (n0, nr, k0, kb), dst)
    };
    run_float(a, m, k, n, bias, out, lanes, row_fn, Some(tile))
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use crate::kernels::f32_matvec::x86::{reduce_avx2, reduce_avx512, tail_mask};
    use std::arch::x86_64::*;

    /// Widen 16 values at `p` to f32 (exact).
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")]
    unsafe fn load16<const BF: bool>(p: *const u16) -> __m512 {
        let h = _mm256_loadu_si256(p as *const __m256i);
        widen16::<BF>(h)
    }

    /// Widen the first `n` (< 16) values at `p`, zeros elsewhere.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")]
    unsafe fn load16_tail<const BF: bool>(p: *const u16, m: __mmask16) -> __m512 {
        let h = _mm256_maskz_loadu_epi16(m, p as *const i16);
        widen16::<BF>(h)
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")]
    fn widen16<const BF: bool>(h: __m256i) -> __m512 {
        if BF {
            _mm512_castsi512_ps(_mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(h)))
        } else {
            _mm512_cvtph_ps(h)
        }
    }

    /// Four rows at a time sharing each `x` load, 16-lane contract per row.
    ///
    /// # Safety
    /// Needs AVX-512F/BW/VL/DQ; `w.len() >= y.len() * x.len()`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")]
    pub(super) unsafe fn rows_avx512<const BF: bool>(x: &[f32], w: &[u16], y: &mut [f32]) {
        let k = x.len();
        let xp = x.as_ptr();
        let n = y.len();
        let tail = k % 16;
        let full = k - tail;
        let m = tail_mask(tail);
        let mut r = 0;
        while r + 4 <= n {
            let w0 = w.as_ptr().add(r * k);
            let (w1, w2, w3) = (w0.add(k), w0.add(2 * k), w0.add(3 * k));
            let mut a0 = _mm512_setzero_ps();
            let mut a1 = _mm512_setzero_ps();
            let mut a2 = _mm512_setzero_ps();
            let mut a3 = _mm512_setzero_ps();
            let mut i = 0;
            while i < full {
                let xv = _mm512_loadu_ps(xp.add(i));
                a0 = _mm512_fmadd_ps(xv, load16::<BF>(w0.add(i)), a0);
                a1 = _mm512_fmadd_ps(xv, load16::<BF>(w1.add(i)), a1);
                a2 = _mm512_fmadd_ps(xv, load16::<BF>(w2.add(i)), a2);
                a3 = _mm512_fmadd_ps(xv, load16::<BF>(w3.add(i)), a3);
                i += 16;
            }
            if tail > 0 {
                let xv = _mm512_maskz_loadu_ps(m, xp.add(i));
                a0 = _mm512_fmadd_ps(xv, load16_tail::<BF>(w0.add(i), m), a0);
                a1 = _mm512_fmadd_ps(xv, load16_tail::<BF>(w1.add(i), m), a1);
                a2 = _mm512_fmadd_ps(xv, load16_tail::<BF>(w2.add(i), m), a2);
                a3 = _mm512_fmadd_ps(xv, load16_tail::<BF>(w3.add(i), m), a3);
            }
            y[r] = reduce_avx512(a0);
            y[r + 1] = reduce_avx512(a1);
            y[r + 2] = reduce_avx512(a2);
            y[r + 3] = reduce_avx512(a3);
            r += 4;
        }
        while r < n {
            let w0 = w.as_ptr().add(r * k);
            let mut a0 = _mm512_setzero_ps();
            let mut i = 0;
            while i < full {
                a0 = _mm512_fmadd_ps(_mm512_loadu_ps(xp.add(i)), load16::<BF>(w0.add(i)), a0);
                i += 16;
            }
            if tail > 0 {
                let xv = _mm512_maskz_loadu_ps(m, xp.add(i));
                a0 = _mm512_fmadd_ps(xv, load16_tail::<BF>(w0.add(i), m), a0);
            }
            y[r] = reduce_avx512(a0);
            r += 1;
        }
    }

    /// Exact widening of a row segment to f32.
    ///
    /// # Safety
    /// Needs AVX-512F/BW/VL/DQ; `dst.len() == src.len()`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")]
    pub(super) unsafe fn decode_avx512<const BF: bool>(src: &[u16], dst: &mut [f32]) {
        let len = src.len().min(dst.len());
        let mut i = 0;
        while i + 16 <= len {
            _mm512_storeu_ps(dst.as_mut_ptr().add(i), load16::<BF>(src.as_ptr().add(i)));
            i += 16;
        }
        if i < len {
            let m = tail_mask(len - i);
            let v = load16_tail::<BF>(src.as_ptr().add(i), m);
            _mm512_mask_storeu_ps(dst.as_mut_ptr().add(i), m, v);
        }
    }

    macro_rules! dot_avx2 {
        ($(#[$doc:meta])* $name:ident, $feat:literal, $load:ident) => {
            $(#[$doc])*
            ///
            /// # Safety
            /// Needs the enabled features; `w.len() >= x.len()`.
            #[target_feature(enable = $feat)]
            pub(super) unsafe fn $name(x: &[f32], w: &[u16]) -> f32 {
                let k = x.len();
                let (xp, wp) = (x.as_ptr(), w.as_ptr());
                let mut lo = _mm256_setzero_ps();
                let mut hi = _mm256_setzero_ps();
                let mut i = 0;
                while i + 16 <= k {
                    lo = _mm256_fmadd_ps(_mm256_loadu_ps(xp.add(i)), $load(wp.add(i)), lo);
                    hi = _mm256_fmadd_ps(_mm256_loadu_ps(xp.add(i + 8)), $load(wp.add(i + 8)), hi);
                    i += 16;
                }
                if i < k {
                    // Zero-padded copies reproduce the contract's padding lanes.
                    let mut xt = [0.0f32; 16];
                    let mut wt = [0u16; 16];
                    xt[..k - i].copy_from_slice(&x[i..k]);
                    wt[..k - i].copy_from_slice(&w[i..k]);
                    lo = _mm256_fmadd_ps(_mm256_loadu_ps(xt.as_ptr()), $load(wt.as_ptr()), lo);
                    hi = _mm256_fmadd_ps(
                        _mm256_loadu_ps(xt.as_ptr().add(8)),
                        $load(wt.as_ptr().add(8)),
                        hi,
                    );
                }
                reduce_avx2(lo, hi)
            }
        };
    }

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn load8_f16(p: *const u16) -> __m256 {
        _mm256_cvtph_ps(_mm_loadu_si128(p as *const __m128i))
    }

    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn load8_bf16(p: *const u16) -> __m256 {
        let v = _mm256_cvtepu16_epi32(_mm_loadu_si128(p as *const __m128i));
        _mm256_castsi256_ps(_mm256_slli_epi32::<16>(v))
    }

    dot_avx2!(
        /// f16 row dot product in the contract order (AVX2 + F16C).
        dot_avx2_f16, "avx2,fma,f16c", load8_f16
    );
    dot_avx2!(
        /// bf16 row dot product in the contract order (AVX2).
        dot_avx2_bf16, "avx2,fma", load8_bf16
    );
}
