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

use super::config::{MimiConfig, QuantizerConfig};
use super::error::MimiError;
use super::weights::MimiWeights;
use crate::kernels::cpu::simd_level;
use crate::kernels::f32_matvec;
use voxlane_runtime::Fork;

/// Epsilon of moshi's `EuclideanCodebook` usage clamp.
const USAGE_EPS: f32 = 1e-5;

/// Codebook entries per lane chunk of the distance pass.
const DOT_CHUNK: usize = 256;

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
            codebooks.push(e);
        }
        Ok(Self {
            input_proj: w.take(&format!("{p}.input_proj.weight"))?,
            output_proj: w.take(&format!("{p}.output_proj.weight"))?,
            codebooks,
            norms,
        })
    }

    /// Codes of one latent column `x` into `codes`.
    fn encode(
        &self,
        pool: &impl Fork,
        dim: usize,
        x: &[f32],
        codes: &mut [u32],
        residual: &mut [f32],
        dots: &mut [f32],
    ) -> Result<(), MimiError> {
        let level = simd_level();
        project(&self.input_proj, x, residual);
        for ((cb, norms), code) in self.codebooks.iter().zip(&self.norms).zip(codes.iter_mut()) {
            let xn: f32 = residual.iter().map(|v| v * v).sum();
            // Fixed chunks of entries: the same bits for every budget.
            let r: &[f32] = residual;
            pool.for_each_chunk_mut(dots, DOT_CHUNK, |ci, piece| {
                let e0 = ci * DOT_CHUNK;
                f32_matvec::rows(
                    level,
                    r,
                    &cb[e0 * dim..(e0 + piece.len()) * dim],
                    dim,
                    None,
                    piece,
                );
            })?;
            let mut best = (f32::INFINITY, 0usize);
            for (j, (dot, en)) in dots.iter().zip(norms).enumerate() {
                let dist = (xn - 2.0 * dot + en).max(1e-30).sqrt();
                if dist < best.0 {
                    best = (dist, j);
                }
            }
            *code = best.1 as u32;
            let e = &cb[best.1 * dim..(best.1 + 1) * dim];
            residual.iter_mut().zip(e).for_each(|(r, v)| *r -= v);
        }
        Ok(())
    }

    /// Sum of the codebook vectors of `codes`, projected: `out[output_dimension]`.
    fn decode(&self, dim: usize, codes: &[u32], sum: &mut [f32], out: &mut [f32]) {
        sum.fill(0.0);
        for (cb, &c) in self.codebooks.iter().zip(codes) {
            let e = &cb[c as usize * dim..(c as usize + 1) * dim];
            sum.iter_mut().zip(e).for_each(|(s, v)| *s += v);
        }
        project(&self.output_proj, sum, out);
    }
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
            )?;
            self.rest.encode(
                pool,
                q.dimension,
                col,
                &mut frame[nf..],
                &mut sc.residual,
                &mut sc.dots,
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
                .decode(q.dimension, &frame[..nf], &mut sc.sum, col);
            self.rest
                .decode(q.dimension, &frame[nf..], &mut sc.sum, &mut sc.out);
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
