//! Kyutai's Moshi speech-text language model, token-exact with PyTorch
//! `moshi` 0.2.13: per 80 ms frame it reads the other speaker's Mimi codes
//! and predicts one text token (temporal transformer) and its own audio
//! codes (depformer).
//!
//! Layout: [`config`] (JSON + official 7B defaults), [`weights`] (expected
//! tensors, checked loading converted tensor by tensor, random weights for
//! benchmarks), [`embedding`], [`transformer`] (the temporal and depth
//! stacks), [`model`] (`MoshiLm`: `forward_text`, `depformer_step`),
//! [`lmgen`] (the delay ring of `LMGen`), [`persona`] (PersonaPlex's
//! `LMGen`: provided tokens, one call late) and [`session`] (all of it with a
//! sampler per stream: one call per frame).

pub mod config;
pub mod embedding;
pub mod error;
pub mod lmgen;
pub mod model;
pub mod persona;
pub mod session;
pub mod transformer;
pub mod weights;

pub use config::MoshiConfig;
pub use error::MoshiError;
pub use lmgen::LmGen;
pub use model::{CacheUse, LmState, LmWeights, MoshiLm};
pub use persona::{
    prefill, wrap_with_system_tags, PersonaGen, PersonaSession, PromptFrame, PREFILL_CHUNK,
    SILENCE_FRAMES, SILENCE_TOKENS, SINE_TOKENS,
};
pub use session::{MoshiSession, StreamSampling};

#[cfg(test)]
mod tests;

#[cfg(test)]
mod persona_tests;
