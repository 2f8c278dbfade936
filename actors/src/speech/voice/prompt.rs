//! Loading a PersonaPlex voice prompt, as NVIDIA's `LMGen` takes it:
//! `load_voice_prompt` (audio: `sphn.read` + `sphn.resample` to 24 kHz, then
//! `normalize_audio` to −24 LUFS) or `load_voice_prompt_embeddings` (a
//! `torch.save` dict: `embeddings` `[N, 1, 1, dim]`, one LM input per
//! prompt frame, and `cache` `[1, 1 + 2·codebooks, max_delay + 3]`, the
//! LM's token ring after them). Shapes are checked against the model here,
//! so a voice file for another model is refused with the tensor named.
//!
//! One deliberate difference: a multi-channel WAV is averaged to mono
//! before anything else; the reference measures loudness over all channels
//! and then keeps only the first.

use super::loudness::{self, LoudnessError};
use super::resample::{self, ResampleError};
use std::borrow::Cow;
use std::path::{Path, PathBuf};
use voxlane_runtime::io::torch_pt::{TorchDType, TorchFile, TorchPtError};
use voxlane_runtime::io::wav::{parse_wav, WavError};
use voxlane_runtime::weights::{DType, WeightError, WeightFile};

/// Mimi's sample rate: prompt audio is brought to it.
pub const SAMPLE_RATE: u32 = 24_000;
/// Samples per Mimi frame (80 ms at 24 kHz).
pub const FRAME_SIZE: usize = 1920;
/// The loudness the reference normalises prompt audio to.
pub const PROMPT_LUFS: f64 = -24.0;
/// Name of the embeddings tensor in a voice file.
pub const EMBEDDINGS: &str = "embeddings";
/// Name of the cache tensor in a voice file.
pub const CACHE: &str = "cache";

