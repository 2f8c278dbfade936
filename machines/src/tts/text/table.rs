//! `kokoro_text`'s declared transitions (the diagram's only source).

use crate::core::table::{edge, MachineSpec, StateSpec, ALWAYS, ANY_EVENT};
use crate::core::Transition;

/// States, leaf and super.
pub const STATES: &[StateSpec] = &[
    StateSpec {
        name: "frontend",
        parent: None,
        superstate: true,
        doc: "handles diagnostics and unexpected events in every state",
    },
    StateSpec {
        name: "unloaded",
        parent: Some("frontend"),
        superstate: false,
        doc: "no vocab yet",
    },
    StateSpec {
        name: "loading",
        parent: Some("frontend"),
        superstate: false,
        doc: "vocab read, awaiting the outcome event",
    },
    StateSpec {
        name: "ready",
        parent: Some("frontend"),
        superstate: false,
        doc: "vocab and espeak-ng en-us set up, accepting texts",
    },
    StateSpec {
        name: "tokenizing",
        parent: Some("frontend"),
        superstate: false,
        doc: "a text phonemized and chunked, awaiting the outcome event",
    },
];

/// Event kinds.
pub const EVENTS: &[&str] = &[
    "load",
    "load_done",
    "load_error",
    "tokenize",
    "tokenize_done",
    "tokenize_error",
    "capture_diagnostics",
];

/// Every edge the machine may take.
pub const TRANSITIONS: &[Transition] = &[
    edge("unloaded", "load", ALWAYS, "effect_load_vocab", "loading"),
    edge(
        "unloaded",
        "tokenize",
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
        "tokenize",
        "guard_text_too_long",
        "effect_reject_too_long",
        "ready",
    ),
    edge(
        "ready",
        "tokenize",
        "guard_text_empty",
        "effect_reject_empty_text",
        "ready",
    ),
    edge(
        "ready",
        "tokenize",
        "guard_text_speakable",
        "effect_tokenize",
        "tokenizing",
    ),
    edge(
        "ready",
        "tokenize",
        "guard_text_speakable_words",
        "effect_tokenize_aligned",
        "tokenizing",
    ),
    edge(
        "tokenizing",
        "tokenize_done",
        "guard_phonemes_dropped",
        "effect_reply_tokens_dropped",
        "ready",
    ),
    edge(
        "tokenizing",
        "tokenize_done",
        "guard_phonemes_known",
        "effect_reply_tokens",
        "ready",
    ),
    edge(
        "tokenizing",
        "tokenize_error",
        ALWAYS,
        "effect_reply_tokenize_error",
        "ready",
    ),
    edge(
        "frontend",
        "capture_diagnostics",
        ALWAYS,
        "effect_capture_diagnostics",
        "frontend",
    ),
    edge(
        "frontend",
        ANY_EVENT,
        ALWAYS,
        "effect_reject_unexpected",
        "frontend",
    ),
];

/// The machine's spec: diagrams and conformance tests read this.
pub const SPEC: MachineSpec = MachineSpec {
    name: "kokoro_text",
    doc: "Kokoro text to tokens: normalise, split, espeak-ng phonemes, vocab ids, chunks of at most 510 ids",
    initial: "unloaded",
    states: STATES,
    events: EVENTS,
    transitions: TRANSITIONS,
};
