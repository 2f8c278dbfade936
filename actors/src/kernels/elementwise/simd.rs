//! Crate-internal f32 vector abstraction: one generic kernel body, three routes.
//!
//! A kernel is written once against [`Vf32`] and run through [`dispatch`],
//! which enters a `#[target_feature]` trampoline for the chosen
//! [`SimdLevel`]. Everything below the trampoline is `#[inline(always)]`, so
//! the intrinsics inline into code compiled for that level. Vector values are
//! only ever created inside such a trampoline (the trait and types are
//! crate-private), which is what makes the safe methods sound.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

use crate::kernels::cpu::{simd_level, SimdLevel};

/// Widest vector in lanes; tails are staged through a buffer of this size.
pub(crate) const MAX_LANES: usize = 16;

/// An f32 vector of `LANES` lanes.
pub(crate) trait Vf32: Copy {
    /// Lane mask type produced by comparisons.
    type M: Copy;
    /// Number of f32 lanes.
    const LANES: usize;
    /// All lanes `v`.
    fn splat(v: f32) -> Self;
    /// Load `LANES` values.
    ///
    /// # Safety
    /// `p` must be valid for `LANES` reads.
    unsafe fn load(p: *const f32) -> Self;
    /// All lanes `*p` (a broadcast load, free of debug-build pointer checks).
    ///
    /// # Safety
    /// `p` must be valid for one read.
    unsafe fn broadcast(p: *const f32) -> Self;
    /// Store `LANES` values.
    ///
    /// # Safety
    /// `p` must be valid for `LANES` writes.
    unsafe fn store(self, p: *mut f32);
    /// `self + b`.
    fn add(self, b: Self) -> Self;
    /// `self - b`.
    fn sub(self, b: Self) -> Self;
    /// `self * b`.
    fn mul(self, b: Self) -> Self;
    /// `self / b`.
    fn div(self, b: Self) -> Self;
    /// `self * b + c` (fused on SIMD routes, two roundings on the scalar route).
    fn mul_add(self, b: Self, c: Self) -> Self;
    /// Lane maximum (returns `b` when either is NaN).
    fn max(self, b: Self) -> Self;
    /// Lane minimum (returns `b` when either is NaN).
    fn min(self, b: Self) -> Self;
    /// `1 / sqrt(self)`, full precision.
    fn rsqrt(self) -> Self;
    /// Round to nearest, ties to even.
    fn round(self) -> Self;
    /// Bitwise AND of the f32 bit patterns.
    fn and_bits(self, b: Self) -> Self;
    /// Bitwise XOR of the f32 bit patterns.
    fn xor_bits(self, b: Self) -> Self;
    /// Treat `self` as an integral float, convert to i32, shift left, reinterpret as f32 bits.
    fn shl_int(self, shift: u32) -> Self;
    /// `self < b` per lane.
    fn lt(self, b: Self) -> Self::M;
    /// `self > b` per lane.
    fn gt(self, b: Self) -> Self::M;
    /// Lanes that are NaN.
    fn is_nan(self) -> Self::M;
    /// Lanes whose sign bit is set.
    fn sign_set(self) -> Self::M;
    /// `m ? a : b` per lane.
    fn select(m: Self::M, a: Self, b: Self) -> Self;
    /// Sum of all lanes.
    fn hsum(self) -> f32;
}

/// The portable route: one lane.
#[derive(Clone, Copy)]
pub(crate) struct S1(f32);

