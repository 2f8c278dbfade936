//! RIFF WAV: 16-bit PCM (and 32-bit float) mono/multichannel reading, 16-bit writing.

use std::path::{Path, PathBuf};

/// Errors reading or writing WAV files.
#[derive(Debug, thiserror::Error)]
pub enum WavError {
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// Not a WAV file voxlane can read.
    #[error("{path}: {detail}")]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
}

/// Decoded audio: interleaved samples in [-1, 1].
#[derive(Debug, Clone, PartialEq)]
pub struct Wav {
    /// Samples per second.
    pub sample_rate: u32,
    /// Channels (interleaved in `samples`).
    pub channels: u16,
    /// The samples.
    pub samples: Vec<f32>,
}

impl Wav {
    /// The first channel only.
    pub fn mono(&self) -> Vec<f32> {
        self.samples
            .iter()
            .step_by(self.channels.max(1) as usize)
            .copied()
            .collect()
    }
}

/// 16-bit PCM encoding of `samples` (clamped to [-1, 1]).
pub fn encode_pcm16(samples: &[f32]) -> Vec<u8> {
    samples
        .iter()
        .flat_map(|s| ((s.clamp(-1.0, 1.0) * 32767.0).round() as i16).to_le_bytes())
        .collect()
}

/// A WAV header for `data_len` bytes of 16-bit mono PCM (or `u32::MAX` when streaming).
pub fn header_pcm16(sample_rate: u32, data_len: u32) -> [u8; 44] {
    let mut h = [0u8; 44];
    let byte_rate = sample_rate * 2;
    h[..4].copy_from_slice(b"RIFF");
    h[4..8].copy_from_slice(&data_len.saturating_add(36).to_le_bytes());
    h[8..16].copy_from_slice(b"WAVEfmt ");
    h[16..20].copy_from_slice(&16u32.to_le_bytes());
    h[20..22].copy_from_slice(&1u16.to_le_bytes());
    h[22..24].copy_from_slice(&1u16.to_le_bytes());
    h[24..28].copy_from_slice(&sample_rate.to_le_bytes());
    h[28..32].copy_from_slice(&byte_rate.to_le_bytes());
    h[32..34].copy_from_slice(&2u16.to_le_bytes());
    h[34..36].copy_from_slice(&16u16.to_le_bytes());
    h[36..40].copy_from_slice(b"data");
    h[40..44].copy_from_slice(&data_len.to_le_bytes());
    h
}

/// Write mono `samples` as 16-bit PCM WAV, atomically.
pub fn write_wav(
    path: impl AsRef<Path>,
    sample_rate: u32,
    samples: &[f32],
) -> Result<(), WavError> {
    let path = path.as_ref();
    let pcm = encode_pcm16(samples);
    let mut bytes = header_pcm16(sample_rate, pcm.len() as u32).to_vec();
    bytes.extend_from_slice(&pcm);
    super::atomic::write_atomic(path, &bytes).map_err(|source| WavError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// Parse WAV bytes (`path` names it in errors).
pub fn parse_wav(bytes: &[u8], path: &Path) -> Result<Wav, WavError> {
    let bad = |detail: &str| WavError::Format {
        path: path.to_path_buf(),
        detail: detail.to_string(),
    };
    if bytes.len() < 12 || &bytes[..4] != b"RIFF" || &bytes[8..12] != b"WAVE" {
        return Err(bad("not a RIFF/WAVE file"));
    }
    let mut pos = 12;
    let mut fmt: Option<(u16, u16, u32, u16)> = None;
    while pos + 8 <= bytes.len() {
        let id = &bytes[pos..pos + 4];
        let len = u32::from_le_bytes([
            bytes[pos + 4],
            bytes[pos + 5],
            bytes[pos + 6],
            bytes[pos + 7],
        ]) as usize;
        let body = &bytes[pos + 8..];
        if id == b"fmt " {
            if body.len() < 16 {
                return Err(bad("truncated fmt chunk"));
            }
            let u16at = |i: usize| u16::from_le_bytes([body[i], body[i + 1]]);
            let rate = u32::from_le_bytes([body[4], body[5], body[6], body[7]]);
            fmt = Some((u16at(0), u16at(2), rate, u16at(14)));
        } else if id == b"data" {
            let (format, channels, sample_rate, bits) =
                fmt.ok_or_else(|| bad("data chunk before fmt chunk"))?;
            // A streamed header may carry a placeholder length: take what is there.
            let data = &body[..len.min(body.len())];
            let samples = match (format, bits) {
                (1, 16) => data
                    .chunks_exact(2)
                    .map(|c| i16::from_le_bytes([c[0], c[1]]) as f32 / 32768.0)
                    .collect(),
                (3, 32) => data
                    .chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect(),
                (0xFFFE, 16) => data
                    .chunks_exact(2)
                    .map(|c| i16::from_le_bytes([c[0], c[1]]) as f32 / 32768.0)
                    .collect(),
                _ => return Err(bad("only 16-bit PCM and 32-bit float WAV are supported")),
            };
            if channels == 0 {
                return Err(bad("zero channels"));
            }
            return Ok(Wav {
                sample_rate,
                channels,
                samples,
            });
        }
        pos += 8 + len + (len & 1);
    }
    Err(bad("no data chunk"))
}

/// Read a WAV file.
pub fn read_wav(path: impl AsRef<Path>) -> Result<Wav, WavError> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|source| WavError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse_wav(&bytes, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_then_read() {
        let p = std::env::temp_dir().join(format!("voxlane-wav-{}.wav", std::process::id()));
        let s: Vec<f32> = (0..480).map(|i| (i as f32 * 0.05).sin() * 0.5).collect();
        write_wav(&p, 24_000, &s).unwrap();
        let w = read_wav(&p).unwrap();
        std::fs::remove_file(&p).unwrap();
        assert_eq!(
            (w.sample_rate, w.channels, w.samples.len()),
            (24_000, 1, 480)
        );
        assert!(w.samples.iter().zip(&s).all(|(a, b)| (a - b).abs() < 1e-4));
    }

    #[test]
    fn rejects_non_wav() {
        let err = parse_wav(b"\x93NUMPY\x01\x00hello", Path::new("x.npy")).unwrap_err();
        assert!(err.to_string().contains("not a RIFF/WAVE file"));
    }
}
