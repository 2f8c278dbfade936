//! The Mimi codec: pcm → SEANet encoder → encoder transformer → learnt
//! downsample → split RVQ codes, and codes → latent → learnt upsample →
//! decoder transformer → SEANet decoder → pcm (moshi `MimiModel.encode/decode`).
//!
//! Every stage is causal, so a batch call is a single step of all frames from
//! a fresh state, and streaming is the same step one code frame (1920
//! samples) at a time: one code path, batch and streaming agree by
//! construction. States ([`EncoderState`], [`DecoderState`]) are sized once
//! for their largest step; a step allocates nothing.

use super::config::MimiConfig;
use super::contract::{BindContract, MimiOptions, WorkspaceRule};
use super::conv::{CausalConv, CausalConvTr, ConvHistory, ConvScratch};
use super::error::MimiError;
use super::quantizer::{Quantizer, QuantizerScratch};
use super::resample;
use super::seanet::{Seanet, SeanetState};
use super::transformer::{Transformer, TransformerState};
use super::weights::MimiWeights;
use crate::speech::attention::Window;
use std::path::Path;
use std::sync::Arc;
use voxlane_runtime::weights::WeightFile;
use voxlane_runtime::Fork;

/// Codes of a clip: `data[k · frames + t]` is codebook `k` at frame `t`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Codes {
    /// Codebooks per frame (K).
    pub num_codebooks: usize,
    /// Frames (12.5 per second).
    pub frames: usize,
    /// `[K, frames]`, codebook-major.
    pub data: Vec<u32>,
}

/// A bound Mimi model (weights only; sessions hold the state).
#[derive(Debug, Clone)]
pub struct MimiModel {
    /// Identifies the states this model made (a state only fits its own model's buffers).
    id: u64,
    cfg: MimiConfig,
    encoder: Seanet,
    decoder: Seanet,
    encoder_transformer: Transformer,
    decoder_transformer: Transformer,
    downsample: Option<CausalConv>,
    upsample: Option<CausalConvTr>,
    quantizer: Quantizer,
    contract: BindContract,
}

/// Streaming state of the encoder path.
#[derive(Debug)]
pub struct EncoderState {
    model: u64,
    seanet: SeanetState,
    transformer: TransformerState,
    down: Option<ConvHistory>,
    sc: ConvScratch,
    /// `[dim, steps]` encoder output, then transformer output.
    lat: Vec<f32>,
    lat2: Vec<f32>,
    qsc: QuantizerScratch,
    max_frames: usize,
}

/// Streaming state of the decoder path.
#[derive(Debug)]
pub struct DecoderState {
    model: u64,
    seanet: SeanetState,
    transformer: TransformerState,
    up: Option<Vec<f32>>,
    sc: ConvScratch,
    lat: Vec<f32>,
    lat2: Vec<f32>,
    qsc: QuantizerScratch,
    max_frames: usize,
}

impl EncoderState {
    /// Floats held by the whole session.
    pub fn floats(&self) -> usize {
        self.seanet.floats()
            + self.transformer.floats()
            + self.down.as_ref().map_or(0, ConvHistory::floats)
            + self.sc.floats()
            + self.lat.len()
            + self.lat2.len()
            + self.qsc.floats()
    }

    /// Back to the start of a stream.
    pub fn reset(&mut self) {
        self.seanet.reset();
        self.transformer.reset();
        if let Some(h) = &mut self.down {
            h.reset();
        }
    }
}

impl DecoderState {
    /// Floats held by the whole session.
    pub fn floats(&self) -> usize {
        self.seanet.floats()
            + self.transformer.floats()
            + self.up.as_ref().map_or(0, Vec::len)
            + self.sc.floats()
            + self.lat.len()
            + self.lat2.len()
            + self.qsc.floats()
    }

    /// Back to the start of a stream.
    pub fn reset(&mut self) {
        self.seanet.reset();
        self.transformer.reset();
        if let Some(p) = &mut self.up {
            p.fill(0.0);
        }
    }
}

impl MimiModel {
    /// Bind validated weights on the default contract (f32 / native half); every tensor must be used.
    pub fn new(cfg: MimiConfig, w: MimiWeights) -> Result<Self, MimiError> {
        let contract = BindContract::plan(&cfg, &w, MimiOptions::default())?;
        Self::bind(cfg, w, contract)
    }

