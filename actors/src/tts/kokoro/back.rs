//! The back half of Kokoro: [`Decoder`] then [`Generator`], bound once.
//!
//! Inputs are the front half's outputs (fixtures `asr`, `f0`, `n`) and the
//! decoder style `style[:, :128]`; outputs are the `conv_post` spectrum and
//! the 24 kHz audio. Weights are packed at load; the workspaces grow to the
//! longest utterance seen and are reused, so steady-state calls do not
//! allocate.

use voxlane_runtime::onnx::OnnxModel;
use voxlane_runtime::Fork;

use super::bind_cache::BindCache;
use super::decoder::{Decoder, DecoderWorkspace};
use super::generator::{Generator, GeneratorTimes, GeneratorWorkspace, SourceWindow};
use super::graph::{KokoroError, KokoroGraph};
use super::stft::CHANNELS;
use super::window::{self, WindowPlan, CROSSFADE};

/// Output of [`KokoroBack::run`].
#[derive(Debug, Clone, Default)]
pub struct BackOutput {
    /// `conv_post` `[22, 120F + 1]`, row-major.
    pub conv_post: Vec<f32>,
    /// Frames of `conv_post`.
    pub spec_frames: usize,
    /// Audio `[600F]` at 24 kHz.
    pub audio: Vec<f32>,
    /// Stage timings.
    pub times: BackTimes,
}

/// Wall time per stage of one [`KokoroBack::run`], in seconds.
#[derive(Debug, Default, Clone, Copy)]
pub struct BackTimes {
    /// Decoder (F0/N convs, encode, decode.0..3).
    pub decoder: f64,
    /// Generator stages.
    pub generator: GeneratorTimes,
}

/// Decoder + generator with their workspaces.
#[derive(Debug)]
pub struct KokoroBack {
    decoder: Decoder,
    generator: Generator,
    dec_ws: DecoderWorkspace,
    gen_ws: GeneratorWorkspace,
    feats: Vec<f32>,
    /// A generator window's input columns.
    win_asr: Vec<f32>,
    /// The first window's seam region, waiting for the second window.
    seam: Vec<f32>,
    /// The streamed utterance in progress and its next window.
    pending: Option<(WindowPlan, usize)>,
}

impl KokoroBack {
    /// Load and pack every decoder and generator weight of `model`.
    pub fn load(model: &OnnxModel) -> Result<Self, KokoroError> {
        Self::load_cached(model, None)
    }

    /// As [`KokoroBack::load`], the int8 convs' packed weights from `cache`.
    pub fn load_cached(model: &OnnxModel, cache: Option<&BindCache>) -> Result<Self, KokoroError> {
        let g = KokoroGraph::with_cache(model, cache);
        let decoder = Decoder::load(&g)?;
        let generator = Generator::load(&g)?;
        if decoder.c_out() != generator.c_in() {
            return Err(KokoroError::BadNode {
                node: "/decoder/decoder".into(),
                detail: format!(
                    "decoder gives {} channels, the generator takes {}",
                    decoder.c_out(),
                    generator.c_in()
                ),
            });
        }
        Ok(Self {
            decoder,
            generator,
            dec_ws: DecoderWorkspace::new(),
            gen_ws: GeneratorWorkspace::new(),
            feats: Vec::new(),
            win_asr: Vec::new(),
            seam: Vec::new(),
            pending: None,
        })
    }

    /// The decoder stage.
    pub fn decoder(&self) -> &Decoder {
        &self.decoder
    }

    /// The generator stage.
    pub fn generator(&self) -> &Generator {
        &self.generator
    }

    /// Run both stages: `asr [512, F]`, `f0 [2F]`, `n [2F]`, `style [128]`
    /// (the first half of the voice row) → `conv_post` and audio.
    pub fn run(
        &mut self,
        asr: &[f32],
        f0: &[f32],
        n: &[f32],
        style: &[f32],
        lanes: &impl Fork,
    ) -> Result<BackOutput, KokoroError> {
        let mut out = BackOutput::default();
        self.run_into(asr, f0, n, style, lanes, &mut out)?;
        Ok(out)
    }

    /// As [`KokoroBack::run`], reusing `out`'s buffers (no allocation once
    /// they and the workspaces have seen an utterance this long).
    pub fn run_into(
        &mut self,
        asr: &[f32],
        f0: &[f32],
        n: &[f32],
        style: &[f32],
        lanes: &impl Fork,
        out: &mut BackOutput,
    ) -> Result<(), KokoroError> {
        let whole = SourceWindow::default();
        self.run_window_into(asr, f0, n, style, &whole, lanes, out)
    }

