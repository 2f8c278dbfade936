//! Payloads of `mimi_encode_session`'s events.

use super::machine::EncodeContract;

/// `push_pcm`: whole frames of 24 kHz mono PCM, and the lane share.
pub type PushPcm<'a> = crate::speech::mimi_session::Push<'a, EncodeContract>;

/// Every event the encode session takes.
pub type EncodeEvent<'a> = crate::speech::mimi_session::SessionEvent<'a, EncodeContract>;
