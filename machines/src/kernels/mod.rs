//! The kernel family: the shared kernel machine (this module's own files),
//! and one submodule per compute kernel that specialises it.
//!
//! Every compute kernel (`kernel_matmul`, `kernel_f32_matvec`,
//! `kernel_attention`, `conv1d`, `conv_transpose1d`, `lstm`) is this one
//! statig machine, specialised by a [`KernelContract`] that names its
//! prepare routes, its shape guard and its run action. Each kernel's
//! contract is a submodule named after its data-plane kernel in
//! `voxlane_actors::kernels` ([`matmul`], [`f32_matvec`], [`attention`],
//! [`conv1d`], [`conv_transpose1d`], [`lstm`]); the machine keeps its name
//! (`kernel_matmul`, ...) in the diagrams and the CLI.
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
// statig generates the `State`/`Superstate` enums undocumented; each variant
// is a state handler of `machine`, documented there.
#[allow(missing_docs)]
pub mod machine;
pub mod table;

// One kernel contract each.
pub mod attention;
pub mod conv1d;
pub mod conv_transpose1d;
pub mod f32_matvec;
pub mod lstm;
pub mod matmul;

pub use contract::KernelContract;
pub use errors::KernelMachineError;
pub use events::{Bind, Execute, KernelEvent, KernelReply, KernelSink};
pub use machine::{Kernel, KernelMachine};
