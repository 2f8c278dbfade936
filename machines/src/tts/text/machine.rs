//! The statig machine: states, then the events each state handles.
//!
//! Every handler arm is one row of [`super::table::TRANSITIONS`]: a named
//! guard selects it and a named action runs (`internal!` stays put,
//! `transition!` moves). Events a state does not name fall through to the
//! `frontend` superstate, which rejects them with a reason.

use super::actions::*;
use super::errors::KokoroTextError;
use super::events::{Event, Load, Reply, Sink, Tokenize};
use super::guards::*;
use super::table::SPEC;
use crate::core::Bookkeeping;
use crate::{internal, transition};
use statig::prelude::*;
use std::path::PathBuf;
use voxlane_actors::tts::frontend::{Frontend, Punctuation};

/// Context that persists across events: the frontend (vocab + phonemizer).
pub struct KokoroFrontendMachine {
    /// The frontend, once loaded.
    pub frontend: Option<Frontend>,
    /// Counters, edge trace and current state.
    pub book: Bookkeeping,
}

impl Default for KokoroFrontendMachine {
    fn default() -> Self {
        Self {
            frontend: None,
            book: Bookkeeping::new(&SPEC),
        }
    }
}

#[state_machine(
    initial = "State::unloaded()",
    before_dispatch = "Self::before_dispatch",
    after_transition = "Self::after_transition",
    state(derive(Debug, Clone, Copy, PartialEq, Eq))
)]
impl KokoroFrontendMachine {
    /// No vocab yet.
    #[state(superstate = "frontend")]
    fn unloaded(&mut self, context: &mut Sink, event: &Event<'_>) -> Outcome<State> {
        match event {
            Event::Load(l) => transition!(
                self,
                always,
                effect_load_vocab(self, l, context),
                State::loading()
            ),
            Event::Tokenize(_) => {
                internal!(self, always, effect_reject_not_loaded(self, context))
            }
            _ => Super,
        }
    }

    /// The vocab was read; waits for `load_done` / `load_error`.
    #[state(superstate = "frontend")]
    fn loading(&mut self, context: &mut Sink, event: &Event<'_>) -> Outcome<State> {
        match event {
            Event::LoadDone => transition!(
                self,
                always,
                effect_reply_loaded(self, context),
                State::ready()
            ),
            Event::LoadError(e) => transition!(
                self,
                always,
                effect_reply_load_error(self, e, context),
                State::unloaded()
            ),
            _ => Super,
        }
    }

    /// Loaded: texts are checked, then phonemized.
    #[state(superstate = "frontend")]
    fn ready(&mut self, context: &mut Sink, event: &Event<'_>) -> Outcome<State> {
        match event {
            Event::Load(_) => {
                internal!(self, always, effect_reject_already_loaded(self, context))
            }
            Event::Tokenize(t) if guard_text_too_long(t) => internal!(
                self,
                guard_text_too_long,
                effect_reject_too_long(self, t, context)
            ),
            Event::Tokenize(t) if guard_text_empty(t) => internal!(
                self,
                guard_text_empty,
                effect_reject_empty_text(self, context)
            ),
            Event::Tokenize(t) if guard_text_speakable(t) => transition!(
                self,
                guard_text_speakable,
                effect_tokenize(self, t, context),
                State::tokenizing()
            ),
            Event::Tokenize(t) if guard_text_speakable_words(t) => transition!(
                self,
                guard_text_speakable_words,
                effect_tokenize_aligned(self, t, context),
                State::tokenizing()
            ),
            _ => Super,
        }
    }

    /// A text was phonemized; waits for `tokenize_done` / `tokenize_error`.
    #[state(superstate = "frontend")]
    fn tokenizing(&mut self, context: &mut Sink, event: &Event<'_>) -> Outcome<State> {
        match event {
            Event::TokenizeDone(t) if guard_phonemes_dropped(t) => transition!(
                self,
                guard_phonemes_dropped,
                effect_reply_tokens_dropped(self, t, context),
                State::ready()
            ),
            Event::TokenizeDone(t) if guard_phonemes_known(t) => transition!(
                self,
                guard_phonemes_known,
                effect_reply_tokens(self, t, context),
                State::ready()
            ),
            Event::TokenizeError(e) => transition!(
                self,
                always,
                effect_reply_tokenize_error(self, e, context),
                State::ready()
            ),
            _ => Super,
        }
    }

    /// Diagnostics in every state; anything else unexpected is rejected.
    #[superstate]
    fn frontend(&mut self, context: &mut Sink, event: &Event<'_>) -> Outcome<State> {
        match event {
            Event::CaptureDiagnostics => {
                internal!(self, always, effect_capture_diagnostics(self, context))
            }
            other => internal!(
                self,
                always,
                effect_reject_unexpected(self, other.kind(), context)
            ),
        }
    }
}

/// The table name of a leaf state.
pub fn state_name(s: &State) -> &'static str {
    match s {
        State::Unloaded {} => "unloaded",
        State::Loading {} => "loading",
        State::Ready {} => "ready",
        State::Tokenizing {} => "tokenizing",
    }
}

crate::machine_hooks!(KokoroFrontendMachine { event: Event<'_>, sink: Sink });

/// The public handle: send an event, get the reply.
pub struct TextStage {
    sm: StateMachine<KokoroFrontendMachine>,
}

crate::machine_handle! {
    /// A frontend in `unloaded`.
    TextStage for KokoroFrontendMachine {
        event: Event<'_>,
        sink: Sink,
        reply: Reply,
        unexpected: |event, state| Reply::Error(KokoroTextError::Unexpected { event, state }),
    }
}

impl TextStage {
    /// Load `vocab.json` with a punctuation convention.
    pub fn load(&mut self, vocab: impl Into<PathBuf>, punctuation: Punctuation) -> Reply {
        self.handle(&Event::Load(Load {
            vocab: vocab.into(),
            punctuation,
        }))
    }

    /// Tokenize `text`.
    pub fn tokenize(&mut self, text: &str) -> Reply {
        self.handle(&Event::Tokenize(Tokenize { text, words: false }))
    }

    /// Tokenize `text`, finding which tokens speak each word.
    pub fn tokenize_words(&mut self, text: &str) -> Reply {
        self.handle(&Event::Tokenize(Tokenize { text, words: true }))
    }

    /// The loaded frontend, if any.
    pub fn frontend(&self) -> Option<&Frontend> {
        self.sm.inner().frontend.as_ref()
    }
}
