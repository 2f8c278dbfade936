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

use super::blocks::{AdainResBlk1d, BlockWorkspace};
use super::graph::{KokoroError, KokoroGraph, LayerNormParams};
use super::quant::{QConv, QConvWorkspace, QLinear, QLstm, QLstmWorkspace};
use crate::kernels::cpu::simd_level;
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

/// `AdaLayerNorm`: LayerNorm over channels, then `(1 + γ)·x + β` with `γ, β = fc(s)`.
#[derive(Debug, Clone)]
struct AdaLayerNorm {
    fc: QLinear,
    norm: LayerNormParams,
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
#[derive(Debug, Default)]
pub struct ProsodyWorkspace {
    lstm: QLstmWorkspace,
    mm: MatmulWorkspace,
    /// The F0 branch's scratch.
    f0: BranchWorkspace,
    /// The N branch's (the two branches run side by side).
    n: BranchWorkspace,
}

/// Scratch of one F0 / N branch.
#[derive(Debug, Default)]
pub struct BranchWorkspace {
    conv: QConvWorkspace,
    block: BlockWorkspace,
    /// Block input and output, swapped after each block.
    x: Vec<f32>,
    y: Vec<f32>,
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
        ws.x.clear();
        ws.x.extend_from_slice(x);
        let mut t = f;
        for b in blocks {
            let to = b.out_len(t);
            ws.y.clear();
            ws.y.resize(b.c_out() * to, 0.0);
            b.forward(pool, &ws.x, t, s, &mut ws.y, &mut ws.block)?;
            std::mem::swap(&mut ws.x, &mut ws.y);
            t = to;
        }
        let mut out = vec![0.0f32; proj.params.c_out * t];
        proj.forward(pool, &ws.x, t, &mut out, &mut ws.conv)?;
        Ok(out)
    }
}
