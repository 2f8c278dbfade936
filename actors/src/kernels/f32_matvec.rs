//! f32 matrix–vector product `y[n] = Σ_k w[n,k]·x[k] (+ bias[n])` in a fixed,
//! documented accumulation order, so every SIMD route equals the scalar
//! reference bit for bit and no result depends on the thread count.
//!
//! The order (the "16-lane contract", also used by the f16/bf16 weight
//! formats in `matmul`):
//! 1. `x` and each weight row are seen zero-padded to a multiple of 16;
//! 2. lane `j` (0..16) starts at `+0.0` and accumulates
//!    `acc[j] = fma(x[i], w[i], acc[j])` for every `i ≡ j (mod 16)`, in
//!    increasing `i`;
//! 3. lanes are combined by the fixed tree `s8[j] = acc[j] + acc[j+8]`,
//!    `s4[j] = s8[j] + s8[j+4]`, `s2[j] = s4[j] + s4[j+2]`, `s = s2[0] + s2[1]`;
//! 4. `y = s + bias` when there is a bias.
//!
//! AVX-512 keeps the 16 lanes in one register, AVX2 in two (lanes 0..8 and
//! 8..16), the scalar route in an array: the same arithmetic in the same order.

use super::cpu::{self, SimdLevel};
use super::error::{check_len, KernelError};
use voxlane_runtime::Fork;

/// Width of the fixed accumulation order (lanes of partial sums).
pub const LANES: usize = 16;

/// Output rows per parallel chunk: fixed, so the split never depends on threads.
pub const CHUNK_ROWS: usize = 64;

/// Combine 16 lane sums with the contract's fixed tree.
#[inline]
pub(crate) fn reduce16(acc: &[f32; LANES]) -> f32 {
    let mut s8 = [0.0f32; 8];
    for j in 0..8 {
        s8[j] = acc[j] + acc[j + 8];
    }
    let mut s4 = [0.0f32; 4];
    for j in 0..4 {
        s4[j] = s8[j] + s8[j + 4];
    }
    let s2 = [s4[0] + s4[2], s4[1] + s4[3]];
    s2[0] + s2[1]
}

/// Scalar form of the 16-lane contract over any weight type decoded exactly to f32.
#[inline]
pub(crate) fn dot16_scalar<T: Copy>(x: &[f32], w: &[T], decode: impl Fn(T) -> f32) -> f32 {
    let len = x.len().min(w.len());
    let mut acc = [0.0f32; LANES];
    let full = len / LANES * LANES;
    for (xc, wc) in x[..full]
        .chunks_exact(LANES)
        .zip(w[..full].chunks_exact(LANES))
    {
        for j in 0..LANES {
            acc[j] = xc[j].mul_add(decode(wc[j]), acc[j]);
        }
    }
    let tail = len - full;
    if tail > 0 {
        // Padding lanes still run fma(0, 0, acc), exactly as the masked SIMD loads do.
        for (j, a) in acc.iter_mut().enumerate() {
            let (xv, wv) = if j < tail {
                (x[full + j], decode(w[full + j]))
            } else {
                (0.0, 0.0)
            };
            *a = xv.mul_add(wv, *a);
        }
    }
    reduce16(&acc)
}

/// The contract's dot product of two equally long slices on the chosen route.
///
/// `level` is capped at what this CPU supports ([`cpu::simd_level`]).
pub fn dot(level: SimdLevel, x: &[f32], w: &[f32]) -> Result<f32, KernelError> {
    check_len("dot w", x.len(), w.len())?;
    Ok(dot_unchecked(level, x, w))
}

/// [`dot`] without the length check (uses the shorter length); for kernels that checked shapes.
#[inline]
pub(crate) fn dot_unchecked(level: SimdLevel, x: &[f32], w: &[f32]) -> f32 {
    let len = x.len().min(w.len());
    let (x, w) = (&x[..len], &w[..len]);
    match level.min(cpu::simd_level()) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the level is capped by the detected CPU features.
        SimdLevel::Avx512 => unsafe { x86::dot_avx512(x, w) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above.
        SimdLevel::Avx2 => unsafe { x86::dot_avx2(x, w) },
        _ => dot16_scalar(x, w, |v| v),
    }
}

