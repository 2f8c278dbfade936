//! PL-BERT (ALBERT) and `bert_encoder`: tokens → `d_en [T, 512]`.
//!
//! Embeddings (word + token type 0 + position, INT8 tables) → LayerNorm →
//! `embedding_hidden_mapping_in` (128 → 768) → one shared layer applied 12
//! times: q/k/v (one int8 GEMM: they share the quantized input), 12 heads × 64
//! softmax attention (q and k each scaled by `√(1/√64)` as the export does;
//! the attention mask is all ones for one unpadded sequence, so it adds 0),
//! `dense` + residual + LayerNorm, FastGelu FFN 768 → 2048 → 768 +
//! SkipLayerNorm; then `bert_encoder` (768 → 512).
//!
//! Parity: `d_en` equals onnxruntime's (1.32, CPU) bit for bit. The int8
//! GEMMs are exact anyway, but 12 passes of one int8 layer turn any last-bit
//! float difference into different `DynamicQuantizeLinear` steps (a
//! correlation of only ≈ 0.99 with a generic LayerNorm/softmax/tanh), so every
//! float op follows the kernel onnxruntime runs (see [`super::pointwise`]):
//! `LayerNormalization` is MLAS's AVX2 kernel (f64 mean, FMA variance,
//! `fma((x − μ)·inv, γ, β)`), `SkipLayerNormalization` a scalar f32 Welford
//! pass with a division, softmax MLAS's AVX-512F sum-exp kernel, `FastGelu`
//! MLAS's FMA3 tanh, and both attention MatMuls MLAS SGEMM's FMA chains (the
//! `·v` one in K slices of 256).

use voxlane_runtime::Fork;

use super::graph::{KokoroError, KokoroGraph, LayerNormParams, QEmbedding};
use super::pointwise;
use super::qgemm::QGemmScratch;
use super::quant::{QLinear, StoredQLinear};
use crate::kernels::matmul::MatmulWorkspace;

/// Hidden width of the ALBERT layer.
pub const HIDDEN: usize = 768;
/// Attention heads.
pub const HEADS: usize = 12;
/// Width of one head.
pub const HEAD_DIM: usize = 64;
/// Embedding width.
pub const EMBED: usize = 128;
/// FFN width.
pub const FFN: usize = 2048;
/// Output width of `bert_encoder` (`d_en`).
pub const D_EN: usize = 512;
/// Times the shared layer is applied.
pub const LAYERS: usize = 12;
/// Most tokens (rows of the position table).
pub const MAX_TOKENS: usize = 512;

const LAYER: &str = "/encoder/bert/encoder/albert_layer_groups.0/albert_layers.0";

/// PL-BERT plus `bert_encoder`, weights packed once.
#[derive(Debug, Clone)]
pub struct Albert {
    word: QEmbedding,
    position: QEmbedding,
    token_type: QEmbedding,
    emb_norm: LayerNormParams,
    mapping_in: QLinear,
    /// q, k and v concatenated along the outputs (`[768, 2304]`).
    qkv: QLinear,
    dense: QLinear,
    attn_norm: LayerNormParams,
    ffn: QLinear,
    ffn_bias: Vec<f32>,
    ffn_out: QLinear,
    full_norm: LayerNormParams,
    bert_encoder: QLinear,
}

/// Reusable buffers of [`Albert::forward`].
#[derive(Debug, Default, Clone)]
pub struct AlbertWorkspace {
    emb: Vec<f32>,
    hidden: Vec<f32>,
    qkv: Vec<f32>,
    ctx: Vec<f32>,
    attn: Vec<f32>,
    ffn: Vec<f32>,
    ffn_out: Vec<f32>,
    /// Attention output head by head, `[12, T, 64]`.
    heads: Vec<f32>,
    mm: MatmulWorkspace,
    qs: QGemmScratch,
}

fn sized(v: &mut Vec<f32>, n: usize) -> &mut [f32] {
    voxlane_runtime::memory::grow(v, n);
    &mut v[..n]
}

