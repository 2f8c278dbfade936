//! Vectorised `exp`, `sin`, `tanh` and `sigmoid` for f32, one body for every route.
//!
//! Accuracy (checked against f64 `std` in the tests):
//! - `exp`: relative error ≤ 1e-6 for results in the normal range
//!   (x ∈ [-87.3, 88.7]); below that it flushes smoothly to 0, above it is `inf`.
//! - `sin`: absolute error ≤ 1e-6 for |x| ≤ 1e4 (Cody–Waite reduction by π/2
//!   in three pieces whose products with the quadrant index stay exact enough
//!   without FMA, then degree-7/8 polynomials on [-π/4, π/4]).
//! - `tanh`, `sigmoid`: absolute error ≤ 1e-6 (relative near 0 for `tanh`).
//! - `gelu` (exact GELU, `x·Φ(x)`): ATen's vectorised CPU formula step for
//!   step — Abramowitz–Stegun 7.1.26 for `erf` with the exp above — so
//!   absolute error ≤ 2e-7·(1 + |x|).
//!
//! NaN in gives NaN out.

use super::simd::{dispatch, map_inplace, SimdFn, Vf32};
use crate::kernels::cpu::SimdLevel;

// exp: x = k·ln2 + r with ln2 split so that k·LN2_HI is exact for |k| < 2^15.
const LOG2E: f32 = std::f32::consts::LOG2_E;
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;
const EXP_HI: f32 = 88.722_83;
const EXP_LO: f32 = -103.0;
// Cephes expf minimax coefficients on [-ln2/2, ln2/2].
const EXP_P: [f32; 6] = [
    1.987_569_1e-4,
    1.398_199_9e-3,
    8.333_452e-3,
    4.166_579_6e-2,
    1.666_666_5e-1,
    5e-1,
];

// sin: π/2 split into 9 + 13 + 24 significant bits (Cephes DP1..DP3 × 2).
const FRAC_2_PI: f32 = std::f32::consts::FRAC_2_PI;
const DP1: f32 = 1.570_312_5;
const DP2: f32 = 4.837_513e-4;
const DP3: f32 = 7.549_79e-8;
const SIN_P: [f32; 3] = [-1.951_529_6e-4, 8.332_161e-3, -1.666_665_5e-1];
const COS_P: [f32; 3] = [2.443_315_7e-5, -1.388_731_6e-3, 4.166_664_6e-2];

// tanh: odd minimax polynomial below 0.625, the exp identity above.
const TANH_P: [f32; 5] = [
    -5.704_988_7e-3,
    2.063_909e-2,
    -5.373_971_6e-2,
    1.333_144_2e-1,
    -3.333_328e-1,
];

/// `exp(x)` per lane.
#[inline(always)]
pub(crate) fn exp_v<V: Vf32>(x: V) -> V {
    let xc = x.max(V::splat(EXP_LO)).min(V::splat(EXP_HI));
    let k = xc.mul(V::splat(LOG2E)).round();
    let r = k.mul_add(V::splat(-LN2_HI), xc);
    let r = k.mul_add(V::splat(-LN2_LO), r);
    let mut p = V::splat(EXP_P[0]);
    for c in &EXP_P[1..] {
        p = p.mul_add(r, V::splat(*c));
    }
    let z = r.mul(r);
    let y = p.mul_add(z, r).add(V::splat(1.0));
    // Scale by 2^k in two halves so k = 128 and k < -126 stay representable.
    let k1 = k.mul(V::splat(0.5)).round();
    let k2 = k.sub(k1);
    let s1 = k1.add(V::splat(127.0)).shl_int(23);
    let s2 = k2.add(V::splat(127.0)).shl_int(23);
    let mut res = y.mul(s1).mul(s2);
    res = V::select(x.gt(V::splat(EXP_HI)), V::splat(f32::INFINITY), res);
    res = V::select(x.lt(V::splat(EXP_LO)), V::splat(0.0), res);
    V::select(x.is_nan(), x, res)
}

/// `sin(x)` per lane.
#[inline(always)]
pub(crate) fn sin_v<V: Vf32>(x: V) -> V {
    let k = x.mul(V::splat(FRAC_2_PI)).round();
    let r = k.mul_add(V::splat(-DP1), x);
    let r = k.mul_add(V::splat(-DP2), r);
    let r = k.mul_add(V::splat(-DP3), r);
    let z = r.mul(r);
    let ps = V::splat(SIN_P[0])
        .mul_add(z, V::splat(SIN_P[1]))
        .mul_add(z, V::splat(SIN_P[2]));
    let s = ps.mul(z).mul_add(r, r);
    let pc = V::splat(COS_P[0])
        .mul_add(z, V::splat(COS_P[1]))
        .mul_add(z, V::splat(COS_P[2]));
    let c = pc
        .mul(z)
        .mul_add(z, V::splat(-0.5).mul_add(z, V::splat(1.0)));
    // Quadrant k mod 4: odd k takes the cosine, k & 2 flips the sign.
    let odd = k.shl_int(31).sign_set();
    let flip = k.shl_int(30).and_bits(V::splat(-0.0));
    V::select(odd, c, s).xor_bits(flip)
}

