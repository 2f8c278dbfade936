//! Transition tables: the declared behaviour of a machine.
//!
//! statig has no introspection, so each machine declares its edges in a
//! `const TRANSITIONS` table next to its handlers. Diagrams are rendered from
//! the table, and the conformance tests drive the statig machine and fail on
//! any edge it takes that the table lacks, and on table edges never taken.

/// The guard name of an unconditional edge.
pub const ALWAYS: &str = "always";
/// The event name of a catch-all edge (every event no more specific row takes).
pub const ANY_EVENT: &str = "*";

/// One edge: in `from`, on `event`, if `guard` holds, run `action` and go to `to`.
///
/// `from == to` on a superstate row means an internal transition: the
/// machine stays in whatever leaf state it was in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Transition {
    /// Source state or superstate.
    pub from: &'static str,
    /// Event kind (or [`ANY_EVENT`]).
    pub event: &'static str,
    /// Guard predicate name (`guard_*`) or [`ALWAYS`].
    pub guard: &'static str,
    /// Action name (`effect_*`).
    pub action: &'static str,
    /// Target state.
    pub to: &'static str,
}

/// Shorthand constructor for table rows.
pub const fn edge(
    from: &'static str,
    event: &'static str,
    guard: &'static str,
    action: &'static str,
    to: &'static str,
) -> Transition {
    Transition {
        from,
        event,
        guard,
        action,
        to,
    }
}

/// A state (or superstate) and its parent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateSpec {
    /// State name, as in the table.
    pub name: &'static str,
    /// Enclosing superstate, if any.
    pub parent: Option<&'static str>,
    /// Whether this is a superstate (never current by itself).
    pub superstate: bool,
    /// One line on what the state means.
    pub doc: &'static str,
}

/// Everything the diagram and the conformance tests need to know about a machine.
#[derive(Debug, Clone, Copy)]
pub struct MachineSpec {
    /// Machine name (also the diagram's file name).
    pub name: &'static str,
    /// One line on what the machine does.
    pub doc: &'static str,
    /// The initial leaf state.
    pub initial: &'static str,
    /// States and superstates.
    pub states: &'static [StateSpec],
    /// Every event kind the machine accepts.
    pub events: &'static [&'static str],
    /// The declared edges.
    pub transitions: &'static [Transition],
}

impl MachineSpec {
    /// The leaf states (those that can be current).
    pub fn leaf_states(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.states.iter().filter(|s| !s.superstate).map(|s| s.name)
    }

    /// Whether `state` is `ancestor` or nested inside it.
    pub fn is_within(&self, state: &str, ancestor: &str) -> bool {
        let mut cur = Some(state);
        while let Some(s) = cur {
            if s == ancestor {
                return true;
            }
            cur = self
                .states
                .iter()
                .find(|x| x.name == s)
                .and_then(|x| x.parent);
        }
        false
    }

    /// Whether the table declares `fired` (matching superstate rows and catch-alls).
    pub fn declares(&self, fired: &super::Fired) -> bool {
        self.transitions.iter().any(|t| {
            (t.event == fired.event || t.event == ANY_EVENT)
                && t.guard == fired.guard
                && t.action == fired.action
                && self.is_within(fired.from, t.from)
                && (t.to == fired.to || (t.from == t.to && self.is_within(fired.to, t.to)))
        })
    }

    /// Table rows that no fired edge in `log` matches.
    pub fn unreached<'a>(
        &self,
        log: impl IntoIterator<Item = &'a super::Fired>,
    ) -> Vec<Transition> {
        let log: Vec<&super::Fired> = log.into_iter().collect();
        self.transitions
            .iter()
            .filter(|t| {
                !log.iter().any(|f| {
                    (t.event == f.event || t.event == ANY_EVENT)
                        && t.guard == f.guard
                        && t.action == f.action
                        && self.is_within(f.from, t.from)
                })
            })
            .copied()
            .collect()
    }

    /// Check the table itself: known states and events, named guards and actions.
    pub fn validate(&self) -> Result<(), String> {
        let known = |s: &str| self.states.iter().any(|x| x.name == s);
        if !known(self.initial) {
            return Err(format!(
                "{}: unknown initial state {}",
                self.name, self.initial
            ));
        }
        for t in self.transitions {
            if !known(t.from) || !known(t.to) {
                return Err(format!("{}: row {t:?} names an unknown state", self.name));
            }
            if t.event != ANY_EVENT && !self.events.contains(&t.event) {
                return Err(format!("{}: row {t:?} names an unknown event", self.name));
            }
            if t.guard != ALWAYS && !t.guard.starts_with("guard_") {
                return Err(format!(
                    "{}: guard {} must be named guard_*",
                    self.name, t.guard
                ));
            }
            if !t.action.starts_with("effect_") {
                return Err(format!(
                    "{}: action {} must be named effect_*",
                    self.name, t.action
                ));
            }
        }
        Ok(())
    }
}
