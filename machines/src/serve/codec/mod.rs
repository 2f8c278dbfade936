//! The duplex route's audio codec: Ogg pages (`voxlane_runtime::io::ogg`)
//! carrying Opus packets ([`opus`], libopus), streamed as Kyutai's `sphn` `OpusStreamWriter` /
//! `OpusStreamReader` do (24 kHz mono, one packet per page); MP3 through the
//! system's LAME ([`mp3`]) for the speech routes.

pub mod errors;
pub mod mp3;
pub mod opus;

pub use errors::CodecError;
pub use mp3::Mp3Encoder;
pub use opus::{OpusStreamDecoder, OpusStreamEncoder};
