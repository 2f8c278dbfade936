//! `mimi_decode_session`'s transitions: the shared session edges with
//! `push_codes` and the decode outcomes.

use crate::core::{MachineSpec, Transition};
use crate::speech::mimi_session::events::event_kinds;
use crate::speech::mimi_session::table::session_spec;

/// Event kinds.
pub const EVENTS: &[&str] = &event_kinds("push_codes", "decode_done", "decode_error");

/// Every edge the machine may take.
pub const TRANSITIONS: &[Transition] = crate::session_transitions!(
    push: "push_codes",
    done: "decode_done",
    error: "decode_error",
    rejects: [
        ("guard_code_count_wrong", "effect_reject_code_count"),
        ("guard_code_out_of_range", "effect_reject_code"),
    ],
    step: ("guard_codes_valid", "effect_decode_frame"),
);

/// The machine's spec.
pub const SPEC: MachineSpec = session_spec(
    "mimi_decode_session",
    "streaming Mimi decode: K codes per frame in, 1920 samples per frame out",
    EVENTS,
    TRANSITIONS,
);
