//! SEANet encoder and decoder (moshi `modules/seanet.py`): causal convs,
//! ELU, residual blocks with `dim / compress` hidden channels and an identity
//! (`true_skip`) or 1×1 conv shortcut, strided convs down / transposed convs up.
//!
//! [`layout`] lists the blocks with their official tensor names; the weight
//! check and the model build both read it, so they cannot disagree.

use super::config::SeanetConfig;
use super::contract::BindContract;
use super::conv::{CausalConv, CausalConvTr, ConvHistory, ConvRoute, ConvScratch};
use super::error::MimiError;
use super::weights::MimiWeights;
use crate::kernels::cpu::{simd_level, SimdLevel};
use crate::kernels::elementwise::activations::elu;
use voxlane_runtime::Fork;

/// One block of the `model` sequence, as named in the checkpoint.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    /// ELU (no weights).
    Elu,
    /// Causal conv `{name}.conv.conv.{weight,bias}`.
    Conv {
        /// Prefix, e.g. `encoder.model.0`.
        name: String,
        /// Input channels.
        c_in: usize,
        /// Output channels.
        c_out: usize,
        /// Taps.
        kernel: usize,
        /// Stride.
        stride: usize,
    },
    /// Causal transposed conv `{name}.convtr.convtr.{weight,bias}`.
    ConvTr {
        /// Prefix.
        name: String,
        /// Input channels.
        c_in: usize,
        /// Output channels.
        c_out: usize,
        /// Stride (kernel is twice it).
        stride: usize,
    },
    /// Residual block `{name}.block.{1,3}` (+ `{name}.shortcut` without true skip).
    Res {
        /// Prefix.
        name: String,
        /// Channels in and out.
        dim: usize,
        /// Hidden channels.
        hidden: usize,
        /// First conv's taps.
        kernel: usize,
        /// First conv's dilation.
        dilation: usize,
        /// 1×1 conv shortcut instead of identity.
        shortcut: bool,
    },
}

/// A tensor the block needs: name and torch shape.
pub type TensorSpec = (String, Vec<usize>);

impl Block {
    /// The block's tensors (weight, then bias, per conv).
    pub fn tensors(&self) -> Vec<TensorSpec> {
        let conv = |p: String, co: usize, ci: usize, k: usize| {
            vec![
                (format!("{p}.conv.conv.weight"), vec![co, ci, k]),
                (format!("{p}.conv.conv.bias"), vec![co]),
            ]
        };
        match self {
            Block::Elu => Vec::new(),
            Block::Conv {
                name,
                c_in,
                c_out,
                kernel,
                ..
            } => conv(name.clone(), *c_out, *c_in, *kernel),
            Block::ConvTr {
                name,
                c_in,
                c_out,
                stride,
            } => vec![
                (
                    format!("{name}.convtr.convtr.weight"),
                    vec![*c_in, *c_out, 2 * stride],
                ),
                (format!("{name}.convtr.convtr.bias"), vec![*c_out]),
            ],
            Block::Res {
                name,
                dim,
                hidden,
                kernel,
                shortcut,
                ..
            } => {
                let mut v = conv(format!("{name}.block.1"), *hidden, *dim, *kernel);
                v.extend(conv(format!("{name}.block.3"), *dim, *hidden, 1));
                if *shortcut {
                    v.extend(conv(format!("{name}.shortcut"), *dim, *dim, 1));
                }
                v
            }
        }
    }
}