impl Vf32 for S1 {
    type M = bool;
    const LANES: usize = 1;
    #[inline(always)]
    fn splat(v: f32) -> Self {
        S1(v)
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        S1(p.read_unaligned())
    }
    #[inline(always)]
    unsafe fn broadcast(p: *const f32) -> Self {
        S1(p.read_unaligned())
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        p.write_unaligned(self.0)
    }
    #[inline(always)]
    fn add(self, b: Self) -> Self {
        S1(self.0 + b.0)
    }
    #[inline(always)]
    fn sub(self, b: Self) -> Self {
        S1(self.0 - b.0)
    }
    #[inline(always)]
    fn mul(self, b: Self) -> Self {
        S1(self.0 * b.0)
    }
    #[inline(always)]
    fn div(self, b: Self) -> Self {
        S1(self.0 / b.0)
    }
    #[inline(always)]
    fn mul_add(self, b: Self, c: Self) -> Self {
        // Unfused on purpose: `f32::mul_add` is a libm call without FMA hardware.
        S1(self.0 * b.0 + c.0)
    }
    #[inline(always)]
    fn max(self, b: Self) -> Self {
        S1(if self.0 > b.0 { self.0 } else { b.0 })
    }
    #[inline(always)]
    fn min(self, b: Self) -> Self {
        S1(if self.0 < b.0 { self.0 } else { b.0 })
    }
    #[inline(always)]
    fn rsqrt(self) -> Self {
        S1(1.0 / self.0.sqrt())
    }
    #[inline(always)]
    fn round(self) -> Self {
        // `round_ties_even` is a libm call without SSE4.1. Adding and removing
        // 2^23 (ULP 1 at that magnitude) rounds to nearest-even in the FPU;
        // at or above 2^23 every f32 is already an integer.
        const TWO23: f32 = 8_388_608.0;
        let v = self.0;
        if v.abs() < TWO23 {
            let m = TWO23.copysign(v);
            S1((v + m) - m)
        } else {
            S1(v)
        }
    }
    #[inline(always)]
    fn and_bits(self, b: Self) -> Self {
        S1(f32::from_bits(self.0.to_bits() & b.0.to_bits()))
    }
    #[inline(always)]
    fn xor_bits(self, b: Self) -> Self {
        S1(f32::from_bits(self.0.to_bits() ^ b.0.to_bits()))
    }
    #[inline(always)]
    fn shl_int(self, shift: u32) -> Self {
        S1(f32::from_bits((self.0 as i32).wrapping_shl(shift) as u32))
    }
    #[inline(always)]
    fn lt(self, b: Self) -> bool {
        self.0 < b.0
    }
    #[inline(always)]
    fn gt(self, b: Self) -> bool {
        self.0 > b.0
    }
    #[inline(always)]
    fn is_nan(self) -> bool {
        self.0.is_nan()
    }
    #[inline(always)]
    fn sign_set(self) -> bool {
        self.0.is_sign_negative()
    }
    #[inline(always)]
    fn select(m: bool, a: Self, b: Self) -> Self {
        if m {
            a
        } else {
            b
        }
    }
    #[inline(always)]
    fn hsum(self) -> f32 {
        self.0
    }
}

/// The AVX2 + FMA route: eight lanes.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
pub(crate) struct F32x8(__m256);

