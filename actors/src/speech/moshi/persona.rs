//! PersonaPlex's `LMGen` (NVIDIA's Moshi fine-tune): the token bookkeeping
//! of `moshi/moshi/models/lm.py` in NVIDIA/personaplex.
//!
//! It differs from Kyutai's ([`super::lmgen`]) in three ways: the ring holds
//! `max_delay + 3` frames with a `provided` mask beside it; any stream may
//! be provided (teacher-forced) — the other speaker's codes always, and in
//! the prompt phase the agent's codes and the text too; and the model runs
//! one call late: call `c` steps the transformer on frame `c − 1`'s tokens
//! and predicts frame `c`, so call 0 runs nothing and, with Moshi's delays
//! (0 and 1), call `c ≥ 2` returns frame `c − 1`. Where a target token is
//! provided it replaces the sampled one, in the ring and as the next
//! depformer step's input.

use super::config::MoshiConfig;
use super::error::MoshiError;

/// The agent's codes for a silent frame (`SILENCE_TOKENS` in NVIDIA's `lm.py`).
pub const SILENCE_TOKENS: [u32; 8] = [948, 243, 1178, 546, 1736, 1030, 1978, 2008];

/// The user's codes during the prompt: Mimi's code of a quiet 440 Hz sine
/// (`SINE_TOKENS` in NVIDIA's `lm.py`).
pub const SINE_TOKENS: [u32; 8] = [430, 1268, 381, 1611, 1095, 1495, 56, 472];

/// Silent frames after the voice prompt and after the text prompt: 0.5 s at 12.5 Hz.
pub const SILENCE_FRAMES: usize = 6;

/// `wrap_with_system_tags` of NVIDIA's `offline.py`: the text prompt as the
/// model was trained on it, `<system> … <system>` (unless already wrapped).
pub fn wrap_with_system_tags(text: &str) -> String {
    let t = text.trim();
    if t.starts_with("<system>") && t.ends_with("<system>") {
        t.to_string()
    } else {
        format!("<system> {t} <system>")
    }
}

/// A slot not yet generated.
const UNGENERATED: i64 = -2;

/// What one call's model step reads and is forced to.
#[derive(Debug, Clone, Copy)]
pub struct Prepared<'a> {
    /// The input tokens (text, then every audio stream) of frame `c − 1`.
    pub input: &'a [u32],
    /// Frame `c`'s provided tokens (valid where `provided`).
    pub target: &'a [u32],
    /// Which of frame `c`'s tokens are provided.
    pub provided: &'a [bool],
}

/// The delay ring, provided mask and offset of one PersonaPlex session.
#[derive(Debug, Clone)]
pub struct PersonaGen {
    delays: Vec<usize>,
    dep_q: usize,
    /// Audio codebooks per speaker (8).
    per_stream: usize,
    max_delay: usize,
    k: usize,
    ct: usize,
    cache: Vec<i64>,
    provided: Vec<bool>,
    initial: Vec<u32>,
    offset: usize,
    input: Vec<u32>,
    target: Vec<u32>,
    target_provided: Vec<bool>,
    out: Vec<u32>,
}

impl PersonaGen {
    /// An empty session for `cfg`'s streams (text, the agent's `n_q / 2`
    /// codebooks, the user's `n_q / 2`; the depformer predicts all `dep_q`).
    pub fn new(cfg: &MoshiConfig) -> Result<Self, MoshiError> {
        let k = cfg.num_codebooks();
        if cfg.dep_q != cfg.n_q || !cfg.n_q.is_multiple_of(2) {
            return Err(MoshiError::Input(format!(
                "PersonaPlex predicts both speakers: dep_q {} must equal an even n_q {}",
                cfg.dep_q, cfg.n_q
            )));
        }
        let max_delay = cfg.max_delay();
        let ct = max_delay + 3;
        let mut initial = vec![cfg.audio_initial_token(); k];
        initial[0] = cfg.text_initial_token();
        Ok(Self {
            delays: cfg.delays.clone(),
            dep_q: cfg.dep_q,
            per_stream: cfg.n_q / 2,
            max_delay,
            k,
            ct,
            cache: vec![UNGENERATED; k * ct],
            provided: vec![false; k * ct],
            initial,
            offset: 0,
            input: vec![0; k],
            target: vec![0; k],
            target_provided: vec![false; k],
            out: vec![0; 1 + cfg.dep_q],
        })
    }

    /// Calls so far.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Streams per frame.
    pub fn streams(&self) -> usize {
        self.k
    }

    /// Audio codebooks per speaker.
    pub fn per_stream(&self) -> usize {
        self.per_stream
    }

