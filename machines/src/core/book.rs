//! The bookkeeping every machine's context carries: diagnostics counters,
//! the edge trace and the current state's name, updated from statig's
//! `before_dispatch` / `after_transition` hooks and the edge macros.

use super::table::MachineSpec;
use super::trace::{Fired, Trace};
use voxlane_runtime::{Diagnostics, DiagnosticsSnapshot};

/// Counters, trace and current state of one machine.
#[derive(Debug, Clone)]
pub struct Bookkeeping {
    diag: Diagnostics,
    trace: Trace,
    state: &'static str,
}

impl Bookkeeping {
    /// Bookkeeping for a machine starting in its spec's initial state.
    pub fn new(spec: &MachineSpec) -> Self {
        Self {
            diag: Diagnostics::new(spec.name, spec.initial),
            trace: Trace::default(),
            state: spec.initial,
        }
    }

    /// The same, logging every edge taken (conformance tests).
    pub fn traced(spec: &MachineSpec) -> Self {
        let mut b = Self::new(spec);
        b.trace.enable_log();
        b
    }

    /// `before_dispatch`: note the event kind (first call per dispatch wins).
    pub fn dispatching(&mut self, kind: &'static str) {
        if !self.trace.dangling() {
            self.diag.event(kind);
        }
        self.trace.begin(kind);
    }

    /// `after_transition`: account the state change and complete the edge.
    pub fn transitioned(&mut self, from: &'static str, to: &'static str) {
        self.state = to;
        self.diag.enter(to);
        self.trace.transitioned(from, to);
    }

    /// A handler is taking a transition edge named by `guard` and `action`.
    pub fn take(&mut self, guard: &'static str, action: &'static str) {
        self.trace.take(guard, action);
    }

    /// A handler took an internal edge (no state change).
    pub fn internal(&mut self, guard: &'static str, action: &'static str) {
        self.trace.internal(self.state, guard, action);
    }

    /// Count a rejection under its reason code.
    pub fn reject(&mut self, reason: &'static str) {
        self.diag.rejection(reason);
    }

    /// The counters, for `capture_diagnostics`.
    pub fn snapshot(&self) -> DiagnosticsSnapshot {
        self.diag.snapshot()
    }

    /// The current leaf state's name.
    pub fn state(&self) -> &'static str {
        self.state
    }

    /// Take the logged edges (empty unless traced).
    pub fn take_log(&mut self) -> Vec<Fired> {
        self.trace.take_log()
    }

    /// Whether the last dispatch ended without taking an edge.
    pub fn dangling(&self) -> bool {
        self.trace.dangling()
    }
}
