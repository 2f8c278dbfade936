//! The three child machines a wavefront drives and one tick of them: Mimi
//! encode, the LM, Mimi decode, each reading only what an earlier tick
//! left in the slots, so the three may run at once.

use super::errors::WavefrontError;
use crate::speech::mimi_session::decode::DecodeSessionMachine;
use crate::speech::mimi_session::encode::EncodeSessionMachine;
use crate::speech::mimi_session::SessionReply;
use crate::speech::moshi_executor::{FrameTokens, MoshiExecutor, Step};
use std::sync::{Arc, Mutex};
use voxlane_runtime::{Fork, LanePool};

/// The child machines (each with its session open) and the pool they share.
pub struct Stages {
    /// Mimi's streaming encoder: the user's PCM in, codes out.
    pub encoder: EncodeSessionMachine,
    /// The LM with a session bound (Moshi or PersonaPlex).
    pub lm: MoshiExecutor,
    /// Mimi's streaming decoder: the agent's codes in, PCM out.
    pub decoder: DecodeSessionMachine,
    /// The lane pool every stage forks on (its budget is the thread budget).
    pub pool: Arc<LanePool>,
}

/// The sizes the stages agree on, read once at `bind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// Samples per frame (1920 at 24 kHz).
    pub frame_size: usize,
    /// Codes Mimi writes per frame.
    pub codebooks: usize,
    /// Codes of the user the LM reads per frame.
    pub user: usize,
    /// Codes of the agent Mimi decodes per frame (after the text token).
    pub agent: usize,
}

impl Stages {
    /// The stages' common sizes, or why they do not fit.
    pub fn shape(&self) -> Result<Shape, String> {
        let enc = self
            .encoder
            .session()
            .ok_or("the Mimi encoder has no open session")?;
        let dec = self
            .decoder
            .session()
            .ok_or("the Mimi decoder has no open session")?;
        let lm = self.lm.model().ok_or("the LM has no model")?;
        if self.lm.state() != "ready" {
            return Err(format!("the LM is in `{}`, not ready", self.lm.state()));
        }
        let c = lm.config();
        let persona = c.dep_q == c.n_q;
        let (user, agent) = if persona {
            (c.n_q / 2, c.n_q / 2)
        } else {
            (c.user_codebooks(), c.dep_q)
        };
        let (em, dm) = (enc.model(), dec.model());
        let codebooks = em.num_codebooks();
        if codebooks < user || dm.num_codebooks() != agent {
            return Err(format!(
                "Mimi codes {codebooks} codebooks (decodes {}); the LM reads {user} and writes {agent}",
                dm.num_codebooks()
            ));
        }
        if em.frame_size() != dm.frame_size() {
            return Err("encoder and decoder frames differ".into());
        }
        if em.config().quantizer.bins != c.card {
            return Err(format!(
                "Mimi codebooks of {} entries, the LM's of {}",
                em.config().quantizer.bins,
                c.card
            ));
        }
        Ok(Shape {
            frame_size: em.frame_size(),
            codebooks,
            user,
            agent,
        })
    }
}

/// What the ticks hand each other: codes one tick old, the LM's answer
/// one tick old, the decoded frame; all sized at `bind`.
#[derive(Debug, Default)]
pub struct Slots {
    /// This tick's codes (the encoder writes).
    pub codes_next: Vec<u32>,
    /// Last tick's codes (the LM reads).
    pub codes_prev: Vec<u32>,
    /// The input frame `codes_next` encodes.
    pub codes_next_seq: Option<u64>,
    /// The input frame `codes_prev` encodes.
    pub codes_prev_seq: Option<u64>,
    /// This tick's LM answer and the input frame it answers.
    pub lm_next: Option<(u64, FrameTokens)>,
    /// Last tick's LM answer (the decoder reads).
    pub lm_prev: Option<(u64, FrameTokens)>,
    /// This tick's decoded PCM.
    pub pcm: Vec<f32>,
    /// The input frame `pcm` answers, and its tokens.
    pub out: Option<(u64, FrameTokens)>,
}

impl Slots {
    /// Slots for `shape`, empty.
    pub fn new(shape: &Shape) -> Self {
        Self {
            codes_next: vec![0; shape.codebooks],
            codes_prev: vec![0; shape.codebooks],
            pcm: vec![0.0; shape.frame_size],
            ..Self::default()
        }
    }

    /// Nothing in flight.
    pub fn clear(&mut self) {
        self.codes_next_seq = None;
        self.codes_prev_seq = None;
        self.lm_next = None;
        self.lm_prev = None;
        self.out = None;
    }

    /// Frames still inside the pipeline (encoded, not yet decoded).
    pub fn in_flight(&self) -> usize {
        usize::from(self.codes_prev_seq.is_some()) + usize::from(self.lm_prev.is_some())
    }

    /// Hand this tick's results to the next tick.
    fn rotate(&mut self) {
        std::mem::swap(&mut self.codes_next, &mut self.codes_prev);
        self.codes_prev_seq = self.codes_next_seq.take();
        self.lm_prev = self.lm_next.take();
    }
}

