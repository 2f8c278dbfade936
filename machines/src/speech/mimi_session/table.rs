//! The session machines' shared states and edges; each side names its push
//! and outcome events, its reject routes and its step through
//! [`session_transitions!`](crate::session_transitions).

use crate::core::table::{MachineSpec, StateSpec, Transition};

/// States of every session machine.
pub const STATES: &[StateSpec] = &[
    StateSpec {
        name: "session",
        parent: None,
        superstate: true,
        doc: "diagnostics and unexpected events in every state",
    },
    StateSpec {
        name: "idle",
        parent: Some("session"),
        superstate: false,
        doc: "no session yet",
    },
    StateSpec {
        name: "open",
        parent: Some("session"),
        superstate: false,
        doc: "streaming state bound, accepting pushes",
    },
    StateSpec {
        name: "stepping",
        parent: Some("session"),
        superstate: false,
        doc: "a frame ran, awaiting its outcome event",
    },
    StateSpec {
        name: "closed",
        parent: Some("session"),
        superstate: false,
        doc: "session dropped, rejects every request",
    },
];

/// A session machine's spec from its name, doc line, event kinds and transitions.
pub const fn session_spec(
    name: &'static str,
    doc: &'static str,
    events: &'static [&'static str],
    transitions: &'static [Transition],
) -> MachineSpec {
    MachineSpec {
        name,
        doc,
        initial: "idle",
        states: STATES,
        events,
        transitions,
    }
}

/// The full transition table of a session machine: its push, outcome and
/// reject names spliced into the edges every session shares.
#[macro_export]
macro_rules! session_transitions {
    (
        push: $push:literal,
        done: $done:literal,
        error: $error:literal,
        rejects: [$( ($rg:literal, $ra:literal) ),+ $(,)?],
        step: ($sg:literal, $sa:literal) $(,)?
    ) => {{
        use $crate::core::table::{edge, ALWAYS, ANY_EVENT};
        &[
            edge("idle", "open_session", "guard_session_present", "effect_open_session", "open"),
            edge("idle", "open_session", "guard_session_missing", "effect_reject_missing_session", "idle"),
            edge("open", "open_session", ALWAYS, "effect_reject_already_open", "open"),
            $( edge("open", $push, $rg, $ra, "open"), )+
            edge("open", $push, $sg, $sa, "stepping"),
            edge("stepping", $done, ALWAYS, "effect_reply_done", "open"),
            edge("stepping", $error, ALWAYS, "effect_reply_step_error", "open"),
            edge("open", "reset", ALWAYS, "effect_reset_stream", "open"),
            edge("open", "close", ALWAYS, "effect_close", "closed"),
            edge("closed", "open_session", ALWAYS, "effect_reject_closed", "closed"),
            edge("closed", $push, ALWAYS, "effect_reject_closed", "closed"),
            edge("closed", "reset", ALWAYS, "effect_reject_closed", "closed"),
            edge("closed", "close", ALWAYS, "effect_reject_closed", "closed"),
            edge("session", "capture_diagnostics", ALWAYS, "effect_capture_diagnostics", "session"),
            edge("session", ANY_EVENT, ALWAYS, "effect_reject_unexpected", "session"),
        ]
    }};
}
