//! PersonaPlex voice prompts: the agent's voice is given either as audio
//! (any rate, mixed to mono, resampled to 24 kHz and normalised to −24 LUFS
//! as NVIDIA's reference does) or as saved embeddings and LM cache (NVIDIA's
//! `.pt` voice files, or the same tensors as safetensors), which replay the
//! prompt without running Mimi.
//!
//! [`loudness`] is BS.1770-4 as `pyloudnorm` computes it, [`resample`] the
//! band-limited rate change, [`prompt`] the loading, shape checks, the
//! reference's 1920-sample framing and its 440 Hz sine frame.

pub mod loudness;
pub mod prompt;
pub mod resample;

pub use loudness::{LoudnessError, Meter};
pub use prompt::{VoicePrompt, VoicePromptError};

#[cfg(test)]
mod tests;
