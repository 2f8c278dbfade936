//! Payloads of `mimi_decode_session`'s events.

use super::machine::DecodeContract;

/// `push_codes`: `[K, frames]` codes (codebook-major), and the lane share.
pub type PushCodes<'a> = crate::speech::mimi_session::Push<'a, DecodeContract>;

/// Every event the decode session takes.
pub type DecodeEvent<'a> = crate::speech::mimi_session::SessionEvent<'a, DecodeContract>;