// SAFETY (all `unsafe` blocks in this impl): an `F32x8` only exists inside
// code entered through `run_avx2` after `dispatch` checked AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
impl Vf32 for F32x8 {
    type M = __m256;
    const LANES: usize = 8;
    #[inline(always)]
    fn splat(v: f32) -> Self {
        unsafe { F32x8(_mm256_set1_ps(v)) }
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        // `lddqu` maps straight to the instruction; `loadu_ps` goes through
        // `read_unaligned`, whose debug-build checks cost a stack round trip.
        F32x8(_mm256_castsi256_ps(_mm256_lddqu_si256(p.cast())))
    }
    #[inline(always)]
    unsafe fn broadcast(p: *const f32) -> Self {
        F32x8(_mm256_set1_ps(_mm_cvtss_f32(_mm_load_ss(p))))
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        _mm256_maskstore_ps(p, _mm256_set1_epi32(-1), self.0)
    }
    #[inline(always)]
    fn add(self, b: Self) -> Self {
        unsafe { F32x8(_mm256_add_ps(self.0, b.0)) }
    }
    #[inline(always)]
    fn sub(self, b: Self) -> Self {
        unsafe { F32x8(_mm256_sub_ps(self.0, b.0)) }
    }
    #[inline(always)]
    fn mul(self, b: Self) -> Self {
        unsafe { F32x8(_mm256_mul_ps(self.0, b.0)) }
    }
    #[inline(always)]
    fn div(self, b: Self) -> Self {
        unsafe { F32x8(_mm256_div_ps(self.0, b.0)) }
    }
    #[inline(always)]
    fn mul_add(self, b: Self, c: Self) -> Self {
        unsafe { F32x8(_mm256_fmadd_ps(self.0, b.0, c.0)) }
    }
    #[inline(always)]
    fn max(self, b: Self) -> Self {
        unsafe { F32x8(_mm256_max_ps(self.0, b.0)) }
    }
    #[inline(always)]
    fn min(self, b: Self) -> Self {
        unsafe { F32x8(_mm256_min_ps(self.0, b.0)) }
    }
    #[inline(always)]
    fn rsqrt(self) -> Self {
        unsafe { F32x8(_mm256_div_ps(_mm256_set1_ps(1.0), _mm256_sqrt_ps(self.0))) }
    }
    #[inline(always)]
    fn round(self) -> Self {
        unsafe {
            F32x8(_mm256_round_ps::<
                { _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC },
            >(self.0))
        }
    }
    #[inline(always)]
    fn and_bits(self, b: Self) -> Self {
        unsafe { F32x8(_mm256_and_ps(self.0, b.0)) }
    }
    #[inline(always)]
    fn xor_bits(self, b: Self) -> Self {
        unsafe { F32x8(_mm256_xor_ps(self.0, b.0)) }
    }
    #[inline(always)]
    fn shl_int(self, shift: u32) -> Self {
        unsafe {
            let i = _mm256_cvtps_epi32(self.0);
            let s = _mm256_sll_epi32(i, _mm_cvtsi32_si128(shift as i32));
            F32x8(_mm256_castsi256_ps(s))
        }
    }
    #[inline(always)]
    fn lt(self, b: Self) -> __m256 {
        unsafe { _mm256_cmp_ps::<_CMP_LT_OQ>(self.0, b.0) }
    }
    #[inline(always)]
    fn gt(self, b: Self) -> __m256 {
        unsafe { _mm256_cmp_ps::<_CMP_GT_OQ>(self.0, b.0) }
    }
    #[inline(always)]
    fn is_nan(self) -> __m256 {
        unsafe { _mm256_cmp_ps::<_CMP_UNORD_Q>(self.0, self.0) }
    }
    #[inline(always)]
    fn sign_set(self) -> __m256 {
        // blendv looks at the sign bit only.
        self.0
    }
    #[inline(always)]
    fn select(m: __m256, a: Self, b: Self) -> Self {
        unsafe { F32x8(_mm256_blendv_ps(b.0, a.0, m)) }
    }
    #[inline(always)]
    fn hsum(self) -> f32 {
        unsafe {
            let lo = _mm256_castps256_ps128(self.0);
            let hi = _mm256_extractf128_ps::<1>(self.0);
            let s = _mm_add_ps(lo, hi);
            let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
            let s = _mm_add_ss(s, _mm_shuffle_ps::<0b01>(s, s));
            _mm_cvtss_f32(s)
        }
    }
}

/// The AVX-512 route: sixteen lanes.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
pub(crate) struct F32x16(__m512);

