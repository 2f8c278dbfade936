//! Text-to-speech models.

pub mod frontend;
pub mod kokoro;
pub mod voices;
