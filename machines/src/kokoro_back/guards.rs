//! Pure predicates choosing `kokoro_back`'s edges. The shape checks run in a
//! fixed order (asr, curves, style); each guard holds for the first problem
//! only, so exactly one edge matches a `run`.

use super::events::Run;
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

/// Every shape fits: decode.
pub fn guard_shapes_valid(m: &KokoroBackMachine, r: &Run<'_>) -> bool {
    problem(m, r).is_none()
}
