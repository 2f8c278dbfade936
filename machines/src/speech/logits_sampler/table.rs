//! `logits_sampler`'s declared transitions (the diagram's only source).

use crate::core::table::{edge, MachineSpec, StateSpec, ALWAYS, ANY_EVENT};
use crate::core::Transition;

/// States, leaf and super.
pub const STATES: &[StateSpec] = &[
    StateSpec {
        name: "sampler",
        parent: None,
        superstate: true,
        doc: "diagnostics, reset and unexpected events in every state",
    },
    StateSpec {
        name: "unconfigured",
        parent: Some("sampler"),
        superstate: false,
        doc: "no vocabulary or parameters yet",
    },
    StateSpec {
        name: "ready",
        parent: Some("sampler"),
        superstate: false,
        doc: "parameters checked, scratch sized, generator seeded",
    },
    StateSpec {
        name: "sampling",
        parent: Some("sampler"),
        superstate: false,
        doc: "a token picked, awaiting the outcome event",
    },
];

/// Event kinds.
pub const EVENTS: &[&str] = &[
    "configure",
    "sample",
    "sample_done",
    "sample_error",
    "reseed",
    "capture_diagnostics",
    "reset",
];

/// Every edge the machine may take.
pub const TRANSITIONS: &[Transition] = &[
    edge(
        "unconfigured",
        "configure",
        "guard_params_invalid",
        "effect_reject_params",
        "unconfigured",
    ),
    edge(
        "unconfigured",
        "configure",
        "guard_params_valid",
        "effect_configure",
        "ready",
    ),
    edge(
        "unconfigured",
        "sample",
        ALWAYS,
        "effect_reject_not_configured",
        "unconfigured",
    ),
    edge(
        "ready",
        "configure",
        "guard_params_invalid",
        "effect_reject_params",
        "ready",
    ),
    edge(
        "ready",
        "configure",
        "guard_params_valid",
        "effect_configure",
        "ready",
    ),
    edge(
        "ready",
        "sample",
        "guard_logits_invalid",
        "effect_reject_logits",
        "ready",
    ),
    edge(
        "ready",
        "sample",
        "guard_route_greedy",
        "effect_argmax",
        "sampling",
    ),
    edge(
        "ready",
        "sample",
        "guard_route_sampled",
        "effect_draw",
        "sampling",
    ),
    edge("ready", "reseed", ALWAYS, "effect_reseed", "ready"),
    edge(
        "sampling",
        "sample_done",
        ALWAYS,
        "effect_reply_token",
        "ready",
    ),
    edge(
        "sampling",
        "sample_error",
        ALWAYS,
        "effect_reply_sample_error",
        "ready",
    ),
    edge("sampler", "reset", ALWAYS, "effect_reset", "unconfigured"),
    edge(
        "sampler",
        "capture_diagnostics",
        ALWAYS,
        "effect_capture_diagnostics",
        "sampler",
    ),
    edge(
        "sampler",
        ANY_EVENT,
        ALWAYS,
        "effect_reject_unexpected",
        "sampler",
    ),
];

/// The machine's spec: diagrams and conformance tests read this.
pub const SPEC: MachineSpec = MachineSpec {
    name: "logits_sampler",
    doc:
        "one stream's token choice: greedy, or temperature / top-k / top-p from a seeded generator",
    initial: "unconfigured",
    states: STATES,
    events: EVENTS,
    transitions: TRANSITIONS,
};
