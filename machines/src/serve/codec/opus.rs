//! An Opus stream in Ogg pages, written and read as Kyutai's `sphn`
//! `OpusStreamWriter` / `OpusStreamReader` do: mono, libopus running at the
//! stream's rate (24 kHz for Mimi), an `OpusHead` page and an `OpusTags`
//! page first, then one page per encoded frame.

use super::CodecError;
use voxlane_runtime::io::ogg::{parse_opus_head, PageReader, PageWriter};

/// The Ogg serial number of streams we write (sphn writes 42 too).
const SERIAL: u32 = 42;
/// Pre-skip in 48 kHz samples: libopus's default encoder lookahead (6.5 ms).
const PRE_SKIP: u16 = 312;
/// The longest Opus packet decodes to 120 ms: the decode buffer at 48 kHz.
const MAX_PACKET_SAMPLES: usize = 5760;
/// Room for one encoded packet (libopus's own bound for 120 ms is ~7.7 kB).
const MAX_PACKET_BYTES: usize = 8192;

/// Checks that libopus runs at `rate`.
fn check_rate(rate: u32) -> Result<(), CodecError> {
    match rate {
        8000 | 12000 | 16000 | 24000 | 48000 => Ok(()),
        _ => Err(CodecError::SampleRate(rate)),
    }
}

/// Encodes PCM frames into Ogg/Opus pages.
pub struct OpusStreamEncoder {
    encoder: ::opus::Encoder,
    pages: PageWriter,
    rate: u32,
    /// Samples written so far, at the stream's rate.
    samples: u64,
    packet: Vec<u8>,
}

impl std::fmt::Debug for OpusStreamEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpusStreamEncoder")
            .field("rate", &self.rate)
            .finish()
    }
}

impl OpusStreamEncoder {
    /// An encoder at `rate` Hz, mono, tuned for voice like sphn's.
    pub fn new(rate: u32) -> Result<Self, CodecError> {
        check_rate(rate)?;
        let encoder =
            ::opus::Encoder::new(rate, ::opus::Channels::Mono, ::opus::Application::Voip)?;
        Ok(Self {
            encoder,
            pages: PageWriter::new(SERIAL),
            rate,
            samples: 0,
            packet: vec![0; MAX_PACKET_BYTES],
        })
    }

    /// The `OpusHead` and `OpusTags` pages, to send before any audio page.
    pub fn header_pages(&mut self) -> Result<Vec<u8>, CodecError> {
        let mut head = Vec::with_capacity(19);
        head.extend_from_slice(b"OpusHead");
        head.push(1); // version
        head.push(1); // channels
        head.extend_from_slice(&PRE_SKIP.to_le_bytes());
        head.extend_from_slice(&self.rate.to_le_bytes()); // the input's rate
        head.extend_from_slice(&0i16.to_le_bytes()); // output gain
        head.push(0); // channel mapping family: mono/stereo
        let vendor = b"voxlane";
        let mut tags = Vec::with_capacity(16 + vendor.len());
        tags.extend_from_slice(b"OpusTags");
        tags.extend_from_slice(&(vendor.len() as u32).to_le_bytes());
        tags.extend_from_slice(vendor);
        tags.extend_from_slice(&0u32.to_le_bytes()); // no comments
        let mut out = self.pages.page(&head, 0)?;
        out.extend(self.pages.page(&tags, 0)?);
        Ok(out)
    }

    /// One frame of PCM (2.5 to 120 ms: 1920 samples is 80 ms at 24 kHz)
    /// as one Ogg page holding one Opus packet.
    pub fn encode_page(&mut self, pcm: &[f32]) -> Result<Vec<u8>, CodecError> {
        let ms10 = pcm.len() as u64 * 400 / self.rate as u64; // length in 2.5 ms units
        let valid = (pcm.len() as u64 * 400).is_multiple_of(self.rate as u64)
            && matches!(ms10, 1 | 2 | 4 | 8 | 16 | 24 | 32 | 40 | 48);
        if !valid {
            return Err(CodecError::FrameSize {
                len: pcm.len(),
                rate: self.rate,
            });
        }
        let n = self.encoder.encode_float(pcm, &mut self.packet)?;
        self.samples += pcm.len() as u64;
        // Granule positions count 48 kHz samples whatever the input rate (RFC 7845).
        let granule = self.samples * 48_000 / self.rate as u64;
        Ok(self.pages.page(&self.packet[..n], granule)?)
    }
}

/// Decodes Ogg/Opus bytes, fed in any chunks, into PCM at the stream's rate.
pub struct OpusStreamDecoder {
    decoder: ::opus::Decoder,
    pages: PageReader,
    seen_head: bool,
    scratch: Vec<f32>,
}

impl std::fmt::Debug for OpusStreamDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpusStreamDecoder")
            .field("seen_head", &self.seen_head)
            .finish()
    }
}

impl OpusStreamDecoder {
    /// A decoder producing mono PCM at `rate` Hz (libopus resamples and downmixes).
    pub fn new(rate: u32) -> Result<Self, CodecError> {
        check_rate(rate)?;
        Ok(Self {
            decoder: ::opus::Decoder::new(rate, ::opus::Channels::Mono)?,
            pages: PageReader::new(),
            seen_head: false,
            scratch: vec![0.0; MAX_PACKET_SAMPLES],
        })
    }

    /// Feeds `bytes` of the stream and appends the PCM they complete to `pcm`.
    pub fn push(&mut self, bytes: &[u8], pcm: &mut Vec<f32>) -> Result<(), CodecError> {
        self.pages.push(bytes)?;
        while let Some(packet) = self.pages.next_packet() {
            if packet.starts_with(b"OpusHead") {
                parse_opus_head(&packet)?;
                self.seen_head = true;
                continue;
            }
            if packet.starts_with(b"OpusTags") {
                continue;
            }
            if !self.seen_head {
                return Err(CodecError::MissingHead);
            }
            let n = self
                .decoder
                .decode_float(&packet, &mut self.scratch, false)?;
            pcm.extend_from_slice(&self.scratch[..n]);
        }
        Ok(())
    }
}
