//! Effects of `moshi_executor`'s edges. Actions that can fail raise an
//! outcome event instead of choosing a state; the frame's phases chain
//! through `temporal_done`, `depformer_done` and `step_done`.

use super::errors::MoshiExecutorError;
use super::events::{
    BindSession, FollowUp, FrameTokens, Initialize, Reply, Sink, Step, WeightsSource,
};
use super::guards::{guard_persona_model, guard_route_serial, session_bytes};
use super::machine::{ExecSession, ExecutorMachine, Gen};
use crate::core::Slot;
use crate::speech::logits_sampler::{Configure, LogitsSampler, SamplerMachineError};
use std::sync::Arc;
use voxlane_actors::speech::moshi::{
    CacheUse, LmGen, MoshiError, MoshiLm, PersonaGen, PromptFrame, PREFILL_CHUNK,
};
use voxlane_runtime::Fork;

fn reject(m: &mut ExecutorMachine, sink: &mut Sink, err: MoshiExecutorError) {
    m.book.reject(err.reason());
    sink.reply = Some(Reply::Error(err));
}

fn take(e: &Slot<MoshiExecutorError>, kind: &'static str) -> MoshiExecutorError {
    e.take().unwrap_or(MoshiExecutorError::MissingPayload(kind))
}

/// Check a step's codes and forced tokens against the model.
pub fn check_step(m: &ExecutorMachine, s: &Step<'_>) -> Result<(), MoshiExecutorError> {
    let lm = m.model.as_ref().ok_or(MoshiExecutorError::NotInitialized)?;
    let c = lm.config();
    let persona = guard_persona_model(m);
    // PersonaPlex reads the user's half of its streams and may be given the agent's half.
    let (user, forced) = if persona {
        (c.n_q / 2, c.n_q / 2)
    } else {
        (c.user_codebooks(), c.dep_q)
    };
    if s.other_codes.len() != user {
        return Err(MoshiExecutorError::CodesShape {
            got: s.other_codes.len(),
            want: user,
        });
    }
    if let Some((index, &code)) = s
        .other_codes
        .iter()
        .enumerate()
        .find(|(_, &v)| v as usize >= c.card)
    {
        return Err(MoshiExecutorError::CodeRange {
            index,
            code,
            card: c.card,
        });
    }
    if let Some(t) = s.forced_text.filter(|&t| t as usize >= c.text_card) {
        return Err(MoshiExecutorError::Forced(format!(
            "text token {t} outside 0..{}",
            c.text_card
        )));
    }
    if let Some(a) = s.forced_audio {
        if a.len() != forced || a.iter().any(|&v| v as usize >= c.card) {
            return Err(MoshiExecutorError::Forced(format!(
                "{} audio tokens (want {forced}, each < {})",
                a.len(),
                c.card
            )));
        }
    }
    Ok(())
}

fn persona_model<'m>(
    m: &'m ExecutorMachine,
    what: &'static str,
) -> Result<&'m MoshiLm, MoshiExecutorError> {
    let lm = m.model.as_ref().ok_or(MoshiExecutorError::NotInitialized)?;
    if m.session.is_none() {
        return Err(MoshiExecutorError::NoSession);
    }
    if !guard_persona_model(m) {
        return Err(MoshiExecutorError::NotPersona(what));
    }
    Ok(lm)
}

/// Check prompt calls against a PersonaPlex session.
pub fn check_prefill(m: &ExecutorMachine, calls: &[PromptFrame]) -> Result<(), MoshiExecutorError> {
    persona_model(m, "prefill")?;
    for c in calls {
        check_step(
            m,
            &Step {
                other_codes: &c.user,
                forced_text: Some(c.text),
                forced_audio: Some(&c.agent),
            },
        )?;
    }
    Ok(())
}

