//! `mimi_init`: setting up the Mimi codec, as a machine.
//!
//! `initialize` carries the config, the weights (a safetensors path or
//! in-memory [`voxlane_actors::speech::mimi::MimiWeights`]) and the options;
//! `guard_config_invalid` and `guard_tensors_invalid` reject a bad config or
//! a missing / unknown / misshapen / non-float tensor by name before anything
//! is converted, and `effect_bind_model` plans the
//! [`voxlane_actors::speech::mimi::BindContract`] and binds the model, which
//! persists in the context. `bind_session { side, max_frames, capacity_bytes }`
//! is checked by `guard_capacity_fits` against the contract's workspace rule
//! for that side before anything is allocated; `effect_open_session` then
//! allocates the session, which comes back in the sink for a
//! `mimi_encode_session` / `mimi_decode_session` machine to open.

pub mod actions;
pub mod errors;
pub mod events;
pub mod guards;
// statig generates the `State`/`Superstate` enums undocumented; each variant
// is a state handler of `machine`, documented there.
#[allow(missing_docs)]
pub mod machine;
pub mod table;

pub use errors::MimiInitError;
pub use events::{
    BindSession, FollowUp, InitReply, InitSink, Initialize, MimiInitEvent, RouteCounts,
    WeightsSource,
};
pub use machine::MimiInit;
pub use table::SPEC;
