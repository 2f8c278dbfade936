//! The speech family: Kyutai's Mimi codec and the Moshi speech-text
//! language model as machines.
//!
//! - [`mimi_init`] (`mimi_init`): sets the codec up (config and tensor
//!   checks, the bind contract) and opens sessions within a capacity;
//! - [`mimi_session`]: the shared streaming session machine, specialised by
//!   [`mimi_session::encode`] (`mimi_encode_session`: PCM frames in, codes
//!   out) and [`mimi_session::decode`] (`mimi_decode_session`: codes in,
//!   PCM out);
//! - [`moshi_executor`] (`moshi_executor`): the Moshi LM, one 80 ms frame
//!   per `step` (temporal transformer, text token, depformer per codebook);
//! - [`logits_sampler`] (`logits_sampler`): one stream's token choice
//!   (greedy, temperature, top-k, top-p from a seeded generator), held by
//!   the executor per stream;
//! - [`wavefront`] (`speech_wavefront`): one conversation's frames
//!   pipelined through Mimi encode, the LM and Mimi decode;
//! - [`converse`]: the public conversation API over them (models loaded
//!   once, a persona's prompt phase, frames in and out).

pub mod converse;
pub mod logits_sampler;
pub mod mimi_init;
pub mod mimi_session;
pub mod moshi_executor;
pub mod wavefront;
