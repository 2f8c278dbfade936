//! `kokoro_text`: Kokoro's text stage (text → phonemes → token chunks, over
//! the data plane's text frontend) as a machine.
//!
//! `load { vocab, punctuation }` reads `vocab.json` into a
//! [`voxlane_actors::tts::frontend::Frontend`] (espeak-ng en-us), kept in the
//! context. `tokenize { text }` is rejected by `guard_text_too_long` /
//! `guard_text_empty` (typed `TextTooLong` / `EmptyText`) or phonemized by
//! `effect_tokenize` (normalise → clauses → espeak-ng → vocab ids → chunks of
//! ≤ 510 ids padded with 0); its `tokenize_done` outcome is routed by
//! `guard_phonemes_known` / `guard_phonemes_dropped`, so phonemes outside the
//! vocab (dropped, listed in the reply) show as their own edge.

pub mod actions;
pub mod errors;
pub mod events;
pub mod guards;
// statig generates the `State`/`Superstate` enums undocumented; each variant
// is a state handler of `machine`, documented there.
#[allow(missing_docs)]
pub mod machine;
pub mod table;

pub use errors::KokoroTextError;
pub use events::{Event, FollowUp, Load, Reply, Sink, Tokenize};
pub use machine::TextStage;
pub use table::SPEC;
