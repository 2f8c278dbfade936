//! One Moshi generation session: the model's state, the `LMGen` delay ring,
//! a sampler per stream and the session's seeded generator. One call per
//! 80 ms frame; text and audio draws take the generator's outputs in call
//! order (the text token, then codebooks `0..dep_q`), so a seed fixes the
//! whole run.

use super::error::MoshiError;
use super::lmgen::LmGen;
use super::model::{LmState, MoshiLm};
use crate::speech::sampler::{Rng, Sampler, SamplingParams};
use std::sync::Arc;
use voxlane_runtime::Fork;

/// Sampling of the text stream and of the audio codebooks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StreamSampling {
    /// Text token (default: temperature 0.7, top-k 25).
    pub text: SamplingParams,
    /// Audio tokens (default: temperature 0.8, top-k 250).
    pub audio: SamplingParams,
}

impl StreamSampling {
    /// Argmax on both streams.
    pub const GREEDY: Self = Self {
        text: SamplingParams::GREEDY,
        audio: SamplingParams::GREEDY,
    };
}

impl Default for StreamSampling {
    fn default() -> Self {
        Self {
            text: SamplingParams::TEXT_DEFAULT,
            audio: SamplingParams::AUDIO_DEFAULT,
        }
    }
}

/// Tokens that replace what the model would pick (teacher forcing).
#[derive(Debug, Clone, Copy, Default)]
pub struct Forced<'a> {
    /// The text token.
    pub text: Option<u32>,
    /// The `dep_q` audio tokens.
    pub audio: Option<&'a [u32]>,
}

/// A streaming generation session over a shared model.
#[derive(Debug)]
pub struct MoshiSession {
    lm: Arc<MoshiLm>,
    state: LmState,
    gen: LmGen,
    sampling: StreamSampling,
    text_sampler: Sampler,
    audio_sampler: Sampler,
    rng: Rng,
    seed: u64,
    tokens: Vec<u32>,
    audio: Vec<u32>,
}

impl MoshiSession {
    /// A session with `sampling` (checked against the vocabularies) and `seed`.
    pub fn new(lm: Arc<MoshiLm>, sampling: StreamSampling, seed: u64) -> Result<Self, MoshiError> {
        let c = lm.config().clone();
        sampling.text.validate(c.text_card)?;
        sampling.audio.validate(c.card)?;
        Ok(Self {
            state: lm.state(1)?,
            gen: LmGen::new(&c),
            sampling,
            text_sampler: Sampler::new(c.text_card),
            audio_sampler: Sampler::new(c.card),
            rng: Rng::new(seed),
            seed,
            tokens: vec![0; c.num_codebooks()],
            audio: vec![0; c.dep_q],
            lm,
        })
    }

    /// The model.
    pub fn model(&self) -> &Arc<MoshiLm> {
        &self.lm
    }

    /// The model state (logits of the last step).
    pub fn state(&self) -> &LmState {
        &self.state
    }

    /// Back to the first frame, the generator reseeded.
    pub fn reset(&mut self) {
        self.state.reset();
        self.gen.reset();
        self.rng = Rng::new(self.seed);
    }

    /// One frame: the other speaker's `n_q − dep_q` codes in; from the
    /// second call on (with Moshi's delays), the text token and `dep_q`
    /// audio tokens of the frame `max_delay` calls back.
    pub fn step(&mut self, pool: &impl Fork, user: &[u32]) -> Result<Option<&[u32]>, MoshiError> {
        self.step_with(pool, user, Forced::default(), &mut |_, _| {})
    }

    /// [`step`](Self::step) with forced tokens, calling `observe(stream, logits)`
    /// for the text logits (stream 0) and each codebook's (stream `1 + k`).
    pub fn step_with(
        &mut self,
        pool: &impl Fork,
        user: &[u32],
        forced: Forced<'_>,
        observe: &mut dyn FnMut(usize, &[f32]),
    ) -> Result<Option<&[u32]>, MoshiError> {
        let dep_q = self.lm.config().dep_q;
        if let Some(a) = forced.audio {
            if a.len() != dep_q {
                return Err(MoshiError::Input(format!(
                    "{} forced audio tokens, expected {dep_q}",
                    a.len()
                )));
            }
        }
        self.tokens.copy_from_slice(self.gen.prepare(user)?);
        self.lm
            .forward_text(pool, &mut self.state, &self.tokens, 1, true)?;
        observe(0, self.state.text_logits());
        let text = match forced.text {
            Some(t) => t,
            None => self.text_sampler.sample(
                self.state.text_logits(),
                &self.sampling.text,
                &mut self.rng,
            )?,
        };
        let mut prev = text;
        for k in 0..dep_q {
            self.lm.depformer_step(pool, &mut self.state, k, prev)?;
            observe(1 + k, self.state.audio_logits());
            let tok = match forced.audio {
                Some(a) => a[k],
                None => self.audio_sampler.sample(
                    self.state.audio_logits(),
                    &self.sampling.audio,
                    &mut self.rng,
                )?,
            };
            self.audio[k] = tok;
            prev = tok;
        }
        self.gen.commit(text, &self.audio)
    }
}