/// Check a saved embedding against a PersonaPlex session.
pub fn check_embedding(m: &ExecutorMachine, e: &[f32]) -> Result<(), MoshiExecutorError> {
    let lm = persona_model(m, "step_embedding")?;
    let dim = lm.config().dim;
    if e.len() != dim || e.iter().any(|v| !v.is_finite()) {
        return Err(MoshiError::Input(format!(
            "a saved embedding of {} values (the model is {dim} wide, all finite)",
            e.len()
        ))
        .into());
    }
    Ok(())
}

/// Check a saved token ring against a PersonaPlex session.
pub fn check_tokens(m: &ExecutorMachine, t: &[i64]) -> Result<(), MoshiExecutorError> {
    persona_model(m, "restore_tokens")?;
    let c = m
        .model
        .as_ref()
        .ok_or(MoshiExecutorError::NotInitialized)?
        .config();
    // The restore itself re-checks: a scratch ring tells without touching the session's.
    let mut probe = PersonaGen::new(c)?;
    probe.restore_cache(t)?;
    Ok(())
}

/// Reject an inconsistent configuration.
pub fn effect_reject_config(m: &mut ExecutorMachine, i: &Initialize, sink: &mut Sink) {
    let err = i
        .config
        .validate()
        .err()
        .map_or(MoshiExecutorError::NotInitialized, Into::into);
    reject(m, sink, err);
}

/// Reject a checkpoint whose tensors do not match the config (named).
pub fn effect_reject_tensors(m: &mut ExecutorMachine, i: &Initialize, sink: &mut Sink) {
    let err = match &i.weights {
        WeightsSource::File(path) => voxlane_runtime::weights::WeightFile::open(path)
            .map_err(MoshiError::from)
            .and_then(|f| {
                voxlane_actors::speech::moshi::weights::check_file(&i.config, &f).map(|_| ())
            })
            .err(),
        WeightsSource::Random(_) => None,
    };
    reject(
        m,
        sink,
        err.map_or(MoshiExecutorError::NotInitialized, Into::into),
    );
}

/// Convert and bind every tensor (one at a time); raise `initialize_*`.
pub fn effect_bind_model(m: &mut ExecutorMachine, i: &Initialize, sink: &mut Sink) {
    let built = match (&i.weights, &i.cache_dir) {
        (WeightsSource::File(path), Some(dir)) => {
            MoshiLm::load_cached(&i.config, path, i.route, dir)
        }
        (WeightsSource::File(path), None) => {
            MoshiLm::load(&i.config, path, i.route).map(|lm| (lm, CacheUse::Off))
        }
        (WeightsSource::Random(seed), _) => {
            MoshiLm::random(&i.config, i.route, *seed).map(|lm| (lm, CacheUse::Off))
        }
    };
    sink.follow_up = Some(match built {
        Ok((lm, cache)) => {
            m.cache = cache;
            m.model = Some(Arc::new(lm));
            m.pool = Some(i.pool.clone());
            FollowUp::InitializeDone
        }
        Err(e) => FollowUp::InitializeError(e.into()),
    });
}

/// Reply `initialize_done`.
pub fn effect_reply_initialized(m: &mut ExecutorMachine, sink: &mut Sink) {
    sink.reply = Some(Reply::Initialized {
        frame_bytes: m.model.as_ref().map_or(0, |lm| lm.bytes_per_frame()),
        cache: m.cache.clone(),
    });
}

/// Reply `initialize_error` (nothing stays bound).
pub fn effect_reply_init_error(
    m: &mut ExecutorMachine,
    e: &Slot<MoshiExecutorError>,
    sink: &mut Sink,
) {
    m.model = None;
    m.pool = None;
    reject(m, sink, take(e, "initialize_error"));
}

/// Reject a second `initialize`.
pub fn effect_reject_already_initialized(m: &mut ExecutorMachine, sink: &mut Sink) {
    reject(m, sink, MoshiExecutorError::AlreadyInitialized);
}

