//! Kokoro's prosody predictor: durations, then F0 and energy (N) curves.
//!
//! * DurationEncoder: 3 × [bi-LSTM on `[x ‖ s]` (640 → 512), AdaLayerNorm
//!   with style (`(1 + γ)·LN(x) + β`, `γ, β = fc(s)`)], style re-concatenated.
//! * `lstm` → `duration_proj` → sigmoid → Σ over 50 → ÷ speed → round half to
//!   even (ONNX `Round`) → clip at 1: the durations.
//! * The features expanded to frames along the durations → `shared` bi-LSTM →
//!   F0 and N branches of 3 AdainResBlk1d each (block 1 upsamples ×2) →
//!   `F0_proj` / `N_proj` (k1 convs) → `[2F]` curves.
//!
//! `s` here is the predictor half of the style vector (`style[128..]`).

use voxlane_runtime::Fork;

use super::graph::{FloatConv, KokoroError, KokoroGraph, LayerNormParams};
use super::quant::{QConv, QConvWorkspace, QLinear, QLstm, QLstmWorkspace};
use crate::kernels::cpu::simd_level;
use crate::kernels::elementwise::activations::leaky_relu;
use crate::kernels::elementwise::fast_math::sigmoid_inplace;
use crate::kernels::elementwise::norms::layer_norm;
use crate::kernels::matmul::MatmulWorkspace;

/// Width of the style half the predictor uses.
pub const STYLE: usize = 128;
/// Hidden width of the predictor (d_en and LSTM outputs).
pub const HIDDEN: usize = 512;
/// Duration bins of `duration_proj`.
pub const DUR_BINS: usize = 50;
/// Most frames one utterance may expand to (510 tokens × 50 bins at speed
/// 0.04); more means a bad speed or bad imposed durations.
pub const MAX_FRAMES: usize = 1 << 20;
const EPS: f32 = 1e-5;
/// `1/√2` as the export divides by it: `Div(x, 1.4142135)`.
const SQRT2: f32 = std::f32::consts::SQRT_2;

/// `AdaLayerNorm`: LayerNorm over channels, then `(1 + γ)·x + β` with `γ, β = fc(s)`.
#[derive(Debug, Clone)]
struct AdaLayerNorm {
    fc: QLinear,
    norm: LayerNormParams,
}

/// AdaIN1d: instance norm over time, then `(1 + γ)·x + β` with `γ, β = fc(s)`.
#[derive(Debug, Clone)]
struct AdaIn1d {
    fc: QLinear,
}

/// One `AdainResBlk1d` (optionally ×2 upsampling, optionally a learned shortcut).
#[derive(Debug, Clone)]
pub struct AdainResBlk1d {
    norm1: AdaIn1d,
    conv1: QConv,
    norm2: AdaIn1d,
    conv2: QConv,
    conv1x1: Option<QConv>,
    /// Depthwise ConvTranspose (k3 s2 p1 op1) upsampler of the residual.
    pool: Option<FloatConv>,
}

/// The prosody predictor, weights packed once.
#[derive(Debug, Clone)]
pub struct Prosody {
    lstms: Vec<(QLstm, AdaLayerNorm)>,
    lstm: QLstm,
    duration_proj: QLinear,
    shared: QLstm,
    f0: Vec<AdainResBlk1d>,
    n: Vec<AdainResBlk1d>,
    f0_proj: QConv,
    n_proj: QConv,
}

/// Reusable scratch of the predictor.
#[derive(Debug, Default, Clone)]
pub struct ProsodyWorkspace {
    lstm: QLstmWorkspace,
    mm: MatmulWorkspace,
    /// The F0 branch's scratch.
    f0: BranchWorkspace,
    /// The N branch's (the two branches run side by side).
    n: BranchWorkspace,
}

/// Scratch of one F0 / N branch.
#[derive(Debug, Default, Clone)]
pub struct BranchWorkspace {
    conv: QConvWorkspace,
    mm: MatmulWorkspace,
}

/// Duration predictions of one utterance.
#[derive(Debug, Clone, PartialEq)]
pub struct Durations {
    /// `Round(Σ sigmoid / speed)` per token (the export's `/encoder/Round`).
    pub rounded: Vec<f32>,
    /// Clipped at 1, as frame counts (`/encoder/Clip` → `Cast`).
    pub frames: Vec<usize>,
}

impl Durations {
    /// Total frames F.
    pub fn total(&self) -> usize {
        self.frames.iter().sum()
    }

    /// Token index of every frame (the alignment `aln[t, f] = 1`), `[F]`.
    pub fn frame_tokens(&self) -> Vec<usize> {
        frame_tokens(&self.frames)
    }
}

