//! MP3 through the system's LAME (`libmp3lame`, Debian `libmp3lame-dev`),
//! linked dynamically like libopus: CBR mono, no Xing/VBR tag (a streamed
//! response cannot seek back to fill one in), so every frame can leave as
//! soon as LAME hands it out.

use super::CodecError;
use std::os::raw::{c_float, c_int, c_uchar};

#[repr(C)]
struct LameFlags {
    _private: [u8; 0],
}

/// LAME's `MPEG_mode` value for one channel.
const MODE_MONO: c_int = 3;

#[link(name = "mp3lame")]
extern "C" {
    fn lame_init() -> *mut LameFlags;
    fn lame_close(gfp: *mut LameFlags) -> c_int;
    fn lame_set_in_samplerate(gfp: *mut LameFlags, rate: c_int) -> c_int;
    fn lame_set_out_samplerate(gfp: *mut LameFlags, rate: c_int) -> c_int;
    fn lame_set_num_channels(gfp: *mut LameFlags, channels: c_int) -> c_int;
    fn lame_set_mode(gfp: *mut LameFlags, mode: c_int) -> c_int;
    fn lame_set_brate(gfp: *mut LameFlags, kbps: c_int) -> c_int;
    fn lame_set_quality(gfp: *mut LameFlags, quality: c_int) -> c_int;
    fn lame_set_bWriteVbrTag(gfp: *mut LameFlags, write: c_int) -> c_int;
    fn lame_init_params(gfp: *mut LameFlags) -> c_int;
    fn lame_encode_buffer_ieee_float(
        gfp: *mut LameFlags,
        left: *const c_float,
        right: *const c_float,
        samples: c_int,
        out: *mut c_uchar,
        out_size: c_int,
    ) -> c_int;
    fn lame_encode_flush(gfp: *mut LameFlags, out: *mut c_uchar, out_size: c_int) -> c_int;
}

/// Samples handed to LAME per call (bounds its output buffer).
const CALL: usize = 8192;
/// LAME's documented worst case for `CALL` samples: 1.25 × n + 7200 bytes.
const OUT_BYTES: usize = CALL * 5 / 4 + 7200;

/// Streams mono PCM into MP3 frames.
pub struct Mp3Encoder {
    lame: *mut LameFlags,
    out: Vec<u8>,
    finished: bool,
}

// SAFETY: the LAME context is owned by this value alone and used from one
// thread at a time (`&mut self`); LAME keeps no thread-local state.
unsafe impl Send for Mp3Encoder {}

impl std::fmt::Debug for Mp3Encoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mp3Encoder").finish_non_exhaustive()
    }
}

impl Mp3Encoder {
    /// A CBR encoder at `kbps` for mono audio at `rate` Hz (an MPEG rate:
    /// 8000 to 48000), coded at the same rate.
    pub fn new(rate: u32, kbps: u32) -> Result<Self, CodecError> {
        let lame_error = |what: &str| CodecError::Mp3(what.to_string());
        // SAFETY: plain constructor; null means out of memory.
        let lame = unsafe { lame_init() };
        if lame.is_null() {
            return Err(lame_error("lame_init failed"));
        }
        let enc = Self {
            lame,
            out: vec![0; OUT_BYTES],
            finished: false,
        };
        let rate = c_int::try_from(rate).map_err(|_| CodecError::SampleRate(rate))?;
        let kbps = c_int::try_from(kbps).map_err(|_| lame_error("bit rate out of range"))?;
        // SAFETY: `lame` is a live context from `lame_init`; setters only store values.
        let status = unsafe {
            lame_set_in_samplerate(lame, rate)
                | lame_set_out_samplerate(lame, rate)
                | lame_set_num_channels(lame, 1)
                | lame_set_mode(lame, MODE_MONO)
                | lame_set_brate(lame, kbps)
                | lame_set_quality(lame, 5)
                | lame_set_bWriteVbrTag(lame, 0)
        };
        if status != 0 {
            return Err(lame_error("a LAME setting was refused"));
        }
        // SAFETY: as above; checks the settings and allocates LAME's tables.
        if unsafe { lame_init_params(lame) } < 0 {
            return Err(CodecError::SampleRate(rate as u32));
        }
        Ok(enc)
    }

    /// Encodes `pcm` (−1..1); returns the MP3 bytes LAME has ready.
    pub fn push(&mut self, pcm: &[f32]) -> Result<Vec<u8>, CodecError> {
        if self.finished {
            return Err(CodecError::Mp3(
                "audio after the stream was finished".into(),
            ));
        }
        let mut bytes = Vec::new();
        for part in pcm.chunks(CALL) {
            // SAFETY: `part` holds `part.len()` ≤ CALL floats (read only; the
            // right channel is ignored in mono); `out` holds OUT_BYTES, LAME's
            // worst case for that many samples.
            let n = unsafe {
                lame_encode_buffer_ieee_float(
                    self.lame,
                    part.as_ptr(),
                    part.as_ptr(),
                    part.len() as c_int,
                    self.out.as_mut_ptr(),
                    OUT_BYTES as c_int,
                )
            };
            bytes.extend_from_slice(self.written(n)?);
        }
        Ok(bytes)
    }

    /// The last frames (LAME's look-ahead, padded); the encoder is done after.
    pub fn finish(&mut self) -> Result<Vec<u8>, CodecError> {
        if self.finished {
            return Ok(Vec::new());
        }
        self.finished = true;
        // SAFETY: `out` holds OUT_BYTES ≥ the 7200 bytes a flush can write.
        let n = unsafe { lame_encode_flush(self.lame, self.out.as_mut_ptr(), OUT_BYTES as c_int) };
        Ok(self.written(n)?.to_vec())
    }

    fn written(&self, n: c_int) -> Result<&[u8], CodecError> {
        usize::try_from(n)
            .ok()
            .and_then(|n| self.out.get(..n))
            .ok_or_else(|| CodecError::Mp3(format!("LAME returned {n}")))
    }
}

impl Drop for Mp3Encoder {
    fn drop(&mut self) {
        // SAFETY: `lame` came from `lame_init` and is closed exactly once.
        unsafe {
            lame_close(self.lame);
        }
    }
}
