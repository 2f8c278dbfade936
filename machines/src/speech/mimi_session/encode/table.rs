//! `mimi_encode_session`'s transitions: the shared session edges with
//! `push_pcm` and the encode outcomes.

use crate::core::{MachineSpec, Transition};
use crate::speech::mimi_session::events::event_kinds;
use crate::speech::mimi_session::table::session_spec;

/// Event kinds.
pub const EVENTS: &[&str] = &event_kinds("push_pcm", "encode_done", "encode_error");

/// Every edge the machine may take.
pub const TRANSITIONS: &[Transition] = crate::session_transitions!(
    push: "push_pcm",
    done: "encode_done",
    error: "encode_error",
    rejects: [("guard_frame_size_wrong", "effect_reject_frame_size")],
    step: ("guard_frame_valid", "effect_encode_frame"),
);

/// The machine's spec.
pub const SPEC: MachineSpec = session_spec(
    "mimi_encode_session",
    "streaming Mimi encode: 1920-sample frames in, K codes per frame out",
    EVENTS,
    TRANSITIONS,
);
