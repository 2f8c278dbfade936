//! A small streaming FLAC writer: 16-bit mono, fixed 4096-sample blocks, each
//! block a FIXED order-2 subframe with one Rice partition (VERBATIM for
//! blocks too short to predict). Lossless and readable by any FLAC decoder;
//! it trades a few percent of size against libFLAC's LPC search for a
//! writer that is a page long and streams block by block (the STREAMINFO
//! header goes first, with the total length when known, else 0 = unknown).

/// Samples per block (the last block of a stream may be shorter).
pub const BLOCK: usize = 4096;

/// Largest Rice parameter a 4-bit field codes (15 is the escape code).
const MAX_RICE: u32 = 14;

/// Bits appended most-significant first.
#[derive(Debug, Default)]
struct BitWriter {
    bytes: Vec<u8>,
    acc: u64,
    bits: u32,
}

impl BitWriter {
    fn put(&mut self, value: u64, n: u32) {
        debug_assert!(n <= 40);
        if n == 0 {
            return;
        }
        self.acc = (self.acc << n) | (value & ((1u64 << n) - 1));
        self.bits += n;
        while self.bits >= 8 {
            self.bits -= 8;
            self.bytes.push((self.acc >> self.bits) as u8);
        }
        self.acc &= (1u64 << self.bits) - 1;
    }

    /// `q` zeros then a one.
    fn unary(&mut self, mut q: u32) {
        while q >= 32 {
            self.put(0, 32);
            q -= 32;
        }
        self.put(1, q + 1);
    }

    /// Pads with zeros to a byte boundary and hands the bytes over.
    fn finish(mut self) -> Vec<u8> {
        if self.bits > 0 {
            let pad = 8 - self.bits;
            self.put(0, pad);
        }
        self.bytes
    }
}

