//! The whole Kokoro network for one chunk: tokens + voice style + speed →
//! 24 kHz audio, through [`KokoroFront`] and [`KokoroBack`], both loaded once
//! from one memory-mapped ONNX file.

use super::back::{BackOutput, BackTimes, KokoroBack};
use super::bind_cache::BindCache;
use super::front::{FrontTimings, FrontWorkspace, KokoroFront, STYLE_DIM};
use super::graph::{KokoroError, KokoroGraph};
use super::window::StreamShape;
use std::path::Path;
use voxlane_runtime::onnx::OnnxModel;
use voxlane_runtime::Fork;

/// Audio sample rate of Kokoro's output.
pub const SAMPLE_RATE: u32 = 24_000;

/// Tokens per call, the two pads included (the position table has 512 rows).
pub const MAX_TOKENS: usize = 512;

/// Kokoro-82M, loaded and ready to synthesize chunk after chunk.
pub struct KokoroTts {
    front: KokoroFront,
    back: KokoroBack,
    front_ws: FrontWorkspace,
    back_out: BackOutput,
    /// Stage times up to the first window of the last streamed call.
    first_window: StageTimes,
}

/// Wall time of each stage of one call, in seconds.
#[derive(Debug, Default, Clone, Copy)]
pub struct StageTimes {
    /// The front half's stages.
    pub front: FrontTimings,
    /// The decoder's and the generator's.
    pub back: BackTimes,
}

impl StageTimes {
    /// Every stage as `(name, seconds)`, in the order they run.
    pub fn rows(&self) -> [(&'static str, f64); 10] {
        let (f, b, g) = (&self.front, &self.back, &self.back.generator);
        [
            ("albert (PL-BERT)", f.albert.as_secs_f64()),
            ("durations (encoder + LSTM)", f.durations.as_secs_f64()),
            ("text encoder", f.text_encoder.as_secs_f64()),
            ("F0/N predictor", f.f0_n.as_secs_f64()),
            ("decoder (F0/N convs, encode, decode)", b.decoder),
            ("harmonic source + STFT", g.source),
            ("noise convs + res", g.noise),
            ("ups.0 + resblocks 0-2", g.stage0),
            ("ups.1 + resblocks 3-5", g.stage1),
            ("conv_post + iSTFT", g.post),
        ]
    }
}

impl std::fmt::Debug for KokoroTts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KokoroTts").finish_non_exhaustive()
    }
}

impl KokoroTts {
    /// Load every weight of the int8 (or fp32) ONNX export at `path`.
    ///
    /// Also pins the allocator's mmap threshold
    /// ([`voxlane_runtime::memory::return_large_frees_to_os`]): the per-chunk
    /// workspaces grow with the utterance and must not fragment the heap.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, KokoroError> {
        voxlane_runtime::memory::return_large_frees_to_os();
        let model = OnnxModel::open(path.as_ref())?;
        let cache = BindCache::open(path.as_ref());
        let front = KokoroFront::load(&KokoroGraph::with_cache(&model, cache.as_ref()))?;
        let back = KokoroBack::load_cached(&model, cache.as_ref())?;
        if let Some(c) = cache {
            c.finish();
        }
        let front_ws = front.workspace(MAX_TOKENS)?;
        Ok(Self {
            front,
            back,
            front_ws,
            back_out: BackOutput::default(),
            first_window: StageTimes::default(),
        })
    }

    /// Synthesize one chunk: `tokens` padded with 0 at both ends, the voice's
    /// style row for this chunk (256 values) and the speaking rate. Returns
    /// the chunk's audio (borrowed until the next call).
    pub fn synthesize(
        &mut self,
        tokens: &[i64],
        style: &[f32],
        speed: f32,
        lanes: &impl Fork,
    ) -> Result<&[f32], KokoroError> {
        self.check(tokens, style)?;
        let front = self
            .front
            .run(lanes, tokens, style, speed, &mut self.front_ws)?;
        // The decoder takes the first half of the style row, the predictor the second.
        let decoder_style = &style[..STYLE_DIM / 2];
        self.back.run_into(
            &front.asr,
            &front.f0,
            &front.n,
            decoder_style,
            lanes,
            &mut self.back_out,
        )?;
        Ok(&self.back_out.audio)
    }

    /// As [`KokoroTts::synthesize`], handing the audio to `sink` in pieces:
    /// when the chunk is long enough for `shape`, its first window early
    /// (see [`super::window`]), then the rest. Returns the samples emitted.
    pub fn synthesize_streamed(
        &mut self,
        tokens: &[i64],
        style: &[f32],
        speed: f32,
        shape: StreamShape,
        lanes: &impl Fork,
        sink: &mut dyn FnMut(&[f32]),
    ) -> Result<usize, KokoroError> {
        self.check(tokens, style)?;
        let front = self
            .front
            .run(lanes, tokens, style, speed, &mut self.front_ws)?;
        let decoder_style = &style[..STYLE_DIM / 2];
        let Some(plan) = shape.plan(front.frames()) else {
            self.back.run_into(
                &front.asr,
                &front.f0,
                &front.n,
                decoder_style,
                lanes,
                &mut self.back_out,
            )?;
            sink(&self.back_out.audio);
            return Ok(self.back_out.audio.len());
        };
        let out = &mut self.back_out;
        self.back.run_first(
            &front.asr,
            &front.f0,
            &front.n,
            decoder_style,
            &plan,
            lanes,
            out,
        )?;
        self.first_window = StageTimes {
            front: self.front_ws.timings,
            back: out.times,
        };
        sink(&out.audio);
        let mut samples = out.audio.len();
        while self.back.streaming() {
            self.back
                .run_next(&front.f0, decoder_style, &plan, lanes, out)?;
            sink(&out.audio);
            samples += out.audio.len();
        }
        Ok(samples)
    }

    /// Stage times of the last call (for a streamed one, its last window's
    /// generator).
    pub fn stage_times(&self) -> StageTimes {
        StageTimes {
            front: self.front_ws.timings,
            back: self.back_out.times,
        }
    }

    /// Stage times of the last streamed call up to its first window's audio
    /// (what its first audio waited for).
    pub fn first_window_times(&self) -> StageTimes {
        self.first_window
    }

    fn check(&self, tokens: &[i64], style: &[f32]) -> Result<(), KokoroError> {
        if tokens.len() > MAX_TOKENS {
            return Err(KokoroError::Input(format!(
                "{} tokens exceed the model's {MAX_TOKENS}",
                tokens.len()
            )));
        }
        if style.len() != STYLE_DIM {
            return Err(KokoroError::Input(format!(
                "style must have {STYLE_DIM} values (got {})",
                style.len()
            )));
        }
        Ok(())
    }
}
