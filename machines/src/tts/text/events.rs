//! Events `kokoro_text` accepts, the outcomes it replies with, and its sink.

use super::errors::KokoroTextError;
use crate::tts::Slot;
use std::path::PathBuf;
use voxlane_actors::tts::frontend::{Punctuation, Tokenized};
use voxlane_runtime::DiagnosticsSnapshot;

/// Read the vocab and set the frontend up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Load {
    /// Kokoro's `vocab.json`.
    pub vocab: PathBuf,
    /// Keep clause punctuation (the model pauses on it) or drop it (the fixtures' convention).
    pub punctuation: Punctuation,
}

/// Turn one text into token chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tokenize<'a> {
    /// The text.
    pub text: &'a str,
    /// Also find which tokens speak each word (word timestamps).
    pub words: bool,
}

/// Everything the machine reacts to. `load_*` and `tokenize_*` outcomes are
/// raised by the machine's own actions; callers send the others.
#[derive(Debug)]
pub enum Event<'a> {
    /// Read the vocab.
    Load(Load),
    /// Outcome: the frontend is set up.
    LoadDone,
    /// Outcome: the vocab could not be read.
    LoadError(Slot<KokoroTextError>),
    /// Tokenize a text.
    Tokenize(Tokenize<'a>),
    /// Outcome: the text's chunks.
    TokenizeDone(Slot<Tokenized>),
    /// Outcome: phonemizing failed.
    TokenizeError(Slot<KokoroTextError>),
    /// Reply with the diagnostics counters.
    CaptureDiagnostics,
}

impl Event<'_> {
    /// The event kind, as named in the transition table.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Load(_) => "load",
            Self::LoadDone => "load_done",
            Self::LoadError(_) => "load_error",
            Self::Tokenize(_) => "tokenize",
            Self::TokenizeDone(_) => "tokenize_done",
            Self::TokenizeError(_) => "tokenize_error",
            Self::CaptureDiagnostics => "capture_diagnostics",
        }
    }
}

/// What the machine replies to one request.
#[derive(Debug)]
pub enum Reply {
    /// `load_done`: the vocab has this many symbols.
    Loaded {
        /// Symbols in the vocab.
        vocab: usize,
    },
    /// `tokenize_done`: the chunks (and any dropped phonemes).
    Tokens(Tokenized),
    /// The counters.
    Diagnostics(DiagnosticsSnapshot),
    /// `*_error`: the request was rejected or failed.
    Error(KokoroTextError),
}

/// Per-dispatch scratch handed to statig as external context.
#[derive(Debug, Default)]
pub struct Sink {
    /// The reply to the caller, once known.
    pub reply: Option<Reply>,
    /// An outcome event raised by an action, dispatched next.
    pub follow_up: Option<FollowUp>,
}

/// Outcome events an action can raise (owned, so they outlive the action).
#[derive(Debug)]
pub enum FollowUp {
    /// See [`Event::LoadDone`].
    LoadDone,
    /// See [`Event::LoadError`].
    LoadError(KokoroTextError),
    /// See [`Event::TokenizeDone`].
    TokenizeDone(Tokenized),
    /// See [`Event::TokenizeError`].
    TokenizeError(KokoroTextError),
}

impl FollowUp {
    /// The event this follow-up stands for.
    pub fn into_event(self) -> Event<'static> {
        match self {
            Self::LoadDone => Event::LoadDone,
            Self::LoadError(e) => Event::LoadError(Slot::new(e)),
            Self::TokenizeDone(t) => Event::TokenizeDone(Slot::new(t)),
            Self::TokenizeError(e) => Event::TokenizeError(Slot::new(e)),
        }
    }
}