/// CRC-8, polynomial x^8 + x^2 + x + 1, initial 0 (a frame header's check).
pub fn crc8(bytes: &[u8]) -> u8 {
    let mut crc = 0u8;
    for &b in bytes {
        crc ^= b;
        for _ in 0..8 {
            crc = if crc & 0x80 != 0 {
                (crc << 1) ^ 0x07
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// CRC-16, polynomial x^16 + x^15 + x^2 + 1, initial 0 (a whole frame's check).
pub fn crc16(bytes: &[u8]) -> u16 {
    let mut crc = 0u16;
    for &b in bytes {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x8005
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// A frame or sample number in FLAC's UTF-8-like code (up to 36 bits).
fn utf8_number(out: &mut Vec<u8>, n: u64) {
    if n < 0x80 {
        out.push(n as u8);
        return;
    }
    // Bytes after the first carry 6 bits each.
    let extra = match n {
        0x80..=0x7FF => 1,
        0x800..=0xFFFF => 2,
        0x1_0000..=0x1F_FFFF => 3,
        0x20_0000..=0x3FF_FFFF => 4,
        0x400_0000..=0x7FFF_FFFF => 5,
        _ => 6,
    };
    let lead_bits = 6 - extra; // payload bits of the first byte
    let mark = !(0xFFu8 >> (extra + 1));
    out.push(mark | ((n >> (6 * extra)) as u8 & ((1u8 << lead_bits) - 1)));
    for i in (0..extra).rev() {
        out.push(0x80 | ((n >> (6 * i)) as u8 & 0x3F));
    }
}

/// The sample-rate code of a frame header: 0 (= read STREAMINFO) unless common.
fn rate_code(rate: u32) -> u8 {
    match rate {
        8000 => 4,
        16000 => 5,
        22050 => 6,
        24000 => 7,
        32000 => 8,
        44100 => 9,
        48000 => 10,
        96000 => 11,
        _ => 0,
    }
}

fn to_i16(x: f32) -> i32 {
    (x.clamp(-1.0, 1.0) * 32767.0).round() as i32
}

/// The Rice parameter that roughly minimises the coded size of `u`.
fn rice_parameter(u: &[u32]) -> u32 {
    let n = u.len().max(1) as u64;
    let mean = u.iter().map(|&v| u64::from(v)).sum::<u64>() / n;
    let mut k = 0;
    while k < MAX_RICE && (1u64 << (k + 1)) <= mean {
        k += 1;
    }
    k
}

/// Streams 16-bit mono FLAC: [`FlacWriter::header`] first, then the bytes
/// [`FlacWriter::push`] returns as blocks fill, then [`FlacWriter::finish`].
#[derive(Debug)]
pub struct FlacWriter {
    rate: u32,
    pending: Vec<i32>,
    frame: u64,
}

impl FlacWriter {
    /// A writer at `rate` Hz (1 to 655350).
    pub fn new(rate: u32) -> Self {
        Self {
            rate,
            pending: Vec::with_capacity(BLOCK),
            frame: 0,
        }
    }

    /// `fLaC` and the STREAMINFO block; `total` samples when known (else unknown).
    pub fn header(&self, total: Option<u64>) -> Vec<u8> {
        let mut out = b"fLaC".to_vec();
        out.push(0x80); // last metadata block, type 0 = STREAMINFO
        out.extend_from_slice(&[0, 0, 34]);
        let mut w = BitWriter::default();
        w.put(BLOCK as u64, 16); // min block size
        w.put(BLOCK as u64, 16); // max block size
        w.put(0, 24); // min frame size: unknown
        w.put(0, 24); // max frame size: unknown
        w.put(u64::from(self.rate), 20);
        w.put(0, 3); // channels − 1
        w.put(15, 5); // bits per sample − 1
        w.put(total.unwrap_or(0).min((1 << 36) - 1), 36);
        out.extend(w.finish());
        out.extend_from_slice(&[0; 16]); // MD5 of the audio: unknown
        out
    }

    /// Takes `pcm` (−1..1); returns the frames of the blocks it completed.
    pub fn push(&mut self, pcm: &[f32]) -> Vec<u8> {
        let mut out = Vec::new();
        for &x in pcm {
            self.pending.push(to_i16(x));
            if self.pending.len() == BLOCK {
                out.extend(self.frame_bytes());
                self.pending.clear();
            }
        }
        out
    }

    /// The last (short) block's frame, if any samples are left.
    pub fn finish(&mut self) -> Vec<u8> {
        if self.pending.is_empty() {
            return Vec::new();
        }
        let out = self.frame_bytes();
        self.pending.clear();
        out
    }

    fn frame_bytes(&mut self) -> Vec<u8> {
        let s = &self.pending;
        let n = s.len();
        let mut head = vec![0xFF, 0xF8]; // sync, fixed block size
        let size_code: u8 = if n == BLOCK { 12 } else { 7 }; // 12: 4096; 7: 16-bit n − 1 follows
        head.push((size_code << 4) | rate_code(self.rate));
        head.push(0x08); // mono, 16 bits per sample
        utf8_number(&mut head, self.frame);
        if size_code == 7 {
            head.extend_from_slice(&((n - 1) as u16).to_be_bytes());
        }
        head.push(crc8(&head));
        let mut w = BitWriter {
            bytes: head,
            ..BitWriter::default()
        };
        if n <= 2 {
            w.put(0b0000_0010, 8); // VERBATIM
            for &x in s {
                w.put(x as u64, 16);
            }
        } else {
            w.put(0b0001_0100, 8); // FIXED, order 2
            w.put(s[0] as u64, 16);
            w.put(s[1] as u64, 16);
            // Zigzag residuals of x[i] − 2x[i−1] + x[i−2]: at most 18 bits.
            let u: Vec<u32> = (2..n)
                .map(|i| {
                    let r = s[i] - 2 * s[i - 1] + s[i - 2];
                    ((r << 1) ^ (r >> 31)) as u32
                })
                .collect();
            let k = rice_parameter(&u);
            w.put(0, 2); // Rice, 4-bit parameters
            w.put(0, 4); // partition order 0
            w.put(u64::from(k), 4);
            for &v in &u {
                w.unary(v >> k);
                w.put(u64::from(v), k);
            }
        }
        let mut frame = w.finish();
        let crc = crc16(&frame);
        frame.extend_from_slice(&crc.to_be_bytes());
        self.frame += 1;
        frame
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crcs_match_the_check_values() {
        // The CRC catalogue's check input "123456789".
        assert_eq!(crc8(b"123456789"), 0xF4);
        assert_eq!(crc16(b"123456789"), 0xFEE8);
    }

    #[test]
    fn frame_numbers_use_the_utf8_code() {
        let code = |n| {
            let mut v = Vec::new();
            utf8_number(&mut v, n);
            v
        };
        assert_eq!(code(0x41), vec![0x41]);
        assert_eq!(code(0x7FF), vec![0xDF, 0xBF]);
        assert_eq!(code(0x800), vec![0xE0, 0xA0, 0x80]);
    }

    #[test]
    fn streaminfo_is_34_bytes_after_the_block_header() {
        let h = FlacWriter::new(24_000).header(Some(10));
        assert_eq!(&h[..4], b"fLaC");
        assert_eq!(h.len(), 4 + 4 + 34);
        // 24000 Hz in 20 bits starts at byte 10 of STREAMINFO.
        let si = &h[8..];
        let rate = (u32::from(si[10]) << 12) | (u32::from(si[11]) << 4) | (u32::from(si[12]) >> 4);
        assert_eq!(rate, 24_000);
    }
}
