//! Ogg pages (RFC 3533), as small as an Opus stream needs: a writer that
//! puts each packet on its own page, an incremental reader that takes bytes
//! in any chunks and gives back whole packets (checking each page's CRC), and
//! the `OpusHead` packet's parser (RFC 7845). Bytes from the network: every
//! size is bounded before anything is buffered.

/// A malformed Ogg page or `OpusHead`.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum OggError {
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
    /// A packet continued across pages past the reader's bound.
    #[error("a packet grew past {0} bytes without ending")]
    Oversized(usize),
    /// An `OpusHead` that cannot be used.
    #[error("bad OpusHead: {0}")]
    Head(&'static str),
}

/// Most segments a page holds (the lacing table's length is one byte).
const MAX_SEGMENTS: usize = 255;
/// Bytes of a page header before its lacing table.
const HEADER_LEN: usize = 27;
/// The largest page: header, a full lacing table, 255 segments of 255 bytes.
pub const MAX_PAGE_LEN: usize = HEADER_LEN + MAX_SEGMENTS + MAX_SEGMENTS * 255;
/// A packet the reader will assemble across pages before refusing it.
pub const MAX_PACKET_LEN: usize = 1 << 20;

/// Header flag: this page begins the logical stream.
pub const FLAG_BOS: u8 = 0x02;
/// Header flag: this page continues a packet from the previous page.
const FLAG_CONTINUED: u8 = 0x01;

/// Ogg's CRC-32 (polynomial 0x04c11db7, MSB first, no reflection, init 0).
const CRC_TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut r = (i as u32) << 24;
        let mut bit = 0;
        while bit < 8 {
            r = if r & 0x8000_0000 != 0 {
                (r << 1) ^ 0x04c1_1db7
            } else {
                r << 1
            };
            bit += 1;
        }
        table[i] = r;
        i += 1;
    }
    table
};

/// The Ogg CRC-32 of `bytes` (the checksum field zeroed by the caller).
pub fn crc32(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0u32, |crc, &b| {
        (crc << 8) ^ CRC_TABLE[(((crc >> 24) as u8) ^ b) as usize]
    })
}

/// Writes one logical stream's pages, one packet per page.
#[derive(Debug)]
pub struct PageWriter {
    serial: u32,
    sequence: u32,
}

impl PageWriter {
    /// A writer for the logical stream `serial`.
    pub fn new(serial: u32) -> Self {
        Self {
            serial,
            sequence: 0,
        }
    }

    /// The page holding `packet` whole, its granule position `granule`; the
    /// first page written carries the begin-of-stream flag.
    pub fn page(&mut self, packet: &[u8], granule: u64) -> Result<Vec<u8>, OggError> {
        // A packet ends at its first lacing value below 255: a length that is
        // a multiple of 255 takes a final 0.
        let segments = packet.len() / 255 + 1;
        if segments > MAX_SEGMENTS {
            return Err(OggError::PacketTooLarge(packet.len()));
        }
        let flags = if self.sequence == 0 { FLAG_BOS } else { 0 };
        let mut page = Vec::with_capacity(HEADER_LEN + segments + packet.len());
        page.extend_from_slice(b"OggS");
        page.push(0);
        page.push(flags);
        page.extend_from_slice(&granule.to_le_bytes());
        page.extend_from_slice(&self.serial.to_le_bytes());
        page.extend_from_slice(&self.sequence.to_le_bytes());
        page.extend_from_slice(&[0; 4]);
        page.push(segments as u8);
        page.extend(std::iter::repeat_n(255u8, segments - 1));
        page.push((packet.len() % 255) as u8);
        page.extend_from_slice(packet);
        let crc = crc32(&page);
        page[22..26].copy_from_slice(&crc.to_le_bytes());
        self.sequence = self.sequence.wrapping_add(1);
        Ok(page)
    }
}

/// Reassembles packets from Ogg bytes fed in arbitrary chunks.
#[derive(Debug, Default)]
pub struct PageReader {
    pending: Vec<u8>,
    partial: Vec<u8>,
    packets: std::collections::VecDeque<Vec<u8>>,
}

