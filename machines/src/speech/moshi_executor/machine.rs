//! The statig machine: states, then the events each state handles.
//!
//! Every handler arm is one row of [`super::table::TRANSITIONS`]: a named
//! guard selects it and a named action runs (`internal!` stays put,
//! `transition!` moves). Events a state does not name fall through to the
//! `moshi` superstate, which rejects them with a reason.

use super::actions::*;
use super::errors::MoshiExecutorError;
use super::events::{BindSession, Event, FrameTokens, Initialize, Reply, Sink, Step};
use super::guards::*;
use super::table::SPEC;
use crate::core::Bookkeeping;
use crate::speech::logits_sampler::LogitsSampler;
use crate::{internal, transition};
use statig::prelude::*;
use std::sync::Arc;
use voxlane_actors::speech::moshi::{CacheUse, LmGen, LmState, MoshiLm};
use voxlane_actors::speech::moshi::{PersonaGen, PromptFrame};
use voxlane_runtime::{DiagnosticsSnapshot, LanePool};

/// The delay ring of a session: Kyutai's `LMGen` (the other speaker's
/// codes in, the model's out) or PersonaPlex's (any stream provided, one
/// call late).
#[derive(Debug)]
pub enum Gen {
    /// Moshi: `max_delay + 2` frames.
    Moshi(LmGen),
    /// PersonaPlex: `max_delay + 3` frames and a provided mask.
    Persona(PersonaGen),
}

impl Gen {
    /// Back to the first call.
    pub fn reset(&mut self) {
        match self {
            Self::Moshi(g) => g.reset(),
            Self::Persona(g) => g.reset(),
        }
    }

    /// Store `text` and the audio tokens; the output frame once the delays are filled.
    pub fn commit(
        &mut self,
        text: u32,
        audio: &[u32],
    ) -> Result<Option<&[u32]>, voxlane_actors::speech::moshi::MoshiError> {
        match self {
            Self::Moshi(g) => g.commit(text, audio),
            Self::Persona(g) => g.commit(text, audio),
        }
    }

    /// The PersonaPlex ring, if this is one.
    pub fn persona(&mut self) -> Option<&mut PersonaGen> {
        match self {
            Self::Persona(g) => Some(g),
            Self::Moshi(_) => None,
        }
    }
}

/// One session: the model state, the delay ring, a sampler machine per
/// stream and the frame's tokens (all sized at `bind_session`).
pub struct ExecSession {
    /// KV rings, activations and logits.
    pub state: LmState,
    /// The delay ring.
    pub gen: Gen,
    /// The text stream's sampler.
    pub text: LogitsSampler,
    /// The audio codebooks' sampler.
    pub audio: LogitsSampler,
    /// This call's input tokens.
    pub tokens: Vec<u32>,
    /// This call's audio tokens.
    pub audio_tokens: Vec<u32>,
    /// This call's forced audio tokens (valid where `forced_mask`).
    pub forced_audio: Vec<u32>,
    /// Which of this call's audio tokens are forced.
    pub forced_mask: Vec<bool>,
    /// This call's forced text token.
    pub forced_text: Option<u32>,
    /// This call's text token.
    pub text_token: u32,
    /// The codebook the depformer is at.
    pub k: usize,
    /// This call's output frame, if any.
    pub frame: Option<FrameTokens>,
}

/// Context that persists: the pool, the model and the session.
pub struct ExecutorMachine {
    /// Lanes every frame forks on.
    pub pool: Option<Arc<LanePool>>,
    /// The bound model.
    pub model: Option<Arc<MoshiLm>>,
    /// The open session.
    pub session: Option<ExecSession>,
    /// How the last load used the converted-weights cache.
    pub cache: CacheUse,
    /// Calls the last prefill took.
    pub prefilled: usize,
    /// Counters, edge trace and current state.
    pub book: Bookkeeping,
}

impl Default for ExecutorMachine {
    fn default() -> Self {
        Self {
            pool: None,
            model: None,
            session: None,
            cache: CacheUse::Off,
            prefilled: 0,
            book: Bookkeeping::new(&SPEC),
        }
    }
}

#[state_machine(
    initial = "State::uninitialized()",
    before_dispatch = "Self::before_dispatch",
    after_transition = "Self::after_transition",
    state(derive(Debug, Clone, Copy, PartialEq, Eq))
)]
impl ExecutorMachine {
    /// No model: `initialize` checks the config, then the tensors, then binds.
    #[state(superstate = "moshi")]
    fn uninitialized(&mut self, context: &mut Sink, event: &Event<'_>) -> Outcome<State> {
        match event {
            Event::Initialize(i) if guard_config_invalid(i) => transition!(
                self,
                guard_config_invalid,
                effect_reject_config(self, i, context),
                State::errored()
            ),
            Event::Initialize(i) if guard_tensors_invalid(i) => transition!(
                self,
                guard_tensors_invalid,
                effect_reject_tensors(self, i, context),
                State::errored()
            ),
            Event::Initialize(i) => transition!(
                self,
                guard_init_valid,
                effect_bind_model(self, i, context),
                State::binding()
            ),
            Event::BindSession(_) => {
                internal!(self, always, effect_reject_not_initialized(self, context))
            }
            _ => Super,
        }
    }

