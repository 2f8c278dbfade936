//! The shared kernel machine: every compute kernel (`kernel_matmul`,
//! `kernel_f32_matvec`, `kernel_attention`, `conv1d`, `conv_transpose1d`,
//! `lstm`) is this one statig machine, specialised by a [`KernelContract`]
//! that names its prepare routes, its shape guard and its run action.
//!
//! Lifecycle: `uninitialized --prepare--> prepared --bind--> ready`;
//! `execute` in `ready` is rejected by `guard_shape_invalid` or
//! `guard_lanes_exceed_budget`, else routed serial or across lanes into
//! `running`, and the `execute_done` / `execute_error` outcome event brings
//! it back to `ready`. Bad params or limits lead to `errored` (leave with
//! `reset`); `capture_diagnostics` works everywhere; anything else is
//! rejected with a reason.

pub mod actions;
pub mod contract;
pub mod errors;
pub mod events;
pub mod guards;
pub mod machine;
pub mod table;

pub use contract::KernelContract;
pub use errors::KernelMachineError;
pub use events::{Bind, Execute, KernelEvent, KernelReply, KernelSink};
pub use machine::{Kernel, KernelMachine};