/// Total frames of per-token frame counts, or an input error beyond [`MAX_FRAMES`].
pub fn check_frames(frames: &[usize]) -> Result<usize, KokoroError> {
    frames
        .iter()
        .try_fold(0usize, |a, &d| a.checked_add(d))
        .filter(|&f| f <= MAX_FRAMES)
        .ok_or_else(|| KokoroError::Input(format!("durations exceed {MAX_FRAMES} frames")))
}

/// Token index of every frame for per-token frame counts (`cumsum` alignment).
pub fn frame_tokens(frames: &[usize]) -> Vec<usize> {
    frames
        .iter()
        .enumerate()
        .flat_map(|(t, &d)| std::iter::repeat_n(t, d))
        .collect()
}

fn gb_split(v: &[f32]) -> (&[f32], &[f32]) {
    v.split_at(v.len() / 2)
}

impl AdaIn1d {
    /// Normalize `x [C, T]` in place with `gb = fc(s)` (`[2C]`), as the export spells it.
    fn apply(gb: &[f32], x: &mut [f32], t: usize) {
        let (gamma, beta) = gb_split(gb);
        for ((row, g), b) in x.chunks_exact_mut(t).zip(gamma).zip(beta) {
            let mean = row.iter().sum::<f32>() / t as f32;
            let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / t as f32;
            let sd = (var + EPS).sqrt();
            let g1 = g + 1.0;
            for v in row.iter_mut() {
                *v = g1 * ((*v - mean) / sd) + b;
            }
        }
    }
}

impl AdainResBlk1d {
    fn load(g: &KokoroGraph<'_>, prefix: &str) -> Result<Self, KokoroError> {
        let fc = |n: &str| -> Result<AdaIn1d, KokoroError> {
            Ok(AdaIn1d {
                fc: g.qlinear(&format!("{prefix}/{n}/fc/Gemm_MatMul_quant"))?,
            })
        };
        let conv = |n: &str| g.qconv(&format!("{prefix}/{n}/Conv_quant"));
        let has = |n: &str| g.node(n).is_ok();
        let c1x1 = format!("{prefix}/conv1x1/Conv_quant");
        let pool = format!("{prefix}/pool/ConvTranspose");
        Ok(Self {
            norm1: fc("norm1")?,
            conv1: conv("conv1")?,
            norm2: fc("norm2")?,
            conv2: conv("conv2")?,
            conv1x1: if has(&c1x1) {
                Some(g.qconv(&c1x1)?)
            } else {
                None
            },
            pool: if has(&pool) {
                Some(g.float_conv(&pool)?)
            } else {
                None
            },
        })
    }

    /// Output channels.
    pub fn c_out(&self) -> usize {
        self.conv2.params.c_out
    }

    /// `x [c_in, t]` → `[c_out, t']` (`t' = 2t` when upsampling).
    fn forward(
        &self,
        pool: &impl Fork,
        s: &[f32],
        x: &[f32],
        t: usize,
        ws: &mut BranchWorkspace,
    ) -> Result<(Vec<f32>, usize), KokoroError> {
        let level = simd_level();
        let c_in = self.conv1.params.c_in;
        let gb1 = self.style(&self.norm1.fc, pool, s, ws)?;
        let gb2 = self.style(&self.norm2.fc, pool, s, ws)?;
        let mut a = x.to_vec();
        AdaIn1d::apply(&gb1, &mut a, t);
        leaky_relu(level, &mut a, 0.2);
        let (a, t2) = match &self.pool {
            Some(p) => (upsample_depthwise(p, &a, c_in, t)?, 2 * t),
            None => (a, t),
        };
        let mut b = vec![0.0f32; self.conv1.params.c_out * t2];
        self.conv1.forward(pool, &a, t2, &mut b, &mut ws.conv)?;
        AdaIn1d::apply(&gb2, &mut b, t2);
        leaky_relu(level, &mut b, 0.2);
        let mut c = vec![0.0f32; self.c_out() * t2];
        self.conv2.forward(pool, &b, t2, &mut c, &mut ws.conv)?;
        let short = if self.pool.is_some() {
            x.chunks_exact(t)
                .flat_map(|row| row.iter().flat_map(|&v| [v, v]))
                .collect()
        } else {
            x.to_vec()
        };
        let short = match &self.conv1x1 {
            Some(conv) => {
                let mut o = vec![0.0f32; conv.params.c_out * t2];
                conv.forward(pool, &short, t2, &mut o, &mut ws.conv)?;
                o
            }
            None => short,
        };
        for (c, s) in c.iter_mut().zip(&short) {
            *c = (*c + s) / SQRT2;
        }
        Ok((c, t2))
    }