/// Reject a request that needs a model.
pub fn effect_reject_not_initialized(m: &mut ExecutorMachine, sink: &mut Sink) {
    reject(m, sink, MoshiExecutorError::NotInitialized);
}

/// Reject sampling parameters the vocabularies do not allow.
pub fn effect_reject_sampling(m: &mut ExecutorMachine, b: &BindSession, sink: &mut Sink) {
    let err = match m.model.as_ref() {
        Some(lm) => {
            let c = lm.config();
            match (
                b.sampling.text.validate(c.text_card),
                b.sampling.audio.validate(c.card),
            ) {
                (Err(e), _) => MoshiExecutorError::Sampler {
                    stream: "text",
                    source: e.into(),
                },
                (_, Err(e)) => MoshiExecutorError::Sampler {
                    stream: "audio",
                    source: e.into(),
                },
                _ => MoshiExecutorError::NotInitialized,
            }
        }
        None => MoshiExecutorError::NotInitialized,
    };
    reject(m, sink, err);
}

/// Reject a session over its capacity (nothing allocated).
pub fn effect_reject_capacity(m: &mut ExecutorMachine, b: &BindSession, sink: &mut Sink) {
    let need = session_bytes(m);
    reject(
        m,
        sink,
        MoshiExecutorError::Capacity {
            need,
            capacity: b.capacity_bytes.unwrap_or(0),
        },
    );
}

fn open(
    m: &ExecutorMachine,
    b: &BindSession,
    persona: bool,
) -> Result<ExecSession, MoshiExecutorError> {
    let lm = m.model.as_ref().ok_or(MoshiExecutorError::NotInitialized)?;
    let c = lm.config();
    let (gen, rows) = if persona {
        (Gen::Persona(PersonaGen::new(c)?), PREFILL_CHUNK)
    } else {
        (Gen::Moshi(LmGen::new(c)), 1)
    };
    let sampler = |stream: &'static str, vocab, params, seed| {
        LogitsSampler::configured(Configure {
            vocab,
            params,
            seed,
        })
        .map_err(|source| MoshiExecutorError::Sampler { stream, source })
    };
    Ok(ExecSession {
        state: lm.state(rows)?,
        gen,
        // One stream of draws per sampler, both fixed by the session seed.
        text: sampler("text", c.text_card, b.sampling.text, b.seed)?,
        audio: sampler("audio", c.card, b.sampling.audio, b.seed.wrapping_add(1))?,
        tokens: vec![0; c.num_codebooks()],
        audio_tokens: vec![0; c.dep_q],
        forced_audio: vec![0; c.dep_q],
        forced_mask: vec![false; c.dep_q],
        forced_text: None,
        text_token: 0,
        k: 0,
        frame: None,
    })
}

/// Allocate the session's rings, buffers and samplers; raise `bind_*`.
pub fn effect_open_session(m: &mut ExecutorMachine, b: &BindSession, sink: &mut Sink) {
    open_with(m, b, false, sink);
}

/// The same with PersonaPlex's ring and room for batched prompt rows; raise `bind_*`.
pub fn effect_open_persona_session(m: &mut ExecutorMachine, b: &BindSession, sink: &mut Sink) {
    open_with(m, b, true, sink);
}

fn open_with(m: &mut ExecutorMachine, b: &BindSession, persona: bool, sink: &mut Sink) {
    sink.follow_up = Some(match open(m, b, persona) {
        Ok(s) => {
            m.session = Some(s);
            FollowUp::BindDone
        }
        Err(e) => FollowUp::BindError(e),
    });
}

/// Reply `bind_done`.
pub fn effect_reply_session(m: &mut ExecutorMachine, sink: &mut Sink) {
    sink.reply = Some(Reply::SessionOpened {
        bytes: session_bytes(m),
    });
}

/// Reply `bind_error`.
pub fn effect_reply_bind_error(
    m: &mut ExecutorMachine,
    e: &Slot<MoshiExecutorError>,
    sink: &mut Sink,
) {
    m.session = None;
    reject(m, sink, take(e, "bind_error"));
}

