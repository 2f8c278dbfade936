//! The bound Moshi LM (moshi `LMModel`): per frame, the embeddings of the
//! previous tokens of every stream are summed, the temporal transformer
//! steps, `out_norm` and `text_linear` give the text logits; then the
//! depformer runs one step per generated codebook, each fed the temporal
//! output through `depformer_in[k]` plus the embedding of the previous
//! codebook's token (the text token for `k = 0`), giving that codebook's
//! logits through `linears[k]`.

use super::config::MoshiConfig;
use super::embedding::Embedding;
use super::error::MoshiError;
use super::transformer::{Stack, StackShape, StackState};
use super::weights::{linear_format, CachedSource, FileSource, RandomSource, TensorSource};
use crate::kernels::cpu::simd_level;
use crate::kernels::elementwise::norms::rms_norm;
use crate::kernels::matmul::{
    matmul_ws, read_weights, MatmulWorkspace, WeightFormat, Weights, WeightsWriter,
};
use std::path::Path;
use voxlane_runtime::weights::{DType, WeightFile};
use voxlane_runtime::Fork;

/// Storage of the linear layers, chosen at load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LmWeights {
    /// As the checkpoint stores them (f32, f16 or bf16).
    AsStored,
    /// f32.
    F32,
    /// bf16.
    Bf16,
    /// GGML q8_0 blocks (against i16-quantized activations).
    Q8_0,
    /// GGML q4_0 blocks.
    Q4_0,
}

impl LmWeights {
    /// The matmul format of this choice for a checkpoint stored as `stored`.
    pub fn route(self, stored: DType) -> WeightFormat {
        match self {
            Self::AsStored => match stored {
                DType::BF16 => WeightFormat::Bf16,
                DType::F16 => WeightFormat::F16,
                _ => WeightFormat::F32,
            },
            Self::F32 => WeightFormat::F32,
            Self::Bf16 => WeightFormat::Bf16,
            Self::Q8_0 => WeightFormat::Q8_0Act16,
            Self::Q4_0 => WeightFormat::Q4_0Act16,
        }
    }

    /// Parse a `--weights` value.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "stored" | "as-stored" => Self::AsStored,
            "f32" => Self::F32,
            "bf16" => Self::Bf16,
            "q8_0" | "q8" => Self::Q8_0,
            "q4_0" | "q4" => Self::Q4_0,
            _ => return None,
        })
    }

    /// The name `--weights` takes.
    pub fn name(self) -> &'static str {
        match self {
            Self::AsStored => "stored",
            Self::F32 => "f32",
            Self::Bf16 => "bf16",
            Self::Q8_0 => "q8_0",
            Self::Q4_0 => "q4_0",
        }
    }
}

/// Metadata key naming what a cache file was converted from.
const CACHE_SOURCE_KEY: &str = "voxlane.moshi.source";

/// How [`MoshiLm::load_cached`] used its cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CacheUse {
    /// Converted linears mapped from this file.
    Hit(std::path::PathBuf),
    /// Converted now and written to this file.
    Written(std::path::PathBuf),
    /// Converted now; nothing could be cached.
    Off,
}

/// What a cache file must have been made from: the checkpoint (canonical
/// path, size, modification time), the config and the route.
fn cache_identity(
    cfg: &MoshiConfig,
    path: &Path,
    route: WeightFormat,
) -> Result<String, MoshiError> {
    let io = |e: std::io::Error| MoshiError::Io {
        path: path.to_path_buf(),
        detail: e.to_string(),
    };
    let canon = std::fs::canonicalize(path).map_err(io)?;
    let meta = std::fs::metadata(&canon).map_err(io)?;
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    Ok(format!(
        "{} size={} mtime={mtime} route={} config={cfg:?}",
        canon.display(),
        meta.len(),
        route.tag()
    ))
}

/// FNV-1a, 64 bits (cache file names).
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A bound Moshi LM.
#[derive(Debug)]
pub struct MoshiLm {
    id: u64,
    cfg: MoshiConfig,
    route: WeightFormat,
    emb: Vec<Embedding>,
    text_emb: Embedding,
    temporal: Stack,
    out_norm: Vec<f32>,
    text_linear: Weights,
    depformer_in: Vec<Weights>,
    depformer_emb: Vec<Embedding>,
    depformer_text_emb: Embedding,
    depformer: Stack,
    linears: Vec<Weights>,
}

