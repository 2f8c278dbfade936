//! Mimi's split residual vector quantizer (moshi `SplitResidualVectorQuantizer`):
//! `rvq_first` (the semantic codebook) and `rvq_rest` (acoustic) each project
//! the *same* latent with their own 1×1 `input_proj`, then quantize
//! residually; decoding sums each part's codebook vectors, applies its
//! `output_proj`, and adds the two parts.
//!
//! Codebook vectors are `embedding_sum / max(cluster_usage, 1e-5)` in f32.
//! The nearest code follows `torch.cdist`'s matmul form
//! `sqrt(max(‖x‖² − 2x·e + ‖e‖², 1e-30))` with the first index winning ties,
//! as `argmin` does.
//!
//! The search reads a q8_0 copy of each codebook (i16 activations,
//! [`WeightFormat::Q8_0Act16`]: a quarter of the f32 bytes, which stay for
//! the exact step; bf16 where the width is not whole 32-value blocks) for
//! approximate distances with a proven error bound per entry, then
//! computes the exact f32 distance only for the entries the bound cannot
//! rule out (`nearest`): the same code as an exhaustive f32 search, for a
//! quarter of the codebook traffic per frame.

use super::config::{MimiConfig, QuantizerConfig};
use super::error::MimiError;
use super::weights::MimiWeights;
use crate::kernels::cpu::simd_level;
use crate::kernels::f32_matvec;
use crate::kernels::matmul::{
    act16_rounding_bound, bf16, matmul_ws, quantize_q8_0, reference, MatmulWorkspace, WeightFormat,
    Weights, Q8_0_BLOCK,
};
use voxlane_runtime::Fork;

/// Epsilon of moshi's `EuclideanCodebook` usage clamp.
const USAGE_EPS: f32 = 1e-5;

/// The widest codebook the bounds cover; wider ones check every entry exactly.
const BOUND_MAX_DIM: usize = 1 << 13;

/// A codebook's approximate copy and what bounds its dot products.
#[derive(Debug, Clone)]
struct Approx {
    /// The entries in q8_0 (or bf16).
    weights: Weights,
    /// Per entry `δ_j ≥ ‖ẽ_j − e_j‖₂`, the copy's rounding.
    delta: Vec<f32>,
}

/// The format of the search's codebook copy for entries of `dim` values:
/// q8_0 (i16 activations) when `dim` is whole 32-value blocks, else bf16.
pub fn search_format(dim: usize) -> WeightFormat {
    if dim.is_multiple_of(Q8_0_BLOCK) {
        WeightFormat::Q8_0Act16
    } else {
        WeightFormat::Bf16
    }
}

impl Approx {
    /// The copy of `cb: [bins, dim]` in [`search_format`].
    fn new(cb: &[f32], bins: usize, dim: usize) -> Result<Self, MimiError> {
        let (weights, values) = if search_format(dim) == WeightFormat::Q8_0Act16 {
            let bytes = quantize_q8_0(cb, dim)?;
            let values = reference::dequantize_q8_0(&bytes)?;
            (Weights::q8_0_act16_from_ggml(&bytes, bins, dim)?, values)
        } else {
            let rounded: Vec<bf16> = cb.iter().map(|&v| bf16::from_f32(v)).collect();
            let values = rounded.iter().map(|v| v.to_f32()).collect();
            (Weights::bf16(&rounded, bins, dim)?, values)
        };
        let delta = cb
            .chunks_exact(dim)
            .zip(values.chunks_exact(dim))
            .map(|(e, a)| {
                let d: f64 = e
                    .iter()
                    .zip(a)
                    .map(|(x, y)| (*x as f64 - *y as f64).powi(2))
                    .sum();
                // Rounded up: the bound must hold.
                (d.sqrt() * (1.0 + 1e-6)) as f32
            })
            .collect();
        Ok(Self { weights, delta })
    }

    /// `‖x̂ − x‖₂` bound of the activations this copy's matmul computes with.
    fn activation_error(&self, x: &[f32]) -> f32 {
        match self.weights.format() {
            WeightFormat::Q8_0Act16 => act16_rounding_bound(x),
            _ => 0.0,
        }
    }
}