/// Reject `step` with no session bound.
pub fn effect_reject_no_session(m: &mut ExecutorMachine, sink: &mut Sink) {
    reject(m, sink, MoshiExecutorError::NoSession);
}

/// Reject a step's codes or forced tokens.
pub fn effect_reject_codes(m: &mut ExecutorMachine, s: &Step<'_>, sink: &mut Sink) {
    let err = check_step(m, s)
        .err()
        .unwrap_or(MoshiExecutorError::NoSession);
    reject(m, sink, err);
}

/// Run `f` on the route's lanes: the caller alone, or the whole pool.
fn on_route<R>(
    m: &ExecutorMachine,
    f: impl FnOnce(&MoshiLm, &dyn RouteFork) -> Result<R, MoshiError>,
) -> Result<R, MoshiExecutorError> {
    let (lm, pool) = match (m.model.as_ref(), m.pool.as_ref()) {
        (Some(lm), Some(p)) => (lm, p),
        _ => return Err(MoshiExecutorError::NotInitialized),
    };
    if guard_route_serial(m) {
        let one = pool.sub(1).map_err(|e| MoshiError::Input(e.to_string()))?;
        Ok(f(lm, &Lanes(&one))?)
    } else {
        Ok(f(lm, &Lanes(&**pool))?)
    }
}

/// The two fork kinds behind one object-safe face (the model's calls are generic).
trait RouteFork {
    /// The temporal step on these lanes.
    fn forward_text(&self, lm: &MoshiLm, s: &mut ExecSession) -> Result<(), MoshiError>;
    /// The temporal step on a saved embedding.
    fn forward_embedding(
        &self,
        lm: &MoshiLm,
        s: &mut ExecSession,
        e: &[f32],
    ) -> Result<(), MoshiError>;
    /// PersonaPlex prompt calls, batched.
    fn prefill(
        &self,
        lm: &MoshiLm,
        s: &mut ExecSession,
        calls: &[PromptFrame],
    ) -> Result<(), MoshiError>;
    /// Depformer step `k` on these lanes.
    fn depformer(
        &self,
        lm: &MoshiLm,
        s: &mut ExecSession,
        k: usize,
        prev: u32,
    ) -> Result<(), MoshiError>;
}

struct Lanes<'a, F: Fork>(&'a F);

impl<F: Fork> RouteFork for Lanes<'_, F> {
    fn forward_text(&self, lm: &MoshiLm, s: &mut ExecSession) -> Result<(), MoshiError> {
        lm.forward_text(self.0, &mut s.state, &s.tokens, 1, true)
    }

    fn forward_embedding(
        &self,
        lm: &MoshiLm,
        s: &mut ExecSession,
        e: &[f32],
    ) -> Result<(), MoshiError> {
        lm.forward_embedding(self.0, &mut s.state, e)
    }

    fn prefill(
        &self,
        lm: &MoshiLm,
        s: &mut ExecSession,
        calls: &[PromptFrame],
    ) -> Result<(), MoshiError> {
        match &mut s.gen {
            Gen::Persona(g) => {
                voxlane_actors::speech::moshi::prefill(lm, &mut s.state, g, self.0, calls)
            }
            Gen::Moshi(_) => Err(MoshiError::Input("prefill needs PersonaPlex's ring".into())),
        }
    }

    fn depformer(
        &self,
        lm: &MoshiLm,
        s: &mut ExecSession,
        k: usize,
        prev: u32,
    ) -> Result<(), MoshiError> {
        lm.depformer_step(self.0, &mut s.state, k, prev)
    }
}

