//! The kernel machines' shared states and edges; each kernel adds its
//! prepare routes through [`kernel_transitions!`](crate::kernel_transitions).

use crate::core::table::{MachineSpec, StateSpec, Transition};

/// States of every kernel machine.
pub const STATES: &[StateSpec] = &[
    StateSpec {
        name: "kernel",
        parent: None,
        superstate: true,
        doc: "diagnostics, reset and unexpected events in every state",
    },
    StateSpec {
        name: "uninitialized",
        parent: Some("kernel"),
        superstate: false,
        doc: "no weights yet",
    },
    StateSpec {
        name: "prepared",
        parent: Some("kernel"),
        superstate: false,
        doc: "weights validated and packed",
    },
    StateSpec {
        name: "ready",
        parent: Some("kernel"),
        superstate: false,
        doc: "workspace sized, lane budget fixed",
    },
    StateSpec {
        name: "running",
        parent: Some("kernel"),
        superstate: false,
        doc: "a request computed, awaiting its outcome event",
    },
    StateSpec {
        name: "errored",
        parent: Some("kernel"),
        superstate: false,
        doc: "setup failed, only reset leaves",
    },
];

/// A kernel machine's spec from its name, doc line and transitions.
pub const fn kernel_spec(
    name: &'static str,
    doc: &'static str,
    transitions: &'static [Transition],
) -> MachineSpec {
    MachineSpec {
        name,
        doc,
        initial: "uninitialized",
        states: STATES,
        events: super::events::EVENT_KINDS,
        transitions,
    }
}

/// The full transition table of a kernel machine: its prepare routes
/// (`(guard, action)` pairs, one per weight format or variant) followed by
/// the edges every kernel shares.
#[macro_export]
macro_rules! kernel_transitions {
    ($( ($guard:literal, $action:literal) ),+ $(,)?) => {{
        use $crate::core::table::{edge, ALWAYS, ANY_EVENT};
        &[
            $( edge("uninitialized", "prepare", $guard, $action, "prepared"), )+
            edge("uninitialized", "prepare", "guard_params_invalid", "effect_reject_params", "errored"),
            edge("prepared", "bind", "guard_limits_valid", "effect_bind_workspace", "ready"),
            edge("prepared", "bind", "guard_limits_invalid", "effect_reject_limits", "errored"),
            edge("prepared", "setup_error", ALWAYS, "effect_reply_setup_error", "errored"),
            edge("ready", "bind", "guard_limits_valid", "effect_bind_workspace", "ready"),
            edge("ready", "bind", "guard_limits_invalid", "effect_reject_limits", "ready"),
            edge("ready", "setup_error", ALWAYS, "effect_reply_setup_error", "errored"),
            edge("ready", "execute", "guard_lanes_exceed_budget", "effect_reject_lanes", "ready"),
            edge("ready", "execute", "guard_shape_invalid", "effect_reject_shape", "ready"),
            edge("ready", "execute", "guard_route_serial", "effect_run_serial", "running"),
            edge("ready", "execute", "guard_route_lanes", "effect_dispatch_lanes", "running"),
            edge("running", "execute_done", ALWAYS, "effect_reply_executed", "ready"),
            edge("running", "execute_error", ALWAYS, "effect_reply_execute_error", "ready"),
            edge("kernel", "reset", ALWAYS, "effect_reset", "uninitialized"),
            edge("kernel", "capture_diagnostics", ALWAYS, "effect_capture_diagnostics", "kernel"),
            edge("kernel", ANY_EVENT, ALWAYS, "effect_reject_unexpected", "kernel"),
        ]
    }};
}
