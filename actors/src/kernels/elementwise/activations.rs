//! Pointwise activations, in place: Snake, LeakyReLU, ELU, SiLU, SiLU gating,
//! tanh and sigmoid, each with a readable scalar reference.

use super::fast_math::{exp_v, sigmoid_v, sin_v};
use super::simd::{dispatch, map_inplace, zip_inplace, SimdFn, Vf32};
use crate::kernels::cpu::SimdLevel;
use crate::kernels::error::{check_len, KernelError};

pub use super::fast_math::{sigmoid_inplace as sigmoid, tanh_inplace as tanh};

/// Check a `[channels, t]` buffer against a per-channel parameter vector.
fn check_channels(x: &[f32], per_channel: &[f32], t: usize) -> Result<(), KernelError> {
    check_len("activation input", per_channel.len() * t, x.len())
}

struct Snake<'a> {
    x: &'a mut [f32],
    alpha: &'a [f32],
    t: usize,
}

impl SimdFn for Snake<'_> {
    type Out = ();
    #[inline(always)]
    fn call<V: Vf32>(self) {
        for (row, &a) in self.x.chunks_exact_mut(self.t).zip(self.alpha) {
            let (va, vinv) = (V::splat(a), V::splat(1.0 / a));
            // One pass: the sine never leaves registers.
            map_inplace!(V, row, |x| {
                let s = sin_v(x.mul(va));
                s.mul(s).mul_add(vinv, x)
            });
        }
    }
}

/// Snake on `x: [C, t]` with per-channel `alpha: [C]`: `x + (1/α)·sin²(αx)` (Kokoro's form).
///
/// α = 0 gives NaN, as in the PyTorch original; callers that want BigVGAN's
/// `1/(α + 1e-9)` fold the epsilon into `alpha` beforehand.
pub fn snake(level: SimdLevel, x: &mut [f32], alpha: &[f32], t: usize) -> Result<(), KernelError> {
    check_channels(x, alpha, t)?;
    if t > 0 {
        dispatch(level, Snake { x, alpha, t });
    }
    Ok(())
}

/// Readable reference for [`snake`] (f64 `sin`).
pub fn snake_reference(x: &mut [f32], alpha: &[f32], t: usize) {
    for (c, &a) in alpha.iter().enumerate() {
        for v in &mut x[c * t..(c + 1) * t] {
            let s = ((a as f64) * (*v as f64)).sin();
            *v = (*v as f64 + s * s / a as f64) as f32;
        }
    }
}

/// The pointwise activations without extra operands.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Activation {
    /// `x > 0 ? x : slope·x`.
    LeakyRelu(f32),
    /// `x > 0 ? x : α·(exp(x) − 1)`.
    Elu(f32),
    /// `x · sigmoid(x)`.
    Silu,
    /// `tanh(x)`.
    Tanh,
    /// `1 / (1 + exp(−x))`.
    Sigmoid,
}

impl Activation {
    /// Readable scalar definition (f64 inside).
    pub fn reference(self, x: f32) -> f32 {
        let v = x as f64;
        let y = match self {
            Activation::LeakyRelu(s) => {
                if v > 0.0 {
                    v
                } else {
                    s as f64 * v
                }
            }
            Activation::Elu(a) => {
                if v > 0.0 {
                    v
                } else {
                    a as f64 * v.exp_m1()
                }
            }
            Activation::Silu => v / (1.0 + (-v).exp()),
            Activation::Tanh => v.tanh(),
            Activation::Sigmoid => 1.0 / (1.0 + (-v).exp()),
        };
        y as f32
    }
}

struct Apply<'a> {
    act: Activation,
    x: &'a mut [f32],
}

impl SimdFn for Apply<'_> {
    type Out = ();
    #[inline(always)]
    fn call<V: Vf32>(self) {
        let zero = V::splat(0.0);
        match self.act {
            Activation::LeakyRelu(s) => {
                let s = V::splat(s);
                map_inplace!(V, self.x, |x| V::select(x.gt(zero), x, x.mul(s)))
            }
            Activation::Elu(a) => {
                let a = V::splat(a);
                map_inplace!(V, self.x, |x| {
                    let em1 = exp_v(x).sub(V::splat(1.0));
                    V::select(x.gt(zero), x, em1.mul(a))
                })
            }
            Activation::Silu => map_inplace!(V, self.x, |x| x.mul(sigmoid_v(x))),
            Activation::Tanh => map_inplace!(V, self.x, |x| super::fast_math::tanh_v(x)),
            Activation::Sigmoid => map_inplace!(V, self.x, |x| sigmoid_v(x)),
        }
    }
}

/// Apply `act` to every element of `x` in place on the `level` route.
pub fn apply(level: SimdLevel, act: Activation, x: &mut [f32]) {
    dispatch(level, Apply { act, x });
}

/// LeakyReLU with negative `slope`, in place.
pub fn leaky_relu(level: SimdLevel, x: &mut [f32], slope: f32) {
    apply(level, Activation::LeakyRelu(slope), x);
}

