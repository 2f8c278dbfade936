//! Moshi LM configuration: the `lm_config` JSON of PyTorch `moshi` (the
//! temporal transformer, the depformer and the stream delays), with the
//! official Moshi 7B (`moshiko`) values for every absent field.
//!
//! voxlane implements what Moshi and PersonaPlex use: causal RoPE
//! (interleaved) in the temporal transformer, no positions in the depformer,
//! SiLU gating, RMS norms, no layer scale, per-step depformer weights.

use super::error::MoshiError;
use crate::speech::config_json::{field_err, Obj};
use serde_json::Value;

/// The most audio codebooks the depformer may generate per frame (a frame's
/// tokens fit a fixed array: no allocation per frame).
pub const MAX_DEP_Q: usize = 32;

/// The depth transformer ("depformer"): one step per generated codebook.
#[derive(Debug, Clone, PartialEq)]
pub struct DepformerConfig {
    /// Width.
    pub dim: usize,
    /// Attention heads.
    pub num_heads: usize,
    /// Layers.
    pub num_layers: usize,
    /// `dim_feedforward` as configured (the gating hidden width derives from it).
    pub dim_feedforward: usize,
    /// One `depformer_in` linear per codebook (else one shared).
    pub multi_linear: bool,
}

/// Speech-text language model hyper-parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct MoshiConfig {
    /// Temporal transformer width.
    pub dim: usize,
    /// Text vocabulary (the embedding has one more row: the initial token).
    pub text_card: usize,
    /// Text padding id (`PAD`, 3 in Moshi).
    pub text_padding_id: usize,
    /// Audio codebooks read per frame (the model's own and the other speaker's).
    pub n_q: usize,
    /// Audio codebooks the depformer generates per frame.
    pub dep_q: usize,
    /// Entries per audio codebook (the embeddings have one more: the initial token).
    pub card: usize,
    /// Attention heads.
    pub num_heads: usize,
    /// Layers.
    pub num_layers: usize,
    /// `int(hidden_scale · dim)`, from which the gating hidden width derives.
    pub dim_feedforward: usize,
    /// Attention window in frames (query included).
    pub context: usize,
    /// RoPE max period.
    pub max_period: f32,
    /// RMS norm epsilon (`rms_norm_f32`: 1e-8, `rms_norm`: 1e-5).
    pub norm_eps: f32,
    /// The depth transformer.
    pub depformer: DepformerConfig,
    /// Per stream delay in frames: text, then the `n_q` audio codebooks.
    pub delays: Vec<usize>,
}

impl Default for MoshiConfig {
    /// The official Moshi 7B (`kyutai/moshiko-pytorch-bf16`).
    fn default() -> Self {
        let mut delays = vec![0, 0];
        delays.extend([1; 7]);
        delays.push(0);
        delays.extend([1; 7]);
        Self {
            dim: 4096,
            text_card: 32000,
            text_padding_id: 3,
            n_q: 16,
            dep_q: 8,
            card: 2048,
            num_heads: 32,
            num_layers: 32,
            dim_feedforward: 16896,
            context: 3000,
            max_period: 10_000.0,
            norm_eps: 1e-8,
            depformer: DepformerConfig {
                dim: 1024,
                num_heads: 16,
                num_layers: 6,
                dim_feedforward: 4224,
                multi_linear: true,
            },
            delays,
        }
    }
}

/// The SiLU gating's hidden width for a `dim_feedforward` (moshi `ActivationGating`).
///
/// Saturating: a hostile config's huge sizes give a huge width (refused by
/// [`MoshiConfig::validate`]), not an overflow.
pub fn gating_hidden(dim: usize, dim_feedforward: usize) -> usize {
    if dim.checked_mul(4) == Some(dim_feedforward) {
        dim.saturating_mul(21) / 8
    } else {
        dim_feedforward.saturating_mul(2) / 3
    }
}

impl MoshiConfig {
    /// Gating hidden width of the temporal transformer.
    pub fn hidden(&self) -> usize {
        gating_hidden(self.dim, self.dim_feedforward)
    }

    /// Gating hidden width of the depformer.
    pub fn depformer_hidden(&self) -> usize {
        gating_hidden(self.depformer.dim, self.depformer.dim_feedforward)
    }

    /// Streams per frame: text plus `n_q` audio codebooks.
    pub fn num_codebooks(&self) -> usize {
        self.n_q + 1
    }

    /// Audio codebooks of the other speaker (`n_q − dep_q`).
    pub fn user_codebooks(&self) -> usize {
        self.n_q - self.dep_q
    }

    /// PersonaPlex: the depformer predicts both speakers (`dep_q == n_q`).
    pub fn is_persona(&self) -> bool {
        self.dep_q == self.n_q
    }