// SAFETY (all `unsafe` blocks in this impl): an `F32x16` only exists inside
// code entered through `run_avx512` after `dispatch` checked AVX-512 F/BW/VL/DQ.
#[cfg(target_arch = "x86_64")]
impl Vf32 for F32x16 {
    type M = __mmask16;
    const LANES: usize = 16;
    #[inline(always)]
    fn splat(v: f32) -> Self {
        unsafe { F32x16(_mm512_set1_ps(v)) }
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        // Masked forms map straight to the instruction; `loadu_ps` goes through
        // `read_unaligned`, whose debug-build checks cost a stack round trip.
        F32x16(_mm512_maskz_loadu_ps(0xFFFF, p))
    }
    #[inline(always)]
    unsafe fn broadcast(p: *const f32) -> Self {
        F32x16(_mm512_set1_ps(_mm_cvtss_f32(_mm_load_ss(p))))
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        _mm512_mask_storeu_ps(p, 0xFFFF, self.0)
    }
    #[inline(always)]
    fn add(self, b: Self) -> Self {
        unsafe { F32x16(_mm512_add_ps(self.0, b.0)) }
    }
    #[inline(always)]
    fn sub(self, b: Self) -> Self {
        unsafe { F32x16(_mm512_sub_ps(self.0, b.0)) }
    }
    #[inline(always)]
    fn mul(self, b: Self) -> Self {
        unsafe { F32x16(_mm512_mul_ps(self.0, b.0)) }
    }
    #[inline(always)]
    fn div(self, b: Self) -> Self {
        unsafe { F32x16(_mm512_div_ps(self.0, b.0)) }
    }
    #[inline(always)]
    fn mul_add(self, b: Self, c: Self) -> Self {
        unsafe { F32x16(_mm512_fmadd_ps(self.0, b.0, c.0)) }
    }
    #[inline(always)]
    fn max(self, b: Self) -> Self {
        unsafe { F32x16(_mm512_max_ps(self.0, b.0)) }
    }
    #[inline(always)]
    fn min(self, b: Self) -> Self {
        unsafe { F32x16(_mm512_min_ps(self.0, b.0)) }
    }
    #[inline(always)]
    fn rsqrt(self) -> Self {
        unsafe { F32x16(_mm512_div_ps(_mm512_set1_ps(1.0), _mm512_sqrt_ps(self.0))) }
    }
    #[inline(always)]
    fn round(self) -> Self {
        unsafe {
            F32x16(_mm512_roundscale_ps::<
                { _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC },
            >(self.0))
        }
    }
    #[inline(always)]
    fn and_bits(self, b: Self) -> Self {
        unsafe { F32x16(_mm512_and_ps(self.0, b.0)) }
    }
    #[inline(always)]
    fn xor_bits(self, b: Self) -> Self {
        unsafe { F32x16(_mm512_xor_ps(self.0, b.0)) }
    }
    #[inline(always)]
    fn shl_int(self, shift: u32) -> Self {
        unsafe {
            let i = _mm512_cvtps_epi32(self.0);
            let s = _mm512_sll_epi32(i, _mm_cvtsi32_si128(shift as i32));
            F32x16(_mm512_castsi512_ps(s))
        }
    }
    #[inline(always)]
    fn lt(self, b: Self) -> __mmask16 {
        unsafe { _mm512_cmp_ps_mask::<_CMP_LT_OQ>(self.0, b.0) }
    }
    #[inline(always)]
    fn gt(self, b: Self) -> __mmask16 {
        unsafe { _mm512_cmp_ps_mask::<_CMP_GT_OQ>(self.0, b.0) }
    }
    #[inline(always)]
    fn is_nan(self) -> __mmask16 {
        unsafe { _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(self.0, self.0) }
    }
    #[inline(always)]
    fn sign_set(self) -> __mmask16 {
        unsafe { _mm512_movepi32_mask(_mm512_castps_si512(self.0)) }
    }
    #[inline(always)]
    fn select(m: __mmask16, a: Self, b: Self) -> Self {
        unsafe { F32x16(_mm512_mask_blend_ps(m, b.0, a.0)) }
    }
    #[inline(always)]
    fn hsum(self) -> f32 {
        unsafe { _mm512_reduce_add_ps(self.0) }
    }
}

/// A kernel body generic over the vector type, run by [`dispatch`].
pub(crate) trait SimdFn {
    /// What the kernel returns.
    type Out;
    /// Run the kernel with vector type `V`.
    fn call<V: Vf32>(self) -> Self::Out;
}

/// The level actually run for a requested one: never above what this CPU supports.
pub(crate) fn effective_level(level: SimdLevel) -> SimdLevel {
    level.min(simd_level())
}

