//! Mimi configuration: the `mimi_config` JSON of PyTorch `moshi` (seanet,
//! quantizer, transformer kwargs) plus `num_codebooks`, with the official
//! defaults (`moshi.models.loaders._mimi_config`) for every absent field.

use super::error::MimiError;
use crate::speech::config_json::Obj;
use serde_json::Value;

/// SEANet encoder/decoder hyper-parameters (`seanet` kwargs).
#[derive(Debug, Clone, PartialEq)]
pub struct SeanetConfig {
    /// Audio channels.
    pub channels: usize,
    /// Latent dimension.
    pub dimension: usize,
    /// Base width.
    pub n_filters: usize,
    /// Residual blocks per stage.
    pub n_residual_layers: usize,
    /// Decoder-order ratios (the encoder uses them reversed).
    pub ratios: Vec<usize>,
    /// First conv kernel.
    pub kernel_size: usize,
    /// Last conv kernel.
    pub last_kernel_size: usize,
    /// Residual conv kernel.
    pub residual_kernel_size: usize,
    /// Dilation growth per residual layer.
    pub dilation_base: usize,
    /// Hidden width divisor in residual blocks.
    pub compress: usize,
    /// Identity skip (else a 1×1 conv shortcut).
    pub true_skip: bool,
    /// ELU alpha.
    pub elu_alpha: f32,
}

/// Split residual vector quantizer hyper-parameters (`quantizer` kwargs).
#[derive(Debug, Clone, PartialEq)]
pub struct QuantizerConfig {
    /// Codebook vector dimension.
    pub dimension: usize,
    /// Quantizers stored in the weights (semantic included).
    pub n_q: usize,
    /// Entries per codebook.
    pub bins: usize,
    /// Latent dimension fed in.
    pub input_dimension: usize,
    /// Latent dimension produced.
    pub output_dimension: usize,
    /// Semantic quantizers (`rvq_first`), 1 in Mimi.
    pub n_q_semantic: usize,
}

/// Projected streaming transformer hyper-parameters (`transformer` kwargs).
#[derive(Debug, Clone, PartialEq)]
pub struct TransformerConfig {
    /// Model width.
    pub d_model: usize,
    /// Attention heads.
    pub num_heads: usize,
    /// Layers.
    pub num_layers: usize,
    /// Feed-forward hidden width.
    pub dim_feedforward: usize,
    /// Attention window in steps (causal, query included).
    pub context: usize,
    /// Layer-scale init; `None` means no layer scale tensors.
    pub layer_scale: Option<f32>,
    /// RoPE max period.
    pub max_period: f32,
    /// Width of the input (projected to `d_model` when different).
    pub input_dimension: usize,
    /// Width of the single output (projected from `d_model` when different).
    pub output_dimension: usize,
}

/// The whole codec configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct MimiConfig {
    /// Audio sample rate (Hz).
    pub sample_rate: usize,
    /// Audio channels (1).
    pub channels: usize,
    /// Code frame rate (Hz), 12.5.
    pub frame_rate: f64,
    /// SEANet.
    pub seanet: SeanetConfig,
    /// Quantizer.
    pub quantizer: QuantizerConfig,
    /// Encoder and decoder transformers (same shape).
    pub transformer: TransformerConfig,
    /// Codebooks used for encode/decode (≤ `quantizer.n_q`).
    pub num_codebooks: usize,
}

impl Default for MimiConfig {
    /// The official Mimi (moshi 0.2.x `_mimi_config`, 8 codebooks used).
    fn default() -> Self {
        Self {
            sample_rate: 24_000,
            channels: 1,
            frame_rate: 12.5,
            seanet: SeanetConfig {
                channels: 1,
                dimension: 512,
                n_filters: 64,
                n_residual_layers: 1,
                ratios: vec![8, 6, 5, 4],
                kernel_size: 7,
                last_kernel_size: 3,
                residual_kernel_size: 3,
                dilation_base: 2,
                compress: 2,
                true_skip: true,
                elu_alpha: 1.0,
            },
            quantizer: QuantizerConfig {
                dimension: 256,
                n_q: 32,
                bins: 2048,
                input_dimension: 512,
                output_dimension: 512,
                n_q_semantic: 1,
            },
            transformer: TransformerConfig {
                d_model: 512,
                num_heads: 8,
                num_layers: 8,
                dim_feedforward: 2048,
                context: 250,
                layer_scale: Some(0.01),
                max_period: 10_000.0,
                input_dimension: 512,
                output_dimension: 512,
            },
            num_codebooks: 8,
        }
    }
}

