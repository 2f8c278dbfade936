//! `kokoro_vocoder`: the back half of Kokoro (one chunk) as a machine.
//!
//! `load { model }` binds [`voxlane_actors::tts::kokoro::back::KokoroBack`]
//! (decoder → iSTFTNet generator) from an open ONNX export; it and the
//! reusable [`voxlane_actors::tts::kokoro::back::BackOutput`] stay in the
//! context. `run { asr, f0, n, style, lanes }` is rejected by
//! `guard_asr_invalid` (`[512, F]`, F ≥ 1), `guard_curves_invalid` (F0 and
//! N of 2F values) and `guard_style_invalid` (the decoder half: 128 finite
//! values), or run by `effect_run_back` into `running`, whose `back_done`
//! outcome leaves the chunk's 24 kHz audio in the context's output buffer.
//! A run with `stream: Some(shape)` long enough to cut
//! (`guard_stream_windows`) decodes the whole chunk but generates only its
//! first window (`effect_run_first_window`); `window_done` parks it in
//! `streaming`, where `next_window` generates the next (the last one ends in
//! `back_done`) and `cancel` drops the rest.

pub mod actions;
pub mod errors;
pub mod events;
pub mod guards;
// statig generates the `State`/`Superstate` enums undocumented; each variant
// is a state handler of `machine`, documented there.
#[allow(missing_docs)]
pub mod machine;
pub mod table;

pub use errors::KokoroVocoderError;
pub use events::{Event, FollowUp, Load, NextWindow, Reply, Run, Sink};
pub use machine::VocoderStage;
pub use table::SPEC;