    fn style(
        &self,
        fc: &QLinear,
        pool: &impl Fork,
        s: &[f32],
        ws: &mut BranchWorkspace,
    ) -> Result<Vec<f32>, KokoroError> {
        let mut gb = vec![0.0f32; fc.n];
        fc.forward(pool, s, 1, &mut gb, &mut ws.mm)?;
        Ok(gb)
    }
}

/// The `pool` ConvTranspose (depthwise, k3, s2, p1, output_padding 1) on `x [c, t]` → `[c, 2t]`.
fn upsample_depthwise(
    p: &FloatConv,
    x: &[f32],
    c: usize,
    t: usize,
) -> Result<Vec<f32>, KokoroError> {
    if p.dims != [c, 1, 3] || p.stride != 2 || p.pad != 1 || p.groups != c {
        return Err(KokoroError::BadNode {
            node: "pool/ConvTranspose".into(),
            detail: format!("expected depthwise k3 s2 p1 over {c} channels, got {p:?}"),
        });
    }
    let mut y = vec![0.0f32; c * 2 * t];
    for ch in 0..c {
        let w = &p.weight[ch * 3..ch * 3 + 3];
        let b = p.bias.as_ref().map_or(0.0, |b| b[ch]);
        let xr = &x[ch * t..(ch + 1) * t];
        let yr = &mut y[ch * 2 * t..(ch + 1) * 2 * t];
        for i in 0..t {
            yr[2 * i] = xr[i] * w[1] + b;
            let next = if i + 1 < t { xr[i + 1] * w[0] } else { 0.0 };
            yr[2 * i + 1] = (xr[i] * w[2] + next) + b;
        }
    }
    Ok(y)
}

impl Prosody {
    /// Resolve and pack the predictor's weights.
    pub fn load(g: &KokoroGraph<'_>) -> Result<Self, KokoroError> {
        let te = "/encoder/predictor/text_encoder";
        let lstms = (0..3)
            .map(|i| {
                let (l, n) = (2 * i, 2 * i + 1);
                Ok((
                    g.qlstm(&format!("{te}/lstms.{l}/LSTM_quant"))?,
                    AdaLayerNorm {
                        fc: g.qlinear(&format!("{te}/lstms.{n}/fc/Gemm_MatMul_quant"))?,
                        norm: g.layer_norm(&format!("{te}/lstms.{n}/LayerNormalization"))?,
                    },
                ))
            })
            .collect::<Result<_, KokoroError>>()?;
        let blocks = |b: &str| -> Result<Vec<AdainResBlk1d>, KokoroError> {
            (0..3)
                .map(|i| AdainResBlk1d::load(g, &format!("/encoder/{b}.{i}")))
                .collect()
        };
        Ok(Self {
            lstms,
            lstm: g.qlstm("/encoder/predictor/lstm/LSTM_quant")?,
            duration_proj: g
                .qlinear("/encoder/predictor/duration_proj/linear_layer/MatMul_quant")?,
            shared: g.qlstm("/encoder/shared/LSTM_quant")?,
            f0: blocks("F0")?,
            n: blocks("N")?,
            f0_proj: g.qconv("/encoder/F0_proj/Conv_quant")?,
            n_proj: g.qconv("/encoder/N_proj/Conv_quant")?,
        })
    }

    /// Size `ws` for token-rate work on up to `max_tokens` tokens (frame-rate
    /// buffers grow on first use: F is only known after the durations).
    pub fn reserve(&self, ws: &mut ProsodyWorkspace, max_tokens: usize) {
        ws.lstm.reserve(&self.lstm, max_tokens);
        ws.mm = MatmulWorkspace::new(max_tokens, HIDDEN);
    }

    /// DurationEncoder: `d_en [T, 512]` and `s [128]` → features `[T, 640]` (`[x ‖ s]`).
    pub fn encode(
        &self,
        pool: &impl Fork,
        d_en: &[f32],
        s: &[f32],
        t: usize,
        ws: &mut ProsodyWorkspace,
    ) -> Result<Vec<f32>, KokoroError> {
        crate::kernels::error::check_len("d_en", t * HIDDEN, d_en.len())?;
        crate::kernels::error::check_len("style", STYLE, s.len())?;
        let level = simd_level();
        let w = HIDDEN + STYLE;
        let mut x = vec![0.0f32; t * w];
        for (row, d) in x.chunks_exact_mut(w).zip(d_en.chunks_exact(HIDDEN)) {
            row[..HIDDEN].copy_from_slice(d);
            row[HIDDEN..].copy_from_slice(s);
        }
        let mut h = vec![0.0f32; t * HIDDEN];
        for (lstm, ada) in &self.lstms {
            lstm.forward(pool, &x, t, &mut h, &mut ws.lstm)?;
            let mut gb = vec![0.0f32; ada.fc.n];
            ada.fc.forward(pool, s, 1, &mut gb, &mut ws.mm)?;
            let n = &ada.norm;
            layer_norm(level, &mut h, HIDDEN, Some(&n.gamma), Some(&n.beta), n.eps)?;
            let (gamma, beta) = gb_split(&gb);
            for (row, hr) in x.chunks_exact_mut(w).zip(h.chunks_exact(HIDDEN)) {
                for (((o, v), g), b) in row.iter_mut().zip(hr).zip(gamma).zip(beta) {
                    *o = (g + 1.0) * v + b;
                }
            }
        }
        Ok(x)
    }

