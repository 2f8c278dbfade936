//! Kokoro's text encoder: tokens → `t_en [512, T]`, and `asr = t_en × aln`.
//!
//! Embedding (INT8 `[178, 512]`) → 3 × [ConvInteger k5 p2, LayerNorm over
//! channels, LeakyReLU 0.2] → bi-LSTM (512 → 2×256). The token mask of the
//! PyTorch model is all false for one unpadded sequence, so it is skipped.

use voxlane_runtime::Fork;

use super::graph::{KokoroError, KokoroGraph, LayerNormParams, QEmbedding};
use super::quant::{QConv, QConvWorkspace, QLstm, QLstmWorkspace};
use crate::kernels::cpu::simd_level;
use crate::kernels::elementwise::activations::leaky_relu;
use crate::kernels::elementwise::norms::layer_norm;

/// Channels of the text encoder.
pub const CHANNELS: usize = 512;
const PREFIX: &str = "/encoder/text_encoder";

/// The text encoder, weights packed once.
#[derive(Debug, Clone)]
pub struct TextEncoder {
    embedding: QEmbedding,
    cnn: Vec<(QConv, LayerNormParams)>,
    lstm: QLstm,
}

/// Reusable buffers of [`TextEncoder::forward`].
#[derive(Debug, Default, Clone)]
pub struct TextEncoderWorkspace {
    x: Vec<f32>,
    y: Vec<f32>,
    rows: Vec<f32>,
    conv: QConvWorkspace,
    lstm: QLstmWorkspace,
}

fn sized(v: &mut Vec<f32>, n: usize) -> &mut [f32] {
    voxlane_runtime::memory::grow(v, n);
    &mut v[..n]
}

/// Transpose a row-major `rows × cols` matrix into `dst`.
pub(crate) fn transpose_into(src: &[f32], rows: usize, cols: usize, dst: &mut [f32]) {
    for r in 0..rows {
        for c in 0..cols {
            dst[c * rows + r] = src[r * cols + c];
        }
    }
}

impl TextEncoder {
    /// Resolve and pack the text encoder's weights.
    pub fn load(g: &KokoroGraph<'_>) -> Result<Self, KokoroError> {
        let cnn = (0..3)
            .map(|i| {
                Ok((
                    g.qconv(&format!("{PREFIX}/cnn.{i}/cnn.{i}.0/Conv_quant"))?,
                    g.layer_norm(&format!("{PREFIX}/cnn.{i}/cnn.{i}.1/LayerNormalization"))?,
                ))
            })
            .collect::<Result<_, KokoroError>>()?;
        Ok(Self {
            embedding: g.embedding(&format!("{PREFIX}/embedding/Gather_quant"))?,
            cnn,
            lstm: g.qlstm(&format!("{PREFIX}/lstm/LSTM_quant"))?,
        })
    }

    /// Size `ws` for up to `max_tokens` tokens so runs do not allocate there.
    pub fn reserve(
        &self,
        ws: &mut TextEncoderWorkspace,
        max_tokens: usize,
    ) -> Result<(), KokoroError> {
        let n = CHANNELS * max_tokens;
        sized(&mut ws.x, n);
        sized(&mut ws.y, n);
        sized(&mut ws.rows, n);
        for (conv, _) in &self.cnn {
            ws.conv.reserve(conv, max_tokens)?;
        }
        ws.lstm.reserve(&self.lstm, max_tokens);
        Ok(())
    }

    /// `t_en [512, T]` for `tokens`.
    pub fn forward(
        &self,
        pool: &impl Fork,
        tokens: &[i64],
        t_en: &mut [f32],
        ws: &mut TextEncoderWorkspace,
    ) -> Result<(), KokoroError> {
        let t = tokens.len();
        crate::kernels::error::check_len("t_en", CHANNELS * t, t_en.len())?;
        let level = simd_level();
        let rows = sized(&mut ws.rows, t * CHANNELS);
        for (&id, row) in tokens.iter().zip(rows.chunks_exact_mut(CHANNELS)) {
            let id = usize::try_from(id).map_err(|_| KokoroError::Input(format!("token {id}")))?;
            self.embedding.row_into(id, row)?;
        }
        let x = sized(&mut ws.x, CHANNELS * t);
        transpose_into(rows, t, CHANNELS, x);
        let y = sized(&mut ws.y, CHANNELS * t);
        for (conv, norm) in &self.cnn {
            conv.forward(pool, x, t, y, &mut ws.conv)?;
            // LayerNorm over channels: per frame, on the transposed view.
            transpose_into(y, CHANNELS, t, rows);
            layer_norm(
                level,
                rows,
                CHANNELS,
                Some(&norm.gamma),
                Some(&norm.beta),
                norm.eps,
            )?;
            leaky_relu(level, rows, 0.2);
            transpose_into(rows, t, CHANNELS, x);
        }
        // `rows` holds the last block's output as [T, 512]: the LSTM input.
        let out = sized(&mut ws.y, t * CHANNELS);
        self.lstm.forward(pool, rows, t, out, &mut ws.lstm)?;
        transpose_into(out, t, CHANNELS, t_en);
        Ok(())
    }
}

/// Expand `x [C, T]` to `[C, F]` along `frames` (token index of each frame):
/// the export's `x × aln` with a 0/1 alignment, computed exactly as a gather.
pub fn expand_frames(
    x: &[f32],
    t: usize,
    frames: &[usize],
    out: &mut [f32],
) -> Result<(), KokoroError> {
    let f = frames.len();
    let c = x.len() / t.max(1);
    crate::kernels::error::check_len("expanded frames", c * f, out.len())?;
    for (xr, or) in x.chunks_exact(t).zip(out.chunks_exact_mut(f.max(1))) {
        for (o, &ti) in or.iter_mut().zip(frames) {
            *o = *xr
                .get(ti)
                .ok_or_else(|| KokoroError::Input(format!("frame token {ti} ≥ {t}")))?;
        }
    }
    Ok(())
}