/// One residual quantizer (`rvq_first` or `rvq_rest`), with its used codebooks.
#[derive(Debug, Clone)]
struct Rvq {
    /// `[dim, input_dimension]`.
    input_proj: Vec<f32>,
    /// `[output_dimension, dim]`.
    output_proj: Vec<f32>,
    /// Per codebook `[bins, dim]`.
    codebooks: Vec<Vec<f32>>,
    /// Per codebook `‖e‖²` for each entry, `[bins]`.
    norms: Vec<Vec<f32>>,
    /// Per codebook, the approximate pass's copy.
    approx: Vec<Approx>,
}

/// A bound split RVQ using `num_codebooks` codebooks.
#[derive(Debug, Clone)]
pub struct Quantizer {
    cfg: QuantizerConfig,
    first: Rvq,
    rest: Rvq,
}

/// Scratch of one frame's quantization (sized at construction).
#[derive(Debug, Clone)]
pub struct QuantizerScratch {
    residual: Vec<f32>,
    /// `[bins]` dot products with one codebook.
    dots: Vec<f32>,
    /// The approximate pass's matmul scratch.
    mm: MatmulWorkspace,
    sum: Vec<f32>,
    col: Vec<f32>,
    out: Vec<f32>,
}

impl QuantizerScratch {
    /// Floats held.
    pub fn floats(&self) -> usize {
        self.residual.len() + self.dots.len() + self.sum.len() + self.col.len() + self.out.len()
    }
}

/// `y[n] = Σ_k w[n, k]·x[k]`, f32 in input order.
fn project(w: &[f32], x: &[f32], y: &mut [f32]) {
    let k = x.len();
    for (o, row) in y.iter_mut().zip(w.chunks_exact(k)) {
        *o = row.iter().zip(x).map(|(a, b)| a * b).sum();
    }
}

/// Output rows per lane chunk of [`par_project`].
const PROJECT_ROWS: usize = 64;

/// [`project`] with its output rows split over the lanes (each row's sum as
/// in [`project`], so the same bits).
fn par_project(pool: &impl Fork, w: &[f32], x: &[f32], y: &mut [f32]) -> Result<(), MimiError> {
    let k = x.len();
    pool.for_each_chunk_mut(y, PROJECT_ROWS, |i, ys| {
        let r0 = i * PROJECT_ROWS;
        project(&w[r0 * k..(r0 + ys.len()) * k], x, ys);
    })?;
    Ok(())
}

impl Rvq {
    fn new(
        q: &QuantizerConfig,
        part: &str,
        used: usize,
        w: &mut MimiWeights,
    ) -> Result<Self, MimiError> {
        let p = format!("quantizer.{part}");
        let mut codebooks = Vec::with_capacity(used);
        let mut norms = Vec::with_capacity(used);
        let mut approx = Vec::with_capacity(used);
        for i in 0..used {
            let c = format!("{p}.vq.layers.{i}._codebook");
            let mut e = w.take(&format!("{c}.embedding_sum"))?;
            let usage = w.take(&format!("{c}.cluster_usage"))?;
            for (row, u) in e.chunks_exact_mut(q.dimension).zip(&usage) {
                let u = u.max(USAGE_EPS);
                row.iter_mut().for_each(|v| *v /= u);
            }
            norms.push(
                e.chunks_exact(q.dimension)
                    .map(|r| r.iter().map(|v| v * v).sum())
                    .collect(),
            );
            approx.push(Approx::new(&e, q.bins, q.dimension)?);
            codebooks.push(e);
        }
        Ok(Self {
            input_proj: w.take(&format!("{p}.input_proj.weight"))?,
            output_proj: w.take(&format!("{p}.output_proj.weight"))?,
            codebooks,
            norms,
            approx,
        })
    }

    /// Codes of one latent column `x` into `codes`.
    #[allow(clippy::too_many_arguments)]
    fn encode(
        &self,
        pool: &impl Fork,
        dim: usize,
        x: &[f32],
        codes: &mut [u32],
        residual: &mut [f32],
        dots: &mut [f32],
        mm: &mut MatmulWorkspace,
    ) -> Result<(), MimiError> {
        par_project(pool, &self.input_proj, x, residual)?;
        let parts = self.codebooks.iter().zip(&self.norms).zip(&self.approx);
        for (((cb, norms), approx), code) in parts.zip(codes.iter_mut()) {
            let r: &[f32] = residual;
            matmul_ws(r, 1, dim, &approx.weights, None, dots, mm, pool)?;
            let best = nearest(r, cb, norms, dots, approx);
            *code = best as u32;
            let e = &cb[best * dim..(best + 1) * dim];
            residual.iter_mut().zip(e).for_each(|(r, v)| *r -= v);
        }
        Ok(())
    }

