//! The back half of Kokoro: [`Decoder`] then [`Generator`], bound once.
//!
//! Inputs are the front half's outputs (fixtures `asr`, `f0`, `n`) and the
//! decoder style `style[:, :128]`; outputs are the `conv_post` spectrum and
//! the 24 kHz audio. Weights are packed at load; the workspaces grow to the
//! longest utterance seen and are reused, so steady-state calls do not
//! allocate.

use voxlane_runtime::onnx::OnnxModel;
use voxlane_runtime::Fork;

use super::decoder::{Decoder, DecoderWorkspace};
use super::generator::{Generator, GeneratorTimes, GeneratorWorkspace, SourceWindow};
use super::graph::{KokoroError, KokoroGraph};
use super::stft::CHANNELS;

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
}

impl KokoroBack {
    /// Load and pack every decoder and generator weight of `model`.
    pub fn load(model: &OnnxModel) -> Result<Self, KokoroError> {
        let g = KokoroGraph::new(model);
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
}
