//! The five response formats of `/v1/audio/speech` and one streaming
//! encoder over them: header bytes first, then bytes per PCM chunk, then the
//! tail. A streamed WAV carries OpenAI's 0xFFFFFFFF sizes (unknown length);
//! a whole one carries its real sizes.

use crate::serve::codec::{CodecError, Mp3Encoder, OpusStreamEncoder};
use voxlane_runtime::io::flac::FlacWriter;
use voxlane_runtime::io::wav::{encode_pcm16, header_pcm16};

/// MP3 bit rate: LAME's CBR at 24 kHz mono, plenty for speech.
const MP3_KBPS: u32 = 64;
/// Opus frame: 20 ms at 24 kHz.
const OPUS_FRAME: usize = 480;

/// A `response_format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AudioFormat {
    /// MPEG-1/2 layer III (OpenAI's default).
    Mp3,
    /// Opus in Ogg.
    Opus,
    /// FLAC, 16-bit.
    Flac,
    /// RIFF WAV, 16-bit PCM.
    Wav,
    /// Raw 16-bit little-endian PCM, 24 kHz mono, no header.
    Pcm,
}

impl AudioFormat {
    /// Every format, in OpenAI's order.
    pub const ALL: [AudioFormat; 5] = [Self::Mp3, Self::Opus, Self::Flac, Self::Wav, Self::Pcm];

    /// The format named `name` (OpenAI's spelling), if any.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.name() == name)
    }

    /// OpenAI's name of the format.
    pub fn name(self) -> &'static str {
        match self {
            Self::Mp3 => "mp3",
            Self::Opus => "opus",
            Self::Flac => "flac",
            Self::Wav => "wav",
            Self::Pcm => "pcm",
        }
    }

    /// The response's `Content-Type`.
    pub fn content_type(self) -> &'static str {
        match self {
            Self::Mp3 => "audio/mpeg",
            Self::Opus => "audio/ogg; codecs=opus",
            Self::Flac => "audio/flac",
            Self::Wav => "audio/wav",
            Self::Pcm => "audio/pcm",
        }
    }
}

enum Inner {
    Mp3(Box<Mp3Encoder>),
    Opus {
        encoder: Box<OpusStreamEncoder>,
        pending: Vec<f32>,
    },
    Flac(FlacWriter),
    /// WAV streamed with unknown sizes, or PCM.
    Pcm16,
    /// A whole WAV: samples kept until the sizes are known.
    WholeWav(Vec<f32>),
}

/// Encodes one response's audio chunk by chunk.
pub struct AudioEncoder {
    format: AudioFormat,
    rate: u32,
    inner: Inner,
}

impl std::fmt::Debug for AudioEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AudioEncoder")
            .field("format", &self.format)
            .field("rate", &self.rate)
            .finish_non_exhaustive()
    }
}

impl AudioEncoder {
    /// An encoder of `format` at `rate` Hz; `streamed` when the length is
    /// unknown until the end (only WAV's header differs).
    pub fn new(format: AudioFormat, rate: u32, streamed: bool) -> Result<Self, CodecError> {
        let inner = match format {
            AudioFormat::Mp3 => Inner::Mp3(Box::new(Mp3Encoder::new(rate, MP3_KBPS)?)),
            AudioFormat::Opus => Inner::Opus {
                encoder: Box::new(OpusStreamEncoder::new(rate)?),
                pending: Vec::with_capacity(OPUS_FRAME),
            },
            AudioFormat::Flac => Inner::Flac(FlacWriter::new(rate)),
            AudioFormat::Wav if !streamed => Inner::WholeWav(Vec::new()),
            AudioFormat::Wav | AudioFormat::Pcm => Inner::Pcm16,
        };
        Ok(Self {
            format,
            rate,
            inner,
        })
    }

    /// The format.
    pub fn format(&self) -> AudioFormat {
        self.format
    }

    /// Bytes before any audio.
    pub fn header(&mut self) -> Result<Vec<u8>, CodecError> {
        Ok(match (&mut self.inner, self.format) {
            (Inner::Opus { encoder, .. }, _) => encoder.header_pages()?,
            (Inner::Flac(w), _) => w.header(None),
            // OpenAI's streamed WAV: both sizes 0xFFFFFFFF.
            (Inner::Pcm16, AudioFormat::Wav) => header_pcm16(self.rate, u32::MAX).to_vec(),
            _ => Vec::new(),
        })
    }

    /// Bytes for one chunk of PCM (−1..1).
    pub fn push(&mut self, pcm: &[f32]) -> Result<Vec<u8>, CodecError> {
        Ok(match &mut self.inner {
            Inner::Mp3(e) => e.push(pcm)?,
            Inner::Opus { encoder, pending } => {
                let mut out = Vec::new();
                for &x in pcm {
                    pending.push(x);
                    if pending.len() == OPUS_FRAME {
                        out.extend(encoder.encode_page(pending)?);
                        pending.clear();
                    }
                }
                out
            }
            Inner::Flac(w) => w.push(pcm),
            Inner::Pcm16 => encode_pcm16(pcm),
            Inner::WholeWav(all) => {
                all.extend_from_slice(pcm);
                Vec::new()
            }
        })
    }

    /// The bytes after the last chunk (a whole WAV comes out here entire).
    pub fn finish(&mut self) -> Result<Vec<u8>, CodecError> {
        Ok(match &mut self.inner {
            Inner::Mp3(e) => e.finish()?,
            Inner::Opus { encoder, pending } => {
                if pending.is_empty() {
                    Vec::new()
                } else {
                    // The last frame padded with silence to a whole Opus frame.
                    pending.resize(OPUS_FRAME, 0.0);
                    let page = encoder.encode_page(pending)?;
                    pending.clear();
                    page
                }
            }
            Inner::Flac(w) => w.finish(),
            Inner::Pcm16 => Vec::new(),
            Inner::WholeWav(all) => {
                let data = encode_pcm16(all);
                let len = u32::try_from(data.len()).unwrap_or(u32::MAX - 36);
                let mut out = header_pcm16(self.rate, len).to_vec();
                out.extend(data);
                all.clear();
                out
            }
        })
    }
}