    /// Weights bound; waits for `initialize_done` / `initialize_error`.
    #[state(superstate = "moshi")]
    fn binding(&mut self, context: &mut Sink, event: &Event<'_>) -> Outcome<State> {
        match event {
            Event::InitializeDone => {
                transition!(
                    self,
                    always,
                    effect_reply_initialized(self, context),
                    State::initialized()
                )
            }
            Event::InitializeError(e) => {
                transition!(
                    self,
                    always,
                    effect_reply_init_error(self, e, context),
                    State::errored()
                )
            }
            _ => Super,
        }
    }

    /// Model bound: `bind_session` is checked before anything is allocated.
    #[state(superstate = "moshi")]
    fn initialized(&mut self, context: &mut Sink, event: &Event<'_>) -> Outcome<State> {
        match event {
            Event::Initialize(_) => internal!(
                self,
                always,
                effect_reject_already_initialized(self, context)
            ),
            Event::BindSession(b) if guard_sampling_invalid(self, b) => {
                internal!(
                    self,
                    guard_sampling_invalid,
                    effect_reject_sampling(self, b, context)
                )
            }
            Event::BindSession(b) if guard_capacity_exceeded(self, b) => {
                internal!(
                    self,
                    guard_capacity_exceeded,
                    effect_reject_capacity(self, b, context)
                )
            }
            Event::BindSession(b) if guard_persona_fits(self, b) => transition!(
                self,
                guard_persona_fits,
                effect_open_persona_session(self, b, context),
                State::opening()
            ),
            Event::BindSession(b) => transition!(
                self,
                guard_moshi_fits,
                effect_open_session(self, b, context),
                State::opening()
            ),
            Event::Step(_) => internal!(self, always, effect_reject_no_session(self, context)),
            Event::Close => transition!(self, always, effect_close(self, context), State::closed()),
            _ => Super,
        }
    }

    /// Session allocated; waits for `bind_done` / `bind_error`.
    #[state(superstate = "moshi")]
    fn opening(&mut self, context: &mut Sink, event: &Event<'_>) -> Outcome<State> {
        match event {
            Event::BindDone => transition!(
                self,
                always,
                effect_reply_session(self, context),
                State::ready()
            ),
            Event::BindError(e) => {
                transition!(
                    self,
                    always,
                    effect_reply_bind_error(self, e, context),
                    State::initialized()
                )
            }
            _ => Super,
        }
    }

    /// A session: each `step` is checked, then routed serial or over the
    /// lanes; `bind_session` replaces it (new sampling, new seed).
    #[state(superstate = "moshi")]
    fn ready(&mut self, context: &mut Sink, event: &Event<'_>) -> Outcome<State> {
        match event {
            Event::BindSession(b) if guard_sampling_invalid(self, b) => {
                internal!(
                    self,
                    guard_sampling_invalid,
                    effect_reject_sampling(self, b, context)
                )
            }
            Event::BindSession(b) if guard_capacity_exceeded(self, b) => {
                internal!(
                    self,
                    guard_capacity_exceeded,
                    effect_reject_capacity(self, b, context)
                )
            }
            Event::BindSession(b) if guard_persona_fits(self, b) => transition!(
                self,
                guard_persona_fits,
                effect_open_persona_session(self, b, context),
                State::opening()
            ),
            Event::BindSession(b) => transition!(
                self,
                guard_moshi_fits,
                effect_open_session(self, b, context),
                State::opening()
            ),
            Event::Step(s) if guard_codes_invalid(self, s) => {
                internal!(
                    self,
                    guard_codes_invalid,
                    effect_reject_codes(self, s, context)
                )
            }
            Event::Step(s) if guard_route_serial(self) => transition!(
                self,
                guard_route_serial,
                effect_step_serial(self, s, context),
                State::temporal()
            ),
            Event::Step(s) => transition!(
                self,
                guard_route_lanes,
                effect_step_lanes(self, s, context),
                State::temporal()
            ),
            Event::Prefill(p) if guard_prefill_invalid(self, p) => internal!(
                self,
                guard_prefill_invalid,
                effect_reject_prefill(self, p, context)
            ),
            Event::Prefill(p) => transition!(
                self,
                guard_prefill_valid,
                effect_prefill(self, p, context),
                State::prefilling()
            ),
            Event::StepEmbedding(e) if guard_embedding_invalid(self, e) => internal!(
                self,
                guard_embedding_invalid,
                effect_reject_embedding(self, e, context)
            ),
            Event::StepEmbedding(e) => transition!(
                self,
                guard_embedding_valid,
                effect_step_embedding(self, e, context),
                State::temporal()
            ),
            Event::RestoreTokens(t) if guard_tokens_invalid(self, t) => internal!(
                self,
                guard_tokens_invalid,
                effect_reject_tokens(self, t, context)
            ),
            Event::RestoreTokens(t) => internal!(
                self,
                guard_tokens_valid,
                effect_restore_tokens(self, t, context)
            ),
            Event::ResetSession => internal!(self, always, effect_reset_session(self, context)),
            Event::Close => transition!(self, always, effect_close(self, context), State::closed()),
            _ => Super,
        }
    }

