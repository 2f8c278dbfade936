//! Per-machine diagnostics counters: events handled, guard rejections by
//! reason, and time spent in each state. Keys are `&'static str`, so counting
//! allocates only the first time a new key is seen.

use std::time::{Duration, Instant};

/// Live counters owned by one machine.
#[derive(Debug, Clone)]
pub struct Diagnostics {
    machine: &'static str,
    events: Vec<(&'static str, u64)>,
    rejections: Vec<(&'static str, u64)>,
    time_in_state: Vec<(&'static str, Duration)>,
    current: &'static str,
    entered: Instant,
}

/// A point-in-time copy of a machine's counters (the reply to `capture_diagnostics`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiagnosticsSnapshot {
    /// The machine's name.
    pub machine: &'static str,
    /// The state the machine is in.
    pub state: &'static str,
    /// Events handled, per event kind.
    pub events: Vec<(&'static str, u64)>,
    /// Guard rejections, per reason.
    pub rejections: Vec<(&'static str, u64)>,
    /// Time spent in each state, the current stay included.
    pub time_in_state: Vec<(&'static str, Duration)>,
}

impl DiagnosticsSnapshot {
    /// Total events handled.
    pub fn events_total(&self) -> u64 {
        self.events.iter().map(|(_, n)| n).sum()
    }

    /// Rejections recorded for `reason`.
    pub fn rejections_for(&self, reason: &str) -> u64 {
        self.rejections
            .iter()
            .find(|(r, _)| *r == reason)
            .map_or(0, |(_, n)| *n)
    }

    /// Events handled of kind `event`.
    pub fn events_for(&self, event: &str) -> u64 {
        self.events
            .iter()
            .find(|(e, _)| *e == event)
            .map_or(0, |(_, n)| *n)
    }
}

fn bump<V: Copy + std::ops::AddAssign>(
    list: &mut Vec<(&'static str, V)>,
    key: &'static str,
    by: V,
) {
    match list.iter_mut().find(|(k, _)| *k == key) {
        Some((_, v)) => *v += by,
        None => list.push((key, by)),
    }
}

impl Diagnostics {
    /// Counters for `machine`, starting in `initial`.
    pub fn new(machine: &'static str, initial: &'static str) -> Self {
        Self {
            machine,
            events: Vec::new(),
            rejections: Vec::new(),
            time_in_state: Vec::new(),
            current: initial,
            entered: Instant::now(),
        }
    }

    /// Count one handled event.
    pub fn event(&mut self, kind: &'static str) {
        bump(&mut self.events, kind, 1);
    }

    /// Count one guard rejection.
    pub fn rejection(&mut self, reason: &'static str) {
        bump(&mut self.rejections, reason, 1);
    }

    /// Account the stay in the current state and move to `state`.
    pub fn enter(&mut self, state: &'static str) {
        let now = Instant::now();
        bump(&mut self.time_in_state, self.current, now - self.entered);
        self.current = state;
        self.entered = now;
    }

    /// Copy the counters out.
    pub fn snapshot(&self) -> DiagnosticsSnapshot {
        let mut time_in_state = self.time_in_state.clone();
        bump(&mut time_in_state, self.current, self.entered.elapsed());
        DiagnosticsSnapshot {
            machine: self.machine,
            state: self.current,
            events: self.events.clone(),
            rejections: self.rejections.clone(),
            time_in_state,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_events_rejections_and_states() {
        let mut d = Diagnostics::new("m", "idle");
        d.event("go");
        d.event("go");
        d.rejection("bad_shape");
        d.enter("busy");
        let s = d.snapshot();
        assert_eq!(s.events_for("go"), 2);
        assert_eq!(s.events_total(), 2);
        assert_eq!(s.rejections_for("bad_shape"), 1);
        assert_eq!(s.rejections_for("other"), 0);
        assert_eq!(s.state, "busy");
        assert!(s.time_in_state.iter().any(|(k, _)| *k == "idle"));
        assert!(s.time_in_state.iter().any(|(k, _)| *k == "busy"));
    }
}