/// `tanh(x)` per lane.
#[inline(always)]
pub(crate) fn tanh_v<V: Vf32>(x: V) -> V {
    let sign = x.and_bits(V::splat(-0.0));
    let ax = x.xor_bits(sign);
    let z = x.mul(x);
    let mut p = V::splat(TANH_P[0]);
    for c in &TANH_P[1..] {
        p = p.mul_add(z, V::splat(*c));
    }
    let small = p.mul(z).mul_add(x, x);
    let e = exp_v(ax.add(ax));
    let big = V::splat(1.0)
        .sub(V::splat(2.0).div(e.add(V::splat(1.0))))
        .xor_bits(sign);
    V::select(ax.lt(V::splat(0.625)), small, big)
}

// erf: Abramowitz–Stegun 7.1.26, the constants ATen's `Vectorized<float>::erf` uses.
const ERF_P: f32 = 0.327_591_1;
const ERF_A: [f32; 5] = [
    1.061_405_4,
    -1.453_152,
    1.421_413_8,
    -0.284_496_74,
    0.254_829_6,
];

/// `erf(x)` per lane, in ATen's operation order.
#[inline(always)]
pub(crate) fn erf_v<V: Vf32>(x: V) -> V {
    let sign = x.and_bits(V::splat(-0.0));
    let ax = x.xor_bits(sign);
    let t = V::splat(1.0).div(V::splat(ERF_P).mul_add(ax, V::splat(1.0)));
    let mut r = V::splat(ERF_A[0]);
    for c in &ERF_A[1..] {
        r = r.mul_add(t, V::splat(*c));
    }
    let e = exp_v(x.mul(x).xor_bits(V::splat(-0.0)));
    let y = e.xor_bits(V::splat(-0.0)).mul(t).mul_add(r, V::splat(1.0));
    y.xor_bits(sign)
}

/// Exact GELU `(x·½)·(1 + erf(x·√½))` per lane (ATen's order).
#[inline(always)]
pub(crate) fn gelu_v<V: Vf32>(x: V) -> V {
    let e = erf_v(x.mul(V::splat(std::f32::consts::FRAC_1_SQRT_2)));
    x.mul(V::splat(0.5)).mul(V::splat(1.0).add(e))
}

/// `1 / (1 + exp(-x))` per lane.
#[inline(always)]
pub(crate) fn sigmoid_v<V: Vf32>(x: V) -> V {
    let e = exp_v(x.xor_bits(V::splat(-0.0)));
    V::splat(1.0).div(V::splat(1.0).add(e))
}

/// Which elementwise function a [`MapFn`] applies.
#[derive(Clone, Copy)]
enum Func {
    Exp,
    Sin,
    Tanh,
    Sigmoid,
    Gelu,
}

struct MapFn<'a> {
    func: Func,
    x: &'a mut [f32],
}

impl SimdFn for MapFn<'_> {
    type Out = ();
    #[inline(always)]
    fn call<V: Vf32>(self) {
        match self.func {
            Func::Exp => map_inplace!(V, self.x, |v| exp_v(v)),
            Func::Sin => map_inplace!(V, self.x, |v| sin_v(v)),
            Func::Tanh => map_inplace!(V, self.x, |v| tanh_v(v)),
            Func::Sigmoid => map_inplace!(V, self.x, |v| sigmoid_v(v)),
            Func::Gelu => map_inplace!(V, self.x, |v| gelu_v(v)),
        }
    }
}

/// `x ← exp(x)` in place on the `level` route.
pub fn exp_inplace(level: SimdLevel, x: &mut [f32]) {
    dispatch(level, MapFn { func: Func::Exp, x });
}

/// `x ← sin(x)` in place on the `level` route.
pub fn sin_inplace(level: SimdLevel, x: &mut [f32]) {
    dispatch(level, MapFn { func: Func::Sin, x });
}

/// `x ← tanh(x)` in place on the `level` route.
pub fn tanh_inplace(level: SimdLevel, x: &mut [f32]) {
    dispatch(
        level,
        MapFn {
            func: Func::Tanh,
            x,
        },
    );
}