/// A saved temporal transformer: each layer's position and its held keys
/// and values (`[H][held][D]` keys then values, layer after layer).
#[derive(Debug, Clone, PartialEq)]
pub struct LmSnapshot {
    /// Frames the temporal transformer had taken.
    pub frames: usize,
    /// Each layer's next position.
    pub positions: Vec<usize>,
    /// The held keys and values.
    pub data: Vec<f32>,
}

/// Every buffer of one session's frames: KV rings, activations, logits.
#[derive(Debug)]
pub struct LmState {
    owner: u64,
    max_t: usize,
    temporal: StackState,
    depformer: StackState,
    /// `[max_t, dim]` residual stream, then the normed temporal output.
    x: Vec<f32>,
    text_logits: Vec<f32>,
    /// `[depformer dim]` depformer stream.
    dx: Vec<f32>,
    audio_logits: Vec<f32>,
    ws: MatmulWorkspace,
    /// Positions the temporal transformer has taken.
    frames: usize,
    /// Frames in the most recent temporal step.
    last_t: usize,
}

impl LmState {
    /// Text logits of the last position stepped.
    pub fn text_logits(&self) -> &[f32] {
        &self.text_logits
    }

    /// Audio logits of the last depformer step.
    pub fn audio_logits(&self) -> &[f32] {
        &self.audio_logits
    }

    /// Frames the temporal transformer has taken since the last reset.
    pub fn frames(&self) -> usize {
        self.frames
    }

    /// Floats held (KV rings and buffers).
    pub fn floats(&self) -> usize {
        self.temporal.floats()
            + self.depformer.floats()
            + self.x.len()
            + self.text_logits.len()
            + self.dx.len()
            + self.audio_logits.len()
    }

    /// Back to frame 0 (buffers kept).
    pub fn reset(&mut self) {
        self.temporal.reset();
        self.depformer.reset();
        self.frames = 0;
        self.last_t = 0;
    }

    /// What the temporal transformer holds (the depformer starts afresh
    /// every frame): enough to resume the session after a prompt.
    pub fn snapshot(&self) -> LmSnapshot {
        let mut data = Vec::new();
        let positions = self.temporal.save_into(&mut data);
        LmSnapshot {
            frames: self.frames,
            positions,
            data,
        }
    }

    /// Resume from a [`Self::snapshot`] of a state of the same model.
    pub fn restore(&mut self, s: &LmSnapshot) -> Result<(), MoshiError> {
        self.depformer.reset();
        self.temporal.restore(&s.positions, &s.data)?;
        self.frames = s.frames;
        self.last_t = 0;
        Ok(())
    }
}

impl MoshiLm {
    /// Load `cfg`'s tensors from a safetensors file, linears as `weights` says.
    pub fn load(cfg: &MoshiConfig, path: &Path, weights: LmWeights) -> Result<Self, MoshiError> {
        let file = WeightFile::open(path)?;
        let mut src = FileSource::new(cfg, &file)?;
        let stored = file.require("text_linear.weight")?.dtype;
        Self::build(cfg, &mut src, weights.route(stored))
    }

