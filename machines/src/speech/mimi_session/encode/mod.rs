//! `mimi_encode_session`: streaming Mimi encode, one or more 1920-sample
//! frames in, `[K, frames]` codes out, as a session machine (see
//! [`crate::speech::mimi_session`] for the shared lifecycle). The session comes from
//! `mimi_init`'s `bind_session { side: Encode }`; `push_pcm` is checked by
//! `guard_frame_size_wrong` and stepped by `effect_encode_frame`.

pub mod actions;
pub mod errors;
pub mod events;
pub mod guards;
pub mod machine;
pub mod table;

pub use machine::{EncodeContract, EncodeSessionMachine};
pub use table::SPEC;
