//! Kyutai Mimi neural audio codec (24 kHz ⇄ 12.5 Hz × K codes), token-exact
//! with PyTorch `moshi` 0.2.13: batch and streaming encode/decode.
//!
//! Layout: [`config`] (JSON + official defaults), [`weights`] (expected
//! tensor list, validated loading), [`conv`] (causal convs with moshi
//! streaming semantics), [`seanet`], [`transformer`], [`resample`],
//! [`quantizer`], and [`model`] (the pipeline and streaming sessions).

//!
//! Use: `MimiConfig::from_file` (or `MimiConfig::default()` for the official
//! checkpoint), `MimiModel::load(cfg, path)` → `Arc<MimiModel>`; batch
//! `model.encode(&pool, &pcm) -> Codes` / `model.decode(&pool, &codes)`;
//! streaming `MimiEncoder::new(model)` then `step(&pool, &pcm[..1920], &mut
//! codes[..K])`, `MimiDecoder::step(&pool, &codes, &mut pcm[..1920])`,
//! `reset()`. A kernel machine for Mimi needs exactly these: prepare = config +
//! load (typed [`MimiError`]s), bind = session construction (all buffers),
//! execute = one `step` (allocation-free, bit-identical for every budget).

pub mod config;
pub mod contract;
pub mod conv;
pub mod error;
pub mod model;
pub mod quantizer;
pub mod resample;
pub mod seanet;
pub mod transformer;
pub mod weights;

pub use config::MimiConfig;
pub use contract::{BindContract, MimiOptions, TensorRoute, WorkspaceRule};

pub(crate) use super::next_id;
pub use error::MimiError;
pub use model::{Codes, DecoderState, EncoderState, MimiDecoder, MimiEncoder, MimiModel};
pub use weights::MimiWeights;