    /// Prompt calls batched through the temporal transformer; waits for the outcome.
    #[state(superstate = "moshi")]
    fn prefilling(&mut self, context: &mut Sink, event: &Event<'_>) -> Outcome<State> {
        match event {
            Event::PrefillDone => transition!(
                self,
                always,
                effect_reply_prefilled(self, context),
                State::ready()
            ),
            Event::StepError(e) => transition!(
                self,
                always,
                effect_reply_step_error(self, e, context),
                State::ready()
            ),
            _ => Super,
        }
    }

    /// Text logits ready: the text token is forced or drawn, then depformer step 0.
    #[state(superstate = "moshi")]
    fn temporal(&mut self, context: &mut Sink, event: &Event<'_>) -> Outcome<State> {
        match event {
            Event::TemporalDone if guard_text_forced(self) => {
                transition!(
                    self,
                    guard_text_forced,
                    effect_force_text(self, context),
                    State::depth()
                )
            }
            Event::TemporalDone => {
                transition!(
                    self,
                    guard_text_sampled,
                    effect_sample_text(self, context),
                    State::depth()
                )
            }
            Event::CallPending => transition!(
                self,
                always,
                effect_reply_pending(self, context),
                State::ready()
            ),
            Event::StepError(e) => {
                transition!(
                    self,
                    always,
                    effect_reply_step_error(self, e, context),
                    State::ready()
                )
            }
            _ => Super,
        }
    }

    /// Codebook by codebook: each token forced or drawn, then the next step or `step_done`.
    #[state(superstate = "moshi")]
    fn depth(&mut self, context: &mut Sink, event: &Event<'_>) -> Outcome<State> {
        match event {
            Event::DepformerDone if guard_audio_forced(self) => {
                internal!(self, guard_audio_forced, effect_force_audio(self, context))
            }
            Event::DepformerDone => internal!(
                self,
                guard_audio_sampled,
                effect_sample_audio(self, context)
            ),
            Event::StepDone if guard_frame_ready(self) => {
                transition!(
                    self,
                    guard_frame_ready,
                    effect_reply_frame(self, context),
                    State::ready()
                )
            }
            Event::StepDone => {
                transition!(
                    self,
                    guard_frame_pending,
                    effect_reply_pending(self, context),
                    State::ready()
                )
            }
            Event::StepError(e) => {
                transition!(
                    self,
                    always,
                    effect_reply_step_error(self, e, context),
                    State::ready()
                )
            }
            _ => Super,
        }
    }

    /// Setup failed: only `reset` (in the superstate) leaves.
    #[state(superstate = "moshi")]
    fn errored(&mut self, event: &Event<'_>) -> Outcome<State> {
        let _ = event;
        Super
    }

    /// Closed: `reset` and diagnostics leave it as everywhere; all else is rejected.
    #[state(superstate = "moshi")]
    fn closed(&mut self, context: &mut Sink, event: &Event<'_>) -> Outcome<State> {
        match event {
            Event::Reset | Event::CaptureDiagnostics => Super,
            _ => internal!(self, always, effect_reject_closed(self, context)),
        }
    }

    /// Reset and diagnostics everywhere; anything else unexpected is rejected.
    #[superstate]
    fn moshi(&mut self, context: &mut Sink, event: &Event<'_>) -> Outcome<State> {
        match event {
            Event::Reset => transition!(
                self,
                always,
                effect_reset(self, context),
                State::uninitialized()
            ),
            Event::CaptureDiagnostics => {
                internal!(self, always, effect_capture_diagnostics(self, context))
            }
            other => internal!(
                self,
                always,
                effect_reject_unexpected(self, other.kind(), context)
            ),
        }
    }
}