impl PageReader {
    /// An empty reader.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends `bytes` and parses every page they complete.
    pub fn push(&mut self, bytes: &[u8]) -> Result<(), OggError> {
        let mut pending = std::mem::take(&mut self.pending);
        pending.extend_from_slice(bytes);
        let mut start = 0;
        let parsed = loop {
            match self.parse_page(&pending[start..]) {
                Ok(Some(len)) => start += len,
                Ok(None) => break Ok(()),
                Err(e) => break Err(e),
            }
        };
        pending.drain(..start);
        self.pending = pending;
        parsed
    }

    /// The next whole packet, if one is ready.
    pub fn next_packet(&mut self) -> Option<Vec<u8>> {
        self.packets.pop_front()
    }

    /// Parses one page at the start of `buf` into packets; its length, or
    /// `None` while the page is incomplete.
    fn parse_page(&mut self, buf: &[u8]) -> Result<Option<usize>, OggError> {
        if buf.len() < HEADER_LEN {
            check_capture(buf)?;
            return Ok(None);
        }
        check_capture(buf)?;
        if buf[4] != 0 {
            return Err(OggError::Version(buf[4]));
        }
        let flags = buf[5];
        let sequence = u32::from_le_bytes([buf[18], buf[19], buf[20], buf[21]]);
        let stored_crc = u32::from_le_bytes([buf[22], buf[23], buf[24], buf[25]]);
        let segments = buf[26] as usize;
        let Some(lacing) = buf.get(HEADER_LEN..HEADER_LEN + segments) else {
            return Ok(None);
        };
        let body_len: usize = lacing.iter().map(|&l| l as usize).sum();
        let page_len = HEADER_LEN + segments + body_len;
        let Some(page) = buf.get(..page_len) else {
            return Ok(None);
        };
        let mut zeroed = page.to_vec();
        zeroed[22..26].fill(0);
        if crc32(&zeroed) != stored_crc {
            return Err(OggError::Checksum { sequence });
        }
        if flags & FLAG_CONTINUED == 0 {
            // A fresh page drops any packet a lost page left unfinished.
            self.partial.clear();
        }
        let mut offset = HEADER_LEN + segments;
        for &l in lacing {
            let l = l as usize;
            self.partial.extend_from_slice(&page[offset..offset + l]);
            offset += l;
            if self.partial.len() > MAX_PACKET_LEN {
                return Err(OggError::Oversized(MAX_PACKET_LEN));
            }
            if l < 255 {
                self.packets.push_back(std::mem::take(&mut self.partial));
            }
        }
        Ok(Some(page_len))
    }
}

/// Checks that `buf` starts (as far as it goes) with `OggS`.
fn check_capture(buf: &[u8]) -> Result<(), OggError> {
    let n = buf.len().min(4);
    if buf[..n] == b"OggS"[..n] {
        Ok(())
    } else {
        Err(OggError::CapturePattern)
    }
}

/// The fields of an `OpusHead` packet a mono/stereo decoder relies on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpusHead {
    /// Output channels (1 or 2).
    pub channels: u8,
    /// Samples (at 48 kHz) to drop from the start of the decoded stream.
    pub pre_skip: u16,
    /// The encoder's input rate (informational; Opus decodes at any rate).
    pub input_rate: u32,
    /// Output gain, Q7.8 dB.
    pub gain: i16,
}

/// Parses an `OpusHead` packet (RFC 7845 section 5.1), mono or stereo only.
pub fn parse_opus_head(packet: &[u8]) -> Result<OpusHead, OggError> {
    if !packet.starts_with(b"OpusHead") {
        return Err(OggError::Head("missing the OpusHead magic"));
    }
    if packet.len() < 19 {
        return Err(OggError::Head("shorter than 19 bytes"));
    }
    if packet[8] >> 4 != 0 {
        return Err(OggError::Head("unsupported major version"));
    }
    if !matches!(packet[9], 1 | 2) {
        return Err(OggError::Head("not mono or stereo"));
    }
    if packet[18] != 0 {
        return Err(OggError::Head("multichannel mapping family"));
    }
    Ok(OpusHead {
        channels: packet[9],
        pre_skip: u16::from_le_bytes([packet[10], packet[11]]),
        input_rate: u32::from_le_bytes([packet[12], packet[13], packet[14], packet[15]]),
        gain: i16::from_le_bytes([packet[16], packet[17]]),
    })
}
