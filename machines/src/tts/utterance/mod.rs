//! `kokoro_tts`: one utterance through Kokoro, as a machine driving the
//! stage machines it holds (`kokoro_text`, `kokoro_acoustic`, `kokoro_vocoder`).
//!
//! `load { model, vocab, voices, threads, pin }` starts the lane pool, opens
//! the voice packs and loads the three stages (one memory-mapped ONNX file
//! for both network halves). `synthesize { text, voice, speed, early }` is rejected
//! by `guard_text_empty`, `guard_speed_out_of_range` or `guard_voice_unknown`,
//! or prepared (tokenized, voice pack selected) into `synthesizing`, where
//! the utterance lives as state-local data. Each `next_chunk` runs the chunk
//! through the acoustic stage (`kokoro_acoustic`, the network's front half:
//! `running_front`), then the vocoder stage (`kokoro_vocoder`, the back half:
//! `running_back`); `chunk_done` emits its audio and is routed by
//! `guard_more_chunks` back to `synthesizing` or by `guard_last_chunk` to
//! `ready`. `cancel` drops the rest of the utterance.
//!
//! With `early` set, `guard_stream_chunk` sends the utterance's first chunk
//! to the back stage in windows (`effect_stream_back`): each `window_done`
//! emits one window (`TtsReply::Chunk { partial: true, .. }`) and parks the
//! utterance, with the chunk's front output, in `streaming_chunk`, where
//! `next_chunk` generates the next window; the last window arrives as
//! `chunk_done`. The first 0.4 s of audio is out after the decoder and one
//! short generator window.

pub mod actions;
pub mod errors;
pub mod events;
pub mod guards;
// statig generates the `State`/`Superstate` enums undocumented; each variant
// is a state handler of `machine`, documented there.
#[allow(missing_docs)]
pub mod machine;
pub mod table;

pub use errors::TtsError;
pub use events::{Event, FollowUp, Load, Sink, Synthesize, TtsReply, Utterance, WordTime};
pub use machine::{Stages, TtsMachine};
pub use table::SPEC;
