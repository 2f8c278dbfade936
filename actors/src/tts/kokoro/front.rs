//! The front half of Kokoro: tokens + style + speed → `d_en`, durations,
//! `asr`, F0 and N (everything the decoder consumes).

use std::path::Path;
use std::time::{Duration, Instant};

use voxlane_runtime::onnx::OnnxModel;
use voxlane_runtime::Fork;

use super::albert::{Albert, AlbertWorkspace, D_EN, MAX_TOKENS};
use super::graph::{KokoroError, KokoroGraph};
use super::prosody::{check_frames, frame_tokens, Durations, Prosody, ProsodyWorkspace, STYLE};
use super::text_encoder::{expand_frames, TextEncoder, TextEncoderWorkspace, CHANNELS};

/// Width of a voice-pack style row (decoder half then predictor half).
pub const STYLE_DIM: usize = 256;

/// Everything the front half produces for one utterance.
#[derive(Debug, Clone, PartialEq)]
pub struct FrontOutput {
    /// Tokens T (including the two pads).
    pub tokens: usize,
    /// `d_en [T, 512]`.
    pub d_en: Vec<f32>,
    /// Durations (rounded, and clipped frame counts).
    pub durations: Durations,
    /// `asr [512, F]` (text encoding expanded to frames).
    pub asr: Vec<f32>,
    /// F0 curve `[2F]`.
    pub f0: Vec<f32>,
    /// Energy curve `[2F]`.
    pub n: Vec<f32>,
}

impl FrontOutput {
    /// Frames F.
    pub fn frames(&self) -> usize {
        self.durations.total()
    }
}

/// Wall time of each stage of the last run.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct FrontTimings {
    /// PL-BERT + bert_encoder.
    pub albert: Duration,
    /// DurationEncoder + duration LSTM/projection.
    pub durations: Duration,
    /// Text encoder (convs + LSTM) and the `asr` expansion.
    pub text_encoder: Duration,
    /// Shared LSTM and the F0/N branches.
    pub f0_n: Duration,
}

/// Kokoro's front half, loaded once from the ONNX export (weights packed at load).
#[derive(Debug, Clone)]
pub struct KokoroFront {
    albert: Albert,
    text_encoder: TextEncoder,
    prosody: Prosody,
}

/// Reusable scratch of [`KokoroFront`].
#[derive(Debug, Default)]
pub struct FrontWorkspace {
    albert: AlbertWorkspace,
    text: TextEncoderWorkspace,
    prosody: ProsodyWorkspace,
    /// Stage times of the last run.
    pub timings: FrontTimings,
}