    /// Back to the first call.
    pub fn reset(&mut self) {
        self.cache.fill(UNGENERATED);
        self.provided.fill(false);
        self.offset = 0;
    }

    /// The ring, `[streams][ring]` (what a voice-prompt file saves).
    pub fn cache(&self) -> (&[i64], usize) {
        (&self.cache, self.ct)
    }

    /// Replace the ring with a saved one (`[streams][ring]`, ring = `max_delay + 3`).
    pub fn restore_cache(&mut self, cache: &[i64]) -> Result<(), MoshiError> {
        if cache.len() != self.cache.len() {
            return Err(MoshiError::Input(format!(
                "a saved token cache of {} values, the model's holds {} ({} streams × {})",
                cache.len(),
                self.cache.len(),
                self.k,
                self.ct
            )));
        }
        if let Some(v) = cache
            .iter()
            .find(|&&v| v < UNGENERATED || v > i64::from(u32::MAX))
        {
            return Err(MoshiError::Input(format!("a saved token cache holds {v}")));
        }
        self.cache.copy_from_slice(cache);
        Ok(())
    }

    fn put(&mut self, stream: usize, tokens: &[u32]) {
        for (q, &t) in tokens.iter().enumerate() {
            let s = stream + q;
            let pos = (self.offset + self.delays[s]) % self.ct;
            self.cache[s * self.ct + pos] = i64::from(t);
            self.provided[s * self.ct + pos] = true;
        }
    }

    /// Store this call's provided tokens at their delays (`user`: the other
    /// speaker's codebooks, `agent`: the model's own, `text`); returns
    /// `None` on the first call (nothing to run yet), else the model's input
    /// (frame `c − 1`) and frame `c`'s forced targets.
    pub fn prepare(
        &mut self,
        user: Option<&[u32]>,
        agent: Option<&[u32]>,
        text: Option<u32>,
    ) -> Result<Option<Prepared<'_>>, MoshiError> {
        for (what, t) in [("user", user), ("agent", agent)] {
            if let Some(t) = t {
                if t.len() != self.per_stream {
                    return Err(MoshiError::Input(format!(
                        "{} {what} codes, expected {}",
                        t.len(),
                        self.per_stream
                    )));
                }
            }
        }
        if let Some(u) = user {
            self.put(1 + self.per_stream, u);
        }
        if let Some(a) = agent {
            self.put(1, a);
        }
        if let Some(t) = text {
            self.put(0, &[t]);
        }
        // Delayed streams start on their initial token.
        for s in 0..self.k {
            if self.offset <= self.delays[s] {
                let pos = self.offset % self.ct;
                self.cache[s * self.ct + pos] = i64::from(self.initial[s]);
                self.provided[s * self.ct + pos] = true;
            }
        }
        if self.offset == 0 {
            for s in 0..self.k {
                self.cache[s * self.ct] = i64::from(self.initial[s]);
            }
            self.offset += 1;
            return Ok(None);
        }
        let (inp, tgt) = ((self.offset - 1) % self.ct, self.offset % self.ct);
        for s in 0..self.k {
            let v = self.cache[s * self.ct + inp];
            self.input[s] = u32::try_from(v).map_err(|_| {
                MoshiError::Input(format!(
                    "stream {s} read before it was generated (call {})",
                    self.offset
                ))
            })?;
            self.target_provided[s] = self.provided[s * self.ct + tgt];
            self.target[s] = u32::try_from(self.cache[s * self.ct + tgt]).unwrap_or(0);
        }
        Ok(Some(Prepared {
            input: &self.input,
            target: &self.target,
            provided: &self.target_provided,
        }))
    }

    /// Prepare a saved-embedding call (moshi's `step_embeddings`): every
    /// stream provided with its initial token, text `text_pad`, repeated
    /// until the ring yields a step (the very first call yields none).
    pub fn prepare_replay(&mut self, audio_initial: u32, text_pad: u32) -> Result<(), MoshiError> {
        let dummy = vec![audio_initial; self.per_stream];
        while self
            .prepare(Some(&dummy), Some(&dummy), Some(text_pad))?
            .is_none()
        {}
        Ok(())
    }

    /// The last prepared call's input and targets.
    pub fn prepared(&self) -> Prepared<'_> {
        Prepared {
            input: &self.input,
            target: &self.target,
            provided: &self.target_provided,
        }
    }

    /// Store the sampled tokens where frame `c` had none provided; from
    /// call `max_delay + 1` on, return frame `c − max_delay` (text then
    /// `dep_q` audio tokens).
    pub fn commit(&mut self, text: u32, audio: &[u32]) -> Result<Option<&[u32]>, MoshiError> {
        if audio.len() != self.dep_q || self.offset == 0 {
            return Err(MoshiError::Input(format!(
                "{} audio tokens (expected {}) at call {}",
                audio.len(),
                self.dep_q,
                self.offset
            )));
        }
        let (inp, tgt) = ((self.offset - 1) % self.ct, self.offset % self.ct);
        for s in 0..self.k {
            self.provided[s * self.ct + inp] = false;
        }
        for (s, &t) in std::iter::once(&text).chain(audio).enumerate() {
            if !self.provided[s * self.ct + tgt] {
                self.cache[s * self.ct + tgt] = i64::from(t);
            }
        }
        if self.offset <= self.max_delay {
            self.offset += 1;
            return Ok(None);
        }
        for s in 0..=self.dep_q {
            let idx = (self.offset - self.max_delay + self.delays[s]) % self.ct;
            self.out[s] = u32::try_from(self.cache[s * self.ct + idx]).map_err(|_| {
                MoshiError::Input(format!(
                    "stream {s} output not generated (call {})",
                    self.offset
                ))
            })?;
        }
        self.offset += 1;
        Ok(Some(&self.out))
    }
}