/// A config error for `key` of the object at `path`.
fn field_err(path: &str, key: &str, detail: &str) -> MimiError {
    crate::speech::config_json::field_err(path, key, detail).into()
}

impl MimiConfig {
    /// Parse a config JSON: either `{"mimi_config": {...}, "num_codebooks": N}`
    /// or a bare `mimi_config` object. Absent fields take the official values.
    pub fn from_json(text: &str) -> Result<Self, MimiError> {
        let root: Value = serde_json::from_str(text).map_err(|e| MimiError::Json(e.to_string()))?;
        let top = Obj::new("", Some(&root))?;
        let (mimi, num_codebooks) = match top.get("mimi_config") {
            Some(m) => (Obj::new("mimi_config", Some(m))?, top.get("num_codebooks")),
            None => (Obj::new("", Some(&root))?, top.get("num_codebooks")),
        };
        let d = MimiConfig::default();
        let s = mimi.sub("seanet")?;
        let q = mimi.sub("quantizer")?;
        let t = mimi.sub("transformer")?;

        // What voxlane implements: causal, no weight norm, ELU, constant padding,
        // plain FF, layer norm, RoPE, conv layout.
        if !s.bool("causal", true)? {
            return Err(field_err(
                "seanet",
                "causal",
                "only causal Mimi is supported",
            ));
        }
        s.one_of("norm", &["none"])?;
        s.one_of("activation", &["ELU"])?;
        s.one_of("pad_mode", &["constant"])?;
        for key in ["final_activation", "mask_fn"] {
            if s.get(key).is_some() {
                return Err(field_err("seanet", key, "not supported (Mimi has none)"));
            }
        }
        if !t.bool("causal", true)? {
            return Err(field_err(
                "transformer",
                "causal",
                "only causal is supported",
            ));
        }
        if !t.bool("conv_layout", true)? {
            return Err(field_err("transformer", "conv_layout", "must be true"));
        }
        t.one_of("gating", &["none"])?;
        t.one_of("norm", &["layer_norm"])?;
        t.one_of("positional_embedding", &["rope"])?;
        for key in ["weights_per_step", "kv_repeat"] {
            if t.usize(key, 0)? > 1 {
                return Err(field_err("transformer", key, "not supported"));
            }
        }

        let seanet = SeanetConfig {
            channels: s.usize("channels", d.seanet.channels)?,
            dimension: s.usize("dimension", d.seanet.dimension)?,
            n_filters: s.usize("n_filters", d.seanet.n_filters)?,
            n_residual_layers: s.usize("n_residual_layers", d.seanet.n_residual_layers)?,
            ratios: s.usize_list("ratios", &d.seanet.ratios)?,
            kernel_size: s.usize("kernel_size", d.seanet.kernel_size)?,
            last_kernel_size: s.usize("last_kernel_size", d.seanet.last_kernel_size)?,
            residual_kernel_size: s.usize("residual_kernel_size", d.seanet.residual_kernel_size)?,
            dilation_base: s.usize("dilation_base", d.seanet.dilation_base)?,
            compress: s.usize("compress", d.seanet.compress)?,
            true_skip: s.bool("true_skip", d.seanet.true_skip)?,
            elu_alpha: match s.sub("activation_params")?.get("alpha") {
                Some(v) => v.as_f64().ok_or_else(|| {
                    field_err("seanet", "activation_params.alpha", "must be a number")
                })? as f32,
                None => 1.0,
            },
        };
        let quantizer = QuantizerConfig {
            dimension: q.usize("dimension", d.quantizer.dimension)?,
            n_q: q.usize("n_q", d.quantizer.n_q)?,
            bins: q.usize("bins", d.quantizer.bins)?,
            input_dimension: q.usize("input_dimension", seanet.dimension)?,
            output_dimension: q.usize("output_dimension", seanet.dimension)?,
            n_q_semantic: q.usize("n_q_semantic", 1)?,
        };
        let outputs = t.usize_list("output_dimensions", &[seanet.dimension])?;
        let output_dimension = match outputs.as_slice() {
            [one] => *one,
            _ => {
                return Err(field_err(
                    "transformer",
                    "output_dimensions",
                    "Mimi has exactly one output",
                ))
            }
        };
        let layer_scale = match t.get("layer_scale") {
            None => None,
            Some(v) => Some(
                v.as_f64()
                    .ok_or_else(|| field_err("transformer", "layer_scale", "must be a number"))?
                    as f32,
            ),
        };
        let layer_scale = if t.is_absent() {
            d.transformer.layer_scale
        } else {
            layer_scale
        };
        let transformer = TransformerConfig {
            d_model: t.usize("d_model", seanet.dimension)?,
            num_heads: t.usize("num_heads", d.transformer.num_heads)?,
            num_layers: t.usize("num_layers", d.transformer.num_layers)?,
            dim_feedforward: t.usize("dim_feedforward", d.transformer.dim_feedforward)?,
            context: t.usize("context", d.transformer.context)?,
            layer_scale,
            max_period: t.f64("max_period", d.transformer.max_period as f64)? as f32,
            input_dimension: t.usize("input_dimension", seanet.dimension)?,
            output_dimension,
        };
        let num_codebooks = match num_codebooks {
            None => d.num_codebooks.min(quantizer.n_q),
            Some(v) => v
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| field_err("", "num_codebooks", "must be a non-negative integer"))?,
        };
        let cfg = MimiConfig {
            sample_rate: mimi.usize("sample_rate", d.sample_rate)?,
            channels: mimi.usize("channels", d.channels)?,
            frame_rate: mimi.f64("frame_rate", d.frame_rate)?,
            seanet,
            quantizer,
            transformer,
            num_codebooks,
        };
        cfg.validate()?;
        Ok(cfg)
    }

    /// Read and parse a config file.
    pub fn from_file(path: impl AsRef<std::path::Path>) -> Result<Self, MimiError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .map_err(|e| MimiError::Json(format!("{}: {e}", path.display())))?;
        Self::from_json(&text)
    }

    /// Samples per encoder step (product of the ratios; saturating, so a
    /// hostile config is refused by [`Self::validate`] instead of overflowing).
    pub fn hop_length(&self) -> usize {
        self.seanet
            .ratios
            .iter()
            .fold(1usize, |a, &r| a.saturating_mul(r))
    }

    /// Samples per code frame (`sample_rate / frame_rate`, 1920).
    pub fn frame_size(&self) -> usize {
        (self.sample_rate as f64 / self.frame_rate).round() as usize
    }

    /// Encoder steps per code frame (the learnt down/upsampling stride, 2).
    pub fn resample_stride(&self) -> usize {
        self.frame_size() / self.hop_length().max(1)
    }

    /// Check the shapes fit together (what moshi asserts at construction).
    pub fn validate(&self) -> Result<(), MimiError> {
        let bad = |field: &str, detail: String| {
            Err(MimiError::Config {
                field: field.to_string(),
                detail,
            })
        };
        let s = &self.seanet;
        let positive = [
            ("seanet.channels", s.channels),
            ("seanet.dimension", s.dimension),
            ("seanet.n_filters", s.n_filters),
            ("seanet.kernel_size", s.kernel_size),
            ("seanet.last_kernel_size", s.last_kernel_size),
            ("seanet.residual_kernel_size", s.residual_kernel_size),
            ("seanet.dilation_base", s.dilation_base),
            ("seanet.compress", s.compress),
            ("quantizer.dimension", self.quantizer.dimension),
            ("quantizer.bins", self.quantizer.bins),
            ("transformer.d_model", self.transformer.d_model),
            ("transformer.num_heads", self.transformer.num_heads),
            (
                "transformer.dim_feedforward",
                self.transformer.dim_feedforward,
            ),
            ("transformer.context", self.transformer.context),
            ("sample_rate", self.sample_rate),
        ];
        for (field, v) in positive {
            if v == 0 {
                return bad(field, "must be positive".into());
            }
        }
        if s.ratios.is_empty() || s.ratios.len() > 16 || s.ratios.contains(&0) {
            return bad(
                "seanet.ratios",
                format!("{:?} must be 1 to 16 positive ratios", s.ratios),
            );
        }
        if s.channels != 1 {
            return bad(
                "seanet.channels",
                format!("{} audio channels: Mimi is mono", s.channels),
            );
        }
        if self.channels != s.channels {
            return bad(
                "channels",
                format!(
                    "{} differs from seanet.channels {}",
                    self.channels, s.channels
                ),
            );
        }
        if s.dimension / s.compress == 0 || (s.n_filters / s.compress) == 0 {
            return bad(
                "seanet.compress",
                format!("{} leaves no hidden channels", s.compress),
            );
        }
        if !(self.frame_rate.is_finite() && self.frame_rate > 0.0) {
            return bad(
                "frame_rate",
                format!("{} must be positive", self.frame_rate),
            );
        }
        let fs = self.sample_rate as f64 / self.frame_rate;
        let hop = self.hop_length();
        if fs.fract() != 0.0 || !(fs as usize).is_multiple_of(hop) || (fs as usize) < hop {
            return bad(
                "frame_rate",
                format!(
                    "frame size {fs} samples must be a positive multiple of the hop {hop} (conv resampling)"
                ),
            );
        }
        let t = &self.transformer;
        if !t.d_model.is_multiple_of(t.num_heads) || !(t.d_model / t.num_heads).is_multiple_of(2) {
            return bad(
                "transformer.num_heads",
                format!("d_model {} must split into heads of even width", t.d_model),
            );
        }
        if t.input_dimension != s.dimension || t.output_dimension != s.dimension {
            return bad(
                "transformer.input_dimension",
                format!(
                    "transformer in/out must equal seanet.dimension {}",
                    s.dimension
                ),
            );
        }
        let q = &self.quantizer;
        if q.input_dimension != s.dimension || q.output_dimension != s.dimension {
            return bad(
                "quantizer.input_dimension",
                format!(
                    "quantizer in/out must equal seanet.dimension {}",
                    s.dimension
                ),
            );
        }
        if q.n_q_semantic == 0 || q.n_q <= q.n_q_semantic {
            return bad(
                "quantizer.n_q",
                format!(
                    "{} must exceed the {} semantic quantizer(s)",
                    q.n_q, q.n_q_semantic
                ),
            );
        }
        if self.num_codebooks < q.n_q_semantic || self.num_codebooks > q.n_q {
            return bad(
                "num_codebooks",
                format!(
                    "{} must lie in {}..={}",
                    self.num_codebooks, q.n_q_semantic, q.n_q
                ),
            );
        }
        if self.num_codebooks > 64 {
            return bad(
                "num_codebooks",
                format!("{} exceeds the supported 64", self.num_codebooks),
            );
        }
        if u32::try_from(q.bins).is_err() {
            return bad("quantizer.bins", format!("{} is too large", q.bins));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_official() {
        let c = MimiConfig::from_json("{}").unwrap();
        assert_eq!(c, MimiConfig::default());
        assert_eq!(c.frame_size(), 1920);
        assert_eq!(c.hop_length(), 960);
        assert_eq!(c.resample_stride(), 2);
    }

    #[test]
    fn unsupported_values_are_named() {
        let e = MimiConfig::from_json(r#"{"mimi_config":{"seanet":{"norm":"weight_norm"}}}"#)
            .unwrap_err();
        assert!(e.to_string().contains("seanet.norm"), "{e}");
        let e = MimiConfig::from_json(r#"{"num_codebooks": 40}"#).unwrap_err();
        assert!(e.to_string().contains("num_codebooks"), "{e}");
        assert!(matches!(
            MimiConfig::from_json("[1"),
            Err(MimiError::Json(_))
        ));
    }
}
