//! Normalisations: layer norm and RMS norm over the last dim, instance norm
//! per channel over time, and AdaIN on top of it. Two-pass mean/variance in
//! f32 lanes (biased variance, as PyTorch).

use super::simd::{dispatch, fold_sum, map_inplace, SimdFn, Vf32};
use crate::kernels::cpu::SimdLevel;
use crate::kernels::error::{check_len, KernelError};

/// Where the per-row scale/shift of a normalisation comes from.
#[derive(Clone, Copy)]
enum Affine<'a> {
    /// Per element of the row (layer norm's `[dim]` gamma/beta).
    Columns(Option<&'a [f32]>, Option<&'a [f32]>),
    /// One pair per row (instance norm's per-channel gamma/beta).
    Rows(Option<&'a [f32]>, Option<&'a [f32]>),
    /// AdaIN: `(1 + gamma[row])·x̂ + beta[row]`.
    AdaIn(&'a [f32], &'a [f32]),
}

struct Normalize<'a> {
    x: &'a mut [f32],
    dim: usize,
    eps: f32,
    /// Subtract the mean (layer/instance norm) or not (RMS norm).
    center: bool,
    affine: Affine<'a>,
}

impl SimdFn for Normalize<'_> {
    type Out = ();
    #[inline(always)]
    fn call<V: Vf32>(self) {
        let n = self.dim as f32;
        for (r, row) in self.x.chunks_exact_mut(self.dim).enumerate() {
            let mean = if self.center {
                fold_sum!(V, row, 0.0, |a, x| a.add(x)) / n
            } else {
                0.0
            };
            let vm = V::splat(mean);
            let var = fold_sum!(V, row, mean, |a, x| {
                let d = x.sub(vm);
                d.mul_add(d, a)
            }) / n;
            let rstd = V::splat(var + self.eps).rsqrt();
            let (scale, shift) = match self.affine {
                Affine::Columns(g, b) => {
                    // Per-column affine: normalise, then apply columns in a second loop.
                    map_inplace!(V, row, |x| x.sub(vm).mul(rstd));
                    for (i, v) in row.iter_mut().enumerate() {
                        let g = g.map_or(1.0, |g| g[i]);
                        let b = b.map_or(0.0, |b| b[i]);
                        *v = v.mul_add(g, b);
                    }
                    continue;
                }
                Affine::Rows(g, b) => (g.map_or(1.0, |g| g[r]), b.map_or(0.0, |b| b[r])),
                Affine::AdaIn(g, b) => (1.0 + g[r], b[r]),
            };
            // Centre first: folding the mean into the shift loses precision
            // when the spread is tiny next to the mean.
            let k = rstd.mul(V::splat(scale));
            let c = V::splat(shift);
            map_inplace!(V, row, |x| x.sub(vm).mul_add(k, c));
        }
    }
}

fn check_opt(what: &'static str, v: Option<&[f32]>, n: usize) -> Result<(), KernelError> {
    v.map_or(Ok(()), |v| check_len(what, n, v.len()))
}

fn check_rows(x: &[f32], dim: usize) -> Result<(), KernelError> {
    if dim == 0 || !x.len().is_multiple_of(dim) {
        return Err(KernelError::Param {
            what: "norm dim",
            detail: format!(
                "buffer of {} is not a whole number of rows of {dim}",
                x.len()
            ),
        });
    }
    Ok(())
}

/// Layer norm of each `dim`-row of `x` in place, with optional `[dim]` gamma/beta.
pub fn layer_norm(
    level: SimdLevel,
    x: &mut [f32],
    dim: usize,
    gamma: Option<&[f32]>,
    beta: Option<&[f32]>,
    eps: f32,
) -> Result<(), KernelError> {
    check_rows(x, dim)?;
    check_opt("layer_norm gamma", gamma, dim)?;
    check_opt("layer_norm beta", beta, dim)?;
    let affine = Affine::Columns(gamma, beta);
    dispatch(
        level,
        Normalize {
            x,
            dim,
            eps,
            center: true,
            affine,
        },
    );
    Ok(())
}

/// RMS norm of each `dim`-row of `x` in place: `x / sqrt(mean(x²) + eps) · weight`.
pub fn rms_norm(
    level: SimdLevel,
    x: &mut [f32],
    dim: usize,
    weight: Option<&[f32]>,
    eps: f32,
) -> Result<(), KernelError> {
    check_rows(x, dim)?;
    check_opt("rms_norm weight", weight, dim)?;
    let affine = Affine::Columns(weight, None);
    dispatch(
        level,
        Normalize {
            x,
            dim,
            eps,
            center: false,
            affine,
        },
    );
    Ok(())
}

/// Instance norm of `x: [C, t]` per channel over time, optional per-channel `[C]` gamma/beta.
pub fn instance_norm(
    level: SimdLevel,
    x: &mut [f32],
    t: usize,
    gamma: Option<&[f32]>,
    beta: Option<&[f32]>,
    eps: f32,
) -> Result<(), KernelError> {
    check_rows(x, t)?;
    let c = x.len() / t;
    check_opt("instance_norm gamma", gamma, c)?;
    check_opt("instance_norm beta", beta, c)?;
    let affine = Affine::Rows(gamma, beta);
    dispatch(
        level,
        Normalize {
            x,
            dim: t,
            eps,
            center: true,
            affine,
        },
    );
    Ok(())
}