    /// Bind validated weights by a planned `contract`; its workspace rules are
    /// completed from the built layers.
    pub fn bind(
        cfg: MimiConfig,
        mut w: MimiWeights,
        mut contract: BindContract,
    ) -> Result<Self, MimiError> {
        cfg.validate()?;
        let dim = cfg.seanet.dimension;
        let s = cfg.resample_stride();
        let mut model = Self {
            id: super::next_id(),
            encoder: Seanet::new(&cfg.seanet, false, cfg.frame_size(), &mut w, &contract)?,
            decoder: Seanet::new(&cfg.seanet, true, s, &mut w, &contract)?,
            encoder_transformer: Transformer::new(
                &cfg.transformer,
                "encoder_transformer",
                &mut w,
                &contract,
            )?,
            decoder_transformer: Transformer::new(
                &cfg.transformer,
                "decoder_transformer",
                &mut w,
                &contract,
            )?,
            downsample: if s > 1 {
                Some(resample::downsample(dim, s, &mut w, &contract)?)
            } else {
                None
            },
            upsample: if s > 1 {
                Some(resample::upsample(dim, s, &mut w)?)
            } else {
                None
            },
            quantizer: Quantizer::new(&cfg, &mut w)?,
            cfg,
            contract: contract.clone(),
        };
        let left: Vec<String> = w.remaining().map(str::to_string).collect();
        if !left.is_empty() {
            return Err(MimiError::UnexpectedTensors(left));
        }
        // Sessions grow linearly in their step size: two small probes give the rule.
        let rule = |one: usize, two: usize| WorkspaceRule {
            fixed: (2 * one).saturating_sub(two),
            per_frame: two.saturating_sub(one),
        };
        contract.encoder = rule(
            model.encoder_state(1)?.floats(),
            model.encoder_state(2)?.floats(),
        );
        contract.decoder = rule(
            model.decoder_state(1)?.floats(),
            model.decoder_state(2)?.floats(),
        );
        model.contract = contract;
        Ok(model)
    }

    /// The contract this model was bound by (routes, workspace rules).
    pub fn contract(&self) -> &BindContract {
        &self.contract
    }

    /// Load `model.safetensors` for `cfg` (checked, converted to f32).
    pub fn load(cfg: MimiConfig, path: impl AsRef<Path>) -> Result<Self, MimiError> {
        Self::load_with(cfg, path, MimiOptions::default())
    }

    /// [`Self::load`] with explicit options (e.g. q8_0 transformer linears).
    pub fn load_with(
        cfg: MimiConfig,
        path: impl AsRef<Path>,
        options: MimiOptions,
    ) -> Result<Self, MimiError> {
        let file = WeightFile::open(path)?;
        let w = MimiWeights::from_file(&cfg, &file)?;
        let contract = BindContract::plan(&cfg, &w, options)?;
        Self::bind(cfg, w, contract)
    }

    /// The configuration.
    pub fn config(&self) -> &MimiConfig {
        &self.cfg
    }

    /// Samples per code frame (1920).
    pub fn frame_size(&self) -> usize {
        self.cfg.frame_size()
    }

    /// Codebooks per frame.
    pub fn num_codebooks(&self) -> usize {
        self.quantizer.num_codebooks()
    }

    /// Encoder steps per code frame.
    fn steps_per_frame(&self) -> usize {
        self.cfg.resample_stride()
    }

    /// A fresh streaming encoder state for steps of up to `max_frames` code frames.
    pub fn encoder_state(&self, max_frames: usize) -> Result<EncoderState, MimiError> {
        self.encoder_state_with(max_frames, self.streaming_window())
    }

    /// A fresh streaming decoder state for steps of up to `max_frames` code frames.
    pub fn decoder_state(&self, max_frames: usize) -> Result<DecoderState, MimiError> {
        self.decoder_state_with(max_frames, self.streaming_window())
    }

    /// The streaming attention window: Kyutai's ring, or NVIDIA's (PersonaPlex).
    fn streaming_window(&self) -> Window {
        if self.contract.options().nvidia_ring {
            Window::NvidiaRing
        } else {
            Window::MoshiRing
        }
    }