/// The encoder (`decoder == false`) or decoder block sequence under `prefix.model.N`.
pub fn layout(cfg: &SeanetConfig, decoder: bool) -> Vec<Block> {
    let prefix = if decoder { "decoder" } else { "encoder" };
    let mut blocks = Vec::new();
    let name = |blocks: &Vec<Block>| format!("{prefix}.model.{}", blocks.len());
    let nf = cfg.n_filters;
    let res = |blocks: &mut Vec<Block>, dim: usize| {
        for j in 0..cfg.n_residual_layers {
            let b = Block::Res {
                name: name(blocks),
                dim,
                hidden: dim / cfg.compress,
                kernel: cfg.residual_kernel_size,
                dilation: cfg.dilation_base.saturating_pow(j as u32),
                shortcut: !cfg.true_skip,
            };
            blocks.push(b);
        }
    };
    if !decoder {
        let mut mult = 1;
        blocks.push(Block::Conv {
            name: name(&blocks),
            c_in: cfg.channels,
            c_out: nf,
            kernel: cfg.kernel_size,
            stride: 1,
        });
        for &ratio in cfg.ratios.iter().rev() {
            res(&mut blocks, mult * nf);
            blocks.push(Block::Elu);
            blocks.push(Block::Conv {
                name: name(&blocks),
                c_in: mult * nf,
                c_out: mult * nf * 2,
                kernel: 2 * ratio,
                stride: ratio,
            });
            mult *= 2;
        }
        blocks.push(Block::Elu);
        blocks.push(Block::Conv {
            name: name(&blocks),
            c_in: mult * nf,
            c_out: cfg.dimension,
            kernel: cfg.last_kernel_size,
            stride: 1,
        });
    } else {
        let mut mult = 1 << cfg.ratios.len();
        blocks.push(Block::Conv {
            name: name(&blocks),
            c_in: cfg.dimension,
            c_out: mult * nf,
            kernel: cfg.kernel_size,
            stride: 1,
        });
        for &ratio in &cfg.ratios {
            blocks.push(Block::Elu);
            blocks.push(Block::ConvTr {
                name: name(&blocks),
                c_in: mult * nf,
                c_out: mult * nf / 2,
                stride: ratio,
            });
            res(&mut blocks, mult * nf / 2);
            mult /= 2;
        }
        blocks.push(Block::Elu);
        blocks.push(Block::Conv {
            name: name(&blocks),
            c_in: nf,
            c_out: cfg.channels,
            kernel: cfg.last_kernel_size,
            stride: 1,
        });
    }
    blocks
}

/// One conv weight of the encoder or decoder and the route its layer streams on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConvWeight {
    /// Official tensor name.
    pub name: String,
    /// `[N, K]` as the matmul route packs it: `[c_out, c_in·k]` for a conv,
    /// `[c_out·k, c_in]` for a transposed one.
    pub shape: [usize; 2],
    /// The smaller of its input and output channel counts.
    pub min_channels: usize,
    /// Frames a streaming step computes: output frames of a conv, input
    /// frames of a transposed conv (its polyphase conv's outputs).
    pub frames: usize,
    /// [`ConvRoute::Matmul`] (the deep layers, where the weight bytes are)
    /// or [`ConvRoute::Kernel`] (the long early/late layers, where the MACs are).
    pub route: ConvRoute,
}

/// Every conv weight of the encoder or decoder with the route its layer
/// takes when each streaming step has `stream_t` input frames.
pub fn conv_weights(cfg: &SeanetConfig, decoder: bool, stream_t: usize) -> Vec<ConvWeight> {
    let mut t = stream_t;
    let mut out = Vec::new();
    for block in layout(cfg, decoder) {
        match &block {
            Block::Conv { stride, .. } => t /= stride,
            Block::ConvTr { stride, .. } => t *= stride,
            Block::Elu | Block::Res { .. } => {}
        }
        let route = ConvRoute::for_frames(t);
        let (transposed, frames) = match &block {
            Block::ConvTr { stride, .. } => (true, t / stride),
            _ => (false, t),
        };
        for (name, shape) in block.tensors() {
            if let (true, &[a, b, k]) = (name.ends_with(".weight"), shape.as_slice()) {
                let nk = if transposed { [b * k, a] } else { [a, b * k] };
                out.push(ConvWeight {
                    name,
                    shape: nk,
                    min_channels: a.min(b),
                    frames,
                    route,
                });
            }
        }
    }
    out
}

/// Elements per parallel ELU chunk (the early layers' `[64, 1920]` splits in eight).
const ELU_CHUNK: usize = 1 << 14;

/// ELU in place over fixed chunks on the pool (elementwise: same bits for any budget).
fn par_elu(pool: &impl Fork, level: SimdLevel, x: &mut [f32], alpha: f32) -> Result<(), MimiError> {
    if x.len() <= ELU_CHUNK {
        elu(level, x, alpha);
        return Ok(());
    }
    pool.for_each_chunk_mut(x, ELU_CHUNK, |_, c| elu(level, c, alpha))?;
    Ok(())
}

