//! What can go wrong reading or writing an Ogg/Opus stream.

/// A malformed Ogg page, a stream that is not Opus, or a libopus failure.
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    /// The bytes where a page starts are not `OggS`.
    #[error("not an Ogg page: expected the capture pattern `OggS`")]
    CapturePattern,
    /// An Ogg page whose stream structure version is not 0.
    #[error("unsupported Ogg version {0}")]
    Version(u8),
    /// The page's CRC does not match its bytes.
    #[error("Ogg page checksum mismatch (page {sequence})")]
    Checksum {
        /// The page's sequence number.
        sequence: u32,
    },
    /// A packet too large for one page (the writer puts one packet per page).
    #[error("packet of {0} bytes does not fit one Ogg page")]
    PacketTooLarge(usize),
    /// Pending bytes past the largest possible page without a whole page.
    #[error("a packet grew past {0} bytes without ending")]
    Oversized(usize),
    /// An audio packet before the stream's `OpusHead`.
    #[error("Opus audio before the OpusHead header")]
    MissingHead,
    /// An `OpusHead` that cannot be used.
    #[error("bad OpusHead: {0}")]
    Head(&'static str),
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
    /// libopus refused (a corrupt packet, a bad argument).
    #[error("libopus: {0}")]
    Opus(#[from] ::opus::Error),
}