/// Why a voice prompt could not be loaded; each variant names the culprit.
#[derive(Debug, thiserror::Error)]
pub enum VoicePromptError {
    /// The file could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// Neither WAV, a torch `.pt` zip nor safetensors.
    #[error("{}: not a voice prompt (expected a .wav, .pt or .safetensors file)", path.display())]
    UnknownFormat {
        /// The file.
        path: PathBuf,
    },
    /// A corrupt or unsupported WAV file.
    #[error(transparent)]
    Wav(#[from] WavError),
    /// A corrupt `.pt` file.
    #[error(transparent)]
    Torch(#[from] TorchPtError),
    /// A corrupt safetensors file.
    #[error(transparent)]
    Weights(#[from] WeightError),
    /// A tensor the voice file needs is absent.
    #[error("{}: voice file has no `{tensor}` tensor", path.display())]
    MissingTensor {
        /// The file.
        path: PathBuf,
        /// The tensor.
        tensor: &'static str,
    },
    /// A tensor's shape does not fit the model.
    #[error("{}: `{tensor}` has shape {found:?}, expected {expected}", path.display())]
    Shape {
        /// The file.
        path: PathBuf,
        /// The tensor.
        tensor: &'static str,
        /// What the model needs.
        expected: String,
        /// What the file holds.
        found: Vec<usize>,
    },
    /// A tensor's element type is not usable.
    #[error("{}: `{tensor}` has dtype {found}, expected {expected}", path.display())]
    Dtype {
        /// The file.
        path: PathBuf,
        /// The tensor.
        tensor: &'static str,
        /// What is accepted.
        expected: &'static str,
        /// What the file holds.
        found: String,
    },
    /// The audio has no samples.
    #[error("{}: the audio is empty", path.display())]
    EmptyAudio {
        /// The file.
        path: PathBuf,
    },
    /// The audio's rate cannot be resampled.
    #[error("{}: {source}", path.display())]
    Resample {
        /// The file.
        path: PathBuf,
        /// The rate problem.
        source: ResampleError,
    },
    /// The audio is too short or silent to normalise.
    #[error("{}: {source}", path.display())]
    Loudness {
        /// The file.
        path: PathBuf,
        /// What the meter found.
        source: LoudnessError,
    },
    /// The cache's ring width is not the model's `max_delay + 3`.
    #[error("voice cache is {found} steps wide, the model's delays need {expected}")]
    CacheWidth {
        /// `max_delay + 3`.
        expected: usize,
        /// The file's width.
        found: usize,
    },
}

/// A loaded voice prompt.
#[derive(Debug, Clone, PartialEq)]
pub enum VoicePrompt {
    /// 24 kHz mono audio at −24 LUFS, to be encoded by Mimi frame by frame.
    Audio(Vec<f32>),
    /// Saved LM inputs for each prompt frame and the token cache after them.
    Embeddings {
        /// `frames × dim` values, frame-major.
        embeddings: Vec<f32>,
        /// Prompt frames (LM steps).
        frames: usize,
        /// Model width.
        dim: usize,
        /// The token ring, `cache_shape` in C order.
        cache: Vec<i64>,
        /// `[1, 1 + 2·codebooks, max_delay + 3]`.
        cache_shape: [usize; 3],
    },
}

/// The width of `LMGen`'s token cache for a model whose largest delay is `max_delay`.
pub fn cache_width(max_delay: usize) -> usize {
    max_delay + 3
}

/// What the file's first bytes say it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Wav,
    Torch,
    Safetensors,
}

fn sniff(head: &[u8], path: &Path) -> Option<Format> {
    if head.len() >= 12 && &head[..4] == b"RIFF" && &head[8..12] == b"WAVE" {
        return Some(Format::Wav);
    }
    if head.starts_with(b"PK\x03\x04") || head.starts_with(b"PK\x05\x06") {
        return Some(Format::Torch);
    }
    if head.len() >= 9 && head[8] == b'{' {
        return Some(Format::Safetensors);
    }
    // Unrecognised content: let the extension pick the reader that names the damage.
    match path.extension()?.to_str()?.to_ascii_lowercase().as_str() {
        "wav" => Some(Format::Wav),
        "pt" | "pth" => Some(Format::Torch),
        "safetensors" => Some(Format::Safetensors),
        _ => None,
    }
}

impl VoicePrompt {
    /// Loads `path` (`.wav` of any rate and channel count, `.pt`, or
    /// `.safetensors`, recognised by content) for a model of width `dim`
    /// with `num_codebooks` Mimi codebooks per speaker (8 for PersonaPlex).
    pub fn load(
        path: impl AsRef<Path>,
        dim: usize,
        num_codebooks: usize,
    ) -> Result<Self, VoicePromptError> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|source| VoicePromptError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_bytes(&bytes, path, dim, num_codebooks)
    }

    /// [`Self::load`] of a file's bytes held in memory (`path` names it in
    /// errors, and its extension picks the reader when the content does not).
    pub fn from_bytes(
        bytes: &[u8],
        path: &Path,
        dim: usize,
        num_codebooks: usize,
    ) -> Result<Self, VoicePromptError> {
        let head = &bytes[..bytes.len().min(16)];
        match sniff(head, path) {
            Some(Format::Wav) => {
                let wav = parse_wav(bytes, path)?;
                let audio = prompt_audio(&wav.samples, wav.channels, wav.sample_rate, path)?;
                Ok(Self::Audio(audio))
            }
            Some(Format::Torch) => {
                let file = TorchFile::parse(bytes, path)?;
                let get = |name: &'static str| {
                    let t = file
                        .get(name)
                        .ok_or_else(|| VoicePromptError::MissingTensor {
                            path: path.to_path_buf(),
                            tensor: name,
                        })?;
                    Ok::<_, VoicePromptError>((t, t.dtype.name()))
                };
                let (e, e_dtype) = get(EMBEDDINGS)?;
                let (c, c_dtype) = get(CACHE)?;
                let embeddings = Tensor {
                    shape: &e.shape,
                    dtype: e_dtype,
                    values: e.to_f32(),
                };
                let cache = Tensor {
                    shape: &c.shape,
                    dtype: c_dtype,
                    values: integer(c.dtype).then(|| c.to_i64()).flatten(),
                };
                Self::from_tensors(path, embeddings, cache, dim, num_codebooks)
            }
            Some(Format::Safetensors) => {
                let file = WeightFile::from_bytes(bytes, path)?;
                let get = |name: &'static str| {
                    file.get(name)
                        .ok_or_else(|| VoicePromptError::MissingTensor {
                            path: path.to_path_buf(),
                            tensor: name,
                        })
                };
                let (e, c) = (get(EMBEDDINGS)?, get(CACHE)?);
                let float = matches!(e.dtype, DType::F32 | DType::F16 | DType::BF16);
                let int = matches!(c.dtype, DType::I64 | DType::I32);
                let embeddings = Tensor {
                    shape: e.shape,
                    dtype: e.dtype.name(),
                    values: float.then(|| e.to_f32()),
                };
                let cache = Tensor {
                    shape: c.shape,
                    dtype: c.dtype.name(),
                    values: int.then(|| c.to_i64()),
                };
                Self::from_tensors(path, embeddings, cache, dim, num_codebooks)
            }
            None => Err(VoicePromptError::UnknownFormat {
                path: path.to_path_buf(),
            }),
        }
    }

    /// Checks both tensors against the model, then takes their values.
    fn from_tensors(
        path: &Path,
        embeddings: Tensor<'_, f32>,
        cache: Tensor<'_, i64>,
        dim: usize,
        num_codebooks: usize,
    ) -> Result<Self, VoicePromptError> {
        let shape_err = |tensor, expected: String, found: &[usize]| VoicePromptError::Shape {
            path: path.to_path_buf(),
            tensor,
            expected,
            found: found.to_vec(),
        };
        let frames = match *embeddings.shape {
            [n, 1, 1, d] if n >= 1 && d == dim => n,
            _ => {
                return Err(shape_err(
                    EMBEDDINGS,
                    format!("[frames >= 1, 1, 1, {dim}]"),
                    embeddings.shape,
                ))
            }
        };
        let streams = 1 + 2 * num_codebooks;
        let cache_shape = match *cache.shape {
            [1, s, w] if s == streams && w >= 1 => [1, s, w],
            _ => {
                return Err(shape_err(
                    CACHE,
                    format!("[1, {streams}, max_delay + 3]"),
                    cache.shape,
                ))
            }
        };
        let dtype_err = |tensor, expected, found: &str| VoicePromptError::Dtype {
            path: path.to_path_buf(),
            tensor,
            expected,
            found: found.to_string(),
        };
        let embeddings_values = embeddings.values.ok_or_else(|| {
            dtype_err(
                EMBEDDINGS,
                "a float type (f32, f16, bf16)",
                embeddings.dtype,
            )
        })?;
        let cache_values = cache
            .values
            .ok_or_else(|| dtype_err(CACHE, "an integer type (i64, i32)", cache.dtype))?;
        Ok(Self::Embeddings {
            embeddings: embeddings_values,
            frames,
            dim,
            cache: cache_values,
            cache_shape,
        })
    }

    /// LM steps the prompt takes: one per (padded) 1920-sample frame, or per saved embedding.
    pub fn frames(&self) -> usize {
        match self {
            Self::Audio(a) => frame_count(a.len(), FRAME_SIZE),
            Self::Embeddings { frames, .. } => *frames,
        }
    }

    /// Checks a saved cache against the model's largest delay (audio prompts pass).
    pub fn check_cache_width(&self, max_delay: usize) -> Result<(), VoicePromptError> {
        match self {
            Self::Embeddings { cache_shape, .. } if cache_shape[2] != cache_width(max_delay) => {
                Err(VoicePromptError::CacheWidth {
                    expected: cache_width(max_delay),
                    found: cache_shape[2],
                })
            }
            _ => Ok(()),
        }
    }
}

