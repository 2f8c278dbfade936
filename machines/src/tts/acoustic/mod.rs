//! `kokoro_acoustic`: the front half of Kokoro (one chunk) as a machine.
//!
//! `load { model }` binds [`voxlane_actors::tts::kokoro::front::KokoroFront`]
//! from an open ONNX export and sizes its workspace for 512 tokens; both stay
//! in the context. `run { tokens, style, speed, durations, lanes }` is
//! rejected by `guard_token_count_invalid` (1..=512), `guard_style_invalid`
//! (256 finite values), `guard_speed_out_of_range` (0.5..=2.0),
//! `guard_token_out_of_vocab` and `guard_durations_mismatch`, or routed by
//! `guard_route_predicted` (durations predicted: `KokoroFront::run`) /
//! `guard_route_reference` (durations given: `run_with_durations`) into
//! `running`, whose `front_done` outcome carries the
//! [`voxlane_actors::tts::kokoro::front::FrontOutput`] (ALBERT →
//! bert_encoder → prosody durations → alignment → text encoder → F0/N).

pub mod actions;
pub mod errors;
pub mod events;
pub mod guards;
// statig generates the `State`/`Superstate` enums undocumented; each variant
// is a state handler of `machine`, documented there.
#[allow(missing_docs)]
pub mod machine;
pub mod table;

pub use errors::KokoroAcousticError;
pub use events::{Event, FollowUp, Load, Reply, Run, Sink};
pub use machine::AcousticStage;
pub use table::SPEC;
