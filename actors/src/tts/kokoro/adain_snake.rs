//! The generator's AdaIN → Snake pair as one pass per channel row.
//!
//! In the export, every `AdaINResBlock1` conv input is
//! `snake(adain(x))`: `ReduceMean → Sub → Mul → ReduceMean → +ε → Sqrt →
//! Div → ·(1 + γ) → +β`, then `x + (1/α)·sin(α·x)²`. Done as separate
//! kernels that is six passes over a `[128, 60·T]` tensor; here each row is
//! normalised and activated while it sits in L1/L2, in the graph's operation
//! order (division by the standard deviation, no fused multiply-adds in the
//! affine or the Snake; the sine is onnxruntime's, [`super::ort_sin`]).

use super::ort_sin::sin_v;
use crate::kernels::cpu::simd_level;
use crate::kernels::elementwise::simd::{dispatch, fold_sum, map_inplace, SimdFn, Vf32};

/// Per-row parameters of one AdaIN + Snake.
#[derive(Clone, Copy)]
pub struct RowParams<'a> {
    /// AdaIN γ per row (the graph adds 1).
    pub gamma: &'a [f32],
    /// AdaIN β per row.
    pub beta: &'a [f32],
    /// Snake α per row.
    pub alpha: &'a [f32],
    /// Snake `1/α` per row (the export's folded `Reciprocal`).
    pub inv_alpha: &'a [f32],
    /// Instance-norm ε.
    pub eps: f32,
}

impl<'a> RowParams<'a> {
    /// The parameters of rows `r0..r0 + n`.
    pub fn rows(&self, r0: usize, n: usize) -> RowParams<'a> {
        RowParams {
            gamma: &self.gamma[r0..r0 + n],
            beta: &self.beta[r0..r0 + n],
            alpha: &self.alpha[r0..r0 + n],
            inv_alpha: &self.inv_alpha[r0..r0 + n],
            eps: self.eps,
        }
    }
}

struct Rows<'a> {
    x: &'a mut [f32],
    t: usize,
    p: RowParams<'a>,
}

impl SimdFn for Rows<'_> {
    type Out = ();
    #[inline(always)]
    fn call<V: Vf32>(self) {
        let n = self.t as f32;
        for (r, row) in self.x.chunks_exact_mut(self.t).enumerate() {
            let mean = fold_sum!(V, row, 0.0, |a, v| a.add(v)) / n;
            let vm = V::splat(mean);
            let var = fold_sum!(V, row, mean, |a, v| {
                let d = v.sub(vm);
                d.mul_add(d, a)
            }) / n;
            let sd = V::splat((var + self.p.eps).sqrt());
            let g = V::splat(1.0 + self.p.gamma[r]);
            let b = V::splat(self.p.beta[r]);
            let al = V::splat(self.p.alpha[r]);
            let inv = V::splat(self.p.inv_alpha[r]);
            map_inplace!(V, row, |v| {
                let y = g.mul(v.sub(vm).div(sd)).add(b);
                let s = sin_v(al.mul(y));
                y.add(inv.mul(s.mul(s)))
            });
        }
    }
}

/// `x: [rows, t]` in place: per row, instance norm → `(1 + γ)·x̂ + β` → Snake.
/// `p`'s slices hold one value per row of `x`.
pub fn adain_snake_rows(x: &mut [f32], t: usize, p: RowParams<'_>) {
    if t == 0 {
        return;
    }
    dispatch(simd_level(), Rows { x, t, p });
}