    /// [`load`](Self::load) through a converted-weights cache in `cache_dir`:
    /// a later load of the same checkpoint (path, size, modification time),
    /// config and route maps the converted linears in place instead of
    /// converting them again. A stale, foreign or damaged cache file is
    /// rebuilt; a cache that cannot be written leaves the load working.
    pub fn load_cached(
        cfg: &MoshiConfig,
        path: &Path,
        weights: LmWeights,
        cache_dir: &Path,
    ) -> Result<(Self, CacheUse), MoshiError> {
        let file = WeightFile::open(path)?;
        let route = weights.route(file.require("text_linear.weight")?.dtype);
        let identity = cache_identity(cfg, path, route)?;
        let cache_path = cache_dir.join(format!(
            "moshi-{:016x}.vxlpack",
            fnv1a64(identity.as_bytes())
        ));
        if let Ok(stored) = read_weights(&cache_path) {
            if stored.metadata.get(CACHE_SOURCE_KEY) == Some(&identity) {
                let mut src = CachedSource::new(cfg, &file, stored.weights)?;
                if let Ok(lm) = Self::build(cfg, &mut src, route) {
                    return Ok((lm, CacheUse::Hit(cache_path)));
                }
            }
        }
        let writer = std::fs::create_dir_all(cache_dir)
            .ok()
            .and_then(|()| WeightsWriter::create(&cache_path).ok());
        let mut src = FileSource::new(cfg, &file)?;
        if let Some(w) = writer {
            src = src.caching(w);
        }
        let lm = Self::build(cfg, &mut src, route)?;
        let used = match src
            .into_cache()
            .map(|w| w.finish(&[(CACHE_SOURCE_KEY, &identity)]))
        {
            Some(Ok(())) => CacheUse::Written(cache_path),
            Some(Err(e)) => {
                tracing::warn!("moshi weights cache not written: {e}");
                CacheUse::Off
            }
            None => CacheUse::Off,
        };
        Ok((lm, used))
    }

    /// `cfg`'s shapes with seeded random weights generated in `route`'s format.
    pub fn random(cfg: &MoshiConfig, weights: LmWeights, seed: u64) -> Result<Self, MoshiError> {
        cfg.validate()?;
        Self::build(
            cfg,
            &mut RandomSource::new(seed),
            weights.route(DType::BF16),
        )
    }

