//! Moshi's streaming transformer (moshi `StreamingTransformer` as the LM
//! configures it): pre-norm layers `x += attn(rms₁(x))`,
//! `x += W_out·(silu(a) ⊙ b)` with `[a; b] = W_in·rms₂(x)`, causal attention
//! over a `context`-frame ring, RoPE (temporal transformer) or no positions
//! (depformer), and optionally one weight set per step (the depformer's
//! `weights_per_step`: step `k` of a frame uses set `k`).
//!
//! A state holds the KV rings and every buffer for steps of up to `max_t`
//! positions, so a step allocates nothing.

use super::error::MoshiError;
use super::weights::{linear_format, TensorSource};
use crate::kernels::cpu::simd_level;
use crate::kernels::elementwise::activations::silu_gate;
use crate::kernels::elementwise::norms::rms_norm;
use crate::kernels::matmul::{matmul_ws, MatmulWorkspace, WeightFormat, Weights};
use crate::speech::attention::{RingAttention, Window};
use voxlane_runtime::Fork;

/// Shape of one transformer stack.
#[derive(Debug, Clone, PartialEq)]
pub struct StackShape {
    /// Tensor name prefix (`transformer` or `depformer`).
    pub prefix: &'static str,
    /// Width.
    pub dim: usize,
    /// Heads.
    pub heads: usize,
    /// Layers.
    pub layers: usize,
    /// Gating hidden width.
    pub hidden: usize,
    /// Attention window (frames, or steps for the depformer).
    pub context: usize,
    /// RoPE max period (`None`: no positional embedding).
    pub rope: Option<f32>,
    /// Weight sets (1, or `dep_q` for per-step weights).
    pub sets: usize,
    /// RMS norm epsilon.
    pub eps: f32,
}

/// One layer's weights: a vector per weight set.
#[derive(Debug, Clone)]
struct Layer {
    in_proj: Vec<Weights>,
    out_proj: Vec<Weights>,
    gate_in: Vec<Weights>,
    gate_out: Vec<Weights>,
    norm1: Vec<f32>,
    norm2: Vec<f32>,
}

/// A bound transformer stack.
#[derive(Debug, Clone)]
pub struct Stack {
    id: u64,
    shape: StackShape,
    layers: Vec<Layer>,
}

/// KV rings and buffers of one stack's steps.
#[derive(Debug)]
pub struct StackState {
    owner: u64,
    caches: Vec<RingAttention>,
    max_t: usize,
    h: Vec<f32>,
    qkv: Vec<f32>,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    att: Vec<f32>,
    gate: Vec<f32>,
    ff: Vec<f32>,
    ws: MatmulWorkspace,
}

impl StackState {
    /// Floats held by the KV rings and buffers.
    pub fn floats(&self) -> usize {
        self.caches.iter().map(RingAttention::floats).sum::<usize>()
            + [
                &self.h, &self.qkv, &self.q, &self.k, &self.v, &self.att, &self.gate, &self.ff,
            ]
            .iter()
            .map(|b| b.len())
            .sum::<usize>()
    }

    /// Back to position 0 (buffers kept).
    pub fn reset(&mut self) {
        self.caches.iter_mut().for_each(RingAttention::reset);
    }

    /// Every layer's position, and the held keys and values appended to `out`.
    pub fn save_into(&self, out: &mut Vec<f32>) -> Vec<usize> {
        self.caches
            .iter()
            .map(|c| {
                c.save_into(out);
                c.position()
            })
            .collect()
    }

    /// Put back what [`Self::save_into`] saved.
    pub fn restore(&mut self, positions: &[usize], data: &[f32]) -> Result<(), MoshiError> {
        if positions.len() != self.caches.len() {
            return Err(MoshiError::Input(format!(
                "a saved state of {} layers, the stack has {}",
                positions.len(),
                self.caches.len()
            )));
        }
        let mut rest = data;
        for (c, &pos) in self.caches.iter_mut().zip(positions) {
            let want = c.saved_floats_at(pos);
            if rest.len() < want {
                return Err(MoshiError::Input("a saved state is truncated".into()));
            }
            let (mine, more) = rest.split_at(want);
            c.restore(pos, mine)
                .map_err(|e| MoshiError::Input(e.to_string()))?;
            rest = more;
        }
        if !rest.is_empty() {
            return Err(MoshiError::Input(format!(
                "a saved state has {} values too many",
                rest.len()
            )));
        }
        Ok(())
    }
}

