//! The bind contract: decided once at initialisation from the config, the
//! stored tensors and the options, before any weight is packed.
//!
//! It says which route each transformer linear takes (f32; native half when
//! the checkpoint stores it in f16/bf16, whose values the half kernels use
//! exactly; q8_0 when selective quantization is on), which SEANet and
//! downsampling convs stream on q8_0 weights (when that option is on), and
//! how much session workspace each side needs per code frame, so a bind can
//! refuse a session that does not fit before allocating anything.

use super::config::MimiConfig;
use super::conv::ConvRoute;
use super::error::MimiError;
use super::quantizer::search_format;
use super::resample::DOWNSAMPLE_WEIGHT;
use super::seanet::conv_weights;
use super::weights::{expected_tensors, MimiWeights};
use crate::kernels::matmul::WeightFormat;
use voxlane_runtime::weights::DType;

/// Options chosen at initialisation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MimiOptions {
    /// Quantize the transformer linears to q8_0 (off by default: codes then
    /// match PyTorch exactly only with it off).
    pub q8_transformer: bool,
    /// Quantize the convs that stream on the matmul route (SEANet's deep
    /// layers and the downsampling conv: most of a frame's weight bytes) to
    /// q8_0 (off by default, for the same reason).
    pub q8_convs: bool,
    /// Run the convs that stream on the conv kernels (SEANet's long early
    /// and late layers: most of a frame's MACs) on bf16 weights and inputs
    /// with f32 sums, on AMX-BF16 tiles where the CPU has them (off by
    /// default; without tiles `vdpbf16ps` or an emulation, slower than f32).
    pub bf16_convs: bool,
    /// Stream with NVIDIA's PersonaPlex ring (its fork of moshi drops the
    /// oldest key of a full attention ring, [`crate::speech::attention::Window::NvidiaRing`]):
    /// PersonaPlex's Mimi, bit for bit past its 10 s window. Off: Kyutai's.
    pub nvidia_ring: bool,
}

/// The format of the q8 options: q8_0 weights against activations rounded
/// per block to i16, whose integer block sums run several times faster than
/// widening q8_0 to f32 for a streaming step's 1–16 rows (AVX512-VNNI,
/// AVX2, or scalar with the same bits).
pub const Q8_FORMAT: WeightFormat = WeightFormat::Q8_0Act16;

/// Convs with fewer input or output channels stay off bf16 (a 1-channel
/// conv is cheaper than packing its input to bf16 tiles).
pub const BF16_MIN_CHANNELS: usize = 16;
/// The decoder's matmul-route convs computing at least this many frames per
/// streaming step move to the bf16 tiles too: half a 32-frame tile already
/// beats the grouped matvecs, which are bound by compute there, not by
/// weight bytes. (The encoder's stay q8_0/f32: on bf16 they left 93.9% of
/// the fixture's codes equal to PyTorch's, under the 95% the q8 option keeps.)
pub const BF16_MIN_FRAMES: usize = 16;

/// The route one transformer linear or matmul-route conv takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorRoute {
    /// Official tensor name.
    pub name: String,
    /// `[N, K]`.
    pub shape: [usize; 2],
    /// Packed format.
    pub format: WeightFormat,
}

impl TensorRoute {
    /// Bytes of the packed weight.
    pub fn bytes(&self) -> usize {
        let n = self.shape[0] * self.shape[1];
        match self.format {
            WeightFormat::F32 => 4 * n,
            WeightFormat::F16 | WeightFormat::Bf16 => 2 * n,
            // 32 int8 values + one f16 scale per block.
            WeightFormat::Q8_0 | WeightFormat::Q8_0Act16 => {
                self.shape[0] * self.shape[1].div_ceil(32) * 34
            }
            // 32 nibbles + one f16 scale per block.
            WeightFormat::Q4_0 | WeightFormat::Q4_0Act16 => {
                self.shape[0] * self.shape[1].div_ceil(32) * 18
            }
            WeightFormat::Int8 => n,
        }
    }
}

/// Session workspace as `fixed + per_frame · max_frames` floats.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkspaceRule {
    /// Floats independent of the step size (KV caches, conv histories).
    pub fixed: usize,
    /// Floats per code frame of the largest step.
    pub per_frame: usize,
}

impl WorkspaceRule {
    /// Bytes for steps of up to `max_frames` code frames.
    pub fn bytes(&self, max_frames: usize) -> usize {
        4 * (self.fixed + self.per_frame * max_frames.max(1))
    }
}

/// The precomputed, opaque plan a Mimi model is bound by.
#[derive(Debug, Clone, PartialEq)]
pub struct BindContract {
    options: MimiOptions,
    routes: Vec<TensorRoute>,
    pub(crate) encoder: WorkspaceRule,
    pub(crate) decoder: WorkspaceRule,
    /// Weight bytes one streaming encode / decode frame reads.
    streamed: (usize, usize),
}

/// Is `name` a transformer linear (the only tensors with a route choice)?
fn is_linear(name: &str) -> bool {
    (name.starts_with("encoder_transformer.") || name.starts_with("decoder_transformer."))
        && (name.ends_with("in_proj_weight")
            || name.ends_with("out_proj.weight")
            || name.ends_with("linear1.weight")
            || name.ends_with("linear2.weight")
            || name.ends_with("input_proj.weight")
            || name.ends_with("output_projs.0.weight"))
}