    /// Bind every tensor from `src`, linears in `route`.
    pub fn build(
        cfg: &MoshiConfig,
        src: &mut dyn TensorSource,
        route: WeightFormat,
    ) -> Result<Self, MoshiError> {
        let (d, dd) = (cfg.dim, cfg.depformer.dim);
        let emb = (0..cfg.n_q)
            .map(|i| src.embedding(&format!("emb.{i}.weight"), cfg.card + 1, d))
            .collect::<Result<Vec<_>, _>>()?;
        let text_emb = src.embedding("text_emb.weight", cfg.text_card + 1, d)?;
        let temporal = Stack::load(
            StackShape {
                prefix: "transformer",
                dim: d,
                heads: cfg.num_heads,
                layers: cfg.num_layers,
                hidden: cfg.hidden(),
                context: cfg.attention_window(),
                rope: Some(cfg.max_period),
                sets: 1,
                eps: cfg.norm_eps,
            },
            src,
            route,
        )?;
        let out_norm = src.vector("out_norm.alpha", d)?;
        let text_linear = src.linear(
            "text_linear.weight",
            0,
            cfg.text_card,
            d,
            linear_format(route, d),
        )?;
        let n_in = if cfg.depformer.multi_linear {
            cfg.dep_q
        } else {
            1
        };
        let depformer_in = (0..n_in)
            .map(|k| {
                src.linear(
                    &format!("depformer_in.{k}.weight"),
                    0,
                    dd,
                    d,
                    linear_format(route, d),
                )
            })
            .collect::<Result<Vec<_>, _>>()?;
        let depformer_emb = (0..cfg.dep_q.saturating_sub(1))
            .map(|k| src.embedding(&format!("depformer_emb.{k}.weight"), cfg.card + 1, dd))
            .collect::<Result<Vec<_>, _>>()?;
        let depformer_text_emb =
            src.embedding("depformer_text_emb.weight", cfg.text_card + 1, dd)?;
        let depformer = Stack::load(
            StackShape {
                prefix: "depformer",
                dim: dd,
                heads: cfg.depformer.num_heads,
                layers: cfg.depformer.num_layers,
                hidden: cfg.depformer_hidden(),
                context: cfg.depformer_window(),
                rope: None,
                sets: cfg.dep_q,
                eps: cfg.norm_eps,
            },
            src,
            route,
        )?;
        let linears = (0..cfg.dep_q)
            .map(|k| {
                src.linear(
                    &format!("linears.{k}.weight"),
                    0,
                    cfg.card,
                    dd,
                    linear_format(route, dd),
                )
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            id: crate::speech::next_id(),
            cfg: cfg.clone(),
            route,
            emb,
            text_emb,
            temporal,
            out_norm,
            text_linear,
            depformer_in,
            depformer_emb,
            depformer_text_emb,
            depformer,
            linears,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &MoshiConfig {
        &self.cfg
    }

    /// The linears' family route.
    pub fn route(&self) -> WeightFormat {
        self.route
    }

    /// Weight bytes one frame streams: the temporal stack, `text_linear`, and
    /// per depformer step its weight set, `depformer_in` and `linears`.
    pub fn bytes_per_frame(&self) -> usize {
        let dep: usize = (0..self.cfg.dep_q)
            .map(|k| {
                self.depformer.bytes_per_step()
                    + self.depformer_in[k.min(self.depformer_in.len() - 1)].bytes()
                    + self.linears[k].bytes()
            })
            .sum();
        self.temporal.bytes_per_step() + self.text_linear.bytes() + dep
    }

    /// Bytes of the temporal part alone (transformer + text head).
    pub fn temporal_bytes(&self) -> usize {
        self.temporal.bytes_per_step() + self.text_linear.bytes()
    }

    /// Bytes of every weight held (linears of every step, embeddings, norms).
    pub fn weight_bytes(&self) -> usize {
        let lin = |w: &[Weights]| w.iter().map(Weights::bytes).sum::<usize>();
        self.temporal.weight_bytes()
            + self.depformer.weight_bytes()
            + self.text_linear.bytes()
            + lin(&self.depformer_in)
            + lin(&self.linears)
            + self.embedding_bytes()
            + 4 * self.out_norm.len()
    }

    /// Bytes held by the embedding tables.
    pub fn embedding_bytes(&self) -> usize {
        self.emb
            .iter()
            .chain(&self.depformer_emb)
            .chain([&self.text_emb, &self.depformer_text_emb])
            .map(Embedding::bytes)
            .sum()
    }

    /// A fresh state for temporal steps of up to `max_t` frames (1 when streaming).
    pub fn state(&self, max_t: usize) -> Result<LmState, MoshiError> {
        let c = &self.cfg;
        let mut ws = MatmulWorkspace::new(max_t, c.dim.max(c.depformer.dim));
        for w in self
            .depformer_in
            .iter()
            .chain(&self.linears)
            .chain([&self.text_linear])
        {
            ws.reserve(w, 1);
        }
        Ok(LmState {
            owner: self.id,
            max_t,
            temporal: self.temporal.state(max_t)?,
            depformer: self.depformer.state(1)?,
            x: vec![0.0; max_t * c.dim],
            text_logits: vec![0.0; c.text_card],
            dx: vec![0.0; c.depformer.dim],
            audio_logits: vec![0.0; c.card],
            ws,
            frames: 0,
            last_t: 0,
        })
    }

    fn check_state(&self, st: &LmState) -> Result<(), MoshiError> {
        if st.owner != self.id {
            return Err(MoshiError::Input("state was made by another model".into()));
        }
        Ok(())
    }

    /// Temporal step over `t` frames of tokens (`tokens: [t, 1 + n_q]`, text
    /// first): the embeddings summed as moshi sums them (audio codebooks in
    /// order, then text), the transformer, `out_norm`; with `logits`, the
    /// last frame's text logits.
    pub fn forward_text(
        &self,
        pool: &impl Fork,
        st: &mut LmState,
        tokens: &[u32],
        t: usize,
        logits: bool,
    ) -> Result<(), MoshiError> {
        self.check_state(st)?;
        let (d, k) = (self.cfg.dim, self.cfg.num_codebooks());
        if t == 0 || t > st.max_t || tokens.len() != t * k {
            return Err(MoshiError::Input(format!(
                "temporal step of {t} frames with {} tokens ({k} per frame, state sized for {})",
                tokens.len(),
                st.max_t
            )));
        }
        let x = &mut st.x[..t * d];
        for (row, frame) in x.chunks_exact_mut(d).zip(tokens.chunks_exact(k)) {
            for (i, (&tok, table)) in frame[1..].iter().zip(&self.emb).enumerate() {
                table.apply_row(tok, row, i == 0)?;
            }
            self.text_emb
                .apply_row(frame[0], row, self.emb.is_empty())?;
        }
        self.temporal_rows(pool, st, t, logits)?;
        Ok(())
    }

    /// Temporal step on one precomputed input embedding (`[dim]`, what
    /// the token embeddings would sum to): a saved voice prompt's replay.
    pub fn forward_embedding(
        &self,
        pool: &impl Fork,
        st: &mut LmState,
        embedding: &[f32],
    ) -> Result<(), MoshiError> {
        self.check_state(st)?;
        let d = self.cfg.dim;
        if embedding.len() != d {
            return Err(MoshiError::Input(format!(
                "an embedding of {} values, the model is {d} wide",
                embedding.len()
            )));
        }
        st.x[..d].copy_from_slice(embedding);
        self.temporal_rows(pool, st, 1, true)
    }

    /// The temporal stack, `out_norm` and (with `logits`) the text head on
    /// the `t` input rows already in `st.x`.
    fn temporal_rows(
        &self,
        pool: &impl Fork,
        st: &mut LmState,
        t: usize,
        logits: bool,
    ) -> Result<(), MoshiError> {
        let d = self.cfg.dim;
        let x = &mut st.x[..t * d];
        self.temporal.step(pool, &mut st.temporal, x, t, 0)?;
        rms_norm(simd_level(), x, d, Some(&self.out_norm), self.cfg.norm_eps)?;
        st.frames += t;
        st.last_t = t;
        if logits {
            let last = &x[(t - 1) * d..];
            matmul_ws(
                last,
                1,
                d,
                &self.text_linear,
                None,
                &mut st.text_logits,
                &mut st.ws,
                pool,
            )?;
        }
        Ok(())
    }

    /// Depformer step `k` of the current frame, fed `prev` (the text token for
    /// `k = 0`, else codebook `k − 1`'s token): codebook `k`'s logits into
    /// [`LmState::audio_logits`]. Step 0 starts the frame's fresh KV.
    pub fn depformer_step(
        &self,
        pool: &impl Fork,
        st: &mut LmState,
        k: usize,
        prev: u32,
    ) -> Result<(), MoshiError> {
        self.check_state(st)?;
        let c = &self.cfg;
        if k >= c.dep_q || st.frames == 0 {
            return Err(MoshiError::Input(format!(
                "depformer step {k} of {} (temporal frames so far: {})",
                c.dep_q, st.frames
            )));
        }
        if k == 0 {
            st.depformer.reset();
        }
        let d = c.dim;
        // The normed temporal output of the last frame stepped.
        let last = &st.x[(st.last_t - 1) * d..st.last_t * d];
        let lin = &self.depformer_in[k.min(self.depformer_in.len() - 1)];
        matmul_ws(last, 1, d, lin, None, &mut st.dx, &mut st.ws, pool)?;
        let emb = if k == 0 {
            &self.depformer_text_emb
        } else {
            &self.depformer_emb[k - 1]
        };
        emb.apply_row(prev, &mut st.dx, false)?;
        self.depformer
            .step(pool, &mut st.depformer, &mut st.dx, 1, k)?;
        matmul_ws(
            &st.dx,
            1,
            c.depformer.dim,
            &self.linears[k],
            None,
            &mut st.audio_logits,
            &mut st.ws,
            pool,
        )?;
        Ok(())
    }
}

/// Floats a [`MoshiLm::state`] of `max_t` holds, computed without allocating
/// (the bind contract checks it against a capacity first).
pub fn state_floats(cfg: &MoshiConfig, max_t: usize) -> usize {
    use crate::speech::attention::RingAttention;
    let stack = |dim: usize,
                 heads: usize,
                 layers: usize,
                 hidden: usize,
                 context: usize,
                 rope: bool,
                 t: usize| {
        let ring = RingAttention::planned_floats(heads, dim / heads, context, rope, t);
        layers * ring + t * (8 * dim + 3 * hidden)
    };
    stack(
        cfg.dim,
        cfg.num_heads,
        cfg.num_layers,
        cfg.hidden(),
        cfg.attention_window(),
        true,
        max_t,
    ) + stack(
        cfg.depformer.dim,
        cfg.depformer.num_heads,
        cfg.depformer.num_layers,
        cfg.depformer_hidden(),
        cfg.depformer_window(),
        false,
        1,
    ) + max_t * cfg.dim
        + cfg.text_card
        + cfg.depformer.dim
        + cfg.card
}
