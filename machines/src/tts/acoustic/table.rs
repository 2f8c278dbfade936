//! `kokoro_acoustic`'s declared transitions (the diagram's only source).

use crate::core::table::{edge, MachineSpec, StateSpec, ALWAYS, ANY_EVENT};
use crate::core::Transition;

/// States, leaf and super.
pub const STATES: &[StateSpec] = &[
    StateSpec {
        name: "front",
        parent: None,
        superstate: true,
        doc: "handles diagnostics and unexpected events in every state",
    },
    StateSpec {
        name: "unloaded",
        parent: Some("front"),
        superstate: false,
        doc: "no weights yet",
    },
    StateSpec {
        name: "loading",
        parent: Some("front"),
        superstate: false,
        doc: "weights bound, awaiting the outcome event",
    },
    StateSpec {
        name: "ready",
        parent: Some("front"),
        superstate: false,
        doc: "ALBERT, prosody and text encoder bound, workspace for 512 tokens",
    },
    StateSpec {
        name: "running",
        parent: Some("front"),
        superstate: false,
        doc: "a chunk ran, awaiting its outcome event",
    },
];

/// Event kinds.
pub const EVENTS: &[&str] = &[
    "load",
    "load_done",
    "load_error",
    "run",
    "front_done",
    "front_error",
    "capture_diagnostics",
];

/// Every edge the machine may take.
pub const TRANSITIONS: &[Transition] = &[
    edge("unloaded", "load", ALWAYS, "effect_load_front", "loading"),
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
        "guard_token_count_invalid",
        "effect_reject_token_count",
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
        "guard_speed_out_of_range",
        "effect_reject_speed",
        "ready",
    ),
    edge(
        "ready",
        "run",
        "guard_token_out_of_vocab",
        "effect_reject_token_id",
        "ready",
    ),
    edge(
        "ready",
        "run",
        "guard_durations_mismatch",
        "effect_reject_durations",
        "ready",
    ),
    edge(
        "ready",
        "run",
        "guard_route_predicted",
        "effect_run_predicted",
        "running",
    ),
    edge(
        "ready",
        "run",
        "guard_route_reference",
        "effect_run_with_durations",
        "running",
    ),
    edge(
        "running",
        "front_done",
        ALWAYS,
        "effect_reply_front",
        "ready",
    ),
    edge(
        "running",
        "front_error",
        ALWAYS,
        "effect_reply_front_error",
        "ready",
    ),
    edge(
        "front",
        "capture_diagnostics",
        ALWAYS,
        "effect_capture_diagnostics",
        "front",
    ),
    edge(
        "front",
        ANY_EVENT,
        ALWAYS,
        "effect_reject_unexpected",
        "front",
    ),
];

/// The machine's spec: diagrams and conformance tests read this.
pub const SPEC: MachineSpec = MachineSpec {
    name: "kokoro_acoustic",
    doc: "Kokoro acoustic stage (the network's front half) per chunk: ALBERT, bert_encoder, durations (predicted or given), alignment, text encoder, F0/N",
    initial: "unloaded",
    states: STATES,
    events: EVENTS,
    transitions: TRANSITIONS,
};
