//! Pure predicates choosing `kokoro_vocoder`'s edges. The shape checks run in a
//! fixed order (asr, curves, style); each guard holds for the first problem
//! only, so exactly one edge matches a `run`.

use super::events::{NextWindow, Run};
use super::machine::KokoroBackMachine;
use voxlane_actors::tts::kokoro::front::STYLE_DIM;

/// Values of the decoder's half of a style row.
pub const DECODER_STYLE: usize = STYLE_DIM / 2;

/// What is wrong with a run, in check order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Problem {
    /// `asr` empty or not whole frames.
    Asr,
    /// F0 or N not 2 values per frame.
    Curves,
    /// Decoder style not 128 finite values.
    Style,
}

/// Channels of `asr` the bound decoder takes (512 before a load).
pub fn asr_channels(m: &KokoroBackMachine) -> usize {
    m.back.as_ref().map_or(512, |b| b.decoder().asr_dim())
}

/// Frames F of a well-shaped `asr`.
pub fn frames(m: &KokoroBackMachine, r: &Run<'_>) -> usize {
    r.asr.len() / asr_channels(m).max(1)
}

/// The first problem of `r`, if any.
pub fn problem(m: &KokoroBackMachine, r: &Run<'_>) -> Option<Problem> {
    let c = asr_channels(m).max(1);
    if r.asr.is_empty() || !r.asr.len().is_multiple_of(c) {
        return Some(Problem::Asr);
    }
    let f = r.asr.len() / c;
    if r.f0.len() != 2 * f || r.n.len() != 2 * f {
        return Some(Problem::Curves);
    }
    if r.style.len() != DECODER_STYLE || r.style.iter().any(|v| !v.is_finite()) {
        return Some(Problem::Style);
    }
    None
}

/// `asr` is empty or not whole 512-channel frames.
pub fn guard_asr_invalid(m: &KokoroBackMachine, r: &Run<'_>) -> bool {
    problem(m, r) == Some(Problem::Asr)
}

/// F0 or N is not 2 values per `asr` frame.
pub fn guard_curves_invalid(m: &KokoroBackMachine, r: &Run<'_>) -> bool {
    problem(m, r) == Some(Problem::Curves)
}

/// The decoder style is not 128 finite values.
pub fn guard_style_invalid(m: &KokoroBackMachine, r: &Run<'_>) -> bool {
    problem(m, r) == Some(Problem::Style)
}

/// Whether `r` asks for windows and its chunk is long enough to cut.
fn cuts_into_windows(m: &KokoroBackMachine, r: &Run<'_>) -> bool {
    r.stream.is_some_and(|s| s.plan(frames(m, r)).is_some())
}

/// Every shape fits and the chunk runs whole (not streamed, or too short to cut).
pub fn guard_run_whole(m: &KokoroBackMachine, r: &Run<'_>) -> bool {
    problem(m, r).is_none() && !cuts_into_windows(m, r)
}

/// Every shape fits and the chunk is cut into windows, the first emitted early.
pub fn guard_stream_windows(m: &KokoroBackMachine, r: &Run<'_>) -> bool {
    problem(m, r).is_none() && cuts_into_windows(m, r)
}

/// `next_window` carries the streamed chunk's F0 length and a decoder style.
pub fn guard_window_matches(m: &KokoroBackMachine, w: &NextWindow<'_>) -> bool {
    m.plan
        .is_some_and(|p| w.f0.len() == 2 * p.frames && w.style.len() == DECODER_STYLE)
        && w.style.iter().all(|v| v.is_finite())
}

/// `next_window` does not fit the streamed chunk.
pub fn guard_window_mismatch(m: &KokoroBackMachine, w: &NextWindow<'_>) -> bool {
    !guard_window_matches(m, w)
}
