//! AdaIN → activation (Snake or LeakyReLU) as one pass per channel row,
//! reporting the range the next conv quantizes with.
//!
//! In the export, the generator's `AdaINResBlock1` conv inputs are
//! `snake(adain(x))`: `ReduceMean → Sub → Mul → ReduceMean → +ε → Sqrt →
//! Div → ·(1 + γ) → +β`, then `x + (1/α)·sin(α·x)²`; the decoder's and the
//! predictor's `AdainResBlk1d` use `leaky_relu(adain(x), 0.2)`. The conv
//! then quantizes its input with the input's range. Done as separate kernels
//! that is five to seven passes over a `[C, T]` tensor; here each row is
//! normalised, activated and ranged while it sits in L1/L2. The affine is
//! one multiply-add, `(x − μ)·((1 + γ)/σ) + β`, instead of the graph's
//! division then scaling, and `sin²` is one polynomial (`sin_sq`) instead
//! of the sine squared: within float rounding of the graph's order, which
//! [`adain_rows_reference`] keeps (with onnxruntime's sine).

use super::ort_sin::{sin, MAGIC, PIO2, SIN_P, TWO_OVER_PI};
use crate::kernels::cpu::simd_level;
use crate::kernels::elementwise::simd::{dispatch, fold_sum, SimdFn, Vf32, MAX_LANES};

/// The activation after the AdaIN.
#[derive(Clone, Copy)]
pub enum Activation<'a> {
    /// Snake with per-row α and the export's folded `1/α`.
    Snake {
        /// α per row.
        alpha: &'a [f32],
        /// `1/α` per row.
        inv_alpha: &'a [f32],
    },
    /// LeakyReLU with this negative slope.
    LeakyRelu(f32),
}

/// Per-row parameters of one AdaIN + activation.
#[derive(Clone, Copy)]
pub struct RowParams<'a> {
    /// AdaIN γ per row (the graph adds 1).
    pub gamma: &'a [f32],
    /// AdaIN β per row.
    pub beta: &'a [f32],
    /// Instance-norm ε.
    pub eps: f32,
    /// What follows the norm.
    pub act: Activation<'a>,
}

impl<'a> RowParams<'a> {
    /// The parameters of rows `r0..r0 + n`.
    pub fn rows(&self, r0: usize, n: usize) -> RowParams<'a> {
        RowParams {
            gamma: &self.gamma[r0..r0 + n],
            beta: &self.beta[r0..r0 + n],
            eps: self.eps,
            act: match self.act {
                Activation::Snake { alpha, inv_alpha } => Activation::Snake {
                    alpha: &alpha[r0..r0 + n],
                    inv_alpha: &inv_alpha[r0..r0 + n],
                },
                leaky => leaky,
            },
        }
    }
}

struct Rows<'a> {
    /// The input rows when not in place.
    src: Option<&'a [f32]>,
    x: &'a mut [f32],
    t: usize,
    p: RowParams<'a>,
}

/// `sin(x)²` for `|x|` below ~25 000 (the Snake's arguments), within
/// ~1e-7 of the exact value: the quadrant `q` and `r = x − q·π/2` by
/// Cody–Waite as onnxruntime's sine does (with fused multiply-adds), then
/// one odd polynomial: `sin²(x)` is `sin²(r)` for even `q` and `1 − sin²(r)`
/// for odd `q`, so the cosine polynomial and all sign work drop out.
#[inline(always)]
fn sin_sq<V: Vf32>(x: V) -> V {
    let ax = x.and_bits(V::splat(f32::from_bits(0x7fff_ffff)));
    let yr = ax.mul_add(V::splat(TWO_OVER_PI), V::splat(MAGIC));
    let y = yr.sub(V::splat(MAGIC));
    let mut r = ax;
    for c in PIO2 {
        r = y.mul_add(V::splat(c), r);
    }
    let x2 = r.mul(r);
    let mut p = V::splat(SIN_P[0]);
    for k in &SIN_P[1..] {
        p = p.mul_add(x2, V::splat(*k));
    }
    let s = p.mul(x2).mul_add(r, r);
    let s2 = s.mul(s);
    // Quadrant bit 0 sits in the lowest mantissa bit of `yr`.
    let odd = yr.and_bits(V::splat(f32::from_bits(1))).gt(V::splat(0.0));
    V::select(odd, V::splat(1.0).sub(s2), s2)
}

/// One activation on vectors; a trait, not a closure, so it inlines into
/// the SIMD route and keeps its target features.
trait VecAct<V: Vf32> {
    fn apply(&self, y: V) -> V;
}

/// `y + inv·sin(α·y)²`.
struct SnakeV<V> {
    alpha: V,
    inv: V,
}

