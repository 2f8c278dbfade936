//! `mimi_decode_session`: streaming Mimi decode, `[K, frames]` codes in,
//! `frames · 1920` samples out, as a session machine (see
//! [`crate::speech::mimi_session`] for the shared lifecycle). The session comes from
//! `mimi_init`'s `bind_session { side: Decode }`; `push_codes` is checked by
//! `guard_code_count_wrong` and `guard_code_out_of_range` and stepped by
//! `effect_decode_frame`.

pub mod actions;
pub mod errors;
pub mod events;
pub mod guards;
pub mod machine;
pub mod table;

pub use machine::{DecodeContract, DecodeSessionMachine};
pub use table::SPEC;