/// `x ← 1 / (1 + exp(-x))` in place on the `level` route.
pub fn sigmoid_inplace(level: SimdLevel, x: &mut [f32]) {
    dispatch(
        level,
        MapFn {
            func: Func::Sigmoid,
            x,
        },
    );
}

/// `x ← x·Φ(x)` (exact GELU, PyTorch `approximate='none'`) in place on the `level` route.
pub fn gelu_inplace(level: SimdLevel, x: &mut [f32]) {
    dispatch(
        level,
        MapFn {
            func: Func::Gelu,
            x,
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::cpu::available_levels;
    use proptest::prelude::*;

    fn run(level: SimdLevel, f: fn(SimdLevel, &mut [f32]), xs: &[f32]) -> Vec<f32> {
        let mut v = xs.to_vec();
        f(level, &mut v);
        v
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn sin_abs_error(xs in prop::collection::vec(-1.0e4f32..1.0e4, 1..70), small in prop::collection::vec(-10.0f32..10.0, 1..40)) {
            for level in available_levels() {
                for set in [&xs, &small] {
                    let got = run(level, sin_inplace, set);
                    for (x, g) in set.iter().zip(&got) {
                        let want = (*x as f64).sin();
                        prop_assert!((*g as f64 - want).abs() <= 1e-6, "{level:?} sin({x}) = {g}, want {want}");
                    }
                }
            }
        }

        #[test]
        fn gelu_abs_error(xs in prop::collection::vec(-12.0f32..12.0, 1..70)) {
            for level in available_levels() {
                let got = run(level, gelu_inplace, &xs);
                for (x, g) in xs.iter().zip(&got) {
                    let x64 = *x as f64;
                    let want = x64 * 0.5 * (1.0 + libm::erf(x64 * std::f64::consts::FRAC_1_SQRT_2));
                    let bound = 2e-7 * (1.0 + x64.abs());
                    prop_assert!((*g as f64 - want).abs() <= bound, "{level:?} gelu({x}) = {g}, want {want}");
                }
            }
        }

        #[test]
        fn exp_rel_error(xs in prop::collection::vec(-87.0f32..88.5, 1..70)) {
            for level in available_levels() {
                let got = run(level, exp_inplace, &xs);
                for (x, g) in xs.iter().zip(&got) {
                    let want = (*x as f64).exp();
                    prop_assert!(((*g as f64 - want) / want).abs() <= 1e-6, "{level:?} exp({x}) = {g}, want {want}");
                }
            }
        }

        #[test]
        fn tanh_sigmoid_error(xs in prop::collection::vec(-30.0f32..30.0, 1..70), small in prop::collection::vec(-1.0f32..1.0, 1..40)) {
            for level in available_levels() {
                for set in [&xs, &small] {
                    let th = run(level, tanh_inplace, set);
                    let sg = run(level, sigmoid_inplace, set);
                    for ((x, t), s) in set.iter().zip(&th).zip(&sg) {
                        let wt = (*x as f64).tanh();
                        let ws = 1.0 / (1.0 + (-*x as f64).exp());
                        prop_assert!((*t as f64 - wt).abs() <= 1e-6 + 1e-6 * wt.abs(), "{level:?} tanh({x}) = {t}, want {wt}");
                        prop_assert!((*s as f64 - ws).abs() <= 1e-6, "{level:?} sigmoid({x}) = {s}, want {ws}");
                    }
                }
            }
        }
    }

    #[test]
    fn special_values() {
        for level in available_levels() {
            let e = run(level, exp_inplace, &[f32::NAN, 100.0, -200.0, 0.0, 88.72]);
            assert!(e[0].is_nan());
            assert_eq!(e[1], f32::INFINITY);
            assert_eq!(e[2], 0.0);
            assert_eq!(e[3], 1.0);
            assert!(e[4].is_finite() && e[4] > 3.3e38);
            let s = run(level, sin_inplace, &[f32::NAN, 0.0, -0.0]);
            assert!(s[0].is_nan());
            assert_eq!(s[1], 0.0);
            let t = run(level, tanh_inplace, &[f32::NAN, 50.0, -50.0]);
            assert!(t[0].is_nan());
            assert_eq!((t[1], t[2]), (1.0, -1.0));
        }
    }

    #[test]
    fn tanh_is_relatively_accurate_near_zero() {
        for level in available_levels() {
            let xs = [1e-5f32, -3e-4, 0.01, 0.6, 0.65];
            let t = run(level, tanh_inplace, &xs);
            for (x, g) in xs.iter().zip(&t) {
                let w = (*x as f64).tanh();
                assert!(((*g as f64 - w) / w).abs() < 1e-6, "{level:?} tanh({x})");
            }
        }
    }
}
