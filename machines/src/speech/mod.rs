//! The speech family: Kyutai's Mimi codec as machines (Moshi's machines are
//! to land here beside them).
//!
//! - [`mimi_init`] (`mimi_init`): sets the codec up (config and tensor
//!   checks, the bind contract) and opens sessions within a capacity;
//! - [`mimi_session`]: the shared streaming session machine, specialised by
//!   [`mimi_session::encode`] (`mimi_encode_session`: PCM frames in, codes
//!   out) and [`mimi_session::decode`] (`mimi_decode_session`: codes in,
//!   PCM out).

pub mod mimi_init;
pub mod mimi_session;