/// Compute `y[r] = dot(x, w[r*k..(r+1)*k]) (+ bias[r])` for the rows in `w` (single lane).
pub(crate) fn rows(
    level: SimdLevel,
    x: &[f32],
    w: &[f32],
    k: usize,
    bias: Option<&[f32]>,
    y: &mut [f32],
) {
    match level.min(cpu::simd_level()) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the level is capped by the detected CPU features; shapes are
        // checked by the caller (w holds y.len() rows of k, x holds k).
        SimdLevel::Avx512 => unsafe { x86::rows_avx512(x, w, k, y) },
        _ => {
            for (r, out) in y.iter_mut().enumerate() {
                *out = dot_unchecked(level, &x[..k], &w[r * k..(r + 1) * k]);
            }
        }
    }
    if let Some(b) = bias {
        for (out, b) in y.iter_mut().zip(b) {
            *out += *b;
        }
    }
}

/// Most activation rows `rows_multi` shares one weight pass between.
pub const MULTI_MAX: usize = 4;

/// `y[j·ldy + r] = dot(xs[j·k..], w[r·k..])` for `m ≤ MULTI_MAX` activation rows:
/// each weight row is loaded once for all `m` rows (the weight-bound case of
/// small-M products), every dot keeping the contract order, so the bits equal
/// `m` separate [`rows`] calls.
#[allow(clippy::too_many_arguments)]
pub(crate) fn rows_multi(
    level: SimdLevel,
    xs: &[f32],
    m: usize,
    w: &[f32],
    k: usize,
    y: &mut [f32],
    ldy: usize,
    n: usize,
) {
    debug_assert!(m <= MULTI_MAX && xs.len() >= m * k && w.len() >= n * k);
    match (level.min(cpu::simd_level()), m) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the level is capped by the detected CPU features; the
        // caller guarantees the shapes (debug-asserted above).
        (SimdLevel::Avx512, 2..=MULTI_MAX) => unsafe {
            x86::rows_multi_avx512(xs, m, w, k, n, y, ldy)
        },
        _ => {
            for j in 0..m {
                rows(
                    level,
                    &xs[j * k..(j + 1) * k],
                    w,
                    k,
                    None,
                    &mut y[j * ldy..j * ldy + n],
                );
            }
        }
    }
}

fn check_shapes(
    x: &[f32],
    w: &[f32],
    n: usize,
    bias: Option<&[f32]>,
    y: &[f32],
) -> Result<usize, KernelError> {
    let k = x.len();
    check_len("matvec w", n * k, w.len())?;
    check_len("matvec y", n, y.len())?;
    if let Some(b) = bias {
        check_len("matvec bias", n, b.len())?;
    }
    Ok(k)
}

/// `y[n] = W[n,:]·x (+ bias[n])` for row-major `w` (`n × x.len()`), on the best route.
pub fn matvec(
    x: &[f32],
    w: &[f32],
    n: usize,
    bias: Option<&[f32]>,
    y: &mut [f32],
    lanes: &impl Fork,
) -> Result<(), KernelError> {
    matvec_with(cpu::simd_level(), x, w, n, bias, y, lanes)
}

/// [`matvec`] on an explicit route (capped at what the CPU supports).
///
/// Rows are split over lanes in fixed [`CHUNK_ROWS`] chunks; each output is
/// computed by one lane in the contract order, so the result is identical
/// for every thread budget and every route.
pub fn matvec_with(
    level: SimdLevel,
    x: &[f32],
    w: &[f32],
    n: usize,
    bias: Option<&[f32]>,
    y: &mut [f32],
    lanes: &impl Fork,
) -> Result<(), KernelError> {
    let k = check_shapes(x, w, n, bias, y)?;
    lanes.for_each_chunk_mut(y, CHUNK_ROWS, |ci, piece| {
        let r0 = ci * CHUNK_ROWS;
        let rows_w = &w[r0 * k..(r0 + piece.len()) * k];
        rows(
            level,
            x,
            rows_w,
            k,
            bias.map(|b| &b[r0..r0 + piece.len()]),
            piece,
        );
    })?;
    Ok(())
}