impl Albert {
    /// Resolve and pack every ALBERT weight.
    pub fn load(g: &KokoroGraph<'_>) -> Result<Self, KokoroError> {
        let emb = "/encoder/bert/embeddings";
        let q = g.qlinear_stored(&format!("{LAYER}/attention/query/MatMul_quant"))?;
        let k = g.qlinear_stored(&format!("{LAYER}/attention/key/MatMul_quant"))?;
        let v = g.qlinear_stored(&format!("{LAYER}/attention/value/MatMul_quant"))?;
        let mut ffn = g.qlinear(&format!("{LAYER}/ffn/MatMul_quant"))?;
        let ffn_bias = match g.node_op("FastGelu", "FastGelu") {
            Ok(gelu) => g.f32s(&g.input_tensor(gelu, 1)?)?,
            // A plain export adds the ffn bias right after its MatMul; the
            // GELU here adds it, so the Linear must not.
            Err(_) => ffn.bias.take().ok_or_else(|| KokoroError::BadNode {
                node: format!("{LAYER}/ffn"),
                detail: "no FastGelu bias and no ffn bias".into(),
            })?,
        };
        crate::kernels::error::check_len("ffn bias", FFN, ffn_bias.len())?;
        let norm = |name: &str, dim: usize| -> Result<LayerNormParams, KokoroError> {
            let n = g.layer_norm(name)?;
            crate::kernels::error::check_len("layer norm gamma", dim, n.gamma.len())?;
            crate::kernels::error::check_len("layer norm beta", dim, n.beta.len())?;
            Ok(n)
        };
        Ok(Self {
            word: g.embedding(&format!("{emb}/word_embeddings/Gather_quant"))?,
            position: g.embedding(&format!("{emb}/position_embeddings/Gather_quant"))?,
            token_type: g.embedding(&format!("{emb}/token_type_embeddings/Gather_quant"))?,
            emb_norm: norm(&format!("{emb}/LayerNorm/LayerNormalization"), EMBED)?,
            mapping_in: g
                .qlinear("/encoder/bert/encoder/embedding_hidden_mapping_in/MatMul_quant")?,
            qkv: StoredQLinear::concat_outputs(&[&q, &k, &v])?
                .pack_cached(g.cache_key(&format!("{LAYER}/attention/qkv (fused)")))?,
            dense: g.qlinear(&format!("{LAYER}/attention/dense/MatMul_quant"))?,
            attn_norm: norm(
                &format!("{LAYER}/attention/LayerNorm/LayerNormalization"),
                HIDDEN,
            )?,
            ffn,
            ffn_bias,
            ffn_out: g.qlinear(&format!("{LAYER}/ffn_output/MatMul_quant"))?,
            full_norm: {
                let n = g.layer_norm_after(&format!("{LAYER}/ffn_output/MatMul_quant"))?;
                crate::kernels::error::check_len("layer norm gamma", HIDDEN, n.gamma.len())?;
                crate::kernels::error::check_len("layer norm beta", HIDDEN, n.beta.len())?;
                n
            },
            bert_encoder: g.qlinear("/encoder/bert_encoder/MatMul_quant")?,
        })
    }

    /// Size `ws` for up to `max_tokens` tokens so runs do not allocate there.
    pub fn reserve(&self, ws: &mut AlbertWorkspace, max_tokens: usize) {
        let t = max_tokens;
        sized(&mut ws.emb, t * EMBED);
        sized(&mut ws.hidden, t * HIDDEN);
        sized(&mut ws.qkv, t * 3 * HIDDEN);
        sized(&mut ws.ctx, t * HIDDEN);
        sized(&mut ws.attn, t * HIDDEN);
        sized(&mut ws.ffn, t * FFN);
        sized(&mut ws.ffn_out, t * HIDDEN);
        sized(&mut ws.heads, t * HIDDEN);
        ws.mm = MatmulWorkspace::new(t, FFN);
    }

    /// Number of token ids the embedding knows.
    pub fn vocab(&self) -> usize {
        self.word.rows
    }

