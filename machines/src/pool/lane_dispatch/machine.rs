//! The statig machine: states, then the events each state handles.
//!
//! Every handler arm is one row of [`super::table::TRANSITIONS`]: a named
//! guard selects it and a named action runs (`internal!` stays put,
//! `transition!` moves). Events a state does not name fall through to the
//! `lifecycle` superstate, which rejects them with a reason.

use super::actions::*;
use super::events::{Configure, Dispatch, Event, Reply, Sink};
use super::guards::*;
use super::table::SPEC;
use crate::core::Bookkeeping;
use crate::{internal, transition};
use statig::prelude::*;
use voxlane_runtime::{Actor, LanePool};

/// Context that persists across events: the pool, counters and the trace.
pub struct LaneDispatchMachine {
    /// The pool, once configured.
    pub pool: Option<LanePool>,
    /// Counters, edge trace and current state.
    pub book: Bookkeeping,
}

impl Default for LaneDispatchMachine {
    fn default() -> Self {
        Self {
            pool: None,
            book: Bookkeeping::new(&SPEC),
        }
    }
}

#[state_machine(
    initial = "State::unconfigured()",
    before_dispatch = "Self::before_dispatch",
    after_transition = "Self::after_transition",
    state(derive(Debug, Clone, Copy, PartialEq, Eq))
)]
impl LaneDispatchMachine {
    /// No pool yet.
    #[state(superstate = "lifecycle")]
    fn unconfigured(&mut self, context: &mut Sink, event: &Event<'_>) -> Outcome<State> {
        match event {
            Event::Configure(c) if guard_budget_valid(c) => {
                transition!(
                    self,
                    guard_budget_valid,
                    effect_start_pool(self, c, context),
                    State::starting()
                )
            }
            Event::Configure(c) if guard_budget_invalid(c) => {
                internal!(
                    self,
                    guard_budget_invalid,
                    effect_reject_budget(self, c, context)
                )
            }
            Event::Dispatch(_) => {
                internal!(self, always, effect_reject_not_configured(self, context))
            }
            Event::Shutdown => transition!(
                self,
                always,
                effect_release_pool(self, context),
                State::shut_down()
            ),
            _ => Super,
        }
    }

    /// Workers spawning; waits for `pool_done` / `pool_error`.
    #[state(superstate = "lifecycle")]
    fn starting(&mut self, context: &mut Sink, event: &Event<'_>) -> Outcome<State> {
        match event {
            Event::PoolDone => transition!(
                self,
                always,
                effect_reply_configured(self, context),
                State::ready()
            ),
            Event::PoolError(e) => {
                transition!(
                    self,
                    always,
                    effect_reply_pool_error(self, e, context),
                    State::unconfigured()
                )
            }
            _ => Super,
        }
    }

    /// Pool up: dispatches route serial or parallel by guard.
    #[state(superstate = "lifecycle")]
    fn ready(&mut self, context: &mut Sink, event: &Event<'_>) -> Outcome<State> {
        match event {
            Event::Configure(_) => internal!(
                self,
                always,
                effect_reject_already_configured(self, context)
            ),
            Event::Dispatch(d) if guard_lanes_exceed_budget(self, d) => {
                internal!(
                    self,
                    guard_lanes_exceed_budget,
                    effect_reject_lanes_budget(self, d, context)
                )
            }
            Event::Dispatch(d) if guard_job_empty(self, d) => {
                internal!(self, guard_job_empty, effect_complete_empty(self, context))
            }
            Event::Dispatch(d) if guard_route_serial(self, d) => {
                transition!(
                    self,
                    guard_route_serial,
                    effect_run_serial(self, d, context),
                    State::dispatching()
                )
            }
            Event::Dispatch(d) if guard_route_parallel(self, d) => {
                transition!(
                    self,
                    guard_route_parallel,
                    effect_dispatch_lanes(self, d, context),
                    State::dispatching()
                )
            }
            Event::Shutdown => transition!(
                self,
                always,
                effect_release_pool(self, context),
                State::shut_down()
            ),
            _ => Super,
        }
    }

