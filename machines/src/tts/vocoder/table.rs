//! `kokoro_vocoder`'s declared transitions (the diagram's only source).

use crate::core::table::{edge, MachineSpec, StateSpec, ALWAYS, ANY_EVENT};
use crate::core::Transition;

/// States, leaf and super.
pub const STATES: &[StateSpec] = &[
    StateSpec {
        name: "back",
        parent: None,
        superstate: true,
        doc: "handles diagnostics and unexpected events in every state",
    },
    StateSpec {
        name: "unloaded",
        parent: Some("back"),
        superstate: false,
        doc: "no weights yet",
    },
    StateSpec {
        name: "loading",
        parent: Some("back"),
        superstate: false,
        doc: "weights bound, awaiting the outcome event",
    },
    StateSpec {
        name: "ready",
        parent: Some("back"),
        superstate: false,
        doc: "decoder and generator bound, output buffer reused",
    },
    StateSpec {
        name: "running",
        parent: Some("back"),
        superstate: false,
        doc: "a chunk or one of its windows was decoded, awaiting its outcome event",
    },
    StateSpec {
        name: "streaming",
        parent: Some("back"),
        superstate: false,
        doc: "a streamed chunk between windows, decoder features kept",
    },
];

/// Event kinds.
pub const EVENTS: &[&str] = &[
    "load",
    "load_done",
    "load_error",
    "run",
    "back_done",
    "window_done",
    "next_window",
    "cancel",
    "back_error",
    "capture_diagnostics",
];

/// Every edge the machine may take.
pub const TRANSITIONS: &[Transition] = &[
    edge("unloaded", "load", ALWAYS, "effect_load_back", "loading"),
    edge(
        "unloaded",
        "run",
        ALWAYS,
        "effect_reject_not_loaded",
        "unloaded",
    ),
    edge(
        "loading",
        "load_done",
        ALWAYS,
        "effect_reply_loaded",
        "ready",
    ),
    edge(
        "loading",
        "load_error",
        ALWAYS,
        "effect_reply_load_error",
        "unloaded",
    ),
    edge(
        "ready",
        "load",
        ALWAYS,
        "effect_reject_already_loaded",
        "ready",
    ),
    edge(
        "ready",
        "run",
        "guard_asr_invalid",
        "effect_reject_asr",
        "ready",
    ),
    edge(
        "ready",
        "run",
        "guard_curves_invalid",
        "effect_reject_curves",
        "ready",
    ),
    edge(
        "ready",
        "run",
        "guard_style_invalid",
        "effect_reject_style",
        "ready",
    ),
    edge(
        "ready",
        "run",
        "guard_run_whole",
        "effect_run_back",
        "running",
    ),
    edge(
        "ready",
        "run",
        "guard_stream_windows",
        "effect_run_first_window",
        "running",
    ),
    edge(
        "running",
        "back_done",
        ALWAYS,
        "effect_reply_audio",
        "ready",
    ),
    edge(
        "running",
        "window_done",
        ALWAYS,
        "effect_reply_window",
        "streaming",
    ),
    edge(
        "streaming",
        "next_window",
        "guard_window_matches",
        "effect_run_next_window",
        "running",
    ),
    edge(
        "streaming",
        "next_window",
        "guard_window_mismatch",
        "effect_reject_window",
        "streaming",
    ),
    edge(
        "streaming",
        "cancel",
        ALWAYS,
        "effect_cancel_stream",
        "ready",
    ),
    edge(
        "running",
        "back_error",
        ALWAYS,
        "effect_reply_back_error",
        "ready",
    ),
    edge(
        "back",
        "capture_diagnostics",
        ALWAYS,
        "effect_capture_diagnostics",
        "back",
    ),
    edge(
        "back",
        ANY_EVENT,
        ALWAYS,
        "effect_reject_unexpected",
        "back",
    ),
];

/// The machine's spec: diagrams and conformance tests read this.
pub const SPEC: MachineSpec = MachineSpec {
    name: "kokoro_vocoder",
    doc: "Kokoro vocoder stage (the network's back half) per chunk: decoder, iSTFTNet generator, 24 kHz audio",
    initial: "unloaded",
    states: STATES,
    events: EVENTS,
    transitions: TRANSITIONS,
};
