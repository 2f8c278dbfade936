//! Text-to-speech models.

pub mod kokoro;
