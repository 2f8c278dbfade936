//! Mimi's projected streaming transformer (moshi `ProjectedTransformer` over
//! `StreamingTransformer`): conv-layout `[C, T]` in and out, optional linear
//! projections to/from `d_model`, then pre-norm layers
//! `x += ls₁·attn(LN₁(x))`, `x += ls₂·W₂·gelu(W₁·LN₂(x))` with causal RoPE
//! attention over a `context`-step window (the stacked `in_proj_weight`
//! yields q, k, v as consecutive `d_model` blocks).
//!
//! A batch call is one step of all frames from an empty cache with moshi's
//! non-streaming mask; streaming states follow moshi's ring-buffer window
//! (see [`Window`]).

use super::config::TransformerConfig;
use super::contract::BindContract;
use super::error::MimiError;
use super::weights::MimiWeights;
use crate::kernels::cpu::simd_level;
use crate::kernels::elementwise::fast_math::gelu_inplace;
use crate::kernels::elementwise::norms::layer_norm;
use crate::kernels::matmul::{matmul_ws, MatmulWorkspace, WeightFormat, Weights};
use crate::speech::attention::{RingAttention, Window};
use voxlane_runtime::Fork;

/// LayerNorm epsilon of moshi's `create_norm_fn("layer_norm")`.
const LN_EPS: f32 = 1e-5;

/// One bound layer.
#[derive(Debug, Clone)]
struct Layer {
    in_proj: Weights,
    out_proj: Weights,
    linear1: Weights,
    linear2: Weights,
    norm1: (Vec<f32>, Vec<f32>),
    norm2: (Vec<f32>, Vec<f32>),
    scale1: Option<Vec<f32>>,
    scale2: Option<Vec<f32>>,
}

/// A bound projected transformer.
#[derive(Debug, Clone)]
pub struct Transformer {
    id: u64,
    cfg: TransformerConfig,
    input_proj: Option<Weights>,
    output_proj: Option<Weights>,
    layers: Vec<Layer>,
}

/// KV caches and every buffer of one transformer's steps.
#[derive(Debug)]
pub struct TransformerState {
    owner: u64,
    caches: Vec<RingAttention>,
    max_t: usize,
    /// `[T, d]` residual stream.
    x: Vec<f32>,
    /// `[T, d]` normed / projected stream.
    h: Vec<f32>,
    /// `[T, 3d]` stacked projections.
    qkv: Vec<f32>,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    att: Vec<f32>,
    /// `[T, dim_feedforward]`.
    ff: Vec<f32>,
    /// `[T, max(in, out)]` time-major input / output.
    io: Vec<f32>,
    ws: MatmulWorkspace,
}

impl TransformerState {
    /// Floats held (KV caches and buffers; the matmul workspace is int8-only).
    pub fn floats(&self) -> usize {
        self.caches.iter().map(RingAttention::floats).sum::<usize>()
            + self.x.len()
            + self.h.len()
            + self.qkv.len()
            + self.q.len()
            + self.k.len()
            + self.v.len()
            + self.att.len()
            + self.ff.len()
            + self.io.len()
    }

    /// Back to position 0 (buffers kept).
    pub fn reset(&mut self) {
        self.caches.iter_mut().for_each(RingAttention::reset);
    }
}

/// Pack one linear in the format its contract route names.
fn linear(
    w: &mut MimiWeights,
    contract: &BindContract,
    name: &str,
    n: usize,
    k: usize,
) -> Result<Weights, MimiError> {
    let v = w.take(name)?;
    // Half routes only exist for tensors stored in half, so these conversions are exact.
    Ok(match contract.format_of(name) {
        WeightFormat::F16 => {
            let h: Vec<half::f16> = v.iter().map(|&x| half::f16::from_f32(x)).collect();
            Weights::f16(&h, n, k)?
        }
        WeightFormat::Bf16 => {
            let h: Vec<half::bf16> = v.iter().map(|&x| half::bf16::from_f32(x)).collect();
            Weights::bf16(&h, n, k)?
        }
        WeightFormat::Q8_0 => Weights::q8_0_from_f32(&v, n, k)?,
        WeightFormat::Q8_0Act16 => Weights::q8_0_act16_from_f32(&v, n, k)?,
        WeightFormat::Q4_0 => Weights::q4_0_from_f32(&v, n, k)?,
        WeightFormat::Q4_0Act16 => Weights::q4_0_act16_from_f32(&v, n, k)?,
        WeightFormat::F32 | WeightFormat::Int8 => Weights::f32(v, n, k)?,
    })
}