    /// Sum of the codebook vectors of `codes`, projected: `out[output_dimension]`.
    fn decode(
        &self,
        pool: &impl Fork,
        dim: usize,
        codes: &[u32],
        sum: &mut [f32],
        out: &mut [f32],
    ) -> Result<(), MimiError> {
        sum.fill(0.0);
        for (cb, &c) in self.codebooks.iter().zip(codes) {
            let e = &cb[c as usize * dim..(c as usize + 1) * dim];
            sum.iter_mut().zip(e).for_each(|(s, v)| *s += v);
        }
        par_project(pool, &self.output_proj, sum, out)
    }
}

/// `torch.cdist` distance from its parts: `sqrt(max(‖x‖² − 2x·e + ‖e‖², 1e-30))`.
fn cdist(xn: f32, dot: f32, en: f32) -> f32 {
    (xn - 2.0 * dot + en).max(1e-30).sqrt()
}

/// The entry of `cb: [bins, dim]` nearest to `x` as the exhaustive f32
/// search finds it (first index on ties), given `approx_dots[j] ≈ x·e_j`
/// from the approximate copy. `|approx_dots[j] − x·e_j| ≤ B_j` with
/// `B_j = (‖x‖ + ε)·δ_j + ε·‖e_j‖ + σ·(‖x‖ + ε)(‖e_j‖ + δ_j)` — the copy's
/// rounding `δ_j`, the activations' `ε` ([`Approx::activation_error`]) and
/// both dots' f32 summation error `σ = 2·dim·2⁻²⁴` — so an entry whose lower
/// bound on the squared distance exceeds the smallest upper bound cannot win
/// (nor tie, with the margin for `sqrt` rounding and the 1e-30 clamp); the
/// rest get their exact f32 dot, the contract order of [`f32_matvec::rows`]
/// for any row count.
fn nearest(x: &[f32], cb: &[f32], norms: &[f32], approx_dots: &[f32], approx: &Approx) -> usize {
    let level = simd_level();
    let dim = x.len();
    let xn: f32 = x.iter().map(|v| v * v).sum();
    let (xl, eps) = (xn.sqrt(), approx.activation_error(x));
    let sigma = 2.0 * dim as f32 / 16_777_216.0;
    let bound = |en: f32, delta: f32| {
        let el = en.sqrt();
        let b = (xl + eps) * delta + eps * el + sigma * (xl + eps) * (el + delta);
        2.0 * b * (1.0 + 1e-5)
    };
    let parts = || approx_dots.iter().zip(norms).zip(&approx.delta);
    let upper = parts()
        .map(|((&d, &en), &de)| (xn - 2.0 * d + en) + bound(en, de))
        .fold(f32::INFINITY, f32::min);
    let limit = if dim <= BOUND_MAX_DIM {
        upper + upper.abs() * (1.0 / 1_048_576.0) + 1e-30
    } else {
        f32::INFINITY
    };
    let mut best = (f32::INFINITY, 0usize);
    for (j, ((&d, &en), &de)) in parts().enumerate() {
        // A NaN bound keeps the entry (compared exactly below).
        if (xn - 2.0 * d + en) - bound(en, de) > limit {
            continue;
        }
        let mut dot = [0.0f32];
        f32_matvec::rows(level, x, &cb[j * dim..(j + 1) * dim], dim, None, &mut dot);
        let dist = cdist(xn, dot[0], en);
        if dist < best.0 {
            best = (dist, j);
        }
    }
    best.1
}

impl QuantizerScratch {
    /// Whether this scratch was sized for `q`.
    fn fits(&self, q: &QuantizerConfig) -> bool {
        self.residual.len() == q.dimension
            && self.sum.len() == q.dimension
            && self.dots.len() == q.bins
            && self.col.len() >= q.input_dimension.max(q.output_dimension)
            && self.out.len() == q.output_dimension
    }
}

