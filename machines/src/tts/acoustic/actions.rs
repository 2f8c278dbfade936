//! Effects of `kokoro_acoustic`'s edges. Actions that can fail raise an outcome
//! event (`load_*`, `front_*`) in the sink instead of choosing a state.

use super::errors::KokoroAcousticError;
use super::events::{DurationRoute, FollowUp, Load, Reply, Run, Sink};
use super::guards::{problem, vocab, Problem};
use super::machine::KokoroFrontMachine;
use crate::tts::Slot;
use voxlane_actors::tts::kokoro::front::{FrontOutput, KokoroFront, STYLE_DIM};
use voxlane_actors::tts::kokoro::graph::KokoroGraph;
use voxlane_actors::tts::kokoro::pipeline::MAX_TOKENS;

fn reject(m: &mut KokoroFrontMachine, sink: &mut Sink, err: KokoroAcousticError) {
    m.book.reject(err.reason());
    sink.reply = Some(Reply::Error(err));
}

/// Bind the weights and size the workspace for 512 tokens; raise `load_done` or `load_error`.
pub fn effect_load_front(m: &mut KokoroFrontMachine, l: &Load<'_>, sink: &mut Sink) {
    let loaded = KokoroFront::load(&KokoroGraph::with_cache(l.model, l.cache))
        .and_then(|front| front.workspace(MAX_TOKENS).map(|ws| (front, ws)));
    sink.follow_up = Some(match loaded {
        Ok((front, ws)) => {
            m.front = Some(front);
            m.workspace = ws;
            FollowUp::LoadDone
        }
        Err(e) => FollowUp::LoadError(e.into()),
    });
}

/// Reply `load_done`.
pub fn effect_reply_loaded(m: &mut KokoroFrontMachine, sink: &mut Sink) {
    sink.reply = Some(Reply::Loaded { vocab: vocab(m) });
}

/// Reply `load_error` (nothing stays bound).
pub fn effect_reply_load_error(
    m: &mut KokoroFrontMachine,
    e: &Slot<KokoroAcousticError>,
    sink: &mut Sink,
) {
    m.front = None;
    let err = e
        .take()
        .unwrap_or(KokoroAcousticError::MissingPayload("load_error"));
    reject(m, sink, err);
}

/// Reject `run` before `load`.
pub fn effect_reject_not_loaded(m: &mut KokoroFrontMachine, sink: &mut Sink) {
    reject(m, sink, KokoroAcousticError::NotLoaded);
}

/// Reject a second `load`.
pub fn effect_reject_already_loaded(m: &mut KokoroFrontMachine, sink: &mut Sink) {
    reject(m, sink, KokoroAcousticError::AlreadyLoaded);
}

/// Reject a run with zero or more than 512 tokens.
pub fn effect_reject_token_count(m: &mut KokoroFrontMachine, r: &Run<'_>, sink: &mut Sink) {
    let err = KokoroAcousticError::TokenCount {
        got: r.tokens.len(),
        max: MAX_TOKENS,
    };
    reject(m, sink, err);
}

/// Reject a style row that is not 256 finite values.
pub fn effect_reject_style(m: &mut KokoroFrontMachine, r: &Run<'_>, sink: &mut Sink) {
    let err = KokoroAcousticError::Style {
        got: r.style.len(),
        want: STYLE_DIM,
    };
    reject(m, sink, err);
}

/// Reject a speed outside 0.5..=2.0.
pub fn effect_reject_speed(m: &mut KokoroFrontMachine, r: &Run<'_>, sink: &mut Sink) {
    reject(m, sink, KokoroAcousticError::Speed(r.speed));
}

/// Reject a token id outside the vocab (names it and its position).
pub fn effect_reject_token_id(m: &mut KokoroFrontMachine, r: &Run<'_>, sink: &mut Sink) {
    let at = match problem(m, r) {
        Some(Problem::TokenId(at)) => at,
        _ => 0,
    };
    let err = KokoroAcousticError::TokenId {
        id: r.tokens.get(at).copied().unwrap_or(-1),
        at,
        vocab: vocab(m),
    };
    reject(m, sink, err);
}

/// Reject reference durations whose count is not the token count.
pub fn effect_reject_durations(m: &mut KokoroFrontMachine, r: &Run<'_>, sink: &mut Sink) {
    let err = KokoroAcousticError::DurationsLength {
        got: r.durations.map_or(0, <[usize]>::len),
        tokens: r.tokens.len(),
    };
    reject(m, sink, err);
}

fn outcome(result: Result<FrontOutput, KokoroAcousticError>) -> FollowUp {
    match result {
        Ok(out) => FollowUp::FrontDone(Box::new(out)),
        Err(e) => FollowUp::FrontError(e),
    }
}

/// ALBERT → bert_encoder → predicted durations → alignment → text encoder →
/// F0/N; raise `front_done` or `front_error`.
pub fn effect_run_predicted(m: &mut KokoroFrontMachine, r: &Run<'_>, sink: &mut Sink) {
    let result = match &m.front {
        Some(front) => front
            .run(r.lanes, r.tokens, r.style, r.speed, &mut m.workspace)
            .map_err(KokoroAcousticError::from),
        None => Err(KokoroAcousticError::NotLoaded),
    };
    sink.route = Some(DurationRoute::Predicted);
    sink.follow_up = Some(outcome(result));
}

/// As [`effect_run_predicted`] with the caller's durations imposed.
pub fn effect_run_with_durations(m: &mut KokoroFrontMachine, r: &Run<'_>, sink: &mut Sink) {
    let result = match (&m.front, r.durations) {
        (Some(front), Some(d)) => front
            .run_with_durations(r.lanes, r.tokens, r.style, d, &mut m.workspace)
            .map_err(KokoroAcousticError::from),
        (None, _) => Err(KokoroAcousticError::NotLoaded),
        (Some(_), None) => Err(KokoroAcousticError::DurationsLength {
            got: 0,
            tokens: r.tokens.len(),
        }),
    };
    sink.route = Some(DurationRoute::Reference);
    sink.follow_up = Some(outcome(result));
}

/// Reply `front_done` with the chunk's output.
pub fn effect_reply_front(m: &mut KokoroFrontMachine, o: &Slot<FrontOutput>, sink: &mut Sink) {
    let route = sink.route.take().unwrap_or(DurationRoute::Predicted);
    match o.take() {
        Some(out) => sink.reply = Some(Reply::Front(Box::new(out), route)),
        None => reject(m, sink, KokoroAcousticError::MissingPayload("front_done")),
    }
}

/// Reply `front_error`.
pub fn effect_reply_front_error(
    m: &mut KokoroFrontMachine,
    e: &Slot<KokoroAcousticError>,
    sink: &mut Sink,
) {
    sink.route = None;
    let err = e
        .take()
        .unwrap_or(KokoroAcousticError::MissingPayload("front_error"));
    reject(m, sink, err);
}

/// Reply with the diagnostics counters.
pub fn effect_capture_diagnostics(m: &mut KokoroFrontMachine, sink: &mut Sink) {
    sink.reply = Some(Reply::Diagnostics(m.book.snapshot()));
}

/// Reject an event no edge of the current state takes.
pub fn effect_reject_unexpected(m: &mut KokoroFrontMachine, event: &'static str, sink: &mut Sink) {
    let state = m.book.state();
    reject(m, sink, KokoroAcousticError::Unexpected { event, state });
}