/// Store the codes, read the frame's input tokens, step the temporal
/// transformer; raise `temporal_done` or `step_error`.
fn step_temporal(m: &mut ExecutorMachine, st: &Step<'_>, sink: &mut Sink) {
    let Some(mut s) = m.session.take() else {
        sink.follow_up = Some(FollowUp::StepError(MoshiExecutorError::NoSession));
        return;
    };
    s.frame = None;
    let prepared = match &mut s.gen {
        Gen::Moshi(g) => {
            s.forced_text = st.forced_text;
            s.forced_mask.fill(st.forced_audio.is_some());
            if let Some(a) = st.forced_audio {
                s.forced_audio.copy_from_slice(a);
            }
            g.prepare(st.other_codes)
                .map(|t| {
                    s.tokens.copy_from_slice(t);
                    true
                })
                .map_err(MoshiExecutorError::from)
        }
        Gen::Persona(g) => g
            .prepare(Some(st.other_codes), st.forced_audio, st.forced_text)
            .map(|p| p.is_some())
            .map_err(MoshiExecutorError::from),
    };
    let result = match prepared {
        Ok(true) => {
            take_provided(&mut s);
            on_route(m, |lm, r| r.forward_text(lm, &mut s)).map(|()| FollowUp::TemporalDone)
        }
        // PersonaPlex's first call: nothing to step yet.
        Ok(false) => Ok(FollowUp::CallPending),
        Err(e) => Err(e),
    };
    m.session = Some(s);
    sink.follow_up = Some(result.unwrap_or_else(FollowUp::StepError));
}

/// PersonaPlex: this call's input tokens and which targets its ring provides.
fn take_provided(s: &mut ExecSession) {
    if let Gen::Persona(g) = &s.gen {
        let p = g.prepared();
        s.tokens.copy_from_slice(p.input);
        s.forced_text = p.provided[0].then_some(p.target[0]);
        s.forced_mask.copy_from_slice(&p.provided[1..]);
        s.forced_audio.copy_from_slice(&p.target[1..]);
    }
}

/// The frame on the caller alone.
pub fn effect_step_serial(m: &mut ExecutorMachine, st: &Step<'_>, sink: &mut Sink) {
    step_temporal(m, st, sink);
}

/// The frame forked over the pool's lanes.
pub fn effect_step_lanes(m: &mut ExecutorMachine, st: &Step<'_>, sink: &mut Sink) {
    step_temporal(m, st, sink);
}

/// Run depformer step `k` fed `prev`; raise `depformer_done` or `step_error`.
fn depformer(m: &mut ExecutorMachine, k: usize, prev: u32, sink: &mut Sink) {
    let Some(mut s) = m.session.take() else {
        sink.follow_up = Some(FollowUp::StepError(MoshiExecutorError::NoSession));
        return;
    };
    s.k = k;
    let r = on_route(m, |lm, route| route.depformer(lm, &mut s, k, prev));
    m.session = Some(s);
    sink.follow_up = Some(match r {
        Ok(()) => FollowUp::DepformerDone,
        Err(e) => FollowUp::StepError(e),
    });
}

fn with_text(
    m: &mut ExecutorMachine,
    pick: impl FnOnce(&mut ExecSession) -> Result<u32, MoshiExecutorError>,
    sink: &mut Sink,
) {
    let picked = match m.session.as_mut() {
        Some(s) => pick(s).inspect(|&t| s.text_token = t),
        None => Err(MoshiExecutorError::NoSession),
    };
    match picked {
        Ok(t) => depformer(m, 0, t, sink),
        Err(e) => sink.follow_up = Some(FollowUp::StepError(e)),
    }
}

/// Take the forced text token, then depformer step 0.
pub fn effect_force_text(m: &mut ExecutorMachine, sink: &mut Sink) {
    with_text(
        m,
        |s| {
            s.forced_text
                .ok_or(MoshiExecutorError::MissingPayload("forced text"))
        },
        sink,
    );
}

/// Draw the text token from the text sampler machine, then depformer step 0.
pub fn effect_sample_text(m: &mut ExecutorMachine, sink: &mut Sink) {
    with_text(
        m,
        |s| {
            s.text
                .sample(s.state.text_logits())
                .map_err(|source| MoshiExecutorError::Sampler {
                    stream: "text",
                    source,
                })
        },
        sink,
    );
}

