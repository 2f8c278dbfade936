//! Pure predicates choosing `kokoro_tts`'s edges. A `synthesize` is checked
//! in a fixed order (text, speed, voice); each guard holds for the first
//! problem only, so exactly one edge matches.

use super::events::{Synthesize, Utterance};
use super::machine::KokoroTtsMachine;
use crate::tts::acoustic::guards::SPEED_RANGE;
use voxlane_actors::tts::frontend::{normalize, split};

/// What is wrong with a `synthesize`, in check order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Problem {
    /// Nothing to say.
    EmptyText,
    /// Speed outside 0.5..=2.0.
    Speed,
    /// A voice the packs lack, or a spec that does not parse.
    Voice,
}

/// The first problem of `s`, if any.
pub fn problem(m: &KokoroTtsMachine, s: &Synthesize<'_>) -> Option<Problem> {
    if split(&normalize(s.text)).is_empty() {
        return Some(Problem::EmptyText);
    }
    if !SPEED_RANGE.contains(&s.speed) {
        return Some(Problem::Speed);
    }
    let known = m
        .stages
        .as_ref()
        .is_some_and(|st| st.voices.check(s.voice).is_ok());
    if !known {
        return Some(Problem::Voice);
    }
    None
}

/// The text has nothing to say (the frontend's own normaliser and splitter).
pub fn guard_text_empty(m: &KokoroTtsMachine, s: &Synthesize<'_>) -> bool {
    problem(m, s) == Some(Problem::EmptyText)
}

/// The speed is outside 0.5..=2.0.
pub fn guard_speed_out_of_range(m: &KokoroTtsMachine, s: &Synthesize<'_>) -> bool {
    problem(m, s) == Some(Problem::Speed)
}

/// The voice spec names a voice the packs lack (or does not parse).
pub fn guard_voice_unknown(m: &KokoroTtsMachine, s: &Synthesize<'_>) -> bool {
    problem(m, s) == Some(Problem::Voice)
}

/// Text, speed and voice are all usable.
pub fn guard_request_valid(m: &KokoroTtsMachine, s: &Synthesize<'_>) -> bool {
    problem(m, s).is_none()
}

/// Chunks remain after the one just finished.
pub fn guard_more_chunks(u: &Utterance) -> bool {
    u.next < u.chunks.len()
}

/// The chunk just finished was the last.
pub fn guard_last_chunk(u: &Utterance) -> bool {
    !guard_more_chunks(u)
}

/// The chunk just through the front stage is the first of an utterance
/// asking for early first audio: stream it in windows.
pub fn guard_stream_chunk(u: &Utterance) -> bool {
    u.early && u.next == 1
}

/// The chunk just through the front stage runs whole.
pub fn guard_whole_chunk(u: &Utterance) -> bool {
    !guard_stream_chunk(u)
}
