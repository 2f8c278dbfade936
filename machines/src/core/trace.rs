//! Recording which table edge each dispatch took.
//!
//! A handler names the guard and action of the edge it takes ([`Trace::take`]
//! for transitions, [`Trace::internal`] for edges that stay put); statig's
//! `after_transition` hook completes transitions with the real source and
//! target states. Recording into the log is off unless enabled (tests,
//! debugging), so production dispatch pays two pointer stores.

/// One edge as the running machine took it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fired {
    /// Leaf state before.
    pub from: &'static str,
    /// Event kind.
    pub event: &'static str,
    /// Guard that selected the edge.
    pub guard: &'static str,
    /// Action that ran.
    pub action: &'static str,
    /// Leaf state after.
    pub to: &'static str,
}

/// Per-machine record of the edge being taken and, optionally, a log of all.
#[derive(Debug, Default, Clone)]
pub struct Trace {
    event: Option<&'static str>,
    pending: Option<(&'static str, &'static str)>,
    last: Option<Fired>,
    log: Option<Vec<Fired>>,
}

impl Trace {
    /// Start logging every fired edge.
    pub fn enable_log(&mut self) {
        self.log.get_or_insert_with(Vec::new);
    }

    /// Take the log so far (empty if logging is off).
    pub fn take_log(&mut self) -> Vec<Fired> {
        self.log.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// Note the event being dispatched (from `before_dispatch`; first call wins).
    pub fn begin(&mut self, event: &'static str) {
        if self.event.is_none() {
            self.event = Some(event);
        }
    }

    /// Name the edge a handler is about to transition along.
    pub fn take(&mut self, guard: &'static str, action: &'static str) {
        self.pending = Some((guard, action));
    }

    /// Record an internal edge (no state change) taken in `state`.
    pub fn internal(&mut self, state: &'static str, guard: &'static str, action: &'static str) {
        self.finish(state, guard, action, state);
    }

    /// Complete a transition (from `after_transition`).
    pub fn transitioned(&mut self, from: &'static str, to: &'static str) {
        let (guard, action) = self.pending.take().unwrap_or(("<unnamed>", "<unnamed>"));
        self.finish(from, guard, action, to);
    }

    fn finish(
        &mut self,
        from: &'static str,
        guard: &'static str,
        action: &'static str,
        to: &'static str,
    ) {
        let fired = Fired {
            from,
            event: self.event.take().unwrap_or("<unknown>"),
            guard,
            action,
            to,
        };
        self.last = Some(fired);
        if let Some(log) = &mut self.log {
            log.push(fired);
        }
    }

    /// Whether the last dispatch ended without taking any edge (a table bug).
    pub fn dangling(&self) -> bool {
        self.event.is_some()
    }

    /// The edge the last completed dispatch took.
    pub fn last(&self) -> Option<Fired> {
        self.last
    }

    /// Forget an unfinished dispatch (after reporting it).
    pub fn clear(&mut self) {
        self.event = None;
        self.pending = None;
    }
}