/// Values per lane chunk of the feed-forward GELU.
const GELU_CHUNK: usize = 1024;

impl Transformer {
    /// Bind `{prefix}.…` tensors from `w`.
    pub fn new(
        cfg: &TransformerConfig,
        prefix: &str,
        w: &mut MimiWeights,
        contract: &BindContract,
    ) -> Result<Self, MimiError> {
        let d = cfg.d_model;
        let input_proj = if cfg.input_dimension != d {
            Some(linear(
                w,
                contract,
                &format!("{prefix}.input_proj.weight"),
                d,
                cfg.input_dimension,
            )?)
        } else {
            None
        };
        let output_proj = if cfg.output_dimension != d {
            Some(linear(
                w,
                contract,
                &format!("{prefix}.output_projs.0.weight"),
                cfg.output_dimension,
                d,
            )?)
        } else {
            None
        };
        let mut layers = Vec::with_capacity(cfg.num_layers);
        for i in 0..cfg.num_layers {
            let l = format!("{prefix}.transformer.layers.{i}");
            let ff = cfg.dim_feedforward;
            let scale = |w: &mut MimiWeights, n: &str| -> Result<Option<Vec<f32>>, MimiError> {
                match cfg.layer_scale {
                    Some(_) => Ok(Some(w.take(&format!("{l}.{n}.scale"))?)),
                    None => Ok(None),
                }
            };
            layers.push(Layer {
                in_proj: linear(
                    w,
                    contract,
                    &format!("{l}.self_attn.in_proj_weight"),
                    3 * d,
                    d,
                )?,
                out_proj: linear(w, contract, &format!("{l}.self_attn.out_proj.weight"), d, d)?,
                linear1: linear(w, contract, &format!("{l}.linear1.weight"), ff, d)?,
                linear2: linear(w, contract, &format!("{l}.linear2.weight"), d, ff)?,
                norm1: (
                    w.take(&format!("{l}.norm1.weight"))?,
                    w.take(&format!("{l}.norm1.bias"))?,
                ),
                norm2: (
                    w.take(&format!("{l}.norm2.weight"))?,
                    w.take(&format!("{l}.norm2.bias"))?,
                ),
                scale1: scale(w, "layer_scale_1")?,
                scale2: scale(w, "layer_scale_2")?,
            });
        }
        Ok(Self {
            id: super::next_id(),
            cfg: cfg.clone(),
            input_proj,
            output_proj,
            layers,
        })
    }

    /// A fresh state for steps of up to `max_t` frames with the `window` rule.
    pub fn state(&self, max_t: usize, window: Window) -> Result<TransformerState, MimiError> {
        let c = &self.cfg;
        let d = c.d_model;
        let head_dim = d / c.num_heads;
        let caches = (0..c.num_layers)
            .map(|_| {
                RingAttention::new(
                    c.num_heads,
                    head_dim,
                    c.context,
                    Some(c.max_period),
                    max_t,
                    window,
                )
            })
            .collect::<Result<Vec<_>, _>>()?;
        let io = c.input_dimension.max(c.output_dimension);
        Ok(TransformerState {
            owner: self.id,
            caches,
            max_t,
            x: vec![0.0; max_t * d],
            h: vec![0.0; max_t * d],
            qkv: vec![0.0; max_t * 3 * d],
            q: vec![0.0; max_t * d],
            k: vec![0.0; max_t * d],
            v: vec![0.0; max_t * d],
            att: vec![0.0; max_t * d],
            ff: vec![0.0; max_t * c.dim_feedforward],
            io: vec![0.0; max_t * io],
            ws: MatmulWorkspace::new(max_t, c.dim_feedforward.max(io).max(d)),
        })
    }