/// `dst = elu(src)` on the lanes (the copy and the activation in one pass).
fn par_elu_into(
    pool: &impl Fork,
    level: SimdLevel,
    src: &[f32],
    dst: &mut [f32],
    alpha: f32,
) -> Result<(), MimiError> {
    pool.for_each_chunk_mut(dst, ELU_CHUNK, |i, c| {
        c.copy_from_slice(&src[i * ELU_CHUNK..i * ELU_CHUNK + c.len()]);
        elu(level, c, alpha)
    })?;
    Ok(())
}

/// `a[i] = b[i] + a[i]` (`shortcut`: `a = s + b`, `s` given) on the lanes.
fn par_residual(
    pool: &impl Fork,
    a: &mut [f32],
    b: &[f32],
    shortcut: Option<&[f32]>,
) -> Result<(), MimiError> {
    pool.for_each_chunk_mut(a, ELU_CHUNK, |i, c| {
        let o = i * ELU_CHUNK;
        let v = &b[o..o + c.len()];
        match shortcut {
            Some(s) => {
                for ((x, u), v) in c.iter_mut().zip(&s[o..o + v.len()]).zip(v) {
                    *x = u + v;
                }
            }
            None => {
                for (x, v) in c.iter_mut().zip(v) {
                    *x += v;
                }
            }
        }
    })?;
    Ok(())
}

/// A bound block.
#[derive(Debug, Clone)]
enum Op {
    Elu,
    Conv(CausalConv),
    ConvTr(CausalConvTr),
    Res(Box<ResOp>),
}

/// A bound residual block.
#[derive(Debug, Clone)]
struct ResOp {
    conv1: CausalConv,
    conv2: CausalConv,
    shortcut: Option<CausalConv>,
}

/// Per-block streaming state.
#[derive(Debug, Clone)]
enum OpState {
    None,
    Conv(ConvHistory),
    ConvTr(Vec<f32>),
    Res(ConvHistory, ConvHistory, Option<ConvHistory>),
}

/// A bound SEANet encoder or decoder.
#[derive(Debug, Clone)]
pub struct Seanet {
    id: u64,
    ops: Vec<Op>,
    c_in: usize,
    alpha: f32,
}

/// Streaming state of one [`Seanet`]: histories plus every buffer a step needs.
#[derive(Debug)]
pub struct SeanetState {
    owner: u64,
    ops: Vec<OpState>,
    a: Vec<f32>,
    b: Vec<f32>,
    h1: Vec<f32>,
    h2: Vec<f32>,
    sc: ConvScratch,
    max_t: usize,
}

impl SeanetState {
    /// Floats held (histories, buffers, scratch).
    pub fn floats(&self) -> usize {
        let hist: usize = self
            .ops
            .iter()
            .map(|o| match o {
                OpState::None => 0,
                OpState::Conv(h) => h.floats(),
                OpState::ConvTr(p) => p.len(),
                OpState::Res(a, b, c) => {
                    a.floats() + b.floats() + c.as_ref().map_or(0, ConvHistory::floats)
                }
            })
            .sum();
        hist + self.a.len() + self.b.len() + self.h1.len() + self.h2.len() + self.sc.floats()
    }

    /// Back to the start of a stream (buffers kept).
    pub fn reset(&mut self) {
        for s in &mut self.ops {
            match s {
                OpState::None => {}
                OpState::Conv(h) => h.reset(),
                OpState::ConvTr(p) => p.fill(0.0),
                OpState::Res(a, b, c) => {
                    a.reset();
                    b.reset();
                    if let Some(c) = c {
                        c.reset();
                    }
                }
            }
        }
    }
}

fn conv_from(
    w: &mut MimiWeights,
    prefix: &str,
    dims: (usize, usize, usize, usize, usize),
    route: ConvRoute,
) -> Result<CausalConv, MimiError> {
    let (c_in, c_out, kernel, stride, dilation) = dims;
    let weight = w.take(&format!("{prefix}.conv.conv.weight"))?;
    let bias = w.take(&format!("{prefix}.conv.conv.bias"))?;
    CausalConv::new(
        c_in,
        c_out,
        kernel,
        stride,
        dilation,
        1,
        &weight,
        Some(&bias),
        false,
        route,
    )
}