/// A tensor read from either format: its values when the dtype is usable.
struct Tensor<'a, T> {
    shape: &'a [usize],
    dtype: &'static str,
    values: Option<Vec<T>>,
}

fn integer(dtype: TorchDType) -> bool {
    matches!(dtype, TorchDType::I64 | TorchDType::I32)
}

/// Prompt audio as the reference prepares it: interleaved `samples` of
/// `channels` at `rate` Hz averaged to mono, resampled to 24 kHz and
/// normalised to −24 LUFS (`path` names the source in errors).
pub fn prompt_audio(
    samples: &[f32],
    channels: u16,
    rate: u32,
    path: &Path,
) -> Result<Vec<f32>, VoicePromptError> {
    let channels = usize::from(channels.max(1));
    let mono: Vec<f32> = if channels == 1 {
        samples.to_vec()
    } else {
        samples
            .chunks_exact(channels)
            .map(|c| (c.iter().map(|&x| f64::from(x)).sum::<f64>() / channels as f64) as f32)
            .collect()
    };
    if mono.is_empty() {
        return Err(VoicePromptError::EmptyAudio {
            path: path.to_path_buf(),
        });
    }
    let audio = resample::resample(&mono, rate, SAMPLE_RATE).map_err(|source| {
        VoicePromptError::Resample {
            path: path.to_path_buf(),
            source,
        }
    })?;
    loudness::normalize(&audio, SAMPLE_RATE, PROMPT_LUFS)
        .map(|n| n.audio)
        .map_err(|source| VoicePromptError::Loudness {
            path: path.to_path_buf(),
            source,
        })
}

/// Frames `_iterate_audio(pad=True)` yields for `len` samples: `ceil(len / frame_size)`.
pub fn frame_count(len: usize, frame_size: usize) -> usize {
    if frame_size == 0 {
        0
    } else {
        len.div_ceil(frame_size)
    }
}

/// `_iterate_audio(audio, frame_size, pad=True)`: whole frames borrowed, a
/// last partial frame zero-padded; an exact multiple gets no extra frame.
/// A zero `frame_size` yields nothing.
pub fn frames(audio: &[f32], frame_size: usize) -> impl Iterator<Item = Cow<'_, [f32]>> {
    let chunks = audio.chunks(frame_size.max(1));
    chunks
        .take(frame_count(audio.len(), frame_size))
        .map(move |c| {
            if c.len() == frame_size {
                Cow::Borrowed(c)
            } else {
                let mut v = c.to_vec();
                v.resize(frame_size, 0.0);
                Cow::Owned(v)
            }
        })
}

/// `create_sinewave(duration, sample_rate)`: 440 Hz at amplitude 0.5 over
/// `int(sample_rate · duration)` samples, `np.linspace(0, duration, n,
/// endpoint=False)` in f64, the sine rounded to f32 and then halved.
pub fn create_sinewave(duration: f64, sample_rate: u32) -> Vec<f32> {
    // `int()` truncates; NaN and negatives give no samples.
    let n = (f64::from(sample_rate) * duration) as usize;
    let step = duration / n as f64;
    let w = 2.0 * std::f64::consts::PI * 440.0;
    (0..n)
        .map(|i| 0.5 * ((w * (i as f64 * step + 0.0)).sin() as f32))
        .collect()
}

/// The reference's one-frame sine (`LMGen._sine_frame`): 1920 samples at 24 kHz.
pub fn sine_frame() -> Vec<f32> {
    create_sinewave(FRAME_SIZE as f64 / f64::from(SAMPLE_RATE), SAMPLE_RATE)
}