/// Readable single-threaded reference: the scalar contract order, row by row.
pub fn matvec_reference(
    x: &[f32],
    w: &[f32],
    n: usize,
    bias: Option<&[f32]>,
    y: &mut [f32],
) -> Result<(), KernelError> {
    let k = check_shapes(x, w, n, bias, y)?;
    for (r, out) in y.iter_mut().enumerate() {
        let s = dot16_scalar(x, &w[r * k..(r + 1) * k], |v| v);
        *out = match bias {
            Some(b) => s + b[r],
            None => s,
        };
    }
    Ok(())
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    //! AVX2 / AVX-512 forms of the 16-lane contract.
    use std::arch::x86_64::*;

    /// Mask selecting the first `n` (< 16) lanes.
    #[inline(always)]
    pub(crate) fn tail_mask(n: usize) -> __mmask16 {
        ((1u32 << n) - 1) as __mmask16
    }

    /// The contract's tree over one 16-lane register.
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq,avx2,fma")]
    pub(crate) fn reduce_avx512(acc: __m512) -> f32 {
        let lo = _mm512_castps512_ps256(acc);
        let hi = _mm512_extractf32x8_ps::<1>(acc);
        reduce_avx2(lo, hi)
    }

    /// The contract's tree over two 8-lane registers (lanes 0..8, 8..16).
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    pub(crate) fn reduce_avx2(lo: __m256, hi: __m256) -> f32 {
        let s8 = _mm256_add_ps(lo, hi);
        let s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps::<1>(s8));
        let s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
        let s = _mm_add_ss(s2, _mm_shuffle_ps::<1>(s2, s2));
        _mm_cvtss_f32(s)
    }

    /// Dot product in the contract order, AVX-512.
    ///
    /// # Safety
    /// Needs AVX-512F/DQ; `w.len() >= x.len()`.
    #[target_feature(enable = "avx512f,avx512dq,avx2,fma")]
    pub(crate) unsafe fn dot_avx512(x: &[f32], w: &[f32]) -> f32 {
        let k = x.len();
        let (xp, wp) = (x.as_ptr(), w.as_ptr());
        let mut acc = _mm512_setzero_ps();
        let mut i = 0;
        while i + 16 <= k {
            acc = _mm512_fmadd_ps(_mm512_loadu_ps(xp.add(i)), _mm512_loadu_ps(wp.add(i)), acc);
            i += 16;
        }
        if i < k {
            let m = tail_mask(k - i);
            let xv = _mm512_maskz_loadu_ps(m, xp.add(i));
            let wv = _mm512_maskz_loadu_ps(m, wp.add(i));
            acc = _mm512_fmadd_ps(xv, wv, acc);
        }
        reduce_avx512(acc)
    }

    /// Dot product in the contract order, AVX2 (lanes split over two registers).
    ///
    /// # Safety
    /// Needs AVX2+FMA; `w.len() >= x.len()`.
    #[target_feature(enable = "avx2,fma")]
    pub(crate) unsafe fn dot_avx2(x: &[f32], w: &[f32]) -> f32 {
        let k = x.len();
        let (xp, wp) = (x.as_ptr(), w.as_ptr());
        let mut lo = _mm256_setzero_ps();
        let mut hi = _mm256_setzero_ps();
        let mut i = 0;
        while i + 16 <= k {
            lo = _mm256_fmadd_ps(_mm256_loadu_ps(xp.add(i)), _mm256_loadu_ps(wp.add(i)), lo);
            hi = _mm256_fmadd_ps(
                _mm256_loadu_ps(xp.add(i + 8)),
                _mm256_loadu_ps(wp.add(i + 8)),
                hi,
            );
            i += 16;
        }
        if i < k {
            // Zero-padded copies: AVX2 has no cheap masked tail for every type.
            let mut xt = [0.0f32; 16];
            let mut wt = [0.0f32; 16];
            xt[..k - i].copy_from_slice(&x[i..k]);
            wt[..k - i].copy_from_slice(&w[i..k]);
            lo = _mm256_fmadd_ps(
                _mm256_loadu_ps(xt.as_ptr()),
                _mm256_loadu_ps(wt.as_ptr()),
                lo,
            );
            hi = _mm256_fmadd_ps(
                _mm256_loadu_ps(xt.as_ptr().add(8)),
                _mm256_loadu_ps(wt.as_ptr().add(8)),
                hi,
            );
        }
        reduce_avx2(lo, hi)
    }

    /// Four rows at a time sharing each `x` load; every row keeps its own contract order.
    ///
    /// # Safety
    /// Needs AVX-512F/DQ; `x.len() >= k`, `w.len() >= y.len() * k`.
    #[target_feature(enable = "avx512f,avx512dq,avx2,fma")]
    pub(crate) unsafe fn rows_avx512(x: &[f32], w: &[f32], k: usize, y: &mut [f32]) {
        let xp = x.as_ptr();
        let n = y.len();
        let mut r = 0;
        while r + 4 <= n {
            let w0 = w.as_ptr().add(r * k);
            let (w1, w2, w3) = (w0.add(k), w0.add(2 * k), w0.add(3 * k));
            let mut a0 = _mm512_setzero_ps();
            let mut a1 = _mm512_setzero_ps();
            let mut a2 = _mm512_setzero_ps();
            let mut a3 = _mm512_setzero_ps();
            let mut i = 0;
            while i + 16 <= k {
                let xv = _mm512_loadu_ps(xp.add(i));
                a0 = _mm512_fmadd_ps(xv, _mm512_loadu_ps(w0.add(i)), a0);
                a1 = _mm512_fmadd_ps(xv, _mm512_loadu_ps(w1.add(i)), a1);
                a2 = _mm512_fmadd_ps(xv, _mm512_loadu_ps(w2.add(i)), a2);
                a3 = _mm512_fmadd_ps(xv, _mm512_loadu_ps(w3.add(i)), a3);
                i += 16;
            }
            if i < k {
                let m = tail_mask(k - i);
                let xv = _mm512_maskz_loadu_ps(m, xp.add(i));
                a0 = _mm512_fmadd_ps(xv, _mm512_maskz_loadu_ps(m, w0.add(i)), a0);
                a1 = _mm512_fmadd_ps(xv, _mm512_maskz_loadu_ps(m, w1.add(i)), a1);
                a2 = _mm512_fmadd_ps(xv, _mm512_maskz_loadu_ps(m, w2.add(i)), a2);
                a3 = _mm512_fmadd_ps(xv, _mm512_maskz_loadu_ps(m, w3.add(i)), a3);
            }
            y[r] = reduce_avx512(a0);
            y[r + 1] = reduce_avx512(a1);
            y[r + 2] = reduce_avx512(a2);
            y[r + 3] = reduce_avx512(a3);
            r += 4;
        }
        while r < n {
            y[r] = dot_avx512(&x[..k], &w[r * k..(r + 1) * k]);
            r += 1;
        }
    }

    /// `M` activation rows × `R` weight rows per pass: each weight load feeds
    /// `M` accumulators and each activation load `R`; every accumulator keeps
    /// its own contract order.
    #[inline(always)]
    unsafe fn block_mr<const M: usize, const R: usize>(
        xs: *const f32,
        w: [*const f32; R],
        k: usize,
    ) -> [[__m512; R]; M] {
        let mut acc = [[_mm512_setzero_ps(); R]; M];
        let mut i = 0;
        while i + 16 <= k {
            let mut wv = [_mm512_setzero_ps(); R];
            for (v, p) in wv.iter_mut().zip(w) {
                *v = _mm512_loadu_ps(p.add(i));
            }
            for (j, a) in acc.iter_mut().enumerate() {
                let xv = _mm512_loadu_ps(xs.add(j * k + i));
                for (c, v) in a.iter_mut().zip(wv) {
                    *c = _mm512_fmadd_ps(xv, v, *c);
                }
            }
            i += 16;
        }
        if i < k {
            let m = tail_mask(k - i);
            let mut wv = [_mm512_setzero_ps(); R];
            for (v, p) in wv.iter_mut().zip(w) {
                *v = _mm512_maskz_loadu_ps(m, p.add(i));
            }
            for (j, a) in acc.iter_mut().enumerate() {
                let xv = _mm512_maskz_loadu_ps(m, xs.add(j * k + i));
                for (c, v) in a.iter_mut().zip(wv) {
                    *c = _mm512_fmadd_ps(xv, v, *c);
                }
            }
        }
        acc
    }

    #[target_feature(enable = "avx512f,avx512dq,avx2,fma")]
    unsafe fn rows_multi_m<const M: usize>(
        xs: &[f32],
        w: &[f32],
        k: usize,
        n: usize,
        y: &mut [f32],
        ldy: usize,
    ) {
        let (xp, wp) = (xs.as_ptr(), w.as_ptr());
        let mut r = 0;
        while r + 4 <= n {
            let w0 = wp.add(r * k);
            let acc = block_mr::<M, 4>(xp, [w0, w0.add(k), w0.add(2 * k), w0.add(3 * k)], k);
            for (j, a) in acc.iter().enumerate() {
                for (q, v) in a.iter().enumerate() {
                    y[j * ldy + r + q] = reduce_avx512(*v);
                }
            }
            r += 4;
        }
        while r < n {
            let acc = block_mr::<M, 1>(xp, [wp.add(r * k)], k);
            for (j, a) in acc.iter().enumerate() {
                y[j * ldy + r] = reduce_avx512(a[0]);
            }
            r += 1;
        }
    }

    /// [`super::rows_multi`] on AVX-512 for `m` in 2..=4.
    ///
    /// # Safety
    /// Needs AVX-512F/DQ; `xs.len() >= m·k`, `w.len() >= n·k`, `y` holds `m` rows of stride `ldy ≥ n`.
    #[target_feature(enable = "avx512f,avx512dq,avx2,fma")]
    pub(crate) unsafe fn rows_multi_avx512(
        xs: &[f32],
        m: usize,
        w: &[f32],
        k: usize,
        n: usize,
        y: &mut [f32],
        ldy: usize,
    ) {
        match m {
            2 => rows_multi_m::<2>(xs, w, k, n, y, ldy),
            3 => rows_multi_m::<3>(xs, w, k, n, y, ldy),
            _ => rows_multi_m::<4>(xs, w, k, n, y, ldy),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::test_rng::centered as rnd_vec;
    use proptest::prelude::*;
    use voxlane_runtime::LanePool;

    proptest! {
        #[test]
        fn routes_equal_reference_bitwise(n in 1usize..80, k in 1usize..300, bias in any::<bool>(), seed in any::<u64>()) {
            let x = rnd_vec(seed, k);
            let w = rnd_vec(seed ^ 0x55, n * k);
            let b = rnd_vec(seed ^ 0xaa, n);
            let b = bias.then_some(&b[..]);
            let mut want = vec![0.0; n];
            matvec_reference(&x, &w, n, b, &mut want).unwrap();
            // Against an f64 dot product: the accuracy bound of the issue.
            for r in 0..n {
                let exact: f64 = (0..k).map(|i| x[i] as f64 * w[r * k + i] as f64).sum::<f64>()
                    + b.map_or(0.0, |b| b[r] as f64);
                let mag: f64 = (0..k).map(|i| (x[i] as f64 * w[r * k + i] as f64).abs()).sum();
                prop_assert!((want[r] as f64 - exact).abs() <= 1e-5 * mag + 1e-6);
            }
            let pool = LanePool::new(1).unwrap();
            for level in cpu::available_levels() {
                let mut got = vec![f32::NAN; n];
                matvec_with(level, &x, &w, n, b, &mut got, &pool).unwrap();
                prop_assert_eq!(got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    want.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), "route {:?}", level);
                for r in 0..n.min(3) {
                    let d = dot(level, &x, &w[r * k..(r + 1) * k]).unwrap();
                    prop_assert_eq!(d.to_bits(), dot16_scalar(&x, &w[r * k..(r + 1) * k], |v| v).to_bits());
                }
            }
        }
    }

    proptest! {
        #[test]
        fn multi_rows_equal_single_rows_bitwise(m in 1usize..=MULTI_MAX, n in 1usize..40, k in 1usize..200, seed in any::<u64>()) {
            let xs = rnd_vec(seed, m * k);
            let w = rnd_vec(seed ^ 0x77, n * k);
            for level in cpu::available_levels() {
                let ldy = n + 3;
                let mut got = vec![f32::NAN; m * ldy];
                rows_multi(level, &xs, m, &w, k, &mut got, ldy, n);
                for j in 0..m {
                    let mut want = vec![0.0; n];
                    matvec_reference(&xs[j * k..(j + 1) * k], &w, n, None, &mut want).unwrap();
                    for r in 0..n {
                        prop_assert_eq!(got[j * ldy + r].to_bits(), want[r].to_bits(), "level {:?} m {} row {}", level, m, r);
                    }
                }
            }
        }
    }

    #[test]
    fn identical_for_every_budget() {
        let (n, k) = (517, 333);
        let x = rnd_vec(1, k);
        let w = rnd_vec(2, n * k);
        let mut first = None;
        for threads in 1..=4 {
            let pool = LanePool::new(threads).unwrap();
            let mut y = vec![0.0; n];
            matvec(&x, &w, n, None, &mut y, &pool).unwrap();
            let bits: Vec<u32> = y.iter().map(|v| v.to_bits()).collect();
            match &first {
                None => first = Some(bits),
                Some(f) => assert_eq!(f, &bits, "budget {threads}"),
            }
        }
    }

    #[test]
    fn shape_errors() {
        let pool = LanePool::new(1).unwrap();
        let mut y = vec![0.0; 2];
        assert!(matches!(
            matvec(&[1.0; 3], &[0.0; 5], 2, None, &mut y, &pool),
            Err(KernelError::Shape { .. })
        ));
        assert!(dot(SimdLevel::Scalar, &[1.0], &[1.0, 2.0]).is_err());
    }
}