impl Quantizer {
    /// Bind the used codebooks and projections of `cfg` from `w`.
    pub fn new(cfg: &MimiConfig, w: &mut MimiWeights) -> Result<Self, MimiError> {
        let q = &cfg.quantizer;
        Ok(Self {
            first: Rvq::new(q, "rvq_first", q.n_q_semantic, w)?,
            rest: Rvq::new(q, "rvq_rest", cfg.num_codebooks - q.n_q_semantic, w)?,
            cfg: q.clone(),
        })
    }

    /// Codebooks used per frame.
    pub fn num_codebooks(&self) -> usize {
        self.first.codebooks.len() + self.rest.codebooks.len()
    }

    /// Entries per codebook.
    pub fn bins(&self) -> usize {
        self.cfg.bins
    }

    /// Scratch for [`Quantizer::encode`] / [`Quantizer::decode`].
    pub fn scratch(&self) -> QuantizerScratch {
        let q = &self.cfg;
        QuantizerScratch {
            residual: vec![0.0; q.dimension],
            dots: vec![0.0; q.bins],
            mm: MatmulWorkspace::new(1, q.dimension),
            sum: vec![0.0; q.dimension],
            col: vec![0.0; q.input_dimension.max(q.output_dimension)],
            out: vec![0.0; q.output_dimension],
        }
    }

    /// Quantize `latent: [input_dimension, t]` into `codes: [K, t]` (codebook-major).
    pub fn encode(
        &self,
        pool: &impl Fork,
        latent: &[f32],
        t: usize,
        codes: &mut [u32],
        sc: &mut QuantizerScratch,
    ) -> Result<(), MimiError> {
        let (q, k) = (&self.cfg, self.num_codebooks());
        if latent.len() != q.input_dimension * t || codes.len() != k * t || !sc.fits(q) {
            return Err(MimiError::Input(format!(
                "quantizer encode of {t} frames: {} latent values, {} code slots",
                latent.len(),
                codes.len()
            )));
        }
        let nf = self.first.codebooks.len();
        let mut frame = [0u32; 64];
        for ti in 0..t {
            let col = &mut sc.col[..q.input_dimension];
            for (ch, c) in col.iter_mut().enumerate() {
                *c = latent[ch * t + ti];
            }
            let frame = frame_codes(&mut frame, k)?;
            self.first.encode(
                pool,
                q.dimension,
                col,
                &mut frame[..nf],
                &mut sc.residual,
                &mut sc.dots,
                &mut sc.mm,
            )?;
            self.rest.encode(
                pool,
                q.dimension,
                col,
                &mut frame[nf..],
                &mut sc.residual,
                &mut sc.dots,
                &mut sc.mm,
            )?;
            for (kk, &c) in frame.iter().enumerate() {
                codes[kk * t + ti] = c;
            }
        }
        Ok(())
    }

    /// Latent `out: [output_dimension, t]` of `codes: [K, t]` (codebook-major).
    pub fn decode(
        &self,
        pool: &impl Fork,
        codes: &[u32],
        t: usize,
        out: &mut [f32],
        sc: &mut QuantizerScratch,
    ) -> Result<(), MimiError> {
        let (q, k) = (&self.cfg, self.num_codebooks());
        if codes.len() != k * t || out.len() != q.output_dimension * t || !sc.fits(q) {
            return Err(MimiError::Input(format!(
                "quantizer decode of {t} frames: {} codes for {k} codebooks, {} output values",
                codes.len(),
                out.len()
            )));
        }
        if let Some((i, c)) = codes
            .iter()
            .enumerate()
            .find(|(_, &c)| c as usize >= q.bins)
        {
            return Err(MimiError::Input(format!(
                "code {c} (codebook {}, frame {}) is outside 0..{}",
                i / t,
                i % t,
                q.bins
            )));
        }
        let nf = self.first.codebooks.len();
        let mut frame = [0u32; 64];
        let od = q.output_dimension;
        for ti in 0..t {
            let frame = frame_codes(&mut frame, k)?;
            for (kk, f) in frame.iter_mut().enumerate() {
                *f = codes[kk * t + ti];
            }
            let col = &mut sc.col[..od];
            self.first
                .decode(pool, q.dimension, &frame[..nf], &mut sc.sum, col)?;
            self.rest
                .decode(pool, q.dimension, &frame[nf..], &mut sc.sum, &mut sc.out)?;
            for (ch, (a, b)) in col.iter().zip(&sc.out).enumerate() {
                out[ch * t + ti] = a + b;
            }
        }
        Ok(())
    }
}

