//! The statig kernel machine, generic over a [`KernelContract`]: states,
//! then the events each state handles. Every arm is a row of the kernel's
//! table: a named guard selects it and a named action runs.

use super::actions::*;
use super::contract::KernelContract;
use super::errors::KernelMachineError;
use super::events::{Bind, Execute, KernelEvent, KernelReply, KernelSink};
use super::guards::*;
use crate::core::{Bookkeeping, Fired};
use crate::{internal, transition};
use statig::prelude::*;
use voxlane_runtime::SubPool;

/// What persists between requests: the packed kernel, its workspace, the
/// bound limits and lane budget, counters and the trace.
pub struct KernelMachine<K: KernelContract> {
    /// Packed weights, once prepared.
    pub prepared: Option<K::Prepared>,
    /// Scratch sized at bind time.
    pub workspace: Option<K::Workspace>,
    /// The bound limits.
    pub limits: Option<K::Limits>,
    /// The bound lane budget.
    pub lanes: usize,
    /// Counters, edge trace and current state.
    pub book: Bookkeeping,
}

impl<K: KernelContract> Default for KernelMachine<K> {
    fn default() -> Self {
        Self {
            prepared: None,
            workspace: None,
            limits: None,
            lanes: 0,
            book: Bookkeeping::new(&K::SPEC),
        }
    }
}

impl<K: KernelContract> KernelMachine<K> {
    /// The kernel's shape guard against the bound limits.
    pub fn check_request(
        &self,
        e: &Execute<'_, K>,
        s: &KernelSink<'_, K>,
    ) -> Result<(), KernelMachineError> {
        match (&self.prepared, &self.limits, &s.output) {
            (Some(k), Some(l), Some(out)) => K::check_request(k, l, &e.request, out),
            (_, _, None) => Err(KernelMachineError::Shape(
                "execute needs an output buffer".into(),
            )),
            _ => Err(KernelMachineError::Shape("kernel is not bound".into())),
        }
    }

    fn take_prepare_route(
        &mut self,
        p: &K::Params,
        context: &mut KernelSink<'_, K>,
    ) -> Outcome<State> {
        match K::prepare_route(p) {
            Some(route) => {
                let (guard, action) = K::PREPARE_ROUTES[route];
                self.book.take(guard, action);
                effect_prepare(self, route, p, context);
                Transition(State::prepared())
            }
            None => transition!(
                self,
                guard_params_invalid,
                effect_reject_params(self, p, context),
                State::errored()
            ),
        }
    }
}

#[state_machine(
    initial = "State::uninitialized()",
    before_dispatch = "Self::before_dispatch",
    after_transition = "Self::after_transition",
    state(derive(Debug, Clone, Copy, PartialEq, Eq))
)]
impl<K: KernelContract> KernelMachine<K> {
    /// No weights: `prepare` takes the kernel's route for the weight format.
    #[state(superstate = "kernel")]
    fn uninitialized(
        &mut self,
        context: &mut KernelSink<'_, K>,
        event: &KernelEvent<'_, K>,
    ) -> Outcome<State> {
        match event {
            KernelEvent::Prepare(p) => self.take_prepare_route(p, context),
            _ => Super,
        }
    }

    /// Weights packed: `bind` sizes the workspace.
    #[state(superstate = "kernel")]
    fn prepared(
        &mut self,
        context: &mut KernelSink<'_, K>,
        event: &KernelEvent<'_, K>,
    ) -> Outcome<State> {
        match event {
            KernelEvent::Bind(b) if guard_limits_valid(self, b) => {
                transition!(
                    self,
                    guard_limits_valid,
                    effect_bind_workspace(self, b, context),
                    State::ready()
                )
            }
            KernelEvent::Bind(b) => {
                transition!(
                    self,
                    guard_limits_invalid,
                    effect_reject_limits(self, b, context),
                    State::errored()
                )
            }
            KernelEvent::SetupError(e) => {
                transition!(
                    self,
                    always,
                    effect_reply_setup_error(self, e, context),
                    State::errored()
                )
            }
            _ => Super,
        }
    }

    /// Bound: `execute` is shape-checked, then routed serial or across lanes.
    #[state(superstate = "kernel")]
    fn ready(
        &mut self,
        context: &mut KernelSink<'_, K>,
        event: &KernelEvent<'_, K>,
    ) -> Outcome<State> {
        match event {
            KernelEvent::Bind(b) if guard_limits_valid(self, b) => {
                transition!(
                    self,
                    guard_limits_valid,
                    effect_bind_workspace(self, b, context),
                    State::ready()
                )
            }
            KernelEvent::Bind(b) => internal!(
                self,
                guard_limits_invalid,
                effect_reject_limits(self, b, context)
            ),
            KernelEvent::SetupError(e) => {
                transition!(
                    self,
                    always,
                    effect_reply_setup_error(self, e, context),
                    State::errored()
                )
            }
            KernelEvent::Execute(e) if guard_lanes_exceed_budget(self, e) => {
                internal!(
                    self,
                    guard_lanes_exceed_budget,
                    effect_reject_lanes(self, e, context)
                )
            }
            KernelEvent::Execute(e) if guard_shape_invalid(self, e, context) => {
                internal!(
                    self,
                    guard_shape_invalid,
                    effect_reject_shape(self, e, context)
                )
            }
            KernelEvent::Execute(e) if guard_route_serial(self, e, context) => {
                transition!(
                    self,
                    guard_route_serial,
                    effect_run_serial(self, e, context),
                    State::running()
                )
            }
            KernelEvent::Execute(e) if guard_route_lanes(self, e, context) => {
                transition!(
                    self,
                    guard_route_lanes,
                    effect_dispatch_lanes(self, e, context),
                    State::running()
                )
            }
            _ => Super,
        }
    }