/// Run `f` on the route for `level`, capped at what this CPU supports.
#[inline]
pub(crate) fn dispatch<F: SimdFn>(level: SimdLevel, f: F) -> F::Out {
    match effective_level(level) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `effective_level` only returns Avx512 when the CPU has it.
        SimdLevel::Avx512 => unsafe { run_avx512(f) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above for AVX2 + FMA.
        SimdLevel::Avx2 => unsafe { run_avx2(f) },
        _ => f.call::<S1>(),
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")]
unsafe fn run_avx512<F: SimdFn>(f: F) -> F::Out {
    f.call::<F32x16>()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn run_avx2<F: SimdFn>(f: F) -> F::Out {
    f.call::<F32x8>()
}

// The helpers below are macros, not functions taking closures: a closure is
// its own LLVM function without the trampoline's target features, so the
// intrinsics inside it would not inline. A macro pastes the body in place.

/// `map_inplace!(V, x, |v| body)`: `x[i] = body(x[i])` with vector type `V`;
/// the tail goes through a padded buffer.
macro_rules! map_inplace {
    ($V:ty, $x:expr, |$v:ident| $body:expr) => {{
        use $crate::kernels::elementwise::simd::MAX_LANES as _ML;
        let x: &mut [f32] = $x;
        let lanes = <$V>::LANES;
        let n = x.len();
        let main = n - n % lanes;
        let p = x.as_mut_ptr();
        let mut i = 0;
        while i < main {
            // SAFETY: i + LANES <= main <= n.
            let $v = unsafe { <$V>::load(p.add(i)) };
            let r: $V = $body;
            // SAFETY: as above.
            unsafe { r.store(p.add(i)) };
            i += lanes;
        }
        if main < n {
            let mut buf = [0.0f32; _ML];
            buf[..n - main].copy_from_slice(&x[main..]);
            // SAFETY: buf holds MAX_LANES >= LANES elements.
            let $v = unsafe { <$V>::load(buf.as_ptr()) };
            let r: $V = $body;
            // SAFETY: as above.
            unsafe { r.store(buf.as_mut_ptr()) };
            x[main..].copy_from_slice(&buf[..n - main]);
        }
    }};
}
pub(crate) use map_inplace;

/// `zip_inplace!(V, a, b, |va, vb| body)`: `a[i] = body(a[i], b[i])` over the common length.
macro_rules! zip_inplace {
    ($V:ty, $a:expr, $b:expr, |$va:ident, $vb:ident| $body:expr) => {{
        use $crate::kernels::elementwise::simd::MAX_LANES as _ML;
        let a: &mut [f32] = $a;
        let b: &[f32] = $b;
        let lanes = <$V>::LANES;
        let n = a.len().min(b.len());
        let main = n - n % lanes;
        let (pa, pb) = (a.as_mut_ptr(), b.as_ptr());
        let mut i = 0;
        while i < main {
            // SAFETY: i + LANES <= main <= both lengths.
            let ($va, $vb) = unsafe { (<$V>::load(pa.add(i)), <$V>::load(pb.add(i))) };
            let r: $V = $body;
            // SAFETY: as above.
            unsafe { r.store(pa.add(i)) };
            i += lanes;
        }
        if main < n {
            let (mut ba, mut bb) = ([0.0f32; _ML], [0.0f32; _ML]);
            ba[..n - main].copy_from_slice(&a[main..n]);
            bb[..n - main].copy_from_slice(&b[main..n]);
            // SAFETY: both buffers hold MAX_LANES >= LANES elements.
            let ($va, $vb) = unsafe { (<$V>::load(ba.as_ptr()), <$V>::load(bb.as_ptr())) };
            let r: $V = $body;
            // SAFETY: as above.
            unsafe { r.store(ba.as_mut_ptr()) };
            a[main..n].copy_from_slice(&ba[..n - main]);
        }
    }};
}
pub(crate) use zip_inplace;

/// `fold_sum!(V, x, pad, |acc, v| body)`: fold over `x` in two vector
/// accumulators (tail lanes padded with `pad`), then sum the lanes.
macro_rules! fold_sum {
    ($V:ty, $x:expr, $pad:expr, |$acc:ident, $v:ident| $body:expr) => {{
        use $crate::kernels::elementwise::simd::MAX_LANES as _ML;
        let x: &[f32] = $x;
        let lanes = <$V>::LANES;
        let n = x.len();
        let main = n - n % lanes;
        let p = x.as_ptr();
        // Two accumulators hide FMA latency.
        let (mut a0, mut a1) = (<$V>::splat(0.0), <$V>::splat(0.0));
        let mut i = 0;
        while i + 2 * lanes <= main {
            // SAFETY: i + 2·LANES <= main <= n.
            let (v0, v1) = unsafe { (<$V>::load(p.add(i)), <$V>::load(p.add(i + lanes))) };
            a0 = {
                let ($acc, $v) = (a0, v0);
                $body
            };
            a1 = {
                let ($acc, $v) = (a1, v1);
                $body
            };
            i += 2 * lanes;
        }
        if i < main {
            // SAFETY: i + LANES <= main.
            let v0 = unsafe { <$V>::load(p.add(i)) };
            a0 = {
                let ($acc, $v) = (a0, v0);
                $body
            };
        }
        if main < n {
            let mut buf = [$pad; _ML];
            buf[..n - main].copy_from_slice(&x[main..]);
            // SAFETY: buf holds MAX_LANES >= LANES elements.
            let v1 = unsafe { <$V>::load(buf.as_ptr()) };
            a1 = {
                let ($acc, $v) = (a1, v1);
                $body
            };
        }
        a0.add(a1).hsum()
    }};
}
pub(crate) use fold_sum;