impl Seanet {
    /// Bind the blocks of [`layout`] from `w` (tensors are taken out of it);
    /// `stream_t` input frames per streaming step pick each layer's
    /// [`ConvRoute`], and `contract` whether a matmul-route weight is q8_0.
    pub fn new(
        cfg: &SeanetConfig,
        decoder: bool,
        stream_t: usize,
        w: &mut MimiWeights,
        contract: &BindContract,
    ) -> Result<Self, MimiError> {
        // The matmul route on the format the contract planned for `weight`.
        let routed = |route: ConvRoute, weight: &str| route.with_format(contract.format_of(weight));
        let mut ops = Vec::new();
        let mut t = stream_t;
        for block in layout(cfg, decoder) {
            match &block {
                Block::Conv { stride, .. } => t /= stride,
                Block::ConvTr { stride, .. } => t *= stride,
                Block::Elu | Block::Res { .. } => {}
            }
            let route = ConvRoute::for_frames(t);
            ops.push(match block {
                Block::Elu => Op::Elu,
                Block::Conv {
                    name,
                    c_in,
                    c_out,
                    kernel,
                    stride,
                } => Op::Conv(conv_from(
                    w,
                    &name,
                    (c_in, c_out, kernel, stride, 1),
                    routed(route, &format!("{name}.conv.conv.weight")),
                )?),
                Block::ConvTr {
                    name,
                    c_in,
                    c_out,
                    stride,
                } => {
                    let wname = format!("{name}.convtr.convtr.weight");
                    let weight = w.take(&wname)?;
                    let bias = w.take(&format!("{name}.convtr.convtr.bias"))?;
                    Op::ConvTr(CausalConvTr::new(
                        c_in,
                        c_out,
                        2 * stride,
                        stride,
                        1,
                        &weight,
                        Some(&bias),
                        routed(route, &wname),
                    )?)
                }
                Block::Res {
                    name,
                    dim,
                    hidden,
                    kernel,
                    dilation,
                    shortcut,
                } => Op::Res(Box::new(ResOp {
                    conv1: conv_from(
                        w,
                        &format!("{name}.block.1"),
                        (dim, hidden, kernel, 1, dilation),
                        routed(route, &format!("{name}.block.1.conv.conv.weight")),
                    )?,
                    conv2: conv_from(
                        w,
                        &format!("{name}.block.3"),
                        (hidden, dim, 1, 1, 1),
                        routed(route, &format!("{name}.block.3.conv.conv.weight")),
                    )?,
                    shortcut: if shortcut {
                        Some(conv_from(
                            w,
                            &format!("{name}.shortcut"),
                            (dim, dim, 1, 1, 1),
                            routed(route, &format!("{name}.shortcut.conv.conv.weight")),
                        )?)
                    } else {
                        None
                    },
                })),
            });
        }
        let c_in = if decoder { cfg.dimension } else { cfg.channels };
        Ok(Self {
            id: super::next_id(),
            ops,
            c_in,
            alpha: cfg.elu_alpha,
        })
    }

    /// Input channels.
    pub fn c_in(&self) -> usize {
        self.c_in
    }