fn with_audio(
    m: &mut ExecutorMachine,
    pick: impl FnOnce(&mut ExecSession) -> Result<u32, SamplerMachineError>,
    sink: &mut Sink,
) {
    let Some(s) = m.session.as_mut() else {
        sink.follow_up = Some(FollowUp::StepError(MoshiExecutorError::NoSession));
        return;
    };
    let tok = match pick(s) {
        Ok(t) => t,
        Err(source) => {
            sink.follow_up = Some(FollowUp::StepError(MoshiExecutorError::Sampler {
                stream: "audio",
                source,
            }));
            return;
        }
    };
    let k = s.k;
    s.audio_tokens[k] = tok;
    if k + 1 < s.audio_tokens.len() {
        return depformer(m, k + 1, tok, sink);
    }
    // Every token chosen: store them, take the frame `max_delay` calls back.
    let committed = s
        .gen
        .commit(s.text_token, &s.audio_tokens)
        .map(|f| f.map(FrameTokens::new));
    sink.follow_up = Some(match committed {
        Ok(frame) => {
            s.frame = frame;
            FollowUp::StepDone
        }
        Err(e) => FollowUp::StepError(e.into()),
    });
}

/// Take codebook `k`'s forced token, then the next depformer step or `step_done`.
pub fn effect_force_audio(m: &mut ExecutorMachine, sink: &mut Sink) {
    with_audio(m, |s| Ok(s.forced_audio[s.k]), sink);
}

/// Draw codebook `k`'s token from the audio sampler, then the next depformer step or `step_done`.
pub fn effect_sample_audio(m: &mut ExecutorMachine, sink: &mut Sink) {
    with_audio(m, |s| s.audio.sample(s.state.audio_logits()), sink);
}

/// Reject prompt calls (named).
pub fn effect_reject_prefill(m: &mut ExecutorMachine, p: &[PromptFrame], sink: &mut Sink) {
    let err = check_prefill(m, p)
        .err()
        .unwrap_or(MoshiExecutorError::NoSession);
    reject(m, sink, err);
}

/// Batch the prompt calls through the temporal transformer; raise `prefill_done` or `step_error`.
pub fn effect_prefill(m: &mut ExecutorMachine, p: &[PromptFrame], sink: &mut Sink) {
    let Some(mut s) = m.session.take() else {
        sink.follow_up = Some(FollowUp::StepError(MoshiExecutorError::NoSession));
        return;
    };
    let r = on_route(m, |lm, route| route.prefill(lm, &mut s, p));
    m.session = Some(s);
    m.prefilled = p.len();
    sink.follow_up = Some(match r {
        Ok(()) => FollowUp::PrefillDone,
        Err(e) => FollowUp::StepError(e),
    });
}

/// Reply `prefill_done`.
pub fn effect_reply_prefilled(m: &mut ExecutorMachine, sink: &mut Sink) {
    sink.reply = Some(Reply::Prefilled { calls: m.prefilled });
}

/// Reject a saved embedding (named).
pub fn effect_reject_embedding(m: &mut ExecutorMachine, e: &[f32], sink: &mut Sink) {
    let err = check_embedding(m, e)
        .err()
        .unwrap_or(MoshiExecutorError::NoSession);
    reject(m, sink, err);
}