/// ELU with scale `alpha`, in place (`exp(x) − 1`, absolute error ≤ 2e-7 near 0).
pub fn elu(level: SimdLevel, x: &mut [f32], alpha: f32) {
    apply(level, Activation::Elu(alpha), x);
}

/// SiLU (swish), in place.
pub fn silu(level: SimdLevel, x: &mut [f32]) {
    apply(level, Activation::Silu, x);
}

struct SiluGate<'a> {
    a: &'a mut [f32],
    b: &'a [f32],
}

impl SimdFn for SiluGate<'_> {
    type Out = ();
    #[inline(always)]
    fn call<V: Vf32>(self) {
        zip_inplace!(V, self.a, self.b, |a, b| a.mul(sigmoid_v(a)).mul(b));
    }
}

/// Gating `a ← silu(a) · b` for equal-length `a`, `b`.
pub fn silu_gate(level: SimdLevel, a: &mut [f32], b: &[f32]) -> Result<(), KernelError> {
    check_len("silu_gate b", a.len(), b.len())?;
    dispatch(level, SiluGate { a, b });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::cpu::available_levels;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        #[test]
        fn snake_matches_reference(c in 1usize..5, t in 1usize..45, seed in any::<u64>()) {
            let mut s = seed;
            let mut rnd = move || { s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407); ((s >> 40) as f32 / (1u64 << 24) as f32) - 0.5 };
            let x: Vec<f32> = (0..c * t).map(|_| 8.0 * rnd()).collect();
            let alpha: Vec<f32> = (0..c).map(|_| 0.2 + 2.0 * (rnd() + 0.5)).collect();
            let mut want = x.clone();
            snake_reference(&mut want, &alpha, t);
            for level in available_levels() {
                let mut got = x.clone();
                snake(level, &mut got, &alpha, t).unwrap();
                for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                    let a = alpha[i / t];
                    prop_assert!((g - w).abs() <= 4e-6 / a + 1e-6 * w.abs() + 1e-6, "{level:?} {i}: {g} vs {w}");
                }
            }
        }

        #[test]
        fn activations_match_reference(xs in prop::collection::vec(-12.0f32..12.0, 1..60), slope in -1.0f32..1.0) {
            let acts = [Activation::LeakyRelu(slope), Activation::Elu(slope.abs() + 0.1), Activation::Silu, Activation::Tanh, Activation::Sigmoid];
            for level in available_levels() {
                for act in acts {
                    let mut got = xs.clone();
                    apply(level, act, &mut got);
                    for (x, g) in xs.iter().zip(&got) {
                        let w = act.reference(*x);
                        prop_assert!((g - w).abs() <= 1e-6 + 2e-6 * w.abs(), "{level:?} {act:?}({x}) = {g} vs {w}");
                    }
                }
                let b: Vec<f32> = xs.iter().map(|v| v * 0.5 - 1.0).collect();
                let mut got = xs.clone();
                silu_gate(level, &mut got, &b).unwrap();
                for ((x, bb), g) in xs.iter().zip(&b).zip(&got) {
                    let w = Activation::Silu.reference(*x) * bb;
                    prop_assert!((g - w).abs() <= 1e-6 + 2e-6 * w.abs(), "{level:?} gate");
                }
            }
        }
    }

    #[test]
    fn shape_errors() {
        let mut x = vec![0.0; 10];
        assert!(snake(SimdLevel::Scalar, &mut x, &[1.0, 2.0], 4).is_err());
        assert!(silu_gate(SimdLevel::Scalar, &mut x, &[1.0]).is_err());
    }

    /// Ad-hoc throughput of the hot activations (run with `--ignored --nocapture`).
    #[test]
    #[ignore]
    fn time_activations() {
        let (c, t) = (256, 800);
        let alpha: Vec<f32> = (0..c).map(|i| 0.5 + i as f32 / c as f32).collect();
        let x0: Vec<f32> = (0..c * t)
            .map(|i| ((i % 97) as f32 - 48.0) * 0.05)
            .collect();
        let mut x = x0.clone();
        for level in available_levels() {
            // Fresh data per pass: iterating would drift into denormals.
            let n = 20;
            let st = std::time::Instant::now();
            for _ in 0..n {
                x.copy_from_slice(&x0);
                snake(level, &mut x, &alpha, t).unwrap();
            }
            let snake_ns = st.elapsed().as_secs_f64() / n as f64 / (c * t) as f64 * 1e9;
            let st = std::time::Instant::now();
            for _ in 0..n {
                x.copy_from_slice(&x0);
                apply(level, Activation::Tanh, &mut x);
            }
            let tanh_ns = st.elapsed().as_secs_f64() / n as f64 / (c * t) as f64 * 1e9;
            println!("{level:?}: snake {snake_ns:.3} ns/elem, tanh {tanh_ns:.3} ns/elem (each incl. a copy)");
        }
    }
}