    fn encoder_state_with(
        &self,
        max_frames: usize,
        window: Window,
    ) -> Result<EncoderState, MimiError> {
        let max_frames = max_frames.max(1);
        let steps = max_frames * self.steps_per_frame();
        let dim = self.cfg.seanet.dimension;
        let mut sc = ConvScratch::default();
        if let Some(d) = &self.downsample {
            d.reserve(&mut sc, steps)?;
        }
        Ok(EncoderState {
            model: self.id,
            seanet: self.encoder.state(max_frames * self.frame_size())?,
            transformer: self.encoder_transformer.state(steps, window)?,
            down: self.downsample.as_ref().map(CausalConv::history),
            sc,
            lat: vec![0.0; dim * steps],
            lat2: vec![0.0; dim * steps],
            qsc: self.quantizer.scratch(),
            max_frames,
        })
    }

    fn decoder_state_with(
        &self,
        max_frames: usize,
        window: Window,
    ) -> Result<DecoderState, MimiError> {
        let max_frames = max_frames.max(1);
        let steps = max_frames * self.steps_per_frame();
        let dim = self.cfg.seanet.dimension;
        let mut sc = ConvScratch::default();
        if let Some(u) = &self.upsample {
            u.reserve(&mut sc, max_frames)?;
        }
        Ok(DecoderState {
            model: self.id,
            seanet: self.decoder.state(steps)?,
            transformer: self.decoder_transformer.state(steps, window)?,
            up: self.upsample.as_ref().map(CausalConvTr::partial),
            sc,
            lat: vec![0.0; dim * steps],
            lat2: vec![0.0; dim * steps],
            qsc: self.quantizer.scratch(),
            max_frames,
        })
    }

    /// Encode `pcm` (a positive multiple of [`Self::frame_size`] samples, at
    /// most the state's frames) into `codes: [K, frames]`; returns the frames.
    pub fn encode_step(
        &self,
        pool: &impl Fork,
        st: &mut EncoderState,
        pcm: &[f32],
        codes: &mut [u32],
    ) -> Result<usize, MimiError> {
        if st.model != self.id {
            return Err(MimiError::Input(
                "encoder state was made by another model".into(),
            ));
        }
        let fs = self.frame_size();
        let frames = pcm.len() / fs;
        if pcm.is_empty() || !pcm.len().is_multiple_of(fs) || frames > st.max_frames {
            return Err(MimiError::Input(format!(
                "encode step of {} samples: needs a positive multiple of {fs}, at most {} frames",
                pcm.len(),
                st.max_frames
            )));
        }
        if codes.len() != self.num_codebooks() * frames {
            return Err(MimiError::Input(format!(
                "{} code slots for {frames} frames of {} codebooks",
                codes.len(),
                self.num_codebooks()
            )));
        }
        let dim = self.cfg.seanet.dimension;
        let steps = frames * self.steps_per_frame();
        let n = dim * steps;
        let (c, t) = self
            .encoder
            .step(pool, &mut st.seanet, pcm, pcm.len(), &mut st.lat)?;
        debug_assert_eq!((c, t), (dim, steps));
        self.encoder_transformer.step(
            pool,
            &mut st.transformer,
            &st.lat[..n],
            steps,
            &mut st.lat2[..n],
        )?;
        let latent = match (&self.downsample, &mut st.down) {
            (Some(d), Some(h)) => {
                d.step(pool, h, &st.lat2[..n], steps, &mut st.lat, &mut st.sc)?;
                &st.lat[..dim * frames]
            }
            _ => &st.lat2[..n],
        };
        self.quantizer
            .encode(pool, latent, frames, codes, &mut st.qsc)?;
        Ok(frames)
    }

    /// Decode `codes: [K, frames]` into `pcm` (`frames · frame_size` samples).
    pub fn decode_step(
        &self,
        pool: &impl Fork,
        st: &mut DecoderState,
        codes: &[u32],
        frames: usize,
        pcm: &mut [f32],
    ) -> Result<(), MimiError> {
        if st.model != self.id {
            return Err(MimiError::Input(
                "decoder state was made by another model".into(),
            ));
        }
        let fs = self.frame_size();
        if frames == 0 || frames > st.max_frames || pcm.len() != frames * fs {
            return Err(MimiError::Input(format!(
                "decode step of {frames} frames into {} samples (state sized for {} frames of {fs})",
                pcm.len(),
                st.max_frames
            )));
        }
        let dim = self.cfg.seanet.dimension;
        let steps = frames * self.steps_per_frame();
        let n = dim * steps;
        self.quantizer.decode(
            pool,
            codes,
            frames,
            &mut st.lat[..dim * frames],
            &mut st.qsc,
        )?;
        match (&self.upsample, &mut st.up) {
            (Some(u), Some(p)) => u.step(
                pool,
                p,
                &st.lat[..dim * frames],
                frames,
                &mut st.lat2[..n],
                &mut st.sc,
            )?,
            _ => st.lat2[..n].copy_from_slice(&st.lat[..n]),
        }
        self.decoder_transformer.step(
            pool,
            &mut st.transformer,
            &st.lat2[..n],
            steps,
            &mut st.lat[..n],
        )?;
        self.decoder
            .step(pool, &mut st.seanet, &st.lat[..n], steps, pcm)?;
        Ok(())
    }

