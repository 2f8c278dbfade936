//! Pure predicates choosing `kokoro_text`'s edges.

use super::events::Tokenize;
use crate::tts::Slot;
use voxlane_actors::tts::frontend::{normalize, split, Tokenized};

/// The most characters one `tokenize` may carry.
pub const MAX_TEXT_CHARS: usize = 100_000;

/// The text exceeds [`MAX_TEXT_CHARS`].
pub fn guard_text_too_long(t: &Tokenize<'_>) -> bool {
    t.text.chars().count() > MAX_TEXT_CHARS
}

/// Within the cap, but the frontend's normaliser and splitter find nothing to say.
pub fn guard_text_empty(t: &Tokenize<'_>) -> bool {
    !guard_text_too_long(t) && split(&normalize(t.text)).is_empty()
}

/// Within the cap and something to say; no word timings asked for.
pub fn guard_text_speakable(t: &Tokenize<'_>) -> bool {
    !t.words && !guard_text_too_long(t) && !guard_text_empty(t)
}

/// Within the cap and something to say, with word timings.
pub fn guard_text_speakable_words(t: &Tokenize<'_>) -> bool {
    t.words && !guard_text_too_long(t) && !guard_text_empty(t)
}

/// Every phoneme was in the vocab (or the outcome carries nothing).
pub fn guard_phonemes_known(t: &Slot<Tokenized>) -> bool {
    !guard_phonemes_dropped(t)
}

/// Some phonemes fell outside the vocab and were dropped.
pub fn guard_phonemes_dropped(t: &Slot<Tokenized>) -> bool {
    t.peek(|t| t.is_some_and(|t| !t.dropped.is_empty()))
}
