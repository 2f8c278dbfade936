//! The statig session machine, generic over a [`SessionContract`]: states,
//! then the events each state handles. Every arm is a row of the side's
//! table: a named guard selects it and a named action runs.

use super::actions::*;
use super::contract::SessionContract;
use super::errors::MimiSessionError;
use super::events::{Push, SessionEvent, SessionReply, SessionSink};
use super::guards::*;
use crate::core::{Bookkeeping, Fired};
use crate::{internal, transition};
use statig::prelude::*;
use voxlane_runtime::{Fork, LanePool};

/// What persists between requests: the open session, counters and the trace.
pub struct SessionMachine<S: SessionContract> {
    /// The session, while open.
    pub session: Option<S::Session>,
    /// Counters, edge trace and current state.
    pub book: Bookkeeping,
}

impl<S: SessionContract> Default for SessionMachine<S> {
    fn default() -> Self {
        Self {
            session: None,
            book: Bookkeeping::new(&S::SPEC),
        }
    }
}

impl<S: SessionContract> SessionMachine<S> {
    /// Take the side's reject route for an invalid push (an internal edge).
    fn take_reject_route(
        &mut self,
        p: &Push<'_, S>,
        context: &mut SessionSink<'_, S>,
    ) -> Outcome<State> {
        let (route, err) = input_problem(self, p, context).unwrap_or((
            0,
            MimiSessionError::Step("push rejected without a reason".into()),
        ));
        let (guard, action) = S::REJECTS.get(route).copied().unwrap_or(S::REJECTS[0]);
        self.book.internal(guard, action);
        effect_reject_input(self, err, context);
        Handled
    }

    /// Take the side's step edge into `stepping`.
    fn take_step(&mut self, p: &Push<'_, S>, context: &mut SessionSink<'_, S>) -> Outcome<State> {
        let (guard, action) = S::STEP;
        self.book.take(guard, action);
        effect_step(self, p, context);
        Transition(State::stepping())
    }
}

#[state_machine(
    initial = "State::idle()",
    before_dispatch = "Self::before_dispatch",
    after_transition = "Self::after_transition",
    state(derive(Debug, Clone, Copy, PartialEq, Eq))
)]
impl<S: SessionContract> SessionMachine<S> {
    /// No session: `open_session` takes the one in its slot.
    #[state(superstate = "session")]
    fn idle(
        &mut self,
        context: &mut SessionSink<'_, S>,
        event: &SessionEvent<'_, S>,
    ) -> Outcome<State> {
        match event {
            SessionEvent::OpenSession(slot) if guard_session_present(slot) => transition!(
                self,
                guard_session_present,
                effect_open_session(self, slot, context),
                State::open()
            ),
            SessionEvent::OpenSession(_) => internal!(
                self,
                guard_session_missing,
                effect_reject_missing_session(self, context)
            ),
            _ => Super,
        }
    }

    /// Streaming: pushes are size- and range-checked, then stepped.
    #[state(superstate = "session")]
    fn open(
        &mut self,
        context: &mut SessionSink<'_, S>,
        event: &SessionEvent<'_, S>,
    ) -> Outcome<State> {
        match event {
            SessionEvent::OpenSession(_) => {
                internal!(self, always, effect_reject_already_open(self, context))
            }
            SessionEvent::Push(p) if guard_input_invalid(self, p, context) => {
                self.take_reject_route(p, context)
            }
            SessionEvent::Push(p) => self.take_step(p, context),
            SessionEvent::Reset => internal!(self, always, effect_reset_stream(self, context)),
            SessionEvent::Close => {
                transition!(self, always, effect_close(self, context), State::closed())
            }
            _ => Super,
        }
    }

    /// A frame ran; its outcome event returns to `open`.
    #[state(superstate = "session")]
    fn stepping(
        &mut self,
        context: &mut SessionSink<'_, S>,
        event: &SessionEvent<'_, S>,
    ) -> Outcome<State> {
        match event {
            SessionEvent::Done(frames) => transition!(
                self,
                always,
                effect_reply_done(self, *frames, context),
                State::open()
            ),
            SessionEvent::Error(e) => transition!(
                self,
                always,
                effect_reply_step_error(self, e, context),
                State::open()
            ),
            _ => Super,
        }
    }

    /// Closed: every request is rejected with `Closed`.
    #[state(superstate = "session")]
    fn closed(
        &mut self,
        context: &mut SessionSink<'_, S>,
        event: &SessionEvent<'_, S>,
    ) -> Outcome<State> {
        match event {
            SessionEvent::OpenSession(_)
            | SessionEvent::Push(_)
            | SessionEvent::Reset
            | SessionEvent::Close => internal!(self, always, effect_reject_closed(self, context)),
            _ => Super,
        }
    }

