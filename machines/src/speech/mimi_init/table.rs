//! `mimi_init`'s declared transitions (the diagram's only source).

use crate::core::table::{edge, MachineSpec, StateSpec, ALWAYS, ANY_EVENT};
use crate::core::Transition;

/// States, leaf and super.
pub const STATES: &[StateSpec] = &[
    StateSpec {
        name: "mimi",
        parent: None,
        superstate: true,
        doc: "diagnostics, reset and unexpected events in every state",
    },
    StateSpec {
        name: "uninitialized",
        parent: Some("mimi"),
        superstate: false,
        doc: "no model yet",
    },
    StateSpec {
        name: "binding",
        parent: Some("mimi"),
        superstate: false,
        doc: "weights converted and bound, awaiting the outcome event",
    },
    StateSpec {
        name: "initialized",
        parent: Some("mimi"),
        superstate: false,
        doc: "model bound by its contract, opening sessions",
    },
    StateSpec {
        name: "opening",
        parent: Some("mimi"),
        superstate: false,
        doc: "a session allocated, awaiting the outcome event",
    },
    StateSpec {
        name: "errored",
        parent: Some("mimi"),
        superstate: false,
        doc: "config, tensors or bind failed, only reset leaves",
    },
];

/// Event kinds.
pub const EVENTS: &[&str] = &[
    "initialize",
    "initialize_done",
    "initialize_error",
    "bind_session",
    "bind_done",
    "bind_error",
    "capture_diagnostics",
    "reset",
];

/// Every edge the machine may take.
pub const TRANSITIONS: &[Transition] = &[
    edge(
        "uninitialized",
        "initialize",
        "guard_config_invalid",
        "effect_reject_config",
        "errored",
    ),
    edge(
        "uninitialized",
        "initialize",
        "guard_tensors_invalid",
        "effect_reject_tensors",
        "errored",
    ),
    edge(
        "uninitialized",
        "initialize",
        "guard_init_valid",
        "effect_bind_model",
        "binding",
    ),
    edge(
        "binding",
        "initialize_done",
        ALWAYS,
        "effect_reply_initialized",
        "initialized",
    ),
    edge(
        "binding",
        "initialize_error",
        ALWAYS,
        "effect_reply_init_error",
        "errored",
    ),
    edge(
        "initialized",
        "initialize",
        ALWAYS,
        "effect_reject_already_initialized",
        "initialized",
    ),
    edge(
        "initialized",
        "bind_session",
        "guard_capacity_exceeded",
        "effect_reject_capacity",
        "initialized",
    ),
    edge(
        "initialized",
        "bind_session",
        "guard_capacity_fits",
        "effect_open_session",
        "opening",
    ),
    edge(
        "opening",
        "bind_done",
        ALWAYS,
        "effect_reply_session",
        "initialized",
    ),
    edge(
        "opening",
        "bind_error",
        ALWAYS,
        "effect_reply_bind_error",
        "initialized",
    ),
    edge("mimi", "reset", ALWAYS, "effect_reset", "uninitialized"),
    edge(
        "mimi",
        "capture_diagnostics",
        ALWAYS,
        "effect_capture_diagnostics",
        "mimi",
    ),
    edge(
        "mimi",
        ANY_EVENT,
        ALWAYS,
        "effect_reject_unexpected",
        "mimi",
    ),
];

/// The machine's spec: diagrams and conformance tests read this.
pub const SPEC: MachineSpec = MachineSpec {
    name: "mimi_init",
    doc: "Mimi codec setup: config and tensor checks, bind contract, sessions within a capacity",
    initial: "uninitialized",
    states: STATES,
    events: EVENTS,
    transitions: TRANSITIONS,
};