    /// Run a window of an utterance (its `asr`, `f0`, `n` columns) whose
    /// harmonic source continues the utterance's phase at `window`
    /// ([`SourceWindow::at`] with the window's first f0 frame). AdaIN
    /// statistics and activation quantization ranges are the window's own,
    /// so the output approximates the whole-utterance one; overlap windows
    /// and crossfade (the first/last frames of a window see its edges).
    #[allow(clippy::too_many_arguments)]
    pub fn run_window_into(
        &mut self,
        asr: &[f32],
        f0: &[f32],
        n: &[f32],
        style: &[f32],
        window: &SourceWindow,
        lanes: &impl Fork,
        out: &mut BackOutput,
    ) -> Result<(), KokoroError> {
        let a = self.decoder.asr_dim();
        if !asr.len().is_multiple_of(a) {
            return Err(KokoroError::Input(format!(
                "asr has {} values, not a multiple of {a} channels",
                asr.len()
            )));
        }
        let f = asr.len() / a;
        if f0.len() != 2 * f || n.len() != 2 * f {
            return Err(KokoroError::Input(format!(
                "f0/n need {} frames for {f} asr frames, got {}/{}",
                2 * f,
                f0.len(),
                n.len()
            )));
        }
        // A run reuses the decoder features a streamed utterance's rest needs.
        self.pending = None;
        let t0 = std::time::Instant::now();
        let t = self.decoder.out_len(f);
        let c = self.decoder.c_out();
        if self.feats.len() < c * t {
            self.feats.resize(c * t, 0.0);
        }
        self.decoder.forward(
            lanes,
            asr,
            f,
            f0,
            n,
            style,
            &mut self.feats[..c * t],
            &mut self.dec_ws,
        )?;
        let decoder = t0.elapsed().as_secs_f64();
        let ts = self.generator.spec_len(t);
        out.conv_post.resize(CHANNELS * ts, 0.0);
        out.audio.resize(Generator::audio_len(t), 0.0);
        out.spec_frames = ts;
        let generator = self.generator.forward_window(
            lanes,
            &self.feats[..c * t],
            t,
            f0,
            window,
            style,
            &mut out.conv_post,
            &mut out.audio,
            &mut self.gen_ws,
        )?;
        out.times = BackTimes { decoder, generator };
        Ok(())
    }

    /// The first window of a streamed utterance (`plan` from
    /// [`window::StreamShape::plan`] over the whole utterance's `asr`, `f0`,
    /// `n`): decodes the whole utterance, then `out.audio` gets the samples
    /// before the first seam. [`KokoroBack::run_next`] gives the others.
    #[allow(clippy::too_many_arguments)]
    pub fn run_first(
        &mut self,
        asr: &[f32],
        f0: &[f32],
        n: &[f32],
        style: &[f32],
        plan: &WindowPlan,
        lanes: &impl Fork,
        out: &mut BackOutput,
    ) -> Result<(), KokoroError> {
        self.pending = None;
        out.times.decoder = self.decode_whole(asr, f0, n, style, plan, lanes)?;
        self.emit_window(f0, style, plan, 0, lanes, out)
    }

    /// The next window of the utterance [`KokoroBack::run_first`] began
    /// (the same `f0`, `style` and `plan`): `out.audio` gets its samples,
    /// the seam before them crossfaded. Returns whether windows remain.
    pub fn run_next(
        &mut self,
        f0: &[f32],
        style: &[f32],
        plan: &WindowPlan,
        lanes: &impl Fork,
        out: &mut BackOutput,
    ) -> Result<bool, KokoroError> {
        let k = match self.pending.take() {
            Some((p, k)) if p == *plan && k < plan.windows() => k,
            _ => {
                return Err(KokoroError::Input(
                    "no window of this plan is due: run_first starts a streamed utterance".into(),
                ))
            }
        };
        out.times.decoder = 0.0;
        self.emit_window(f0, style, plan, k, lanes, out)?;
        Ok(self.pending.is_some())
    }

    /// Whether a streamed utterance has windows left.
    pub fn streaming(&self) -> bool {
        self.pending.is_some()
    }

    /// Drop the rest of a streamed utterance (its kept seam too).
    pub fn end_stream(&mut self) {
        self.pending = None;
        self.seam.clear();
    }