impl<V: Vf32> VecAct<V> for SnakeV<V> {
    #[inline(always)]
    fn apply(&self, y: V) -> V {
        self.inv.mul_add(sin_sq(self.alpha.mul(y)), y)
    }
}

/// `y < 0 ? slope·y : y`.
struct LeakyV<V>(V);

impl<V: Vf32> VecAct<V> for LeakyV<V> {
    #[inline(always)]
    fn apply(&self, y: V) -> V {
        V::select(y.lt(V::splat(0.0)), y.mul(self.0), y)
    }
}

/// One row: `out = act((inp − μ)·a + b)`, folded into the running range.
///
/// # Safety
/// `inp` and `out` are valid for `len` values (they may be the same row).
#[inline(always)]
unsafe fn row_pass<V: Vf32, A: VecAct<V>>(
    inp: *const f32,
    out: *mut f32,
    len: usize,
    (mean, a, b): (V, V, V),
    act: &A,
    range: &mut (V, V),
) {
    let lanes = V::LANES;
    let main = len - len % lanes;
    let mut i = 0;
    while i < main {
        let y = act.apply(V::load(inp.add(i)).sub(mean).mul_add(a, b));
        // `min`/`max` return their argument for NaN lanes, as `range` ignores NaNs.
        range.0 = y.min(range.0);
        range.1 = y.max(range.1);
        y.store(out.add(i));
        i += lanes;
    }
    let rest = len - main;
    if rest > 0 {
        let mut tail = [0.0f32; MAX_LANES];
        std::ptr::copy_nonoverlapping(inp.add(main), tail.as_mut_ptr(), rest);
        let y = act.apply(V::load(tail.as_ptr()).sub(mean).mul_add(a, b));
        y.store(tail.as_mut_ptr());
        std::ptr::copy_nonoverlapping(tail.as_ptr(), out.add(main), rest);
        let (l, h) = tail[..rest].iter().fold((0.0f32, 0.0f32), |(l, h), &v| {
            (if v < l { v } else { l }, if v > h { v } else { h })
        });
        range.0 = V::splat(l).min(range.0);
        range.1 = V::splat(h).max(range.1);
    }
}

impl SimdFn for Rows<'_> {
    type Out = [f32; 2];
    #[inline(always)]
    fn call<V: Vf32>(self) -> [f32; 2] {
        let t = self.t;
        let n = t as f32;
        let mut range = (V::splat(0.0), V::splat(0.0));
        for (r, row) in self.x.chunks_exact_mut(t).enumerate() {
            let input: &[f32] = match self.src {
                Some(src) => &src[r * t..(r + 1) * t],
                None => row,
            };
            let mean = fold_sum!(V, input, 0.0, |a, v| a.add(v)) / n;
            let vm = V::splat(mean);
            let var = fold_sum!(V, input, mean, |a, v| {
                let d = v.sub(vm);
                d.mul_add(d, a)
            }) / n;
            let a = V::splat((1.0 + self.p.gamma[r]) / (var + self.p.eps).sqrt());
            let affine = (vm, a, V::splat(self.p.beta[r]));
            let out = row.as_mut_ptr();
            // In place, input and output are one pointer (no shared borrow
            // of the row outlives the statistics).
            let inp = self
                .src
                .map_or(out as *const f32, |src| src[r * t..].as_ptr());
            // SAFETY: `inp` and `out` each hold `t` values (the same row when in place).
            unsafe {
                match self.p.act {
                    Activation::Snake { alpha, inv_alpha } => {
                        let act = SnakeV {
                            alpha: V::splat(alpha[r]),
                            inv: V::splat(inv_alpha[r]),
                        };
                        row_pass(inp, out, t, affine, &act, &mut range);
                    }
                    Activation::LeakyRelu(slope) => {
                        row_pass(inp, out, t, affine, &LeakyV(V::splat(slope)), &mut range);
                    }
                }
            }
        }
        let mut buf = [0.0f32; MAX_LANES];
        // SAFETY: `buf` holds MAX_LANES >= LANES values.
        unsafe { range.0.store(buf.as_mut_ptr()) };
        let l = buf[..V::LANES].iter().fold(0.0f32, |m, &v| m.min(v));
        // SAFETY: as above.
        unsafe { range.1.store(buf.as_mut_ptr()) };
        let h = buf[..V::LANES].iter().fold(0.0f32, |m, &v| m.max(v));
        [l, h]
    }
}

/// `x: [rows, t]` in place: per row, instance norm → `(1 + γ)·x̂ + β` → the
/// activation. `p`'s slices hold one value per row of `x`. Returns the range
/// of what it wrote, `[min(0, x…), max(0, x…)]` (as `pointwise::range`), for
/// the quantization of the conv that reads it.
pub fn adain_rows(x: &mut [f32], t: usize, p: RowParams<'_>) -> [f32; 2] {
    if t == 0 {
        return [0.0, 0.0];
    }
    dispatch(simd_level(), Rows { src: None, x, t, p })
}