    /// One step: `x: [input_dimension, t]` → `out: [output_dimension, t]` (conv layout).
    pub fn step(
        &self,
        pool: &impl Fork,
        st: &mut TransformerState,
        x: &[f32],
        t: usize,
        out: &mut [f32],
    ) -> Result<(), MimiError> {
        let c = &self.cfg;
        let (d, ff, ci, co) = (
            c.d_model,
            c.dim_feedforward,
            c.input_dimension,
            c.output_dimension,
        );
        if st.owner != self.id || t == 0 || t > st.max_t || x.len() != ci * t || out.len() != co * t
        {
            return Err(MimiError::Input(format!(
                "transformer step of {t} frames ({} in, {} out values; state sized for {}, made by this transformer: {})",
                x.len(),
                out.len(),
                st.max_t,
                st.owner == self.id
            )));
        }
        let level = simd_level();
        let TransformerState {
            caches,
            x: xs,
            h,
            qkv,
            q,
            k,
            v,
            att,
            ff: ffb,
            io,
            ws,
            ..
        } = st;
        let (xs, h, qkv) = (&mut xs[..t * d], &mut h[..t * d], &mut qkv[..t * 3 * d]);
        let (q, k, v, att) = (
            &mut q[..t * d],
            &mut k[..t * d],
            &mut v[..t * d],
            &mut att[..t * d],
        );
        let ffb = &mut ffb[..t * ff];
        // [C, T] → [T, C], then the optional input projection.
        let target = if self.input_proj.is_some() {
            &mut io[..t * ci]
        } else {
            &mut xs[..]
        };
        for ch in 0..ci {
            for ti in 0..t {
                target[ti * ci + ch] = x[ch * t + ti];
            }
        }
        if let Some(p) = &self.input_proj {
            matmul_ws(&io[..t * ci], t, ci, p, None, xs, ws, pool)?;
        }
        for (layer, cache) in self.layers.iter().zip(caches.iter_mut()) {
            h.copy_from_slice(xs);
            layer_norm(
                level,
                h,
                d,
                Some(&layer.norm1.0),
                Some(&layer.norm1.1),
                LN_EPS,
            )?;
            matmul_ws(h, t, d, &layer.in_proj, None, qkv, ws, pool)?;
            for ti in 0..t {
                let row = &qkv[ti * 3 * d..(ti + 1) * 3 * d];
                q[ti * d..(ti + 1) * d].copy_from_slice(&row[..d]);
                k[ti * d..(ti + 1) * d].copy_from_slice(&row[d..2 * d]);
                v[ti * d..(ti + 1) * d].copy_from_slice(&row[2 * d..]);
            }
            cache.step(pool, q, k, v, t, att)?;
            matmul_ws(att, t, d, &layer.out_proj, None, h, ws, pool)?;
            add_scaled(xs, h, layer.scale1.as_deref(), d);
            h.copy_from_slice(xs);
            layer_norm(
                level,
                h,
                d,
                Some(&layer.norm2.0),
                Some(&layer.norm2.1),
                LN_EPS,
            )?;
            matmul_ws(h, t, d, &layer.linear1, None, ffb, ws, pool)?;
            // Worth the lanes (8 layers × T × 4·d values).
            pool.for_each_chunk_mut(&mut ffb[..], GELU_CHUNK, |_, c| gelu_inplace(level, c))?;
            matmul_ws(ffb, t, ff, &layer.linear2, None, h, ws, pool)?;
            add_scaled(xs, h, layer.scale2.as_deref(), d);
        }
        // Optional output projection, then [T, C] → [C, T].
        let src: &[f32] = if let Some(p) = &self.output_proj {
            matmul_ws(xs, t, d, p, None, &mut io[..t * co], ws, pool)?;
            &io[..t * co]
        } else {
            xs
        };
        for ch in 0..co {
            for ti in 0..t {
                out[ch * t + ti] = src[ti * co + ch];
            }
        }
        Ok(())
    }
}

/// `x += scale ⊙ u` per row of `d` (plain add without layer scale).
fn add_scaled(x: &mut [f32], u: &[f32], scale: Option<&[f32]>, d: usize) {
    match scale {
        Some(s) => {
            for (xr, ur) in x.chunks_exact_mut(d).zip(u.chunks_exact(d)) {
                for ((o, a), g) in xr.iter_mut().zip(ur).zip(s) {
                    *o += g * a;
                }
            }
        }
        None => x.iter_mut().zip(u).for_each(|(o, a)| *o += a),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gelu_matches_known_values() {
        // Φ-based GELU reference values (scipy.stats.norm.cdf).
        for (x, want) in [
            (0.0f32, 0.0f64),
            (1.0, 0.841_344_746_068_542_9),
            (-1.0, -0.158_655_253_931_457_05),
            (3.0, 2.995_950_070_309_018),
            (-4.0, -1.266_849_027_306_006e-4),
        ] {
            let mut v = [x];
            gelu_inplace(simd_level(), &mut v);
            assert!((v[0] as f64 - want).abs() < 3e-7, "{x}: {}", v[0]);
        }
    }
}