/// AdaIN on `x: [C, t]`: instance norm, then `(1 + gamma[c])·x̂ + beta[c]`.
pub fn adain(
    level: SimdLevel,
    x: &mut [f32],
    t: usize,
    gamma: &[f32],
    beta: &[f32],
    eps: f32,
) -> Result<(), KernelError> {
    check_rows(x, t)?;
    let c = x.len() / t;
    check_len("adain gamma", c, gamma.len())?;
    check_len("adain beta", c, beta.len())?;
    let affine = Affine::AdaIn(gamma, beta);
    dispatch(
        level,
        Normalize {
            x,
            dim: t,
            eps,
            center: true,
            affine,
        },
    );
    Ok(())
}

/// Readable f64 reference: normalise each `dim`-row, then `y = x̂·scale(r, i) + shift(r, i)`.
pub fn normalize_reference(
    x: &mut [f32],
    dim: usize,
    eps: f32,
    center: bool,
    scale_shift: impl Fn(usize, usize) -> (f32, f32),
) {
    for (r, row) in x.chunks_exact_mut(dim).enumerate() {
        let n = dim as f64;
        let mean = if center {
            row.iter().map(|&v| v as f64).sum::<f64>() / n
        } else {
            0.0
        };
        let var = row.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n;
        let rstd = 1.0 / (var + eps as f64).sqrt();
        for (i, v) in row.iter_mut().enumerate() {
            let (g, b) = scale_shift(r, i);
            *v = ((*v as f64 - mean) * rstd * g as f64 + b as f64) as f32;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::cpu::available_levels;
    use proptest::prelude::*;

    /// Tolerance grows with the row's conditioning `max|x| / std`: f32
    /// rounding of `x − mean` is amplified by `1/std` when the spread is tiny.
    fn close(
        what: &str,
        x: &[f32],
        dim: usize,
        center: bool,
        got: &[f32],
        want: &[f32],
    ) -> Result<(), TestCaseError> {
        for (r, row) in x.chunks_exact(dim).enumerate() {
            let n = dim as f64;
            let mean = if center {
                row.iter().map(|&v| v as f64).sum::<f64>() / n
            } else {
                0.0
            };
            let var = row.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n;
            let amax = row.iter().fold(0.0f64, |m, &v| m.max((v as f64).abs()));
            let cond = (amax / (var + 1e-5).sqrt()) as f32;
            for i in r * dim..(r + 1) * dim {
                let (g, w) = (got[i], want[i]);
                prop_assert!(
                    (g - w).abs() <= 2e-5 + 2e-5 * w.abs() + 1e-6 * cond,
                    "{what} {i}: {g} vs {w}"
                );
            }
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        #[test]
        fn norms_match_reference(rows in 1usize..5, dim in 1usize..70, offset in -3.0f32..3.0, seed in any::<u64>()) {
            let mut s = seed;
            let mut rnd = move || { s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407); ((s >> 40) as f32 / (1u64 << 24) as f32) - 0.5 };
            let x: Vec<f32> = (0..rows * dim).map(|_| offset + 4.0 * rnd()).collect();
            let g: Vec<f32> = (0..dim.max(rows)).map(|_| rnd()).collect();
            let b: Vec<f32> = (0..dim.max(rows)).map(|_| rnd()).collect();
            let eps = 1e-5;
            for level in available_levels() {
                let mut got = x.clone();
                layer_norm(level, &mut got, dim, Some(&g[..dim]), Some(&b[..dim]), eps).unwrap();
                let mut want = x.clone();
                normalize_reference(&mut want, dim, eps, true, |_, i| (g[i], b[i]));
                close("layer_norm affine", &x, dim, true, &got, &want)?;

                let mut got = x.clone();
                layer_norm(level, &mut got, dim, None, None, eps).unwrap();
                let mut want = x.clone();
                normalize_reference(&mut want, dim, eps, true, |_, _| (1.0, 0.0));
                close("layer_norm", &x, dim, true, &got, &want)?;

                let mut got = x.clone();
                rms_norm(level, &mut got, dim, Some(&g[..dim]), eps).unwrap();
                let mut want = x.clone();
                normalize_reference(&mut want, dim, eps, false, |_, i| (g[i], 0.0));
                close("rms_norm", &x, dim, false, &got, &want)?;

                let mut got = x.clone();
                instance_norm(level, &mut got, dim, Some(&g[..rows]), Some(&b[..rows]), eps).unwrap();
                let mut want = x.clone();
                normalize_reference(&mut want, dim, eps, true, |r, _| (g[r], b[r]));
                close("instance_norm", &x, dim, true, &got, &want)?;

                let mut got = x.clone();
                adain(level, &mut got, dim, &g[..rows], &b[..rows], eps).unwrap();
                let mut want = x.clone();
                normalize_reference(&mut want, dim, eps, true, |r, _| (1.0 + g[r], b[r]));
                close("adain", &x, dim, true, &got, &want)?;
            }
        }
    }

    #[test]
    fn shape_errors() {
        let mut x = vec![0.0; 10];
        assert!(layer_norm(SimdLevel::Scalar, &mut x, 3, None, None, 1e-5).is_err());
        assert!(layer_norm(SimdLevel::Scalar, &mut x, 5, Some(&[1.0]), None, 1e-5).is_err());
        assert!(adain(SimdLevel::Scalar, &mut x, 5, &[1.0], &[0.0, 0.0], 1e-5).is_err());
        assert!(instance_norm(SimdLevel::Scalar, &mut x, 0, None, None, 1e-5).is_err());
    }
}