/// One PersonaPlex call from a saved embedding (every stream provided, text
/// PAD); raise `temporal_done` or `step_error`.
pub fn effect_step_embedding(m: &mut ExecutorMachine, e: &[f32], sink: &mut Sink) {
    let Some(mut s) = m.session.take() else {
        sink.follow_up = Some(FollowUp::StepError(MoshiExecutorError::NoSession));
        return;
    };
    s.frame = None;
    let (init, pad) = m.model.as_ref().map_or((0, 0), |lm| {
        let c = lm.config();
        (c.audio_initial_token(), c.text_padding_id as u32)
    });
    let r = match s.gen.persona() {
        Some(g) => g
            .prepare_replay(init, pad)
            .map_err(MoshiExecutorError::from),
        None => Err(MoshiExecutorError::NotPersona("step_embedding")),
    }
    .and_then(|()| {
        take_provided(&mut s);
        on_route(m, |lm, route| route.forward_embedding(lm, &mut s, e))
    });
    m.session = Some(s);
    sink.follow_up = Some(match r {
        Ok(()) => FollowUp::TemporalDone,
        Err(e) => FollowUp::StepError(e),
    });
}

/// Reject a saved token ring (named).
pub fn effect_reject_tokens(m: &mut ExecutorMachine, t: &[i64], sink: &mut Sink) {
    let err = check_tokens(m, t)
        .err()
        .unwrap_or(MoshiExecutorError::NoSession);
    reject(m, sink, err);
}

/// Replace PersonaPlex's token ring with the saved one.
pub fn effect_restore_tokens(m: &mut ExecutorMachine, t: &[i64], sink: &mut Sink) {
    let r = match m.session.as_mut().and_then(|s| s.gen.persona()) {
        Some(g) => g.restore_cache(t).map_err(MoshiExecutorError::from),
        None => Err(MoshiExecutorError::NotPersona("restore_tokens")),
    };
    match r {
        Ok(()) => sink.reply = Some(Reply::Ok),
        Err(e) => reject(m, sink, e),
    }
}

/// Reply `step_done` with the output frame.
pub fn effect_reply_frame(m: &mut ExecutorMachine, sink: &mut Sink) {
    sink.reply = Some(match m.session.as_ref().and_then(|s| s.frame) {
        Some(f) => Reply::Frame(f),
        None => Reply::Pending,
    });
}

/// Reply `step_done` without a frame (the first `max_delay` calls).
pub fn effect_reply_pending(_m: &mut ExecutorMachine, sink: &mut Sink) {
    sink.reply = Some(Reply::Pending);
}

/// Reply `step_error`.
pub fn effect_reply_step_error(
    m: &mut ExecutorMachine,
    e: &Slot<MoshiExecutorError>,
    sink: &mut Sink,
) {
    reject(m, sink, take(e, "step_error"));
}

/// Back to the session's first frame, samplers reseeded.
pub fn effect_reset_session(m: &mut ExecutorMachine, sink: &mut Sink) {
    if let Some(s) = m.session.as_mut() {
        s.state.reset();
        s.gen.reset();
        s.text.handle(&crate::speech::logits_sampler::Event::Reseed);
        s.audio
            .handle(&crate::speech::logits_sampler::Event::Reseed);
    }
    sink.reply = Some(Reply::Ok);
}

/// Drop the session and the model.
pub fn effect_close(m: &mut ExecutorMachine, sink: &mut Sink) {
    m.session = None;
    m.model = None;
    m.pool = None;
    sink.reply = Some(Reply::Ok);
}

/// Reject any request after `close`.
pub fn effect_reject_closed(m: &mut ExecutorMachine, sink: &mut Sink) {
    reject(m, sink, MoshiExecutorError::Closed);
}

/// Back to `uninitialized`, everything dropped.
pub fn effect_reset(m: &mut ExecutorMachine, sink: &mut Sink) {
    effect_close(m, sink);
}

/// Reply with the diagnostics counters.
pub fn effect_capture_diagnostics(m: &mut ExecutorMachine, sink: &mut Sink) {
    sink.reply = Some(Reply::Diagnostics(m.book.snapshot()));
}

/// Reject an event no edge of the current state takes.
pub fn effect_reject_unexpected(m: &mut ExecutorMachine, event: &'static str, sink: &mut Sink) {
    let state = m.book.state();
    reject(m, sink, MoshiExecutorError::Unexpected { event, state });
}
