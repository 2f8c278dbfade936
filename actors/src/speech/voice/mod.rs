//! PersonaPlex voice prompts: the agent's voice is given either as audio
//! (any rate, mixed to mono, resampled to 24 kHz and normalised to −24 LUFS
//! as NVIDIA's reference does) or as saved embeddings and LM cache (NVIDIA's
//! `.pt` voice files, or the same tensors as safetensors), which replay the
//! prompt without running Mimi.
//!
//! [`loudness`] is BS.1770-4 as `pyloudnorm` computes it.

pub mod loudness;

pub use loudness::{LoudnessError, Meter};
