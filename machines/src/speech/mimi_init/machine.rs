//! The statig machine: states, then the events each state handles.
//!
//! Every handler arm is one row of [`super::table::TRANSITIONS`]: a named
//! guard selects it and a named action runs (`internal!` stays put,
//! `transition!` moves). Events a state does not name fall through to the
//! `mimi` superstate, which rejects them with a reason.

use super::actions::*;
use super::errors::MimiInitError;
use super::events::{BindSession, InitReply, InitSink, Initialize, MimiInitEvent, WeightsSource};
use super::guards::*;
use super::table::SPEC;
use crate::core::{Bookkeeping, Fired};
use crate::speech::mimi_session::{DecodeSession, EncodeSession, MimiSession, Side};
use crate::{internal, transition};
use statig::prelude::*;
use std::path::PathBuf;
use std::sync::Arc;
use voxlane_actors::speech::mimi::{MimiConfig, MimiModel, MimiOptions, MimiWeights};

/// Context that persists across events: the bound model, counters and the trace.
pub struct MimiInitMachine {
    /// The model, once bound (sessions share it).
    pub model: Option<Arc<MimiModel>>,
    /// Counters, edge trace and current state.
    pub book: Bookkeeping,
}

impl Default for MimiInitMachine {
    fn default() -> Self {
        Self {
            model: None,
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
impl MimiInitMachine {
    /// No model: `initialize` checks the config, then the tensors, then binds.
    #[state(superstate = "mimi")]
    fn uninitialized(&mut self, context: &mut InitSink, event: &MimiInitEvent) -> Outcome<State> {
        match event {
            MimiInitEvent::Initialize(i) if guard_config_invalid(i) => transition!(
                self,
                guard_config_invalid,
                effect_reject_config(self, i, context),
                State::errored()
            ),
            MimiInitEvent::Initialize(i) if guard_tensors_invalid(i) => transition!(
                self,
                guard_tensors_invalid,
                effect_reject_tensors(self, i, context),
                State::errored()
            ),
            MimiInitEvent::Initialize(i) => transition!(
                self,
                guard_init_valid,
                effect_bind_model(self, i, context),
                State::binding()
            ),
            _ => Super,
        }
    }

    /// Weights bound; waits for `initialize_done` / `initialize_error`.
    #[state(superstate = "mimi")]
    fn binding(&mut self, context: &mut InitSink, event: &MimiInitEvent) -> Outcome<State> {
        match event {
            MimiInitEvent::InitializeDone => transition!(
                self,
                always,
                effect_reply_initialized(self, context),
                State::initialized()
            ),
            MimiInitEvent::InitializeError(e) => transition!(
                self,
                always,
                effect_reply_init_error(self, e, context),
                State::errored()
            ),
            _ => Super,
        }
    }

    /// Model bound: `bind_session` is checked against the workspace rule first.
    #[state(superstate = "mimi")]
    fn initialized(&mut self, context: &mut InitSink, event: &MimiInitEvent) -> Outcome<State> {
        match event {
            MimiInitEvent::Initialize(_) => internal!(
                self,
                always,
                effect_reject_already_initialized(self, context)
            ),
            MimiInitEvent::BindSession(b) if guard_capacity_exceeded(self, b) => internal!(
                self,
                guard_capacity_exceeded,
                effect_reject_capacity(self, b, context)
            ),
            MimiInitEvent::BindSession(b) => transition!(
                self,
                guard_capacity_fits,
                effect_open_session(self, b, context),
                State::opening()
            ),
            _ => Super,
        }
    }

    /// A session allocated; waits for `bind_done` / `bind_error`.
    #[state(superstate = "mimi")]
    fn opening(&mut self, context: &mut InitSink, event: &MimiInitEvent) -> Outcome<State> {
        match event {
            MimiInitEvent::BindDone => transition!(
                self,
                always,
                effect_reply_session(self, context),
                State::initialized()
            ),
            MimiInitEvent::BindError(e) => transition!(
                self,
                always,
                effect_reply_bind_error(self, e, context),
                State::initialized()
            ),
            _ => Super,
        }
    }

    /// Setup failed: only `reset` (in the superstate) leaves.
    #[state(superstate = "mimi")]
    fn errored(&mut self, event: &MimiInitEvent) -> Outcome<State> {
        let _ = event;
        Super
    }

    /// Reset and diagnostics everywhere; anything else unexpected is rejected.
    #[superstate]
    fn mimi(&mut self, context: &mut InitSink, event: &MimiInitEvent) -> Outcome<State> {
        match event {
            MimiInitEvent::Reset => transition!(
                self,
                always,
                effect_reset(self, context),
                State::uninitialized()
            ),
            MimiInitEvent::CaptureDiagnostics => {
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
        State::Errored {} => "errored",
    }
}

crate::machine_hooks!(MimiInitMachine {
    event: MimiInitEvent,
    sink: InitSink
});

/// The public handle: send an event, get the reply (and the session a bind opened).
pub struct MimiInit {
    sm: StateMachine<MimiInitMachine>,
}

impl Default for MimiInit {
    fn default() -> Self {
        Self::new()
    }
}

impl MimiInit {
    /// A machine in `uninitialized`.
    pub fn new() -> Self {
        Self {
            sm: MimiInitMachine::default().state_machine(),
        }
    }

    /// A machine that logs every edge it takes (for conformance tests).
    pub fn traced() -> Self {
        let m = MimiInitMachine {
            book: Bookkeeping::traced(&SPEC),
            ..Default::default()
        };
        Self {
            sm: m.state_machine(),
        }
    }

    /// Step exactly one event, without feeding back the outcome event its
    /// action raised (left in the returned sink).
    pub fn step(&mut self, event: &MimiInitEvent) -> InitSink {
        let mut sink = InitSink::default();
        self.sm.handle_with_context(event, &mut sink);
        sink
    }

    /// Handle `event` run-to-completion; the sink holds the reply and any session.
    pub fn handle_sink(&mut self, event: &MimiInitEvent) -> InitSink {
        let mut sink = self.step(event);
        while let Some(next) = sink.follow_up.take() {
            self.sm.handle_with_context(&next.into_event(), &mut sink);
        }
        if sink.reply.is_none() {
            sink.reply = Some(InitReply::Error(MimiInitError::Unexpected {
                event: event.kind(),
                state: self.state(),
            }));
        }
        sink
    }

    /// Handle `event` run-to-completion and return the reply.
    pub fn handle(&mut self, event: &MimiInitEvent) -> InitReply {
        self.handle_sink(event)
            .reply
            .unwrap_or(InitReply::Error(MimiInitError::Unexpected {
                event: event.kind(),
                state: self.state(),
            }))
    }

    /// Initialize from a config and a safetensors file.
    pub fn initialize_file(
        &mut self,
        config: MimiConfig,
        path: impl Into<PathBuf>,
        options: MimiOptions,
    ) -> InitReply {
        self.handle(&MimiInitEvent::Initialize(Box::new(Initialize {
            config,
            weights: WeightsSource::File(path.into()),
            options,
        })))
    }

    /// Initialize from a config and in-memory weights.
    pub fn initialize_memory(
        &mut self,
        config: MimiConfig,
        weights: MimiWeights,
        options: MimiOptions,
    ) -> InitReply {
        self.handle(&MimiInitEvent::Initialize(Box::new(Initialize {
            config,
            weights: WeightsSource::memory(weights),
            options,
        })))
    }

    /// Bind a session of `side`; the session, or the typed reason it was refused.
    pub fn bind_session(
        &mut self,
        side: Side,
        max_frames: usize,
        capacity_bytes: usize,
    ) -> Result<MimiSession, MimiInitError> {
        let mut sink = self.handle_sink(&MimiInitEvent::BindSession(BindSession {
            side,
            max_frames,
            capacity_bytes,
        }));
        match (sink.session.take(), sink.reply) {
            (Some(s), _) => Ok(s),
            (None, Some(InitReply::Error(e))) => Err(e),
            (None, other) => Err(MimiInitError::Session(format!("no session: {other:?}"))),
        }
    }

    /// Bind an encode session.
    pub fn bind_encoder(
        &mut self,
        max_frames: usize,
        capacity_bytes: usize,
    ) -> Result<EncodeSession, MimiInitError> {
        match self.bind_session(Side::Encode, max_frames, capacity_bytes)? {
            MimiSession::Encode(s) => Ok(s),
            MimiSession::Decode(_) => Err(MimiInitError::Session("wrong side".into())),
        }
    }

    /// Bind a decode session.
    pub fn bind_decoder(
        &mut self,
        max_frames: usize,
        capacity_bytes: usize,
    ) -> Result<DecodeSession, MimiInitError> {
        match self.bind_session(Side::Decode, max_frames, capacity_bytes)? {
            MimiSession::Decode(s) => Ok(s),
            MimiSession::Encode(_) => Err(MimiInitError::Session("wrong side".into())),
        }
    }

    /// The bound model, if any.
    pub fn model(&self) -> Option<&Arc<MimiModel>> {
        self.sm.inner().model.as_ref()
    }

    /// The current leaf state's name.
    pub fn state(&self) -> &'static str {
        state_name(self.sm.state())
    }

    /// The edges taken so far (empty unless built with [`Self::traced`]).
    pub fn take_trace(&mut self) -> Vec<Fired> {
        // SAFETY (statig's contract for inner_mut): taking the log does not
        // touch any state the machine's invariants depend on.
        unsafe { self.sm.inner_mut().book.take_log() }
    }

    /// Whether the last event ended without taking any declared edge.
    pub fn dangling(&self) -> bool {
        self.sm.inner().book.dangling()
    }
}
