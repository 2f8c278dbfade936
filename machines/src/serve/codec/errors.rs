//! What can go wrong reading or writing an Ogg/Opus stream or encoding MP3.

/// A malformed Ogg page, a stream that is not Opus, or a libopus failure.
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    /// A malformed Ogg page or `OpusHead`.
    #[error(transparent)]
    Ogg(#[from] voxlane_runtime::io::ogg::OggError),
    /// An audio packet before the stream's `OpusHead`.
    #[error("Opus audio before the OpusHead header")]
    MissingHead,
    /// A sample rate libopus does not run at.
    #[error("unsupported sample rate {0} Hz (8000, 12000, 16000, 24000 or 48000)")]
    SampleRate(u32),
    /// A PCM frame of a length Opus cannot code at this rate.
    #[error("a PCM frame of {len} samples is not an Opus frame size at {rate} Hz")]
    FrameSize {
        /// The frame's length.
        len: usize,
        /// The stream's rate.
        rate: u32,
    },
    /// LAME (the MP3 encoder) failed or refused a setting.
    #[error("mp3 encoder: {0}")]
    Mp3(String),
    /// libopus refused (a corrupt packet, a bad argument).
    #[error("libopus: {0}")]
    Opus(#[from] ::opus::Error),
}