impl Stack {
    /// Bind `{prefix}.layers.*` from `src`, linears in `route` (per tensor, see [`linear_format`]).
    pub fn load(
        shape: StackShape,
        src: &mut dyn TensorSource,
        route: WeightFormat,
    ) -> Result<Self, MoshiError> {
        let (d, hd) = (shape.dim, shape.hidden);
        let mut layers = Vec::with_capacity(shape.layers);
        for l in 0..shape.layers {
            let p = format!("{}.layers.{l}", shape.prefix);
            let attn_in = format!("{p}.self_attn.in_proj_weight");
            let attn_out = format!("{p}.self_attn.out_proj.weight");
            let mut layer = Layer {
                in_proj: Vec::with_capacity(shape.sets),
                out_proj: Vec::with_capacity(shape.sets),
                gate_in: Vec::with_capacity(shape.sets),
                gate_out: Vec::with_capacity(shape.sets),
                norm1: src.vector(&format!("{p}.norm1.alpha"), d)?,
                norm2: src.vector(&format!("{p}.norm2.alpha"), d)?,
            };
            for s in 0..shape.sets {
                // Per-step weights are stacked along rows (moshi's `_load_hook` view(mult, -1, D)).
                layer.in_proj.push(src.linear(
                    &attn_in,
                    s * 3 * d,
                    3 * d,
                    d,
                    linear_format(route, d),
                )?);
                layer
                    .out_proj
                    .push(src.linear(&attn_out, s * d, d, d, linear_format(route, d))?);
                let gating = if shape.sets > 1 {
                    format!("{p}.gating.{s}")
                } else {
                    format!("{p}.gating")
                };
                layer.gate_in.push(src.linear(
                    &format!("{gating}.linear_in.weight"),
                    0,
                    2 * hd,
                    d,
                    linear_format(route, d),
                )?);
                layer.gate_out.push(src.linear(
                    &format!("{gating}.linear_out.weight"),
                    0,
                    d,
                    hd,
                    linear_format(route, hd),
                )?);
            }
            layers.push(layer);
        }
        Ok(Self {
            id: crate::speech::next_id(),
            shape,
            layers,
        })
    }

    /// The stack's shape.
    pub fn shape(&self) -> &StackShape {
        &self.shape
    }

    /// Bytes of weights one position streams (for bandwidth floors): one weight set.
    pub fn bytes_per_step(&self) -> usize {
        self.layers
            .iter()
            .map(|l| {
                l.in_proj[0].bytes()
                    + l.out_proj[0].bytes()
                    + l.gate_in[0].bytes()
                    + l.gate_out[0].bytes()
            })
            .sum()
    }

    /// Bytes of every weight set of every layer.
    pub fn weight_bytes(&self) -> usize {
        self.layers
            .iter()
            .map(|l| {
                l.in_proj
                    .iter()
                    .chain(&l.out_proj)
                    .chain(&l.gate_in)
                    .chain(&l.gate_out)
                    .map(Weights::bytes)
                    .sum::<usize>()
                    + 4 * (l.norm1.len() + l.norm2.len())
            })
            .sum()
    }