/// [`adain_rows`] out of place: `dst` from `src` (both `[rows, t]`), saving
/// the copy an in-place pass would need.
pub fn adain_rows_from(src: &[f32], dst: &mut [f32], t: usize, p: RowParams<'_>) -> [f32; 2] {
    if t == 0 {
        return [0.0, 0.0];
    }
    assert_eq!(
        src.len(),
        dst.len(),
        "adain_rows_from: source and destination differ in size"
    );
    dispatch(
        simd_level(),
        Rows {
            src: Some(src),
            x: dst,
            t,
            p,
        },
    )
}

/// Readable reference of [`adain_rows`] in the graph's operation order
/// (two-pass statistics, division by σ, onnxruntime's sine).
pub fn adain_rows_reference(x: &mut [f32], t: usize, p: RowParams<'_>) {
    if t == 0 {
        return;
    }
    for (r, row) in x.chunks_exact_mut(t).enumerate() {
        let mean = row.iter().sum::<f32>() / t as f32;
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / t as f32;
        let sd = (var + p.eps).sqrt();
        for v in row.iter_mut() {
            let y = (1.0 + p.gamma[r]) * ((*v - mean) / sd) + p.beta[r];
            *v = match p.act {
                Activation::Snake { alpha, inv_alpha } => {
                    let s = sin(alpha[r] * y);
                    y + inv_alpha[r] * (s * s)
                }
                Activation::LeakyRelu(slope) => {
                    if y < 0.0 {
                        y * slope
                    } else {
                        y
                    }
                }
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tts::kokoro::pointwise;
    use proptest::prelude::*;

    struct SinSq<'a>(&'a mut [f32]);
    impl SimdFn for SinSq<'_> {
        type Out = ();
        #[inline(always)]
        fn call<V: Vf32>(self) {
            crate::kernels::elementwise::simd::map_inplace!(V, self.0, |v| sin_sq(v));
        }
    }

    #[test]
    fn one_polynomial_sine_square_is_within_1e7_of_exact() {
        let x: Vec<f32> = (0..200_000)
            .map(|i| (i as f32 - 100_000.0) * 0.123_457)
            .chain([
                0.0,
                -0.0,
                1e-30,
                std::f32::consts::FRAC_PI_2,
                std::f32::consts::PI,
            ])
            .collect();
        let mut got = x.clone();
        dispatch(simd_level(), SinSq(&mut got));
        for (&v, &g) in x.iter().zip(&got) {
            let want = (v as f64).sin().powi(2);
            assert!(
                (g as f64 - want).abs() <= 3e-7,
                "sin²({v}) = {g}, exact {want}"
            );
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        /// Rows of 1–300 values (odd, below and across the vector width):
        /// the fused pass stays within float rounding of the graph-order
        /// reference and reports exactly the range of what it wrote.
        #[test]
        fn fused_rows_follow_the_graph_order_reference(
            rows in 1usize..6,
            t in 1usize..300,
            seed in 0u64..1000,
            leaky in proptest::bool::ANY,
        ) {
            let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
            let mut next = || {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
            };
            let x: Vec<f32> = (0..rows * t).map(|i| next() * 3.0 + (i % 7) as f32 * 0.1).collect();
            let params: Vec<f32> = (0..4 * rows).map(|_| next()).collect();
            let alpha: Vec<f32> = params[2 * rows..3 * rows].iter().map(|a| 0.2 + a.abs()).collect();
            let inv: Vec<f32> = alpha.iter().map(|a| 1.0 / a).collect();
            let act = if leaky {
                Activation::LeakyRelu(0.2)
            } else {
                Activation::Snake { alpha: &alpha, inv_alpha: &inv }
            };
            let p = RowParams {
                gamma: &params[..rows],
                beta: &params[rows..2 * rows],
                eps: 1e-5,
                act,
            };
            let (mut fast, mut want) = (x.clone(), x.clone());
            let range = adain_rows(&mut fast, t, p);
            adain_rows_reference(&mut want, t, p);
            let mut moved = vec![0.0f32; x.len()];
            prop_assert_eq!(adain_rows_from(&x, &mut moved, t, p), range);
            prop_assert_eq!(&moved, &fast);
            prop_assert_eq!(range, pointwise::range(&fast));
            for (i, (f, w)) in fast.iter().zip(&want).enumerate() {
                prop_assert!((f - w).abs() <= 2e-5 * (1.0 + w.abs()), "{i}: {f} vs {w}");
            }
        }
    }
}
