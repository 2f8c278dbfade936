//! `lane_dispatch`: the lane pool's own dispatcher, as a machine.
//!
//! It owns a [`voxlane_runtime::LanePool`] and turns `dispatch` requests into
//! fork/join runs. The serial-vs-parallel choice is a guard plus an edge (so
//! it shows in the diagram), lane panics come back as a `lanes_error` event,
//! and every invalid request ends in a typed rejection, never a panic.

pub mod actions;
pub mod errors;
pub mod events;
pub mod guards;
// statig generates the `State`/`Superstate` enums undocumented; each variant
// is a state handler of `machine`, documented there.
#[allow(missing_docs)]
pub mod machine;
pub mod table;

pub use errors::LaneDispatchError;
pub use events::{Configure, Dispatch, Event, FollowUp, Reply, Route, Sink};
pub use machine::{LaneDispatcher, OwnedEvent, Request};
pub use table::SPEC;