/// One prompt call whose every stream is provided: the user's codes, the
/// agent's codes and the text token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptFrame {
    /// The other speaker's codebooks (the sine tokens in a prompt).
    pub user: Vec<u32>,
    /// The model's own codebooks (voice prompt codes or silence).
    pub agent: Vec<u32>,
    /// The text token (PAD or a text prompt piece).
    pub text: u32,
}

/// Calls of a prompt whose every token is provided (the voice prompt's
/// codes, silence, the text prompt): their inputs are all known, so the
/// temporal transformer takes them [`PREFILL_CHUNK`] frames at a time and
/// the depformer, whose tokens the prompt would overwrite, is skipped. The
/// same KV rings and ring of tokens as stepping each call, bit for bit
/// (`state` must be sized for [`PREFILL_CHUNK`] frames).
pub fn prefill(
    lm: &super::MoshiLm,
    state: &mut super::LmState,
    gen: &mut PersonaGen,
    pool: &impl voxlane_runtime::Fork,
    calls: &[PromptFrame],
) -> Result<(), MoshiError> {
    let k = gen.streams();
    let audio = vec![0; lm.config().dep_q];
    let mut rows: Vec<u32> = Vec::with_capacity(PREFILL_CHUNK * k);
    for (i, c) in calls.iter().enumerate() {
        if let Some(p) = gen.prepare(Some(&c.user), Some(&c.agent), Some(c.text))? {
            if let Some(s) = p.provided.iter().position(|&v| !v) {
                return Err(MoshiError::Input(format!(
                    "prefill call {i}: stream {s} is not provided, so its token would be sampled"
                )));
            }
            rows.extend_from_slice(p.input);
            // Every target is provided: nothing sampled is stored.
            gen.commit(0, &audio)?;
        }
        if rows.len() == PREFILL_CHUNK * k || (i + 1 == calls.len() && !rows.is_empty()) {
            lm.forward_text(pool, state, &rows, rows.len() / k, false)?;
            rows.clear();
        }
    }
    Ok(())
}

/// Frames a prefill runs through the temporal transformer at once (the
/// matmuls' grouped-row path gives every row its single-row bits up to 16).
pub const PREFILL_CHUNK: usize = 16;

/// A PersonaPlex session: the model state, the ring and a sampler per
/// stream (draws in call order from one seeded generator, as
/// [`super::MoshiSession`]).
#[derive(Debug)]
pub struct PersonaSession {
    lm: std::sync::Arc<super::MoshiLm>,
    pub(crate) state: super::LmState,
    gen: PersonaGen,
    sampling: super::StreamSampling,
    text_sampler: crate::speech::sampler::Sampler,
    audio_sampler: crate::speech::sampler::Sampler,
    rng: crate::speech::sampler::Rng,
    tokens: Vec<u32>,
    target: Vec<u32>,
    provided: Vec<bool>,
    audio: Vec<u32>,
    #[cfg(test)]
    pub(crate) margins: Vec<(f32, u32, u32)>,
}

impl PersonaSession {
    /// A session with `sampling` and `seed`.
    pub fn new(
        lm: std::sync::Arc<super::MoshiLm>,
        sampling: super::StreamSampling,
        seed: u64,
    ) -> Result<Self, MoshiError> {
        let c = lm.config().clone();
        sampling.text.validate(c.text_card)?;
        sampling.audio.validate(c.card)?;
        let gen = PersonaGen::new(&c)?;
        Ok(Self {
            state: lm.state(PREFILL_CHUNK)?,
            gen,
            sampling,
            text_sampler: crate::speech::sampler::Sampler::new(c.text_card),
            audio_sampler: crate::speech::sampler::Sampler::new(c.card),
            rng: crate::speech::sampler::Rng::new(seed),
            tokens: vec![0; c.num_codebooks()],
            target: vec![0; c.num_codebooks()],
            provided: vec![false; c.num_codebooks()],
            audio: vec![0; c.dep_q],
            #[cfg(test)]
            margins: vec![(0.0, 0, 0); 1 + c.dep_q],
            lm,
        })
    }