    /// Batch encode: `pcm` is zero-padded to whole frames (moshi `pad_for_conv1d`).
    pub fn encode(&self, pool: &impl Fork, pcm: &[f32]) -> Result<Codes, MimiError> {
        let fs = self.frame_size();
        let frames = pcm.len().div_ceil(fs);
        if frames == 0 {
            return Ok(Codes {
                num_codebooks: self.num_codebooks(),
                frames: 0,
                data: Vec::new(),
            });
        }
        let mut padded = pcm.to_vec();
        padded.resize(frames * fs, 0.0);
        let mut st = self.encoder_state_with(frames, Window::Full)?;
        let mut data = vec![0; self.num_codebooks() * frames];
        self.encode_step(pool, &mut st, &padded, &mut data)?;
        Ok(Codes {
            num_codebooks: self.num_codebooks(),
            frames,
            data,
        })
    }

    /// Batch decode: `frames · frame_size` samples.
    pub fn decode(&self, pool: &impl Fork, codes: &Codes) -> Result<Vec<f32>, MimiError> {
        if codes.num_codebooks != self.num_codebooks()
            || codes.data.len() != codes.num_codebooks * codes.frames
        {
            return Err(MimiError::Input(format!(
                "{} codes as {} codebooks × {} frames; the model uses {} codebooks",
                codes.data.len(),
                codes.num_codebooks,
                codes.frames,
                self.num_codebooks()
            )));
        }
        if codes.frames == 0 {
            return Ok(Vec::new());
        }
        let mut st = self.decoder_state_with(codes.frames, Window::Full)?;
        let mut pcm = vec![0.0; codes.frames * self.frame_size()];
        self.decode_step(pool, &mut st, &codes.data, codes.frames, &mut pcm)?;
        Ok(pcm)
    }
}

/// A streaming encoder session: one 1920-sample frame in, one column of K codes out.
#[derive(Debug)]
pub struct MimiEncoder {
    model: Arc<MimiModel>,
    state: EncoderState,
}

impl MimiEncoder {
    /// A session over `model`, all state allocated here.
    pub fn new(model: Arc<MimiModel>) -> Result<Self, MimiError> {
        let state = model.encoder_state(1)?;
        Ok(Self { model, state })
    }

    /// The model.
    pub fn model(&self) -> &Arc<MimiModel> {
        &self.model
    }

    /// Encode one frame of `frame_size` samples into `codes[K]`.
    pub fn step(
        &mut self,
        pool: &impl Fork,
        frame: &[f32],
        codes: &mut [u32],
    ) -> Result<(), MimiError> {
        self.model
            .encode_step(pool, &mut self.state, frame, codes)
            .map(|_| ())
    }

    /// Start a new stream.
    pub fn reset(&mut self) {
        self.state.reset();
    }
}

/// A streaming decoder session: K codes in, one 1920-sample frame out.
#[derive(Debug)]
pub struct MimiDecoder {
    model: Arc<MimiModel>,
    state: DecoderState,
}

impl MimiDecoder {
    /// A session over `model`, all state allocated here.
    pub fn new(model: Arc<MimiModel>) -> Result<Self, MimiError> {
        let state = model.decoder_state(1)?;
        Ok(Self { model, state })
    }

    /// The model.
    pub fn model(&self) -> &Arc<MimiModel> {
        &self.model
    }

    /// Decode one frame's `codes[K]` into `frame_size` samples.
    pub fn step(
        &mut self,
        pool: &impl Fork,
        codes: &[u32],
        pcm: &mut [f32],
    ) -> Result<(), MimiError> {
        self.model.decode_step(pool, &mut self.state, codes, 1, pcm)
    }

    /// Start a new stream.
    pub fn reset(&mut self) {
        self.state.reset();
    }
}