    /// Diagnostics everywhere; anything else unexpected is rejected.
    #[superstate]
    fn session(
        &mut self,
        context: &mut SessionSink<'_, S>,
        event: &SessionEvent<'_, S>,
    ) -> Outcome<State> {
        match event {
            SessionEvent::CaptureDiagnostics => {
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
        State::Idle {} => "idle",
        State::Open {} => "open",
        State::Stepping {} => "stepping",
        State::Closed {} => "closed",
    }
}

impl<S: SessionContract> SessionMachine<S> {
    fn before_dispatch(
        &mut self,
        _s: StateOrSuperstate<'_, State, Superstate>,
        event: &SessionEvent<'_, S>,
        _c: &mut SessionSink<'_, S>,
    ) {
        self.book.dispatching(event.kind());
    }

    fn after_transition(&mut self, source: &State, target: &State, _c: &mut SessionSink<'_, S>) {
        self.book
            .transitioned(state_name(source), state_name(target));
    }
}

/// The public handle of a session machine.
pub struct SessionHandle<S: SessionContract> {
    sm: StateMachine<SessionMachine<S>>,
}

impl<S: SessionContract> Default for SessionHandle<S> {
    fn default() -> Self {
        Self::new()
    }
}

impl<S: SessionContract> SessionHandle<S> {
    /// A session machine in `idle`.
    pub fn new() -> Self {
        Self {
            sm: SessionMachine::<S>::default().state_machine(),
        }
    }

    /// A session machine that logs every edge it takes.
    pub fn traced() -> Self {
        let m = SessionMachine::<S> {
            book: Bookkeeping::traced(&S::SPEC),
            ..Default::default()
        };
        Self {
            sm: m.state_machine(),
        }
    }

    /// Step one event (an outcome event the action raises stays in the sink).
    pub fn step<'a>(
        &mut self,
        event: &SessionEvent<'a, S>,
        output: Option<S::Output<'a>>,
    ) -> SessionSink<'a, S> {
        let mut sink = SessionSink::new(output);
        self.sm.handle_with_context(event, &mut sink);
        sink
    }

    /// Handle `event` run-to-completion, writing into `output` if it steps.
    pub fn handle<'a>(
        &mut self,
        event: &SessionEvent<'a, S>,
        output: Option<S::Output<'a>>,
    ) -> SessionReply {
        let mut sink = self.step(event, output);
        while let Some(next) = sink.follow_up.take() {
            self.sm
                .handle_with_context(&next.into_event::<S>(), &mut sink);
        }
        sink.reply
            .unwrap_or(SessionReply::Error(MimiSessionError::Unexpected {
                event: event.kind(),
                state: self.state(),
            }))
    }

    /// Open `session` (from `mimi_init`'s `bind_session`).
    pub fn open(&mut self, session: S::Session) -> SessionReply {
        self.handle(&SessionEvent::open(session), None)
    }

    /// Push one step's `input` on the whole of `pool`, writing into `output`.
    pub fn push<'a>(
        &mut self,
        pool: &'a LanePool,
        input: S::Input<'a>,
        output: S::Output<'a>,
    ) -> SessionReply {
        match pool.sub(pool.threads()) {
            Ok(lanes) => self.handle(&SessionEvent::Push(Push { input, lanes }), Some(output)),
            Err(e) => SessionReply::Error(MimiSessionError::Step(e.to_string())),
        }
    }

    /// Restart the stream.
    pub fn reset(&mut self) -> SessionReply {
        self.handle(&SessionEvent::Reset, None)
    }

    /// Drop the session.
    pub fn close(&mut self) -> SessionReply {
        self.handle(&SessionEvent::Close, None)
    }

    /// The counters.
    pub fn diagnostics(&mut self) -> SessionReply {
        self.handle(&SessionEvent::CaptureDiagnostics, None)
    }

    /// The current leaf state's name.
    pub fn state(&self) -> &'static str {
        state_name(self.sm.state())
    }

    /// The open session, if any.
    pub fn session(&self) -> Option<&S::Session> {
        self.sm.inner().session.as_ref()
    }

    /// The edges taken so far (empty unless built with [`Self::traced`]).
    pub fn take_trace(&mut self) -> Vec<Fired> {
        // SAFETY (statig's contract for inner_mut): the log is not part of any
        // state invariant.
        unsafe { self.sm.inner_mut().book.take_log() }
    }

    /// Whether the last event ended without taking a declared edge.
    pub fn dangling(&self) -> bool {
        self.sm.inner().book.dangling()
    }
}
