//! Effects of `kokoro_text`'s edges. Actions that can fail raise an
//! outcome event (`load_*`, `tokenize_*`) in the sink instead of choosing a state.

use super::errors::KokoroTextError;
use super::events::{FollowUp, Load, Reply, Sink, Tokenize};
use super::guards::MAX_TEXT_CHARS;
use super::machine::KokoroFrontendMachine;
use crate::tts::Slot;
use voxlane_actors::tts::frontend::{Frontend, Tokenized, Vocab};

fn reject(m: &mut KokoroFrontendMachine, sink: &mut Sink, err: KokoroTextError) {
    m.book.reject(err.reason());
    sink.reply = Some(Reply::Error(err));
}

/// Read the vocab and build the frontend; raise `load_done` or `load_error`.
pub fn effect_load_vocab(m: &mut KokoroFrontendMachine, l: &Load, sink: &mut Sink) {
    sink.follow_up = Some(match Vocab::load(&l.vocab) {
        Ok(vocab) => {
            m.frontend = Some(Frontend::new(vocab).punctuation(l.punctuation));
            FollowUp::LoadDone
        }
        Err(e) => FollowUp::LoadError(e.into()),
    });
}

/// Reply `load_done`.
pub fn effect_reply_loaded(m: &mut KokoroFrontendMachine, sink: &mut Sink) {
    sink.reply = Some(Reply::Loaded {
        vocab: m.frontend.as_ref().map_or(0, |f| f.vocab().len()),
    });
}

/// Reply `load_error` (nothing stays loaded).
pub fn effect_reply_load_error(
    m: &mut KokoroFrontendMachine,
    e: &Slot<KokoroTextError>,
    sink: &mut Sink,
) {
    m.frontend = None;
    let err = e
        .take()
        .unwrap_or(KokoroTextError::MissingPayload("load_error"));
    reject(m, sink, err);
}

/// Reject `tokenize` before `load`.
pub fn effect_reject_not_loaded(m: &mut KokoroFrontendMachine, sink: &mut Sink) {
    reject(m, sink, KokoroTextError::NotLoaded);
}

/// Reject a second `load`.
pub fn effect_reject_already_loaded(m: &mut KokoroFrontendMachine, sink: &mut Sink) {
    reject(m, sink, KokoroTextError::AlreadyLoaded);
}

/// Reject a text over the cap.
pub fn effect_reject_too_long(m: &mut KokoroFrontendMachine, t: &Tokenize<'_>, sink: &mut Sink) {
    let chars = t.text.chars().count();
    reject(
        m,
        sink,
        KokoroTextError::TextTooLong {
            chars,
            max: MAX_TEXT_CHARS,
        },
    );
}

/// Reject a text with nothing to say.
pub fn effect_reject_empty_text(m: &mut KokoroFrontendMachine, sink: &mut Sink) {
    reject(m, sink, KokoroTextError::EmptyText);
}

/// Normalise, split, phonemize, map and chunk; raise `tokenize_done` or `tokenize_error`.
pub fn effect_tokenize(m: &mut KokoroFrontendMachine, t: &Tokenize<'_>, sink: &mut Sink) {
    sink.follow_up = Some(match &m.frontend {
        Some(f) => match f.tokenize(t.text) {
            Ok(tokens) => FollowUp::TokenizeDone(tokens),
            Err(e) => FollowUp::TokenizeError(e.into()),
        },
        None => FollowUp::TokenizeError(KokoroTextError::NotLoaded),
    });
}

/// As `effect_tokenize`, also aligning words to tokens; raise `tokenize_done` or `tokenize_error`.
pub fn effect_tokenize_aligned(m: &mut KokoroFrontendMachine, t: &Tokenize<'_>, sink: &mut Sink) {
    sink.follow_up = Some(match &m.frontend {
        Some(f) => match f.tokenize_aligned(t.text) {
            Ok(tokens) => FollowUp::TokenizeDone(tokens),
            Err(e) => FollowUp::TokenizeError(e.into()),
        },
        None => FollowUp::TokenizeError(KokoroTextError::NotLoaded),
    });
}

fn reply_tokens(m: &mut KokoroFrontendMachine, t: &Slot<Tokenized>, sink: &mut Sink) {
    match t.take() {
        Some(t) => sink.reply = Some(Reply::Tokens(t)),
        None => reject(m, sink, KokoroTextError::MissingPayload("tokenize_done")),
    }
}

/// Reply `tokenize_done` with the chunks.
pub fn effect_reply_tokens(m: &mut KokoroFrontendMachine, t: &Slot<Tokenized>, sink: &mut Sink) {
    reply_tokens(m, t, sink);
}

/// Reply `tokenize_done` with the chunks, counting the text under `phonemes_dropped`.
pub fn effect_reply_tokens_dropped(
    m: &mut KokoroFrontendMachine,
    t: &Slot<Tokenized>,
    sink: &mut Sink,
) {
    m.book.reject("phonemes_dropped");
    reply_tokens(m, t, sink);
}

/// Reply `tokenize_error`.
pub fn effect_reply_tokenize_error(
    m: &mut KokoroFrontendMachine,
    e: &Slot<KokoroTextError>,
    sink: &mut Sink,
) {
    let err = e
        .take()
        .unwrap_or(KokoroTextError::MissingPayload("tokenize_error"));
    reject(m, sink, err);
}

/// Reply with the diagnostics counters.
pub fn effect_capture_diagnostics(m: &mut KokoroFrontendMachine, sink: &mut Sink) {
    sink.reply = Some(Reply::Diagnostics(m.book.snapshot()));
}

/// Reject an event no edge of the current state takes.
pub fn effect_reject_unexpected(
    m: &mut KokoroFrontendMachine,
    event: &'static str,
    sink: &mut Sink,
) {
    let state = m.book.state();
    reject(m, sink, KokoroTextError::Unexpected { event, state });
}