/// The table name of a leaf state.
pub fn state_name(s: &State) -> &'static str {
    match s {
        State::Uninitialized {} => "uninitialized",
        State::Binding {} => "binding",
        State::Initialized {} => "initialized",
        State::Opening {} => "opening",
        State::Ready {} => "ready",
        State::Prefilling {} => "prefilling",
        State::Temporal {} => "temporal",
        State::Depth {} => "depth",
        State::Errored {} => "errored",
        State::Closed {} => "closed",
    }
}

crate::machine_hooks!(ExecutorMachine { event: Event<'_>, sink: Sink });

/// The public handle: send an event, get the reply.
pub struct MoshiExecutor {
    sm: StateMachine<ExecutorMachine>,
}

crate::machine_handle! {
    /// An executor in `uninitialized`.
    MoshiExecutor for ExecutorMachine {
        event: Event<'_>,
        sink: Sink,
        reply: Reply,
        unexpected: |event, state| Reply::Error(MoshiExecutorError::Unexpected { event, state }),
    }
}

fn expect<T>(
    r: Reply,
    what: &'static str,
    state: &'static str,
    f: impl FnOnce(Reply) -> Option<T>,
) -> Result<T, MoshiExecutorError> {
    match r {
        Reply::Error(e) => Err(e),
        other => f(other).ok_or(MoshiExecutorError::Unexpected { event: what, state }),
    }
}

impl MoshiExecutor {
    /// Validate and bind a model; returns the weight bytes a frame streams and the cache's use.
    pub fn initialize(
        &mut self,
        init: Initialize,
    ) -> Result<(usize, CacheUse), MoshiExecutorError> {
        let r = self.handle(&Event::Initialize(Box::new(init)));
        expect(r, "initialize", self.state(), |r| match r {
            Reply::Initialized { frame_bytes, cache } => Some((frame_bytes, cache)),
            _ => None,
        })
    }

    /// Open the session; returns the bytes its rings and buffers took.
    pub fn bind_session(&mut self, b: BindSession) -> Result<usize, MoshiExecutorError> {
        let r = self.handle(&Event::BindSession(b));
        expect(r, "bind_session", self.state(), |r| match r {
            Reply::SessionOpened { bytes } => Some(bytes),
            _ => None,
        })
    }

    /// One frame; `Some(tokens)` (text, then `dep_q` audio) once the delays are filled.
    pub fn frame(&mut self, step: Step<'_>) -> Result<Option<FrameTokens>, MoshiExecutorError> {
        let r = self.handle(&Event::Step(step));
        expect(r, "step", self.state(), |r| match r {
            Reply::Frame(f) => Some(Some(f)),
            Reply::Pending => Some(None),
            _ => None,
        })
    }

    /// PersonaPlex: prompt calls whose every stream is provided, batched; returns the calls taken.
    pub fn prefill(&mut self, calls: &[PromptFrame]) -> Result<usize, MoshiExecutorError> {
        let r = self.handle(&Event::Prefill(calls));
        expect(r, "prefill", self.state(), |r| match r {
            Reply::Prefilled { calls } => Some(calls),
            _ => None,
        })
    }

    /// PersonaPlex: one call from a saved voice-prompt embedding.
    pub fn step_embedding(&mut self, embedding: &[f32]) -> Result<(), MoshiExecutorError> {
        let r = self.handle(&Event::StepEmbedding(embedding));
        expect(r, "step_embedding", self.state(), |r| match r {
            Reply::Frame(_) | Reply::Pending => Some(()),
            _ => None,
        })
    }

    /// PersonaPlex: replace the token ring with a saved one.
    pub fn restore_tokens(&mut self, cache: &[i64]) -> Result<(), MoshiExecutorError> {
        let r = self.handle(&Event::RestoreTokens(cache));
        expect(r, "restore_tokens", self.state(), |r| match r {
            Reply::Ok => Some(()),
            _ => None,
        })
    }

    /// Back to the session's first frame (samplers reseeded).
    pub fn reset_session(&mut self) -> Result<(), MoshiExecutorError> {
        let r = self.handle(&Event::ResetSession);
        expect(r, "reset_session", self.state(), |r| match r {
            Reply::Ok => Some(()),
            _ => None,
        })
    }

    /// The diagnostics counters.
    pub fn diagnostics(&mut self) -> Option<DiagnosticsSnapshot> {
        match self.handle(&Event::CaptureDiagnostics) {
            Reply::Diagnostics(d) => Some(d),
            _ => None,
        }
    }

    /// Calls the session's ring has taken (PersonaPlex: prompt steps included).
    pub fn calls(&self) -> Option<usize> {
        self.sm.inner().session.as_ref().map(|s| match &s.gen {
            Gen::Moshi(g) => g.offset(),
            Gen::Persona(g) => g.offset(),
        })
    }

    /// The bound model, if any.
    pub fn model(&self) -> Option<&Arc<MoshiLm>> {
        self.sm.inner().model.as_ref()
    }
}
