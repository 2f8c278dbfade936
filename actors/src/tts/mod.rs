//! Text-to-speech models.

pub mod kokoro;
pub mod frontend;
pub mod voices;
