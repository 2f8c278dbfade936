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
//! Parity: every int8 GEMM equals onnxruntime's bit for bit, but LayerNorm,
//! softmax and FastGelu's tanh are not MLAS's kernels bit for bit (last-bit
//! differences). Now and then such a difference moves an activation across a
//! quantization step of the next layer's `DynamicQuantizeLinear`, and 12
//! passes of the shared layer amplify it: `d_en` correlates ≈ 0.99 with
//! onnxruntime's (each layer alone matches to ~1e-5), enough to round a few
//! durations differently (by 1).

use voxlane_runtime::Fork;

use super::graph::{KokoroError, KokoroGraph, LayerNormParams, QEmbedding};
use super::quant::QLinear;
use crate::kernels::cpu::simd_level;
use crate::kernels::elementwise::fast_math::{exp_inplace, tanh_inplace};
use crate::kernels::elementwise::norms::layer_norm;
use crate::kernels::matmul::MatmulWorkspace;
use crate::kernels::sgemm::{sgemm, MatRef};

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
    mm: MatmulWorkspace,
}

fn sized(v: &mut Vec<f32>, n: usize) -> &mut [f32] {
    if v.len() < n {
        v.resize(n, 0.0);
    }
    &mut v[..n]
}

impl Albert {
    /// Resolve and pack every ALBERT weight.
    pub fn load(g: &KokoroGraph<'_>) -> Result<Self, KokoroError> {
        let emb = "/encoder/bert/embeddings";
        let q = g.qlinear(&format!("{LAYER}/attention/query/MatMul_quant"))?;
        let k = g.qlinear(&format!("{LAYER}/attention/key/MatMul_quant"))?;
        let v = g.qlinear(&format!("{LAYER}/attention/value/MatMul_quant"))?;
        let gelu = g.node_op("FastGelu", "FastGelu")?;
        let ffn_bias = g.f32s(&g.input_tensor(gelu, 1)?)?;
        Ok(Self {
            word: g.embedding(&format!("{emb}/word_embeddings/Gather_quant"))?,
            position: g.embedding(&format!("{emb}/position_embeddings/Gather_quant"))?,
            token_type: g.embedding(&format!("{emb}/token_type_embeddings/Gather_quant"))?,
            emb_norm: g.layer_norm(&format!("{emb}/LayerNorm/LayerNormalization"))?,
            mapping_in: g
                .qlinear("/encoder/bert/encoder/embedding_hidden_mapping_in/MatMul_quant")?,
            qkv: QLinear::concat_outputs(&[&q, &k, &v])?,
            dense: g.qlinear(&format!("{LAYER}/attention/dense/MatMul_quant"))?,
            attn_norm: g.layer_norm(&format!("{LAYER}/attention/LayerNorm/LayerNormalization"))?,
            ffn: g.qlinear(&format!("{LAYER}/ffn/MatMul_quant"))?,
            ffn_bias,
            ffn_out: g.qlinear(&format!("{LAYER}/ffn_output/MatMul_quant"))?,
            full_norm: g.layer_norm("SkipLayerNormalization")?,
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
        let level = simd_level();
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
        layer_norm(level, emb, EMBED, Some(&n.gamma), Some(&n.beta), n.eps)?;
        let hidden = sized(&mut ws.hidden, t * HIDDEN);
        self.mapping_in.forward(pool, emb, t, hidden, &mut ws.mm)?;
        for _ in 0..LAYERS {
            let qkv = sized(&mut ws.qkv, t * 3 * HIDDEN);
            self.qkv.forward(pool, hidden, t, qkv, &mut ws.mm)?;
            let ctx = sized(&mut ws.ctx, t * HIDDEN);
            attention(pool, qkv, t, ctx)?;
            let attn = sized(&mut ws.attn, t * HIDDEN);
            self.dense.forward(pool, ctx, t, attn, &mut ws.mm)?;
            // Residual (IEEE addition commutes: same bits as the export's h + a).
            for (a, h) in attn.iter_mut().zip(hidden.iter()) {
                *a += *h;
            }
            let n = &self.attn_norm;
            layer_norm(level, attn, HIDDEN, Some(&n.gamma), Some(&n.beta), n.eps)?;
            let ffn = sized(&mut ws.ffn, t * FFN);
            self.ffn.forward(pool, attn, t, ffn, &mut ws.mm)?;
            fast_gelu(ffn, &self.ffn_bias);
            let out = sized(&mut ws.ffn_out, t * HIDDEN);
            self.ffn_out.forward(pool, ffn, t, out, &mut ws.mm)?;
            for (h, (o, a)) in hidden.iter_mut().zip(out.iter().zip(attn.iter())) {
                *h = *o + *a;
            }
            let n = &self.full_norm;
            layer_norm(level, hidden, HIDDEN, Some(&n.gamma), Some(&n.beta), n.eps)?;
        }
        self.bert_encoder
            .forward(pool, hidden, t, d_en, &mut ws.mm)?;
        Ok(())
    }
}

/// onnxruntime's FastGelu with bias: `x = v + b`, `0.5·x·(1 + tanh(x·(α + β·x²)))`.
fn fast_gelu(v: &mut [f32], bias: &[f32]) {
    const ALPHA: f32 = 0.797_884_6;
    const BETA: f32 = 0.035_677_407;
    let level = simd_level();
    let mut th = [0.0f32; FFN];
    for row in v.chunks_exact_mut(bias.len()) {
        for (x, b) in row.iter_mut().zip(bias) {
            *x += b;
        }
        let th = &mut th[..row.len()];
        for (t, &x) in th.iter_mut().zip(row.iter()) {
            *t = x * (ALPHA + BETA * x * x);
        }
        tanh_inplace(level, th);
        for (x, t) in row.iter_mut().zip(th.iter()) {
            *x = 0.5 * *x * (*t + 1.0);
        }
    }
}

/// Softmax attention of all 12 heads: `qkv [T, 3·768]` → `ctx [T, 768]`.
///
/// Per head: `P = softmax(q·kᵀ)` and `P·v` on the sgemm kernel. Heads run in
/// parallel (one chunk each, each computed the same way whatever the
/// budget), so the result is budget-independent.
fn attention(pool: &impl Fork, qkv: &[f32], t: usize, ctx: &mut [f32]) -> Result<(), KokoroError> {
    // The export scales q and k each by √(1/√d) (Cast → Sqrt → Div → Sqrt).
    let s = (1.0f32 / (HEAD_DIM as f32).sqrt()).sqrt();
    let level = simd_level();
    let mut heads = vec![0.0f32; HEADS * t * HEAD_DIM];
    let failed = std::sync::Mutex::new(None);
    pool.for_each_chunk_mut(&mut heads, t * HEAD_DIM, |h, out| {
        let gather = |base: usize| -> Vec<f32> {
            (0..t)
                .flat_map(|r| qkv[r * 3 * HIDDEN + base + h * HEAD_DIM..][..HEAD_DIM].iter())
                .map(|v| v * s)
                .collect()
        };
        let (q, k) = (gather(0), gather(HIDDEN));
        let mut p = vec![0.0f32; t * t];
        let v = MatRef {
            data: &qkv[2 * HIDDEN + h * HEAD_DIM..],
            row_stride: 3 * HIDDEN,
            col_stride: 1,
        };
        let res = sgemm(
            t,
            t,
            HEAD_DIM,
            MatRef::row_major(&q, HEAD_DIM),
            MatRef::transposed(&k, HEAD_DIM),
            &mut p,
            t,
            false,
        )
        .and_then(|()| {
            for row in p.chunks_exact_mut(t) {
                let max = row.iter().fold(f32::NEG_INFINITY, |m, &x| m.max(x));
                for x in row.iter_mut() {
                    *x -= max;
                }
                exp_inplace(level, row);
                let inv = 1.0 / row.iter().sum::<f32>();
                for x in row.iter_mut() {
                    *x *= inv;
                }
            }
            sgemm(
                t,
                HEAD_DIM,
                t,
                MatRef::row_major(&p, t),
                v,
                out,
                HEAD_DIM,
                false,
            )
        });
        if let Err(e) = res {
            if let Ok(mut f) = failed.lock() {
                *f = Some(e);
            }
        }
    })?;
    if let Some(e) = failed.into_inner().ok().flatten() {
        return Err(e.into());
    }
    for (h, head) in heads.chunks_exact(t * HEAD_DIM).enumerate() {
        for (i, row) in head.chunks_exact(HEAD_DIM).enumerate() {
            ctx[i * HIDDEN + h * HEAD_DIM..][..HEAD_DIM].copy_from_slice(row);
        }
    }
    Ok(())
}