    /// A request computed; its outcome event returns to `ready`.
    #[state(superstate = "kernel")]
    fn running(
        &mut self,
        context: &mut KernelSink<'_, K>,
        event: &KernelEvent<'_, K>,
    ) -> Outcome<State> {
        match event {
            KernelEvent::ExecuteDone => transition!(
                self,
                always,
                effect_reply_executed(self, context),
                State::ready()
            ),
            KernelEvent::ExecuteError(e) => {
                transition!(
                    self,
                    always,
                    effect_reply_execute_error(self, e, context),
                    State::ready()
                )
            }
            _ => Super,
        }
    }

    /// Setup failed: only `reset` (in the superstate) leaves.
    #[state(superstate = "kernel")]
    fn errored(&mut self, event: &KernelEvent<'_, K>) -> Outcome<State> {
        let _ = event;
        Super
    }

    /// Reset and diagnostics everywhere; anything else unexpected is rejected.
    #[superstate]
    fn kernel(
        &mut self,
        context: &mut KernelSink<'_, K>,
        event: &KernelEvent<'_, K>,
    ) -> Outcome<State> {
        match event {
            KernelEvent::Reset => transition!(
                self,
                always,
                effect_reset(self, context),
                State::uninitialized()
            ),
            KernelEvent::CaptureDiagnostics => {
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
        State::Prepared {} => "prepared",
        State::Ready {} => "ready",
        State::Running {} => "running",
        State::Errored {} => "errored",
    }
}

impl<K: KernelContract> KernelMachine<K> {
    fn before_dispatch(
        &mut self,
        _s: StateOrSuperstate<'_, State, Superstate>,
        event: &KernelEvent<'_, K>,
        _c: &mut KernelSink<'_, K>,
    ) {
        self.book.dispatching(event.kind());
    }

    fn after_transition(&mut self, source: &State, target: &State, _c: &mut KernelSink<'_, K>) {
        self.book
            .transitioned(state_name(source), state_name(target));
    }
}

/// The public handle of a kernel machine.
pub struct Kernel<K: KernelContract> {
    sm: StateMachine<KernelMachine<K>>,
}

impl<K: KernelContract> Default for Kernel<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: KernelContract> Kernel<K> {
    /// A kernel machine in `uninitialized`.
    pub fn new() -> Self {
        Self {
            sm: KernelMachine::<K>::default().state_machine(),
        }
    }

    /// A kernel machine that logs every edge it takes.
    pub fn traced() -> Self {
        let m = KernelMachine::<K> {
            book: Bookkeeping::traced(&K::SPEC),
            ..Default::default()
        };
        Self {
            sm: m.state_machine(),
        }
    }

    /// Step one event (outcome events an action raises stay in the sink).
    pub fn step<'a>(
        &mut self,
        event: &KernelEvent<'a, K>,
        output: Option<K::Output<'a>>,
    ) -> KernelSink<'a, K> {
        let mut sink = KernelSink::new(output);
        self.sm.handle_with_context(event, &mut sink);
        sink
    }

    /// Handle `event` run-to-completion, writing into `output` if it computes.
    pub fn handle<'a>(
        &mut self,
        event: &KernelEvent<'a, K>,
        output: Option<K::Output<'a>>,
    ) -> KernelReply {
        let mut sink = self.step(event, output);
        while let Some(next) = sink.follow_up.take() {
            self.sm
                .handle_with_context(&next.into_event::<K>(), &mut sink);
        }
        sink.reply
            .unwrap_or(KernelReply::Error(KernelMachineError::Unexpected {
                event: event.kind(),
                state: self.state(),
            }))
    }

    /// Validate and pack `params`.
    pub fn prepare(&mut self, params: &K::Params) -> KernelReply {
        self.handle(&KernelEvent::Prepare(params), None)
    }

    /// Size the workspace for `limits` and fix the lane budget.
    pub fn bind(&mut self, limits: K::Limits, lanes: usize) -> KernelReply {
        self.handle(&KernelEvent::Bind(Bind { limits, lanes }), None)
    }

    /// Compute `request` into `output` on `lanes`.
    pub fn execute<'a>(
        &mut self,
        request: K::Request<'a>,
        output: K::Output<'a>,
        lanes: SubPool<'a>,
    ) -> KernelReply {
        self.handle(
            &KernelEvent::Execute(Execute { request, lanes }),
            Some(output),
        )
    }

    /// The counters.
    pub fn diagnostics(&mut self) -> KernelReply {
        self.handle(&KernelEvent::CaptureDiagnostics, None)
    }

    /// The current leaf state's name.
    pub fn state(&self) -> &'static str {
        state_name(self.sm.state())
    }

    /// The prepared kernel, if any.
    pub fn prepared(&self) -> Option<&K::Prepared> {
        self.sm.inner().prepared.as_ref()
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