    /// Keys a temporal query attends to. Kyutai's `moshi` 0.2.13 attends to
    /// the last `context` positions; NVIDIA's PersonaPlex fork keeps moshi's
    /// older `RingKVCache`, whose position arithmetic (`delta <= 0`) gives
    /// the oldest slot of a full ring a future position, so the mask drops it:
    /// `context − 1` keys once the ring has wrapped (measured against
    /// NVIDIA's reference logits to 1e-7).
    pub fn attention_window(&self) -> usize {
        if self.is_persona() {
            self.context.saturating_sub(1).max(1)
        } else {
            self.context
        }
    }

    /// Keys a depformer step attends to (its ring holds `dep_q` steps; the
    /// same older ring drops the first step from PersonaPlex's last one).
    pub fn depformer_window(&self) -> usize {
        if self.is_persona() {
            self.dep_q.saturating_sub(1).max(1)
        } else {
            self.dep_q
        }
    }

    /// The largest stream delay.
    pub fn max_delay(&self) -> usize {
        self.delays.iter().copied().max().unwrap_or(0)
    }

    /// Token id that starts the text stream (`text_card`).
    pub fn text_initial_token(&self) -> u32 {
        self.text_card as u32
    }

    /// Token id that starts each audio stream (`card`).
    pub fn audio_initial_token(&self) -> u32 {
        self.card as u32
    }

    /// Parse a config JSON: `{"lm_config": {...}}` or a bare `lm_config` object.
    pub fn from_json(text: &str) -> Result<Self, MoshiError> {
        let root: Value =
            serde_json::from_str(text).map_err(|e| MoshiError::Json(e.to_string()))?;
        let top = Obj::new("", Some(&root))?;
        let lm = match top.get("lm_config") {
            Some(m) => Obj::new("lm_config", Some(m))?,
            None => top,
        };
        let d = MoshiConfig::default();
        let dim = lm.usize("dim", d.dim)?;
        let hidden_scale = lm.f64("hidden_scale", 4.125)?;
        let dep_dim = lm.usize("depformer_dim", d.depformer.dim)?;
        let dep_ff = match lm.get("depformer_dim_feedforward") {
            None => (hidden_scale * dep_dim as f64) as usize,
            Some(_) => lm.usize("depformer_dim_feedforward", 0)?,
        };
        // What voxlane implements (the official Moshi and PersonaPlex values).
        lm.one_of("gating", &["silu"])?;
        lm.one_of("depformer_gating", &["silu"])?;
        lm.one_of("norm", &["rms_norm_f32", "rms_norm"])?;
        lm.one_of("positional_embedding", &["rope"])?;
        lm.one_of("depformer_pos_emb", &["none"])?;
        for key in [
            "layer_scale",
            "depformer_layer_scale",
            "depformer_weights_per_step_schedule",
            "depformer_low_rank_embeddings",
            "depformer_norm",
            "text_card_out",
        ] {
            if lm.get(key).is_some() {
                return Err(field_err(
                    "lm_config",
                    key,
                    "is not supported (must be null or absent)",
                )
                .into());
            }
        }
        for (key, want) in [
            ("causal", true),
            ("depformer_weights_per_step", true),
            ("demux_second_text_stream", false),
            ("norm_emb", false),
            ("bias_proj", false),
        ] {
            if lm.bool(key, want)? != want {
                return Err(
                    field_err("lm_config", key, &format!("only {want} is supported")).into(),
                );
            }
        }
        let norm_eps = match lm.get("norm").and_then(Value::as_str) {
            Some("rms_norm") => 1e-5,
            _ => 1e-8,
        };
        let cfg = Self {
            dim,
            text_card: lm.usize("text_card", d.text_card)?,
            text_padding_id: lm.usize("existing_text_padding_id", d.text_padding_id)?,
            n_q: lm.usize("n_q", d.n_q)?,
            dep_q: lm.usize("dep_q", d.dep_q)?,
            card: lm.usize("card", d.card)?,
            num_heads: lm.usize("num_heads", d.num_heads)?,
            num_layers: lm.usize("num_layers", d.num_layers)?,
            dim_feedforward: (hidden_scale * dim as f64) as usize,
            context: lm.usize("context", d.context)?,
            max_period: lm.f64("max_period", f64::from(d.max_period))? as f32,
            norm_eps,
            depformer: DepformerConfig {
                dim: dep_dim,
                num_heads: lm.usize("depformer_num_heads", d.depformer.num_heads)?,
                num_layers: lm.usize("depformer_num_layers", d.depformer.num_layers)?,
                dim_feedforward: dep_ff,
                multi_linear: lm.bool("depformer_multi_linear", true)?,
            },
            delays: lm.usize_list("delays", &d.delays)?,
        };
        cfg.validate()?;
        Ok(cfg)
    }

    /// Read and parse a config file.
    pub fn from_file(path: &std::path::Path) -> Result<Self, MoshiError> {
        let text = std::fs::read_to_string(path).map_err(|e| MoshiError::Io {
            path: path.to_path_buf(),
            detail: e.to_string(),
        })?;
        Self::from_json(&text)
    }