    /// A fresh state whose buffers fit steps of up to `max_t` input frames.
    pub fn state(&self, max_t: usize) -> Result<SeanetState, MimiError> {
        let mut sc = ConvScratch::default();
        let (mut c, mut t) = (self.c_in, max_t);
        let (mut big, mut hid) = (c * t, 0);
        let mut ops = Vec::with_capacity(self.ops.len());
        for op in &self.ops {
            ops.push(match op {
                Op::Elu => OpState::None,
                Op::Conv(k) => {
                    k.reserve(&mut sc, t)?;
                    t = k.out_len(t);
                    c = k.c_out();
                    OpState::Conv(k.history())
                }
                Op::ConvTr(k) => {
                    k.reserve(&mut sc, t)?;
                    t = k.out_len(t);
                    c = k.c_out();
                    OpState::ConvTr(k.partial())
                }
                Op::Res(r) => {
                    let ResOp {
                        conv1,
                        conv2,
                        shortcut,
                    } = &**r;
                    conv1.reserve(&mut sc, t)?;
                    conv2.reserve(&mut sc, t)?;
                    hid = hid.max(conv1.c_out() * t);
                    if let Some(s) = shortcut {
                        s.reserve(&mut sc, t)?;
                    }
                    OpState::Res(
                        conv1.history(),
                        conv2.history(),
                        shortcut.as_ref().map(CausalConv::history),
                    )
                }
            });
            big = big.max(c * t);
        }
        Ok(SeanetState {
            owner: self.id,
            ops,
            a: vec![0.0; big],
            b: vec![0.0; big],
            h1: vec![0.0; big],
            h2: vec![0.0; big.max(hid)],
            sc,
            max_t,
        })
    }

    /// One step: `x: [c_in, t]` → the output written to `out`, returning `(channels, frames)`.
    ///
    /// `t` must be a multiple of the total stride (encoder) and at most the state's `max_t`.
    pub fn step(
        &self,
        pool: &impl Fork,
        st: &mut SeanetState,
        x: &[f32],
        t: usize,
        out: &mut [f32],
    ) -> Result<(usize, usize), MimiError> {
        if st.owner != self.id || t == 0 || t > st.max_t || x.len() != self.c_in * t {
            return Err(MimiError::Input(format!(
                "seanet step of {t} frames ({} values; state sized for {}, made by this seanet: {})",
                x.len(),
                st.max_t,
                st.owner == self.id
            )));
        }
        let level = simd_level();
        let SeanetState {
            ops: states,
            a,
            b,
            h1,
            h2,
            sc,
            ..
        } = st;
        let (mut c, mut t) = (self.c_in, t);
        a[..c * t].copy_from_slice(x);
        for (op, state) in self.ops.iter().zip(states.iter_mut()) {
            match (op, state) {
                (Op::Elu, _) => par_elu(pool, level, &mut a[..c * t], self.alpha)?,
                (Op::Conv(k), OpState::Conv(h)) => {
                    let to = k.out_len(t);
                    k.step(pool, h, &a[..c * t], t, &mut b[..k.c_out() * to], sc)?;
                    std::mem::swap(a, b);
                    (c, t) = (k.c_out(), to);
                }
                (Op::ConvTr(k), OpState::ConvTr(p)) => {
                    let to = k.out_len(t);
                    k.step(pool, p, &a[..c * t], t, &mut b[..k.c_out() * to], sc)?;
                    std::mem::swap(a, b);
                    (c, t) = (k.c_out(), to);
                }
                (Op::Res(r), OpState::Res(s1, s2, s3)) => {
                    let ResOp {
                        conv1,
                        conv2,
                        shortcut,
                    } = &**r;
                    let n = c * t;
                    let hn = conv1.c_out() * t;
                    par_elu_into(pool, level, &a[..n], &mut h1[..n], self.alpha)?;
                    conv1.step(pool, s1, &h1[..n], t, &mut h2[..hn], sc)?;
                    par_elu(pool, level, &mut h2[..hn], self.alpha)?;
                    conv2.step(pool, s2, &h2[..hn], t, &mut h1[..n], sc)?;
                    match (shortcut, s3) {
                        (Some(k), Some(s3)) => {
                            k.step(pool, s3, &a[..n], t, &mut h2[..n], sc)?;
                            par_residual(pool, &mut a[..n], &h1[..n], Some(&h2[..n]))?;
                        }
                        _ => par_residual(pool, &mut a[..n], &h1[..n], None)?,
                    }
                }
                _ => {
                    return Err(MimiError::Input(
                        "seanet state does not match its model".into(),
                    ))
                }
            }
        }
        let n = c * t;
        if out.len() < n {
            return Err(MimiError::Input(format!(
                "seanet output buffer holds {} values, step needs {n}",
                out.len()
            )));
        }
        out[..n].copy_from_slice(&a[..n]);
        Ok((c, t))
    }
}
