//! `logits_sampler`: one stream's token choice as a machine.
//!
//! `configure { vocab, params, seed }` is checked by `guard_params_invalid`
//! (temperature negative or not finite, top-k 0 or above the vocabulary
//! when sampling, top-p outside (0, 1]: typed errors) before the sampler's
//! scratch is sized; then each `sample { logits }` is rejected by
//! `guard_logits_invalid` (wrong length, NaN) or routed by
//! `guard_route_greedy` (temperature 0: argmax) / `guard_route_sampled`
//! (temperature, top-k, top-p, drawn from the session's seeded generator —
//! xoshiro256**, see `voxlane_actors::speech::sampler`) into `sampling`,
//! whose `sample_done` outcome replies the token. A draw allocates nothing.

pub mod actions;
pub mod errors;
pub mod events;
pub mod guards;
// statig generates the `State`/`Superstate` enums undocumented; each variant
// is a state handler of `machine`, documented there.
#[allow(missing_docs)]
pub mod machine;
pub mod table;

pub use errors::SamplerMachineError;
pub use events::{Configure, Event, Reply, Sink};
pub use machine::LogitsSampler;
pub use table::SPEC;