    /// Check the sizes fit together (the shapes every tensor is checked against).
    pub fn validate(&self) -> Result<(), MoshiError> {
        let bad = |key: &str, detail: String| -> MoshiError {
            field_err("lm_config", key, &detail).into()
        };
        let positive = [
            ("dim", self.dim),
            ("text_card", self.text_card),
            ("n_q", self.n_q),
            ("dep_q", self.dep_q),
            ("card", self.card),
            ("num_heads", self.num_heads),
            ("num_layers", self.num_layers),
            ("context", self.context),
            ("hidden_scale", self.hidden()),
            ("depformer_dim", self.depformer.dim),
            ("depformer_num_heads", self.depformer.num_heads),
            ("depformer_num_layers", self.depformer.num_layers),
            ("depformer_dim_feedforward", self.depformer_hidden()),
        ];
        for (key, v) in positive {
            if v == 0 {
                return Err(bad(key, "must be positive".into()));
            }
        }
        // Bounds that keep every size product far from overflow and every id in u32.
        for (key, v, max) in [
            ("dim", self.dim, 1 << 16),
            ("text_card", self.text_card, 1 << 20),
            ("card", self.card, 1 << 20),
            ("n_q", self.n_q, 64),
            ("num_layers", self.num_layers, 256),
            ("context", self.context, 1 << 20),
            ("depformer_dim", self.depformer.dim, 1 << 16),
            ("depformer_num_layers", self.depformer.num_layers, 256),
            ("hidden_scale", self.hidden(), 1 << 20),
            (
                "depformer_dim_feedforward",
                self.depformer_hidden(),
                1 << 20,
            ),
        ] {
            if v > max {
                return Err(bad(key, format!("{v} exceeds {max}")));
            }
        }
        if self.dep_q > MAX_DEP_Q {
            return Err(bad("dep_q", format!("{} exceeds {MAX_DEP_Q}", self.dep_q)));
        }
        if self.dep_q > self.n_q {
            return Err(bad(
                "dep_q",
                format!("{} exceeds n_q {}", self.dep_q, self.n_q),
            ));
        }
        for (key, dim, heads) in [
            ("num_heads", self.dim, self.num_heads),
            (
                "depformer_num_heads",
                self.depformer.dim,
                self.depformer.num_heads,
            ),
        ] {
            if !dim.is_multiple_of(heads) || !(dim / heads).is_multiple_of(2) {
                return Err(bad(
                    key,
                    format!("{heads} heads must split width {dim} into even head sizes"),
                ));
            }
        }
        if self.delays.len() != self.num_codebooks() {
            return Err(bad(
                "delays",
                format!(
                    "{} delays for {} streams (text + n_q)",
                    self.delays.len(),
                    self.num_codebooks()
                ),
            ));
        }
        if self.max_delay() > 64 {
            return Err(bad(
                "delays",
                format!("largest delay {} exceeds 64", self.max_delay()),
            ));
        }
        if self.text_padding_id >= self.text_card {
            return Err(bad(
                "existing_text_padding_id",
                format!("{} outside text_card", self.text_padding_id),
            ));
        }
        if !(self.max_period.is_finite() && self.max_period > 1.0) {
            return Err(bad(
                "max_period",
                format!("{} must be a finite number > 1", self.max_period),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn official_defaults_match_moshiko() {
        let c = MoshiConfig::default();
        assert_eq!(c.hidden(), 11264);
        assert_eq!(c.depformer_hidden(), 2816);
        assert_eq!(c.delays.len(), 17);
        assert_eq!(c.max_delay(), 1);
        c.validate().unwrap();
        assert_eq!(MoshiConfig::from_json("{}").unwrap(), c);
    }

    #[test]
    fn fixture_config_parses() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../shared/fixtures/moshi-tiny/config.json"
        );
        let c = MoshiConfig::from_file(std::path::Path::new(path)).unwrap();
        assert_eq!(
            (c.dim, c.dep_q, c.n_q, c.card, c.text_card),
            (64, 8, 16, 256, 100)
        );
        assert_eq!((c.hidden(), c.depformer_hidden()), (176, 88));
    }

    #[test]
    fn bad_fields_are_named() {
        for (json, field) in [
            (r#"{"lm_config": {"gating": "gelu"}}"#, "lm_config.gating"),
            (
                r#"{"lm_config": {"dim": 100, "num_heads": 3}}"#,
                "lm_config.num_heads",
            ),
            (r#"{"lm_config": {"delays": [0, 1]}}"#, "lm_config.delays"),
            (r#"{"lm_config": {"dep_q": 20}}"#, "lm_config.dep_q"),
            (
                r#"{"lm_config": {"layer_scale": 0.1}}"#,
                "lm_config.layer_scale",
            ),
            (r#"{"lm_config": {"card": -3}}"#, "lm_config.card"),
        ] {
            match MoshiConfig::from_json(json) {
                Err(MoshiError::Config { field: f, .. }) => assert_eq!(f, field, "{json}"),
                other => panic!("{json}: {other:?}"),
            }
        }
        assert!(matches!(
            MoshiConfig::from_json("{"),
            Err(MoshiError::Json(_))
        ));
    }
}