    /// Generate window `k` of `plan`, crossfade its leading seam with the
    /// kept tail of window `k - 1`, keep its own trailing seam region, and
    /// leave exactly its emitted samples in `out.audio`.
    fn emit_window(
        &mut self,
        f0: &[f32],
        style: &[f32],
        plan: &WindowPlan,
        k: usize,
        lanes: &impl Fork,
        out: &mut BackOutput,
    ) -> Result<(), KokoroError> {
        let span = plan.span(k);
        self.generate_window(f0, style, plan, span.clone(), lanes, out)?;
        let base = span.start * window::SAMPLES_PER_FRAME;
        let emit = plan.emitted(k);
        let (a, b) = (emit.start - base, emit.end - base);
        if out.audio.len() < b + if k + 1 < plan.windows() { CROSSFADE } else { 0 } {
            return Err(KokoroError::Input(format!(
                "window {k} gave {} samples, its seams need more",
                out.audio.len()
            )));
        }
        if k > 0 {
            if self.seam.len() != CROSSFADE {
                return Err(KokoroError::Input(
                    "the seam before this window is missing".into(),
                ));
            }
            let head = &mut out.audio[a..a + CROSSFADE];
            let mut faded = [0.0f32; CROSSFADE];
            window::crossfade(&self.seam, head, &mut faded);
            head.copy_from_slice(&faded);
        }
        self.seam.clear();
        if k + 1 < plan.windows() {
            self.seam.extend_from_slice(&out.audio[b..b + CROSSFADE]);
            self.pending = Some((*plan, k + 1));
        }
        out.audio.truncate(b);
        out.audio.drain(..a);
        Ok(())
    }

    /// Run the decoder over the whole utterance `plan` describes (its AdaIN
    /// statistics exact, it is cheap), keeping its features for the windows.
    fn decode_whole(
        &mut self,
        asr: &[f32],
        f0: &[f32],
        n: &[f32],
        style: &[f32],
        plan: &WindowPlan,
        lanes: &impl Fork,
    ) -> Result<f64, KokoroError> {
        let f = plan.frames;
        let a = self.decoder.asr_dim();
        if asr.len() != a * f || f0.len() != 2 * f || n.len() != 2 * f {
            return Err(KokoroError::Input(format!(
                "the window plan is for {f} frames; asr/f0/n have {}/{}/{} values",
                asr.len(),
                f0.len(),
                n.len()
            )));
        }
        let t0 = std::time::Instant::now();
        let (t, c) = (self.decoder.out_len(f), self.decoder.c_out());
        if self.feats.len() < c * t {
            self.feats.resize(c * t, 0.0);
        }
        self.decoder.forward(
            lanes,
            asr,
            f,
            f0,
            n,
            style,
            &mut self.feats[..c * t],
            &mut self.dec_ws,
        )?;
        Ok(t0.elapsed().as_secs_f64())
    }

    /// Run the generator over decoder frames `range` of the features
    /// [`KokoroBack::decode_whole`] left.
    fn generate_window(
        &mut self,
        f0: &[f32],
        style: &[f32],
        plan: &WindowPlan,
        range: std::ops::Range<usize>,
        lanes: &impl Fork,
        out: &mut BackOutput,
    ) -> Result<(), KokoroError> {
        let (t, c) = (self.decoder.out_len(plan.frames), self.decoder.c_out());
        let (a2, b2) = (2 * range.start, 2 * range.end);
        if f0.len() != t || b2 > t || self.feats.len() < c * t {
            return Err(KokoroError::Input(format!(
                "window {range:?} outside the decoded utterance of {} frames",
                plan.frames
            )));
        }
        let mut cols = std::mem::take(&mut self.win_asr);
        window::columns(&self.feats[..c * t], t, a2..b2, &mut cols);
        let tw = b2 - a2;
        let ts = self.generator.spec_len(tw);
        out.conv_post.resize(CHANNELS * ts, 0.0);
        out.audio.resize(Generator::audio_len(tw), 0.0);
        out.spec_frames = ts;
        let at = SourceWindow::at(f0, a2);
        let r = self.generator.forward_window(
            lanes,
            &cols,
            tw,
            &f0[a2..b2],
            &at,
            style,
            &mut out.conv_post,
            &mut out.audio,
            &mut self.gen_ws,
        );
        self.win_asr = cols;
        out.times.generator = r?;
        Ok(())
    }
}