fn reply_err(
    stage: &'static str,
    r: SessionReply,
    wrap: fn(crate::speech::mimi_session::MimiSessionError) -> WavefrontError,
) -> WavefrontError {
    match r {
        SessionReply::Error(e) => wrap(e),
        other => WavefrontError::StageReply {
            stage,
            reply: format!("{other:?}"),
        },
    }
}

fn encode(
    enc: &mut EncodeSessionMachine,
    pool: &LanePool,
    input: Option<(u64, &[f32])>,
    codes: &mut [u32],
    seq: &mut Option<u64>,
) -> Result<(), WavefrontError> {
    *seq = None;
    if let Some((s, pcm)) = input {
        match enc.push(pool, pcm, codes) {
            SessionReply::Done { .. } => *seq = Some(s),
            r => return Err(reply_err("encode", r, WavefrontError::Encode)),
        }
    }
    Ok(())
}

fn lm_step(
    lm: &mut MoshiExecutor,
    user: usize,
    codes: &[u32],
    seq: Option<u64>,
    out: &mut Option<(u64, FrameTokens)>,
) -> Result<(), WavefrontError> {
    *out = None;
    if let Some(s) = seq {
        let step = Step {
            other_codes: &codes[..user],
            forced_text: None,
            forced_audio: None,
        };
        *out = lm.frame(step).map_err(WavefrontError::Lm)?.map(|f| (s, f));
    }
    Ok(())
}

fn decode(
    dec: &mut DecodeSessionMachine,
    pool: &LanePool,
    agent: usize,
    answer: Option<(u64, FrameTokens)>,
    pcm: &mut [f32],
    out: &mut Option<(u64, FrameTokens)>,
) -> Result<(), WavefrontError> {
    *out = None;
    if let Some((s, f)) = answer {
        let codes = f
            .as_slice()
            .get(1..1 + agent)
            .ok_or(WavefrontError::Stages(format!(
                "an LM frame of {} tokens, the decoder reads {agent} after the text",
                f.as_slice().len()
            )))?;
        match dec.push(pool, codes, pcm) {
            SessionReply::Done { .. } => *out = Some((s, f)),
            r => return Err(reply_err("decode", r, WavefrontError::Decode)),
        }
    }
    Ok(())
}

/// One tick: encode `input` (none while draining), step the LM on last
/// tick's codes, decode last tick's answer; `parallel` runs the three as
/// stage jobs on the pool (the LM first, on the caller), else in order on
/// the caller. Either way the same bits: no stage reads what another
/// writes in the same tick.
pub fn run_tick(
    st: &mut Stages,
    sl: &mut Slots,
    shape: &Shape,
    input: Option<(u64, &[f32])>,
    parallel: bool,
) -> Result<(), WavefrontError> {
    let pool = &*st.pool;
    let Stages {
        encoder,
        lm,
        decoder,
        ..
    } = st;
    let Slots {
        codes_next,
        codes_prev,
        codes_next_seq,
        codes_prev_seq,
        lm_next,
        lm_prev,
        pcm,
        out,
    } = sl;
    let (user, agent) = (shape.user, shape.agent);
    let answer = *lm_prev;
    let prev_seq = *codes_prev_seq;
    let (re, rl, rd) = if parallel {
        let e = Mutex::new((encoder, codes_next, codes_next_seq, None));
        let l = Mutex::new((lm, lm_next, None));
        let d = Mutex::new((decoder, pcm, out, None));
        pool.fork(3, &|i| match i {
            0 => {
                let mut g = lock(&l);
                let (lm, next, r) = &mut *g;
                *r = Some(lm_step(lm, user, codes_prev, prev_seq, next));
            }
            1 => {
                let mut g = lock(&e);
                let (enc, codes, seq, r) = &mut *g;
                *r = Some(encode(enc, pool, input, codes, seq));
            }
            _ => {
                let mut g = lock(&d);
                let (dec, pcm, out, r) = &mut *g;
                *r = Some(decode(dec, pool, agent, answer, pcm, out));
            }
        })
        .map_err(|e| WavefrontError::Lanes(e.to_string()))?;
        let done = |r: Option<Result<(), WavefrontError>>| {
            r.unwrap_or(Err(WavefrontError::Lanes("a stage job did not run".into())))
        };
        (
            done(e.into_inner().unwrap_or_else(|p| p.into_inner()).3),
            done(l.into_inner().unwrap_or_else(|p| p.into_inner()).2),
            done(d.into_inner().unwrap_or_else(|p| p.into_inner()).3),
        )
    } else {
        (
            encode(encoder, pool, input, codes_next, codes_next_seq),
            lm_step(lm, user, codes_prev, prev_seq, lm_next),
            decode(decoder, pool, agent, answer, pcm, out),
        )
    };
    re?;
    rl?;
    rd?;
    sl.rotate();
    Ok(())
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Each stage locks only its own job: poison would mean a stage panicked,
    // which the pool already reports.
    m.lock().unwrap_or_else(|e| e.into_inner())
}
