//! `kokoro_tts`'s declared transitions (the diagram's only source).

use crate::core::table::{edge, MachineSpec, StateSpec, ALWAYS, ANY_EVENT};
use crate::core::Transition;

/// States, leaf and super.
pub const STATES: &[StateSpec] = &[
    StateSpec {
        name: "tts",
        parent: None,
        superstate: true,
        doc: "handles diagnostics and unexpected events in every state",
    },
    StateSpec {
        name: "unloaded",
        parent: Some("tts"),
        superstate: false,
        doc: "no model, vocab or voices yet",
    },
    StateSpec {
        name: "loading",
        parent: Some("tts"),
        superstate: false,
        doc: "lanes started and stages loaded, awaiting the outcome event",
    },
    StateSpec {
        name: "loaded",
        parent: Some("tts"),
        superstate: true,
        doc: "stages loaded: a second load, or a synthesize while busy, is rejected",
    },
    StateSpec {
        name: "ready",
        parent: Some("loaded"),
        superstate: false,
        doc: "idle, accepting texts",
    },
    StateSpec {
        name: "preparing",
        parent: Some("loaded"),
        superstate: false,
        doc: "text tokenized and voice selected, awaiting the outcome event",
    },
    StateSpec {
        name: "synthesizing",
        parent: Some("loaded"),
        superstate: false,
        doc: "an utterance in flight (state-local), between chunks",
    },
    StateSpec {
        name: "running_front",
        parent: Some("loaded"),
        superstate: false,
        doc: "a chunk through the kokoro_front stage, awaiting its outcome",
    },
    StateSpec {
        name: "running_back",
        parent: Some("loaded"),
        superstate: false,
        doc: "the chunk through the kokoro_back stage, awaiting its outcome",
    },
];

/// Event kinds.
pub const EVENTS: &[&str] = &[
    "load",
    "load_done",
    "load_error",
    "synthesize",
    "prepare_done",
    "prepare_error",
    "next_chunk",
    "front_done",
    "front_error",
    "chunk_done",
    "chunk_error",
    "cancel",
    "capture_diagnostics",
];

/// Every edge the machine may take.
pub const TRANSITIONS: &[Transition] = &[
    edge("unloaded", "load", ALWAYS, "effect_load_stages", "loading"),
    edge(
        "unloaded",
        "synthesize",
        ALWAYS,
        "effect_reject_not_loaded",
        "unloaded",
    ),
    edge(
        "unloaded",
        "next_chunk",
        ALWAYS,
        "effect_reject_not_loaded",
        "unloaded",
    ),
    edge(
        "unloaded",
        "cancel",
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
        "synthesize",
        "guard_text_empty",
        "effect_reject_empty_text",
        "ready",
    ),
    edge(
        "ready",
        "synthesize",
        "guard_speed_out_of_range",
        "effect_reject_speed",
        "ready",
    ),
    edge(
        "ready",
        "synthesize",
        "guard_voice_unknown",
        "effect_reject_voice",
        "ready",
    ),
    edge(
        "ready",
        "synthesize",
        "guard_request_valid",
        "effect_prepare_utterance",
        "preparing",
    ),
    edge(
        "ready",
        "next_chunk",
        ALWAYS,
        "effect_reject_not_synthesizing",
        "ready",
    ),
    edge(
        "ready",
        "cancel",
        ALWAYS,
        "effect_reject_not_synthesizing",
        "ready",
    ),
    edge(
        "preparing",
        "prepare_done",
        ALWAYS,
        "effect_reply_prepared",
        "synthesizing",
    ),
    edge(
        "preparing",
        "prepare_error",
        ALWAYS,
        "effect_reply_prepare_error",
        "ready",
    ),
    edge(
        "synthesizing",
        "next_chunk",
        ALWAYS,
        "effect_run_front",
        "running_front",
    ),
    edge("synthesizing", "cancel", ALWAYS, "effect_cancel", "ready"),
    edge(
        "running_front",
        "front_done",
        ALWAYS,
        "effect_run_back",
        "running_back",
    ),
    edge(
        "running_front",
        "front_error",
        ALWAYS,
        "effect_reply_chunk_error",
        "ready",
    ),
    edge(
        "running_back",
        "chunk_done",
        "guard_more_chunks",
        "effect_emit_chunk",
        "synthesizing",
    ),
    edge(
        "running_back",
        "chunk_done",
        "guard_last_chunk",
        "effect_emit_last_chunk",
        "ready",
    ),
    edge(
        "running_back",
        "chunk_error",
        ALWAYS,
        "effect_reply_chunk_error",
        "ready",
    ),
    edge(
        "loaded",
        "load",
        ALWAYS,
        "effect_reject_already_loaded",
        "loaded",
    ),
    edge(
        "loaded",
        "synthesize",
        ALWAYS,
        "effect_reject_busy",
        "loaded",
    ),
    edge(
        "tts",
        "capture_diagnostics",
        ALWAYS,
        "effect_capture_diagnostics",
        "tts",
    ),
    edge("tts", ANY_EVENT, ALWAYS, "effect_reject_unexpected", "tts"),
];

/// The machine's spec: diagrams and conformance tests read this.
pub const SPEC: MachineSpec = MachineSpec {
    name: "kokoro_tts",
    doc: "one Kokoro utterance: load the stages, then per chunk frontend tokens, front stage, back stage, chunk_done with its audio",
    initial: "unloaded",
    states: STATES,
    events: EVENTS,
    transitions: TRANSITIONS,
};