impl KokoroFront {
    /// Load from `kokoro-v1.0.int8.onnx` at `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, KokoroError> {
        let model = OnnxModel::open(path)?;
        Self::load(&KokoroGraph::new(&model))
    }

    /// Load from a resolver over the model.
    pub fn load(g: &KokoroGraph<'_>) -> Result<Self, KokoroError> {
        Ok(Self {
            albert: Albert::load(g)?,
            text_encoder: TextEncoder::load(g)?,
            prosody: Prosody::load(g)?,
        })
    }

    /// A workspace sized for up to `max_tokens` tokens (at most 512).
    pub fn workspace(&self, max_tokens: usize) -> Result<FrontWorkspace, KokoroError> {
        let t = max_tokens.min(MAX_TOKENS);
        let mut ws = FrontWorkspace::default();
        self.albert.reserve(&mut ws.albert, t);
        self.text_encoder.reserve(&mut ws.text, t)?;
        self.prosody.reserve(&mut ws.prosody, t);
        Ok(ws)
    }

    /// PL-BERT + `bert_encoder`.
    pub fn albert(&self) -> &Albert {
        &self.albert
    }

    /// The text encoder.
    pub fn text_encoder(&self) -> &TextEncoder {
        &self.text_encoder
    }

    /// The prosody predictor.
    pub fn prosody(&self) -> &Prosody {
        &self.prosody
    }

    /// Durations predicted from a given `d_en [T, 512]` (e.g. onnxruntime's, to
    /// check the predictor apart from PL-BERT).
    pub fn durations_from_d_en(
        &self,
        pool: &impl Fork,
        d_en: &[f32],
        style: &[f32],
        speed: f32,
        ws: &mut FrontWorkspace,
    ) -> Result<Durations, KokoroError> {
        let t = d_en.len() / D_EN;
        self.check(&[], style)?;
        let s = &style[STYLE_DIM - STYLE..];
        let features = self.prosody.encode(pool, d_en, s, t, &mut ws.prosody)?;
        self.prosody
            .durations(pool, &features, t, speed, &mut ws.prosody)
    }

    fn check(&self, tokens: &[i64], style: &[f32]) -> Result<(), KokoroError> {
        if style.len() != STYLE_DIM || style.iter().any(|v| !v.is_finite()) {
            return Err(KokoroError::Input(format!(
                "style must be {STYLE_DIM} finite values (got {})",
                style.len()
            )));
        }
        let vocab = self.albert.vocab() as i64;
        if let Some(bad) = tokens.iter().find(|&&id| !(0..vocab).contains(&id)) {
            return Err(KokoroError::Input(format!(
                "token id {bad} is outside 0..{vocab}"
            )));
        }
        Ok(())
    }

    /// Run tokens (padded with 0 at both ends), a style row and speed.
    pub fn run(
        &self,
        pool: &impl Fork,
        tokens: &[i64],
        style: &[f32],
        speed: f32,
        ws: &mut FrontWorkspace,
    ) -> Result<FrontOutput, KokoroError> {
        self.run_inner(pool, tokens, style, Some(speed), None, ws)
    }

    /// As [`KokoroFront::run`] with durations imposed (per-token frame counts),
    /// e.g. the reference durations in parity tests.
    pub fn run_with_durations(
        &self,
        pool: &impl Fork,
        tokens: &[i64],
        style: &[f32],
        frames: &[usize],
        ws: &mut FrontWorkspace,
    ) -> Result<FrontOutput, KokoroError> {
        self.run_inner(pool, tokens, style, None, Some(frames), ws)
    }

    fn run_inner(
        &self,
        pool: &impl Fork,
        tokens: &[i64],
        style: &[f32],
        speed: Option<f32>,
        frames: Option<&[usize]>,
        ws: &mut FrontWorkspace,
    ) -> Result<FrontOutput, KokoroError> {
        self.check(tokens, style)?;
        let t = tokens.len();
        let s = &style[STYLE_DIM - STYLE..];
        let clock = Instant::now();
        let mut d_en = vec![0.0f32; t * D_EN];
        self.albert
            .forward(pool, tokens, &mut d_en, &mut ws.albert)?;
        ws.timings.albert = clock.elapsed();

        let clock = Instant::now();
        let features = self.prosody.encode(pool, &d_en, s, t, &mut ws.prosody)?;
        let durations = match frames {
            Some(f) => {
                if f.len() != t {
                    return Err(KokoroError::Input(format!(
                        "{} durations for {t} tokens",
                        f.len()
                    )));
                }
                Durations {
                    rounded: f.iter().map(|&d| d as f32).collect(),
                    frames: f.to_vec(),
                }
            }
            None => {
                self.prosody
                    .durations(pool, &features, t, speed.unwrap_or(1.0), &mut ws.prosody)?
            }
        };
        ws.timings.durations = clock.elapsed();

        let clock = Instant::now();
        let mut t_en = vec![0.0f32; CHANNELS * t];
        self.text_encoder
            .forward(pool, tokens, &mut t_en, &mut ws.text)?;
        check_frames(&durations.frames)?;
        let ft = frame_tokens(&durations.frames);
        let mut asr = vec![0.0f32; CHANNELS * ft.len()];
        expand_frames(&t_en, t, &ft, &mut asr)?;
        ws.timings.text_encoder = clock.elapsed();

        let clock = Instant::now();
        let (f0, n) =
            self.prosody
                .f0_n(pool, &features, t, &durations.frames, s, &mut ws.prosody)?;
        ws.timings.f0_n = clock.elapsed();
        Ok(FrontOutput {
            tokens: t,
            d_en,
            durations,
            asr,
            f0,
            n,
        })
    }
}
