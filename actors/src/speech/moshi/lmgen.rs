//! The token bookkeeping of PyTorch `moshi` 0.2.13's `LMGen`: a ring of
//! `max_delay + 2` frames per stream holds what was generated and what the
//! other speaker sent, each stream written at its delay, so the model reads
//! every stream undelayed-by-construction and the caller gets frame `t`
//! back, undelayed, at call `t + max_delay` (the first `max_delay` calls
//! return nothing).
//!
//! Per call: [`LmGen::prepare`] stores the other speaker's codes and yields
//! the model's input tokens; the model picks the text token and `dep_q` audio
//! tokens; [`LmGen::commit`] stores them and yields the output frame.

use super::config::MoshiConfig;
use super::error::MoshiError;

/// A slot not yet generated (moshi's `ungenerated_token_id`).
const UNGENERATED: i64 = -2;

/// The delay ring and offsets of one generation session.
#[derive(Debug, Clone)]
pub struct LmGen {
    delays: Vec<usize>,
    dep_q: usize,
    max_delay: usize,
    /// Streams (text + n_q).
    k: usize,
    /// Ring length.
    ct: usize,
    /// `[k][ct]` tokens.
    cache: Vec<i64>,
    /// Initial token per stream.
    initial: Vec<u32>,
    offset: usize,
    input: Vec<u32>,
    out: Vec<u32>,
}

impl LmGen {
    /// An empty session for `cfg`'s streams.
    pub fn new(cfg: &MoshiConfig) -> Self {
        let k = cfg.num_codebooks();
        let max_delay = cfg.max_delay();
        let ct = max_delay + 2;
        let mut initial = vec![cfg.audio_initial_token(); k];
        initial[0] = cfg.text_initial_token();
        Self {
            delays: cfg.delays.clone(),
            dep_q: cfg.dep_q,
            max_delay,
            k,
            ct,
            cache: vec![UNGENERATED; k * ct],
            initial,
            offset: 0,
            input: vec![0; k],
            out: vec![0; 1 + cfg.dep_q],
        }
    }

    /// Calls so far.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Back to the first call.
    pub fn reset(&mut self) {
        self.cache.fill(UNGENERATED);
        self.offset = 0;
    }

    /// Store the other speaker's `n_q − dep_q` codes at their delays and
    /// return this call's input tokens (text, then `n_q` audio streams).
    pub fn prepare(&mut self, user: &[u32]) -> Result<&[u32], MoshiError> {
        let first_user = 1 + self.dep_q;
        if user.len() != self.k - first_user {
            return Err(MoshiError::Input(format!(
                "{} codes from the other speaker, expected {}",
                user.len(),
                self.k - first_user
            )));
        }
        for (i, &u) in user.iter().enumerate() {
            let s = first_user + i;
            let pos = (self.offset + self.delays[s]) % self.ct;
            self.cache[s * self.ct + pos] = i64::from(u);
        }
        let pos = self.offset % self.ct;
        for s in 0..self.k {
            self.input[s] = if self.offset <= self.delays[s] {
                self.initial[s]
            } else {
                let v = self.cache[s * self.ct + pos];
                u32::try_from(v).map_err(|_| {
                    MoshiError::Input(format!(
                        "stream {s} read before it was generated (call {})",
                        self.offset
                    ))
                })?
            };
        }
        Ok(&self.input)
    }

    /// Store this call's text token and `dep_q` audio tokens; from call
    /// `max_delay` on, return the undelayed frame `offset − max_delay`
    /// (text then `dep_q` audio tokens).
    pub fn commit(&mut self, text: u32, audio: &[u32]) -> Result<Option<&[u32]>, MoshiError> {
        if audio.len() != self.dep_q {
            return Err(MoshiError::Input(format!(
                "{} audio tokens, expected {}",
                audio.len(),
                self.dep_q
            )));
        }
        self.offset += 1;
        let pos = self.offset % self.ct;
        self.cache[pos] = i64::from(text);
        for (i, &a) in audio.iter().enumerate() {
            self.cache[(1 + i) * self.ct + pos] = i64::from(a);
        }
        if self.offset <= self.max_delay {
            return Ok(None);
        }
        for s in 0..=self.dep_q {
            let idx = (self.offset - self.max_delay + self.delays[s]) % self.ct;
            let v = self.cache[s * self.ct + idx];
            self.out[s] = u32::try_from(v).map_err(|_| {
                MoshiError::Input(format!(
                    "stream {s} output not generated (call {})",
                    self.offset
                ))
            })?;
        }
        Ok(Some(&self.out))
    }
}
