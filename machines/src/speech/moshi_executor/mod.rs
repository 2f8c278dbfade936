//! `moshi_executor`: the Moshi LM (EMEL's "moshi predictor executor") as a machine.
//!
//! `initialize { config, weights, route, pool }` is rejected by
//! `guard_config_invalid` / `guard_tensors_invalid` (a missing, unknown,
//! misshapen or non-float tensor, named, read from the file's header before
//! anything is converted) or binds the model tensor by tensor
//! (`effect_bind_model`). `bind_session { sampling, seed, capacity_bytes }`
//! is checked by `guard_sampling_invalid` and `guard_capacity_exceeded`
//! against the session's planned KV rings and buffers before anything is
//! allocated. Then each `step { other_codes, forced }` is rejected by
//! `guard_codes_invalid` or runs one frame, every choice an edge:
//! `guard_route_serial` / `guard_route_lanes` (the frame on the caller alone,
//! or forked over the pool's lanes: the same bits), the temporal transformer
//! → `temporal_done` → `guard_text_forced` / `guard_text_sampled` (the text
//! token teacher-forced or drawn by the text `logits_sampler`) → depformer
//! step 0 → per codebook `depformer_done` → `guard_audio_forced` /
//! `guard_audio_sampled` → the next depformer step or `step_done` →
//! `guard_frame_ready` (a frame `max_delay` calls back, undelayed) /
//! `guard_frame_pending` (the first calls). A frame allocates nothing.

pub mod actions;
pub mod errors;
pub mod events;
pub mod guards;
// statig generates the `State`/`Superstate` enums undocumented; each variant
// is a state handler of `machine`, documented there.
#[allow(missing_docs)]
pub mod machine;
pub mod table;

pub use errors::MoshiExecutorError;
pub use events::{
    BindSession, Event, FrameTokens, Initialize, PersonaSnapshot, Reply, Sink, Step, WeightsSource,
};
pub use machine::MoshiExecutor;
pub use table::SPEC;