impl BindContract {
    /// Plan the routes of validated `weights` for `cfg` (workspace rules are
    /// filled in when the model is built, from its layer shapes).
    pub fn plan(
        cfg: &MimiConfig,
        weights: &MimiWeights,
        options: MimiOptions,
    ) -> Result<Self, MimiError> {
        cfg.validate()?;
        let mut routes = Vec::new();
        let expected = expected_tensors(cfg);
        for e in expected
            .iter()
            .filter(|e| e.used && is_linear(&e.name))
            .cloned()
        {
            if weights.peek(&e.name).is_none() {
                return Err(MimiError::MissingTensors(vec![e.name]));
            }
            let format = if options.q8_transformer {
                Q8_FORMAT
            } else {
                match weights.stored_dtype(&e.name) {
                    DType::F16 => WeightFormat::F16,
                    DType::BF16 => WeightFormat::Bf16,
                    _ => WeightFormat::F32,
                }
            };
            routes.push(TensorRoute {
                shape: [e.shape[0], e.shape[1]],
                name: e.name,
                format,
            });
        }
        let (dim, s) = (cfg.seanet.dimension, cfg.resample_stride());
        let encoder = conv_weights(&cfg.seanet, false, cfg.frame_size());
        let decoder = conv_weights(&cfg.seanet, true, s);
        let encoder = encoder.into_iter().map(|c| (c, false));
        for (c, decoding) in encoder.chain(decoder.into_iter().map(|c| (c, true))) {
            let bf16 = options.bf16_convs && c.min_channels >= BF16_MIN_CHANNELS;
            let wide = decoding && c.frames >= BF16_MIN_FRAMES;
            let format = match c.route {
                ConvRoute::Kernel if bf16 => WeightFormat::Bf16,
                ConvRoute::Matmul if bf16 && wide => WeightFormat::Bf16,
                // q8_0 blocks run along K: layers whose K is not whole blocks stay f32.
                ConvRoute::Matmul if options.q8_convs && c.shape[1] % 32 == 0 => Q8_FORMAT,
                _ => continue,
            };
            routes.push(TensorRoute {
                name: c.name,
                shape: c.shape,
                format,
            });
        }
        if options.q8_convs && s > 1 && (dim * 2 * s) % 32 == 0 {
            routes.push(TensorRoute {
                name: DOWNSAMPLE_WEIGHT.to_string(),
                shape: [dim, dim * 2 * s],
                format: Q8_FORMAT,
            });
        }
        let mut plan = Self {
            options,
            routes,
            encoder: WorkspaceRule::default(),
            decoder: WorkspaceRule::default(),
            streamed: (0, 0),
        };
        // Every weight a frame touches, in its packed size; decoding looks up
        // only one row per codebook, and the encoder's search reads the
        // codebooks' q8_0 copy (bf16 for widths off whole 32-value blocks;
        // plus the few f32 rows it checks exactly).
        for e in expected.iter().filter(|e| e.used) {
            let n: usize = e.shape.iter().product();
            let name = e.name.as_str();
            let bytes = match plan.routes.iter().find(|r| r.name == e.name) {
                Some(r) => r.bytes(),
                None if name.ends_with("embedding_sum") => TensorRoute {
                    name: e.name.clone(),
                    shape: [e.shape[0], e.shape[1]],
                    format: search_format(e.shape[1]),
                }
                .bytes(),
                None => 4 * n,
            };
            if name.starts_with("encoder") || name.starts_with("downsample") {
                plan.streamed.0 += bytes;
            } else if name.starts_with("decoder") || name.starts_with("upsample") {
                plan.streamed.1 += bytes;
            } else if name.ends_with("input_proj.weight") || name.ends_with("embedding_sum") {
                plan.streamed.0 += bytes;
            } else if name.ends_with("output_proj.weight") {
                plan.streamed.1 += bytes;
            }
        }
        Ok(plan)
    }

    /// Weight bytes one streaming frame reads: `(encode, decode)`. Streaming
    /// steps are bound by this traffic: it over the machine's read bandwidth
    /// is the floor of a frame's time.
    pub fn streamed_bytes(&self) -> (usize, usize) {
        self.streamed
    }

    /// The options it was planned with.
    pub fn options(&self) -> MimiOptions {
        self.options
    }

    /// Every transformer linear with its route, then the convs the options
    /// move off f32: q8_0 ([`MimiOptions::q8_convs`]) and bf16
    /// ([`MimiOptions::bf16_convs`]), in layer order.
    pub fn routes(&self) -> &[TensorRoute] {
        &self.routes
    }

    /// The format `name` is packed in (f32 for tensors without a route choice).
    pub fn format_of(&self, name: &str) -> WeightFormat {
        self.routes
            .iter()
            .find(|r| r.name == name)
            .map_or(WeightFormat::F32, |r| r.format)
    }

    /// How many linears take `format`, and their packed bytes.
    pub fn route_total(&self, format: WeightFormat) -> (usize, usize) {
        self.routes
            .iter()
            .filter(|r| r.format == format)
            .fold((0, 0), |(n, b), r| (n + 1, b + r.bytes()))
    }

    /// Workspace rule of an encode session.
    pub fn encoder_workspace(&self) -> WorkspaceRule {
        self.encoder
    }

    /// Workspace rule of a decode session.
    pub fn decoder_workspace(&self) -> WorkspaceRule {
        self.decoder
    }
}
