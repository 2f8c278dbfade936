//! The lane pool and the runtime's readers: the pool family's machine
//! (`lane_dispatch`, `machines/src/pool/`) obeys its table, the thread
//! budget is strict and results do not depend on it, and the `.npy`, WAV
//! and safetensors readers read the shared fixtures.
//!
//! The OS-thread count test is its own target (`lane_thread_count.rs`): it
//! counts every thread of the process, so no other test may run beside it.

mod io_formats;
mod lane_budget;
mod machine_lane_dispatch;
mod weights;
