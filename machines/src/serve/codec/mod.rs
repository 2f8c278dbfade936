//! The duplex route's audio codec: Ogg pages (`voxlane_runtime::io::ogg`)
//! carrying Opus packets ([`opus`], libopus), streamed as Kyutai's `sphn` `OpusStreamWriter` /
//! `OpusStreamReader` do (24 kHz mono, one packet per page).

pub mod errors;
pub mod opus;

pub use errors::CodecError;
pub use opus::{OpusStreamDecoder, OpusStreamEncoder};