    /// A fresh state for steps of up to `max_t` positions. Each position
    /// attends to the `context` positions up to itself (`Window::Full`), so
    /// a step of `t` positions (a prompt's prefill) computes what `t`
    /// single steps would — the LM is only ever stepped one frame at a time
    /// by moshi, and a ring of `context + max_t − 1` slots keeps every key a
    /// query of the step needs.
    pub fn state(&self, max_t: usize) -> Result<StackState, MoshiError> {
        let s = &self.shape;
        let d = s.dim;
        let caches = (0..s.layers)
            .map(|_| {
                RingAttention::new(s.heads, d / s.heads, s.context, s.rope, max_t, Window::Full)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut ws = MatmulWorkspace::new(max_t, d.max(s.hidden));
        for l in &self.layers {
            for w in l
                .in_proj
                .iter()
                .chain(&l.out_proj)
                .chain(&l.gate_in)
                .chain(&l.gate_out)
            {
                ws.reserve(w, max_t);
            }
        }
        Ok(StackState {
            owner: self.id,
            caches,
            max_t,
            h: vec![0.0; max_t * d],
            qkv: vec![0.0; max_t * 3 * d],
            q: vec![0.0; max_t * d],
            k: vec![0.0; max_t * d],
            v: vec![0.0; max_t * d],
            att: vec![0.0; max_t * d],
            gate: vec![0.0; max_t * 2 * s.hidden],
            ff: vec![0.0; max_t * s.hidden],
            ws,
        })
    }

    /// Run `t` positions through every layer, `x: [t, dim]` in place, with weight set `set`.
    pub fn step(
        &self,
        pool: &impl Fork,
        st: &mut StackState,
        x: &mut [f32],
        t: usize,
        set: usize,
    ) -> Result<(), MoshiError> {
        let s = &self.shape;
        let (d, hd) = (s.dim, s.hidden);
        if st.owner != self.id || t == 0 || t > st.max_t || x.len() != t * d || set >= s.sets {
            return Err(MoshiError::Input(format!(
                "{} step of {t} positions ({} values, set {set} of {}; state sized for {}, made by this stack: {})",
                s.prefix,
                x.len(),
                s.sets,
                st.max_t,
                st.owner == self.id
            )));
        }
        let level = simd_level();
        let StackState {
            caches,
            h,
            qkv,
            q,
            k,
            v,
            att,
            gate,
            ff,
            ws,
            ..
        } = st;
        let (h, qkv) = (&mut h[..t * d], &mut qkv[..t * 3 * d]);
        let (q, k, v, att) = (
            &mut q[..t * d],
            &mut k[..t * d],
            &mut v[..t * d],
            &mut att[..t * d],
        );
        let (gate, ff) = (&mut gate[..t * 2 * hd], &mut ff[..t * hd]);
        for (layer, cache) in self.layers.iter().zip(caches.iter_mut()) {
            h.copy_from_slice(x);
            rms_norm(level, h, d, Some(&layer.norm1), s.eps)?;
            matmul_ws(h, t, d, &layer.in_proj[set], None, qkv, ws, pool)?;
            for ti in 0..t {
                let row = &qkv[ti * 3 * d..(ti + 1) * 3 * d];
                q[ti * d..(ti + 1) * d].copy_from_slice(&row[..d]);
                k[ti * d..(ti + 1) * d].copy_from_slice(&row[d..2 * d]);
                v[ti * d..(ti + 1) * d].copy_from_slice(&row[2 * d..]);
            }
            cache.step(pool, q, k, v, t, att)?;
            matmul_ws(att, t, d, &layer.out_proj[set], None, h, ws, pool)?;
            x.iter_mut().zip(h.iter()).for_each(|(o, u)| *o += u);
            h.copy_from_slice(x);
            rms_norm(level, h, d, Some(&layer.norm2), s.eps)?;
            matmul_ws(h, t, d, &layer.gate_in[set], None, gate, ws, pool)?;
            for ti in 0..t {
                let (a, b) = gate[ti * 2 * hd..(ti + 1) * 2 * hd].split_at_mut(hd);
                silu_gate(level, a, b)?;
                ff[ti * hd..(ti + 1) * hd].copy_from_slice(a);
            }
            matmul_ws(ff, t, hd, &layer.gate_out[set], None, h, ws, pool)?;
            x.iter_mut().zip(h.iter()).for_each(|(o, u)| *o += u);
        }
        Ok(())
    }
}