    /// `d_en [T, 512]` for `tokens` (padded with 0 at both ends).
    pub fn forward(
        &self,
        pool: &impl Fork,
        tokens: &[i64],
        d_en: &mut [f32],
        ws: &mut AlbertWorkspace,
    ) -> Result<(), KokoroError> {
        let t = tokens.len();
        if t == 0 || t > self.position.rows {
            return Err(KokoroError::Input(format!(
                "{t} tokens (1..={} allowed)",
                self.position.rows
            )));
        }
        crate::kernels::error::check_len("d_en", t * D_EN, d_en.len())?;
        // Embeddings: (word + token_type) + position, then LayerNorm.
        let emb = sized(&mut ws.emb, t * EMBED);
        let mut tt = vec![0.0f32; EMBED];
        let mut pos = vec![0.0f32; EMBED];
        self.token_type.row_into(0, &mut tt)?;
        for (i, (&id, row)) in tokens.iter().zip(emb.chunks_exact_mut(EMBED)).enumerate() {
            let id = usize::try_from(id).map_err(|_| KokoroError::Input(format!("token {id}")))?;
            self.word.row_into(id, row)?;
            self.position.row_into(i, &mut pos)?;
            for ((e, a), p) in row.iter_mut().zip(&tt).zip(&pos) {
                *e = (*e + a) + p;
            }
        }
        let n = &self.emb_norm;
        pointwise::layer_norm(emb, EMBED, &n.gamma, &n.beta, n.eps);
        let hidden = sized(&mut ws.hidden, t * HIDDEN);
        self.mapping_in
            .forward_with(pool, emb, t, hidden, &mut ws.mm, &mut ws.qs)?;
        for _ in 0..LAYERS {
            let qkv = sized(&mut ws.qkv, t * 3 * HIDDEN);
            self.qkv
                .forward_with(pool, hidden, t, qkv, &mut ws.mm, &mut ws.qs)?;
            let ctx = sized(&mut ws.ctx, t * HIDDEN);
            attention(pool, qkv, t, ctx, &mut ws.heads)?;
            let attn = sized(&mut ws.attn, t * HIDDEN);
            self.dense
                .forward_with(pool, ctx, t, attn, &mut ws.mm, &mut ws.qs)?;
            // Residual (IEEE addition commutes: same bits as the export's h + a).
            let n = &self.attn_norm;
            by_rows(pool, attn, HIDDEN, |r, rows| {
                for (a, h) in rows.iter_mut().zip(&hidden[r * HIDDEN..]) {
                    *a += *h;
                }
                pointwise::layer_norm(rows, HIDDEN, &n.gamma, &n.beta, n.eps);
            })?;
            let ffn = sized(&mut ws.ffn, t * FFN);
            self.ffn
                .forward_with(pool, attn, t, ffn, &mut ws.mm, &mut ws.qs)?;
            by_rows(pool, ffn, FFN, |_, rows| {
                pointwise::fast_gelu(rows, &self.ffn_bias)
            })?;
            let out = sized(&mut ws.ffn_out, t * HIDDEN);
            self.ffn_out
                .forward_with(pool, ffn, t, out, &mut ws.mm, &mut ws.qs)?;
            let n = &self.full_norm;
            let attn = &*attn;
            by_rows(pool, hidden, HIDDEN, |r, rows| {
                for (h, (o, a)) in rows
                    .iter_mut()
                    .zip(out[r * HIDDEN..].iter().zip(&attn[r * HIDDEN..]))
                {
                    *h = *o + *a;
                }
                pointwise::skip_layer_norm(rows, HIDDEN, &n.gamma, &n.beta, n.eps);
            })?;
        }
        self.bert_encoder
            .forward_with(pool, hidden, t, d_en, &mut ws.mm, &mut ws.qs)?;
        Ok(())
    }
}

/// Rows per parallel chunk of the row-wise passes (one batch of
/// [`pointwise::skip_layer_norm`]).
const ROW_CHUNK: usize = 16;

/// Run `f(first_row, rows)` over chunks of [`ROW_CHUNK`] rows of `x: [_, dim]`
/// on the pool: every pass is per row, so any split gives the same bits.
fn by_rows(
    pool: &impl Fork,
    x: &mut [f32],
    dim: usize,
    f: impl Fn(usize, &mut [f32]) + Sync,
) -> Result<(), KokoroError> {
    pool.for_each_chunk_mut(x, ROW_CHUNK * dim, |i, rows| f(i * ROW_CHUNK, rows))?;
    Ok(())
}

/// Softmax attention of all 12 heads: `qkv [T, 3·768]` → `ctx [T, 768]`.
///
/// Per head: `P = softmax(q·kᵀ)` and `P·v` exactly as onnxruntime's MatMul /
/// Softmax / MatMul ([`pointwise::attention_head`]). Heads run in parallel
/// (one chunk each, each computed the same way whatever the budget), so the
/// result is budget-independent.
fn attention(
    pool: &impl Fork,
    qkv: &[f32],
    t: usize,
    ctx: &mut [f32],
    heads: &mut Vec<f32>,
) -> Result<(), KokoroError> {
    // The export scales q and k each by √(1/√d) (Cast → Sqrt → Div → Sqrt).
    let s = (1.0f32 / (HEAD_DIM as f32).sqrt()).sqrt();
    let heads = sized(heads, HEADS * t * HEAD_DIM);
    pool.for_each_chunk_mut(heads, t * HEAD_DIM, |h, out| {
        let mut q = vec![0.0f32; t * HEAD_DIM];
        // kᵀ rows padded to whole 16-column blocks (zeros, never read back).
        let stride = t.next_multiple_of(16);
        let mut kt = vec![0.0f32; HEAD_DIM * stride];
        for r in 0..t {
            let row = &qkv[r * 3 * HIDDEN..(r + 1) * 3 * HIDDEN];
            for d in 0..HEAD_DIM {
                q[r * HEAD_DIM + d] = row[h * HEAD_DIM + d] * s;
                kt[d * stride + r] = row[HIDDEN + h * HEAD_DIM + d] * s;
            }
        }
        let mut p = vec![0.0f32; t * t];
        pointwise::attention_head(
            &q,
            &kt,
            stride,
            &qkv[2 * HIDDEN + h * HEAD_DIM..],
            3 * HIDDEN,
            t,
            HEAD_DIM,
            &mut p,
            out,
        );
    })?;
    for (h, head) in heads.chunks_exact(t * HEAD_DIM).enumerate() {
        for (i, row) in head.chunks_exact(HEAD_DIM).enumerate() {
            ctx[i * HIDDEN + h * HEAD_DIM..][..HEAD_DIM].copy_from_slice(row);
        }
    }
    Ok(())
}
