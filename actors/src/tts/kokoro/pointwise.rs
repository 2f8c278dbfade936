//! The back half's small pointwise loops, compiled once per SIMD level.
//!
//! Each loop is plain Rust written so LLVM vectorises it; [`dispatch!`]
//! instantiates it inside a `#[target_feature]` trampoline for AVX-512 and
//! AVX2 (the crate itself targets baseline x86-64). Rust never contracts
//! `a·b + c` into an FMA, so every route performs the same IEEE operations
//! and returns the same bits.

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
}