    /// Durations from the DurationEncoder features `[T, 640]`.
    pub fn durations(
        &self,
        pool: &impl Fork,
        features: &[f32],
        t: usize,
        speed: f32,
        ws: &mut ProsodyWorkspace,
    ) -> Result<Durations, KokoroError> {
        if !(speed.is_finite() && speed > 0.0) {
            return Err(KokoroError::Input(format!(
                "speed {speed} must be positive"
            )));
        }
        let mut h = vec![0.0f32; t * HIDDEN];
        self.lstm.forward(pool, features, t, &mut h, &mut ws.lstm)?;
        let mut logits = vec![0.0f32; t * DUR_BINS];
        self.duration_proj
            .forward(pool, &h, t, &mut logits, &mut ws.mm)?;
        sigmoid_inplace(simd_level(), &mut logits);
        let rounded: Vec<f32> = logits
            .chunks_exact(DUR_BINS)
            .map(|r| (r.iter().sum::<f32>() / speed).round_ties_even())
            .collect();
        // Saturating cast (∞ → usize::MAX), then rejected by the frame check.
        let frames: Vec<usize> = rounded.iter().map(|&d| d.max(1.0) as usize).collect();
        check_frames(&frames)?;
        Ok(Durations { rounded, frames })
    }

    /// F0 and N curves (`[2F]` each) from the features `[T, 640]` and per-token frames.
    pub fn f0_n(
        &self,
        pool: &impl Fork,
        features: &[f32],
        t: usize,
        frames: &[usize],
        s: &[f32],
        ws: &mut ProsodyWorkspace,
    ) -> Result<(Vec<f32>, Vec<f32>), KokoroError> {
        let w = HIDDEN + STYLE;
        crate::kernels::error::check_len("features", t * w, features.len())?;
        crate::kernels::error::check_len("durations", t, frames.len())?;
        check_frames(frames)?;
        let tokens = frame_tokens(frames);
        let f = tokens.len();
        if f == 0 {
            return Err(KokoroError::Input("durations sum to zero frames".into()));
        }
        // `en = features.T × aln`, then the shared LSTM on its transpose: a row gather.
        let mut en = vec![0.0f32; f * w];
        for (row, &ti) in en.chunks_exact_mut(w).zip(&tokens) {
            row.copy_from_slice(&features[ti * w..(ti + 1) * w]);
        }
        let mut h = vec![0.0f32; f * HIDDEN];
        self.shared.forward(pool, &en, f, &mut h, &mut ws.lstm)?;
        let mut x = vec![0.0f32; HIDDEN * f];
        super::text_encoder::transpose_into(&h, f, HIDDEN, &mut x);
        // The two branches are independent: side by side on two lanes (each
        // computes the same either way, so the result does not depend on the budget).
        let (f0_ws, n_ws) = (&mut ws.f0, &mut ws.n);
        let (f0, n) = pool.join(
            || self.branch(pool, &self.f0, &self.f0_proj, &x, f, s, f0_ws),
            || self.branch(pool, &self.n, &self.n_proj, &x, f, s, n_ws),
        )?;
        Ok((f0?, n?))
    }

    #[allow(clippy::too_many_arguments)]
    fn branch(
        &self,
        pool: &impl Fork,
        blocks: &[AdainResBlk1d],
        proj: &QConv,
        x: &[f32],
        f: usize,
        s: &[f32],
        ws: &mut BranchWorkspace,
    ) -> Result<Vec<f32>, KokoroError> {
        let mut cur = x.to_vec();
        let mut t = f;
        for b in blocks {
            let (y, t2) = b.forward(pool, s, &cur, t, ws)?;
            cur = y;
            t = t2;
        }
        let mut out = vec![0.0f32; proj.params.c_out * t];
        proj.forward(pool, &cur, t, &mut out, &mut ws.conv)?;
        Ok(out)
    }
}
