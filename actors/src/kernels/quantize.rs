//! `DynamicQuantizeLinear` of activations, the two passes every int8 kernel
//! starts with: the range `[min(0, x…), max(0, x…)]`, then
//! `q = clamp(round_half_even(x / scale) + zp, 0, 255)`.
//!
//! A readable scalar route and AVX2 / AVX-512 routes, chosen by the
//! [`SimdLevel`] the caller passes (its bind-time choice) or
//! [`cpu::simd_level`]. Every route gives the same bytes: min/max are exact,
//! the division is IEEE, and rounding is half-to-even in all of them.

use super::cpu::{self, SimdLevel};
use super::matmul::ActivationQuant;

/// `[min(0, x…), max(0, x…)]` on the best route (NaNs ignored, as `f32::min`/`max`).
pub fn range(x: &[f32]) -> [f32; 2] {
    range_with(cpu::simd_level(), x)
}

/// [`range`] on the route for `level` (at most the CPU's).
pub fn range_with(level: SimdLevel, x: &[f32]) -> [f32; 2] {
    match level {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: callers pass a level this CPU runs (a detected or capped one).
        SimdLevel::Avx512 if cpu::features().avx512 => unsafe { x86::range_avx512(x) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX is part of every AVX2 level.
        SimdLevel::Avx512 | SimdLevel::Avx2 if cpu::features().avx2_fma => unsafe {
            x86::range_avx2(x)
        },
        _ => range_scalar(x),
    }
}

/// The readable reference of [`range`].
pub fn range_scalar(x: &[f32]) -> [f32; 2] {
    // 16 running extremes so the loop vectorizes (`f32::min` does not); a
    // NaN never wins a comparison, so it is skipped as `f32::min` skips it.
    let (mut los, mut his) = ([0.0f32; 16], [0.0f32; 16]);
    let mut chunks = x.chunks_exact(16);
    for c in &mut chunks {
        for i in 0..16 {
            los[i] = if c[i] < los[i] { c[i] } else { los[i] };
            his[i] = if c[i] > his[i] { c[i] } else { his[i] };
        }
    }
    let (mut lo, mut hi) = (0.0f32, 0.0f32);
    for &v in los.iter().chain(his.iter()).chain(chunks.remainder()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    [lo, hi]
}

/// Quantize `x` into `dst` (same length) with `aq`, on the best route.
pub fn quantize_into(aq: ActivationQuant, x: &[f32], dst: &mut [u8]) {
    quantize_with(cpu::simd_level(), aq, x, dst)
}

/// [`quantize_into`] on the route for `level` (at most the CPU's).
pub fn quantize_with(level: SimdLevel, aq: ActivationQuant, x: &[f32], dst: &mut [u8]) {
    match level {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX-512 F/BW are part of the detected level.
        SimdLevel::Avx512 if cpu::features().avx512 => unsafe { x86::quantize_avx512(aq, x, dst) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX2 is part of the detected level.
        SimdLevel::Avx512 | SimdLevel::Avx2 if cpu::features().avx2_fma => unsafe {
            x86::quantize_avx2(aq, x, dst)
        },
        _ => {
            for (d, &v) in dst.iter_mut().zip(x) {
                *d = aq.quantize(v);
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::ActivationQuant;
    use std::arch::x86_64::*;

    /// `[min(0, x…), max(0, x…)]`; `vminps(v, acc)` returns `acc` for a NaN `v`.
    ///
    /// # Safety
    /// Needs AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn range_avx512(x: &[f32]) -> [f32; 2] {
        let (mut lo, mut hi) = (_mm512_setzero_ps(), _mm512_setzero_ps());
        let mut chunks = x.chunks_exact(16);
        for c in &mut chunks {
            let v = _mm512_loadu_ps(c.as_ptr());
            lo = _mm512_min_ps(v, lo);
            hi = _mm512_max_ps(v, hi);
        }
        let (mut l, mut h) = (_mm512_reduce_min_ps(lo), _mm512_reduce_max_ps(hi));
        for &v in chunks.remainder() {
            l = l.min(v);
            h = h.max(v);
        }
        [l, h]
    }

    /// [`range_avx512`] on 256-bit vectors: two of them per 16 values, so
    /// the same values reach the scalar tail as in the reference.
    ///
    /// # Safety
    /// Needs AVX.
    #[target_feature(enable = "avx")]
    pub(super) unsafe fn range_avx2(x: &[f32]) -> [f32; 2] {
        let (mut lo, mut hi) = ([_mm256_setzero_ps(); 2], [_mm256_setzero_ps(); 2]);
        let mut chunks = x.chunks_exact(16);
        for c in &mut chunks {
            for h in 0..2 {
                let v = _mm256_loadu_ps(c[8 * h..].as_ptr());
                lo[h] = _mm256_min_ps(v, lo[h]);
                hi[h] = _mm256_max_ps(v, hi[h]);
            }
        }
        let (mut los, mut his) = ([0.0f32; 16], [0.0f32; 16]);
        for h in 0..2 {
            _mm256_storeu_ps(los[8 * h..].as_mut_ptr(), lo[h]);
            _mm256_storeu_ps(his[8 * h..].as_mut_ptr(), hi[h]);
        }
        let (mut l, mut h) = (0.0f32, 0.0f32);
        for &v in los.iter().chain(his.iter()).chain(chunks.remainder()) {
            l = l.min(v);
            h = h.max(v);
        }
        [l, h]
    }

    /// `((v / scale).round_ties_even() + zp).clamp(0, 255) as u8`, 16 at a time;
    /// `vmaxps(r, 0)` maps NaN to 0 as the scalar cast does.
    ///
    /// # Safety
    /// Needs AVX-512F/BW.
    #[target_feature(enable = "avx512f,avx512bw")]
    pub(super) unsafe fn quantize_avx512(aq: ActivationQuant, x: &[f32], dst: &mut [u8]) {
        let (scale, zp) = (
            _mm512_set1_ps(aq.scale),
            _mm512_set1_ps(aq.zero_point as f32),
        );
        let (zero, top) = (_mm512_setzero_ps(), _mm512_set1_ps(255.0));
        let n = x.len().min(dst.len());
        let mut i = 0;
        while i + 16 <= n {
            let v = _mm512_div_ps(_mm512_loadu_ps(x.as_ptr().add(i)), scale);
            let v = _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(v);
            let v = _mm512_min_ps(_mm512_max_ps(_mm512_add_ps(v, zp), zero), top);
            let q = _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(v));
            _mm_storeu_si128(dst.as_mut_ptr().add(i) as *mut _, q);
            i += 16;
        }
        for j in i..n {
            dst[j] = aq.quantize(x[j]);
        }
    }

    /// As [`quantize_avx512`], 8 at a time with AVX2.
    ///
    /// # Safety
    /// Needs AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn quantize_avx2(aq: ActivationQuant, x: &[f32], dst: &mut [u8]) {
        let (scale, zp) = (
            _mm256_set1_ps(aq.scale),
            _mm256_set1_ps(aq.zero_point as f32),
        );
        let (zero, top) = (_mm256_setzero_ps(), _mm256_set1_ps(255.0));
        let gather = _mm256_setr_epi32(0, 4, 0, 0, 0, 0, 0, 0);
        let n = x.len().min(dst.len());
        let mut i = 0;
        while i + 8 <= n {
            let v = _mm256_div_ps(_mm256_loadu_ps(x.as_ptr().add(i)), scale);
            let v = _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(v);
            let v = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(v, zp), zero), top);
            let q = _mm256_cvttps_epi32(v);
            // 0..=255 survives both saturating packs; bytes 0..4 of each lane.
            let q = _mm256_packus_epi16(_mm256_packus_epi32(q, q), _mm256_setzero_si256());
            let q = _mm256_permutevar8x32_epi32(q, gather);
            _mm_storel_epi64(dst.as_mut_ptr().add(i) as *mut _, _mm256_castsi256_si128(q));
            i += 8;
        }
        for j in i..n {
            dst[j] = aq.quantize(x[j]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::cpu::available_levels;
    use crate::kernels::test_rng::scaled as values;
    use proptest::prelude::*;

    proptest! {
        /// Every route gives the scalar reference's range and bytes, for
        /// lengths around the vector widths (0, 1, odd, 15/16/17, …).
        #[test]
        fn every_route_equals_the_scalar_reference(
            n in 0usize..300, seed in any::<u64>(), spread in 0.001f32..100.0,
        ) {
            let x = values(seed, n, spread);
            let want = range_scalar(&x);
            let aq = ActivationQuant::from_range(want[0], want[1]);
            let mut want_q = vec![0u8; n];
            for (d, &v) in want_q.iter_mut().zip(&x) {
                *d = aq.quantize(v);
            }
            for level in available_levels() {
                let r = range_with(level, &x);
                prop_assert_eq!(r.map(f32::to_bits), want.map(f32::to_bits), "{:?}", level);
                let mut q = vec![0u8; n];
                quantize_with(level, aq, &x, &mut q);
                prop_assert_eq!(&q, &want_q, "{:?}", level);
            }
        }
    }

    #[test]
    fn nan_is_skipped_by_the_range() {
        let x = [1.0, f32::NAN, -2.0, 0.5];
        for level in available_levels() {
            assert_eq!(range_with(level, &x), [-2.0, 1.0], "{level:?}");
        }
    }
}