    /// A batch ran; waits for `lanes_done` / `lanes_error`.
    #[state(superstate = "lifecycle")]
    fn dispatching(&mut self, context: &mut Sink, event: &Event<'_>) -> Outcome<State> {
        match event {
            Event::LanesDone => transition!(
                self,
                always,
                effect_reply_dispatch_done(self, context),
                State::ready()
            ),
            Event::LanesError(e) => {
                transition!(
                    self,
                    always,
                    effect_reply_lanes_error(self, e, context),
                    State::ready()
                )
            }
            _ => Super,
        }
    }

    /// Workers joined: every request is rejected.
    #[state(superstate = "lifecycle")]
    fn shut_down(&mut self, context: &mut Sink, event: &Event<'_>) -> Outcome<State> {
        match event {
            Event::Configure(_) | Event::Dispatch(_) | Event::Shutdown => {
                internal!(self, always, effect_reject_shut_down(self, context))
            }
            _ => Super,
        }
    }

    /// Diagnostics in every state; anything else unexpected is rejected.
    #[superstate]
    fn lifecycle(&mut self, context: &mut Sink, event: &Event<'_>) -> Outcome<State> {
        match event {
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
        State::Unconfigured {} => "unconfigured",
        State::Starting {} => "starting",
        State::Ready {} => "ready",
        State::Dispatching {} => "dispatching",
        State::ShutDown {} => "shut_down",
    }
}

crate::machine_hooks!(LaneDispatchMachine { event: Event<'_>, sink: Sink });

/// The public handle: send an event, get the reply.
pub struct LaneDispatcher {
    sm: StateMachine<LaneDispatchMachine>,
}

crate::machine_handle! {
    /// A dispatcher in `unconfigured`.
    LaneDispatcher for LaneDispatchMachine {
        event: Event<'_>,
        sink: Sink,
        reply: Reply,
        unexpected: |event, state| Reply::Error(super::errors::LaneDispatchError::Unexpected { event, state }),
    }
}

impl LaneDispatcher {
    /// Build the pool.
    pub fn configure(&mut self, threads: usize, pin: bool) -> Reply {
        self.handle(&Event::Configure(Configure { threads, pin }))
    }

    /// Run `job(i)` for `i < tasks` on up to `lanes` lanes (0 = all).
    pub fn dispatch(&mut self, tasks: usize, lanes: usize, job: &(dyn Fn(usize) + Sync)) -> Reply {
        self.handle(&Event::Dispatch(Dispatch { tasks, lanes, job }))
    }
}

/// A mailbox message: an owned event and where to send the reply.
pub struct Request {
    /// What to do.
    pub event: OwnedEvent,
    /// Where the reply goes.
    pub reply_to: crossbeam_channel::Sender<Reply>,
}

/// An event that can cross threads (jobs shared through an `Arc`).
pub enum OwnedEvent {
    /// See [`Event::Configure`].
    Configure(Configure),
    /// See [`Event::Dispatch`].
    Dispatch {
        /// Number of tasks.
        tasks: usize,
        /// Lanes (0 = all).
        lanes: usize,
        /// The work.
        job: std::sync::Arc<dyn Fn(usize) + Send + Sync>,
    },
    /// See [`Event::CaptureDiagnostics`].
    CaptureDiagnostics,
    /// See [`Event::Shutdown`].
    Shutdown,
}

impl Actor for LaneDispatcher {
    type Message = Request;

    fn name(&self) -> &'static str {
        SPEC.name
    }

    fn handle(&mut self, msg: Request) {
        let reply = match &msg.event {
            OwnedEvent::Configure(c) => LaneDispatcher::handle(self, &Event::Configure(*c)),
            OwnedEvent::Dispatch { tasks, lanes, job } => self.dispatch(*tasks, *lanes, &**job),
            OwnedEvent::CaptureDiagnostics => {
                LaneDispatcher::handle(self, &Event::CaptureDiagnostics)
            }
            OwnedEvent::Shutdown => LaneDispatcher::handle(self, &Event::Shutdown),
        };
        // The sender may have stopped waiting; that is not the machine's error.
        let _ = msg.reply_to.send(reply);
    }
}