/// The first `k` slots of a per-frame code buffer (Mimi uses at most 32 codebooks).
fn frame_codes(buf: &mut [u32; 64], k: usize) -> Result<&mut [u32], MimiError> {
    buf.get_mut(..k)
        .ok_or_else(|| MimiError::Input(format!("{k} codebooks exceed the supported 64")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// `B_j` of [`nearest`] (its squared-distance bound is twice this).
    fn bound_of(x: &[f32], en: f32, delta: f32, approx: &Approx) -> f32 {
        let xl = x.iter().map(|v| v * v).sum::<f32>().sqrt();
        let eps = approx.activation_error(x);
        let sigma = 2.0 * x.len() as f32 / 16_777_216.0;
        let el = en.sqrt();
        (xl + eps) * delta + eps * el + sigma * (xl + eps) * (el + delta)
    }

    /// The exhaustive f32 search the bound-pruned one must reproduce.
    fn exhaustive(x: &[f32], cb: &[f32], norms: &[f32]) -> usize {
        let dim = x.len();
        let xn: f32 = x.iter().map(|v| v * v).sum();
        let mut dots = vec![0.0f32; norms.len()];
        f32_matvec::rows(simd_level(), x, cb, dim, None, &mut dots);
        let mut best = (f32::INFINITY, 0usize);
        for (j, (&d, &en)) in dots.iter().zip(norms).enumerate() {
            let dist = cdist(xn, d, en);
            if dist < best.0 {
                best = (dist, j);
            }
        }
        best.1
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Random codebooks with planted near-duplicates and exact duplicates
        /// (ties go to the first index), queries near an entry or far from all.
        #[test]
        fn pruned_search_finds_the_exhaustive_winner(
            bins in 1usize..300,
            odd_dim in 1usize..70,
            blocks in 0usize..9,
            seed in 0u64..10_000,
            near in proptest::bool::ANY,
        ) {
            // Whole 32-value blocks take the q8_0 copy, other widths bf16.
            let dim = if blocks > 0 { blocks * Q8_0_BLOCK } else { odd_dim };
            let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(7);
            let mut next = || {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
            };
            let mut cb: Vec<f32> = (0..bins * dim).map(|_| next()).collect();
            // Entry 2j+1 duplicates or nearly duplicates entry 2j.
            for j in (0..bins.saturating_sub(1)).step_by(2) {
                let jitter = if j % 4 == 0 { 0.0 } else { 1e-6 };
                for c in 0..dim {
                    cb[(j + 1) * dim + c] = cb[j * dim + c] + jitter;
                }
            }
            let norms: Vec<f32> = cb.chunks_exact(dim).map(|r| r.iter().map(|v| v * v).sum()).collect();
            let target = (seed as usize) % bins;
            let x: Vec<f32> = (0..dim)
                .map(|c| if near { cb[target * dim + c] + next() * 1e-4 } else { next() * 3.0 })
                .collect();
            let approx = Approx::new(&cb, bins, dim).expect("approximate copy");
            let mut dots = vec![0.0f32; bins];
            matmul_ws(&x, 1, dim, &approx.weights, None, &mut dots, &mut MatmulWorkspace::default(), &voxlane_runtime::LanePool::new(1).expect("pool"))
                .expect("approximate dots");
            // The bound holds for every entry (against f64 dots).
            for j in 0..bins {
                let e = &cb[j * dim..(j + 1) * dim];
                let exact: f64 = x.iter().zip(e).map(|(a, b)| *a as f64 * *b as f64).sum();
                let b = bound_of(&x, norms[j], approx.delta[j], &approx);
                prop_assert!((dots[j] as f64 - exact).abs() <= b as f64, "entry {}: {} vs {} (bound {})", j, dots[j], exact, b);
            }
            prop_assert_eq!(nearest(&x, &cb, &norms, &dots, &approx), exhaustive(&x, &cb, &norms));
        }
    }
}
