//! Pure predicates choosing `kokoro_acoustic`'s edges. The rejections are
//! checked in a fixed order (token count, style, speed, token ids,
//! durations); each guard holds for the first problem only, so exactly one
//! edge matches a `run`.

use super::events::Run;
use super::machine::KokoroFrontMachine;
use voxlane_actors::tts::kokoro::front::STYLE_DIM;
use voxlane_actors::tts::kokoro::pipeline::MAX_TOKENS;

/// Slowest and fastest speaking rate.
pub const SPEED_RANGE: std::ops::RangeInclusive<f32> = 0.5..=2.0;

/// What is wrong with a run, in check order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Problem {
    /// No tokens, or more than [`MAX_TOKENS`].
    TokenCount,
    /// Not [`STYLE_DIM`] finite values.
    Style,
    /// Speed outside [`SPEED_RANGE`].
    Speed,
    /// A token id outside the vocab, at this position.
    TokenId(usize),
    /// Durations not one per token.
    Durations,
}

/// The vocab size of the bound model (0 when none is bound).
pub fn vocab(m: &KokoroFrontMachine) -> usize {
    m.front.as_ref().map_or(0, |f| f.albert().vocab())
}

/// The first problem of `r`, if any.
pub fn problem(m: &KokoroFrontMachine, r: &Run<'_>) -> Option<Problem> {
    if r.tokens.is_empty() || r.tokens.len() > MAX_TOKENS {
        return Some(Problem::TokenCount);
    }
    if r.style.len() != STYLE_DIM || r.style.iter().any(|v| !v.is_finite()) {
        return Some(Problem::Style);
    }
    if !SPEED_RANGE.contains(&r.speed) {
        return Some(Problem::Speed);
    }
    let vocab = i64::try_from(vocab(m)).unwrap_or(i64::MAX);
    if let Some(at) = r.tokens.iter().position(|&id| !(0..vocab).contains(&id)) {
        return Some(Problem::TokenId(at));
    }
    if r.durations.is_some_and(|d| d.len() != r.tokens.len()) {
        return Some(Problem::Durations);
    }
    None
}

/// Zero tokens or more than 512.
pub fn guard_token_count_invalid(m: &KokoroFrontMachine, r: &Run<'_>) -> bool {
    problem(m, r) == Some(Problem::TokenCount)
}

/// The style row is not 256 finite values.
pub fn guard_style_invalid(m: &KokoroFrontMachine, r: &Run<'_>) -> bool {
    problem(m, r) == Some(Problem::Style)
}

/// The speed is outside 0.5..=2.0.
pub fn guard_speed_out_of_range(m: &KokoroFrontMachine, r: &Run<'_>) -> bool {
    problem(m, r) == Some(Problem::Speed)
}

/// A token id is not below the vocab size.
pub fn guard_token_out_of_vocab(m: &KokoroFrontMachine, r: &Run<'_>) -> bool {
    matches!(problem(m, r), Some(Problem::TokenId(_)))
}

/// Reference durations are not one per token.
pub fn guard_durations_mismatch(m: &KokoroFrontMachine, r: &Run<'_>) -> bool {
    problem(m, r) == Some(Problem::Durations)
}

/// A valid run without durations: the predictor chooses them.
pub fn guard_route_predicted(m: &KokoroFrontMachine, r: &Run<'_>) -> bool {
    problem(m, r).is_none() && r.durations.is_none()
}

/// A valid run with reference durations imposed.
pub fn guard_route_reference(m: &KokoroFrontMachine, r: &Run<'_>) -> bool {
    problem(m, r).is_none() && r.durations.is_some()
}
