//! The lane dispatcher's declared transitions (the diagram's only source).

use crate::core::table::{edge, MachineSpec, StateSpec, ALWAYS, ANY_EVENT};
use crate::core::Transition;

/// States, leaf and super.
pub const STATES: &[StateSpec] = &[
    StateSpec {
        name: "lifecycle",
        parent: None,
        superstate: true,
        doc: "handles diagnostics and unexpected events in every state",
    },
    StateSpec {
        name: "unconfigured",
        parent: Some("lifecycle"),
        superstate: false,
        doc: "no pool yet",
    },
    StateSpec {
        name: "starting",
        parent: Some("lifecycle"),
        superstate: false,
        doc: "spawning threads - 1 workers",
    },
    StateSpec {
        name: "ready",
        parent: Some("lifecycle"),
        superstate: false,
        doc: "pool up, accepting dispatches",
    },
    StateSpec {
        name: "dispatching",
        parent: Some("lifecycle"),
        superstate: false,
        doc: "a batch ran, awaiting its outcome event",
    },
    StateSpec {
        name: "shut_down",
        parent: Some("lifecycle"),
        superstate: false,
        doc: "workers joined, rejects all work",
    },
];

/// Event kinds.
pub const EVENTS: &[&str] = &[
    "configure",
    "dispatch",
    "pool_done",
    "pool_error",
    "lanes_done",
    "lanes_error",
    "capture_diagnostics",
    "shutdown",
];

/// Every edge the machine may take.
pub const TRANSITIONS: &[Transition] = &[
    edge(
        "unconfigured",
        "configure",
        "guard_budget_valid",
        "effect_start_pool",
        "starting",
    ),
    edge(
        "unconfigured",
        "configure",
        "guard_budget_invalid",
        "effect_reject_budget",
        "unconfigured",
    ),
    edge(
        "unconfigured",
        "dispatch",
        ALWAYS,
        "effect_reject_not_configured",
        "unconfigured",
    ),
    edge(
        "unconfigured",
        "shutdown",
        ALWAYS,
        "effect_release_pool",
        "shut_down",
    ),
    edge(
        "starting",
        "pool_done",
        ALWAYS,
        "effect_reply_configured",
        "ready",
    ),
    edge(
        "starting",
        "pool_error",
        ALWAYS,
        "effect_reply_pool_error",
        "unconfigured",
    ),
    edge(
        "ready",
        "configure",
        ALWAYS,
        "effect_reject_already_configured",
        "ready",
    ),
    edge(
        "ready",
        "dispatch",
        "guard_lanes_exceed_budget",
        "effect_reject_lanes_budget",
        "ready",
    ),
    edge(
        "ready",
        "dispatch",
        "guard_job_empty",
        "effect_complete_empty",
        "ready",
    ),
    edge(
        "ready",
        "dispatch",
        "guard_route_serial",
        "effect_run_serial",
        "dispatching",
    ),
    edge(
        "ready",
        "dispatch",
        "guard_route_parallel",
        "effect_dispatch_lanes",
        "dispatching",
    ),
    edge(
        "ready",
        "shutdown",
        ALWAYS,
        "effect_release_pool",
        "shut_down",
    ),
    edge(
        "dispatching",
        "lanes_done",
        ALWAYS,
        "effect_reply_dispatch_done",
        "ready",
    ),
    edge(
        "dispatching",
        "lanes_error",
        ALWAYS,
        "effect_reply_lanes_error",
        "ready",
    ),
    edge(
        "shut_down",
        "configure",
        ALWAYS,
        "effect_reject_shut_down",
        "shut_down",
    ),
    edge(
        "shut_down",
        "dispatch",
        ALWAYS,
        "effect_reject_shut_down",
        "shut_down",
    ),
    edge(
        "shut_down",
        "shutdown",
        ALWAYS,
        "effect_reject_shut_down",
        "shut_down",
    ),
    edge(
        "lifecycle",
        "capture_diagnostics",
        ALWAYS,
        "effect_capture_diagnostics",
        "lifecycle",
    ),
    edge(
        "lifecycle",
        ANY_EVENT,
        ALWAYS,
        "effect_reject_unexpected",
        "lifecycle",
    ),
];

/// The machine's spec: diagrams and conformance tests read this.
pub const SPEC: MachineSpec = MachineSpec {
    name: "lane_dispatch",
    doc: "the lane pool's dispatcher: budgeted fork/join with serial and parallel routes",
    initial: "unconfigured",
    states: STATES,
    events: EVENTS,
    transitions: TRANSITIONS,
};