    /// The delay ring.
    pub fn gen(&self) -> &PersonaGen {
        &self.gen
    }

    /// The delay ring, to restore a saved cache.
    pub fn gen_mut(&mut self) -> &mut PersonaGen {
        &mut self.gen
    }

    /// Calls of a prompt whose every token is provided, batched through
    /// the temporal transformer (see [`prefill`]).
    pub fn prefill(
        &mut self,
        pool: &impl voxlane_runtime::Fork,
        calls: &[PromptFrame],
    ) -> Result<(), MoshiError> {
        prefill(&self.lm, &mut self.state, &mut self.gen, pool, calls)
    }

    /// One call with the given provided tokens; `Some` frame once the delays are filled.
    pub fn step(
        &mut self,
        pool: &impl voxlane_runtime::Fork,
        user: Option<&[u32]>,
        agent: Option<&[u32]>,
        text: Option<u32>,
    ) -> Result<Option<&[u32]>, MoshiError> {
        self.step_from(pool, user, agent, text, None)
    }

    /// One call whose transformer input is a saved embedding (`[dim]`)
    /// instead of the ring's tokens: the `.pt` voice prompt's replay
    /// (moshi's `step_embeddings`: every stream provided with its initial
    /// token, text PAD).
    pub fn step_embedding(
        &mut self,
        pool: &impl voxlane_runtime::Fork,
        embedding: &[f32],
        text_pad: u32,
    ) -> Result<Option<&[u32]>, MoshiError> {
        let init = self.lm.config().audio_initial_token();
        self.gen.prepare_replay(init, text_pad)?;
        self.run(pool, Some(embedding))
    }

    fn step_from(
        &mut self,
        pool: &impl voxlane_runtime::Fork,
        user: Option<&[u32]>,
        agent: Option<&[u32]>,
        text: Option<u32>,
        embedding: Option<&[f32]>,
    ) -> Result<Option<&[u32]>, MoshiError> {
        if self.gen.prepare(user, agent, text)?.is_none() {
            return Ok(None);
        }
        self.run(pool, embedding)
    }

    /// The model step on the prepared call: transformer (tokens or a saved
    /// embedding), text token, depformer with provided tokens fed forward.
    fn run(
        &mut self,
        pool: &impl voxlane_runtime::Fork,
        embedding: Option<&[f32]>,
    ) -> Result<Option<&[u32]>, MoshiError> {
        let p = self.gen.prepared();
        self.tokens.copy_from_slice(p.input);
        self.target.copy_from_slice(p.target);
        self.provided.copy_from_slice(p.provided);
        match embedding {
            Some(e) => self.lm.forward_embedding(pool, &mut self.state, e)?,
            None => self
                .lm
                .forward_text(pool, &mut self.state, &self.tokens, 1, true)?,
        }
        #[cfg(test)]
        {
            self.margins[0] = margin(self.state.text_logits());
        }
        let sampled_text = self.text_sampler.sample(
            self.state.text_logits(),
            &self.sampling.text,
            &mut self.rng,
        )?;
        let mut prev = if self.provided[0] {
            self.target[0]
        } else {
            sampled_text
        };
        for k in 0..self.audio.len() {
            self.lm.depformer_step(pool, &mut self.state, k, prev)?;
            #[cfg(test)]
            {
                self.margins[1 + k] = margin(self.state.audio_logits());
            }
            let tok = self.audio_sampler.sample(
                self.state.audio_logits(),
                &self.sampling.audio,
                &mut self.rng,
            )?;
            self.audio[k] = tok;
            prev = if self.provided[1 + k] {
                self.target[1 + k]
            } else {
                tok
            };
        }
        self.gen.commit(sampled_text, &self.audio)
    }
}

/// The gap between the two largest logits and their tokens (how close a
/// greedy pick is to a tie).
#[cfg(test)]
fn margin(l: &[f32]) -> (f32, u32, u32) {
    let mut idx: Vec<usize> = (0..l.len()).collect();
    idx.sort_by(|&a, &b| l[b].total_cmp(&l[a]).then(a.cmp(&b)));
    (l[idx[0]] - l[idx[1]], idx[0] as u32, idx[1] as u32)
}
