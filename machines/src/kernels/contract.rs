//! What a kernel supplies to the shared kernel machine.

use super::errors::KernelMachineError;
use crate::core::MachineSpec;
use voxlane_actors::kernels::KernelError;
use voxlane_runtime::SubPool;

/// A kernel's types, its pure guards and its actions.
pub trait KernelContract: Sized + 'static {
    /// The kernel's machine spec (name, table).
    const SPEC: MachineSpec;
    /// Prepare routes as `(guard, action)` names, in table order.
    const PREPARE_ROUTES: &'static [(&'static str, &'static str)];

    /// The `prepare` payload: configuration and weights.
    type Params;
    /// The prepared (validated, packed) kernel.
    type Prepared;
    /// The `bind` payload: the largest request the workspace must serve.
    type Limits: Copy + std::fmt::Debug;
    /// Scratch sized at bind time, so `execute` allocates nothing.
    type Workspace;
    /// The `execute` payload: inputs (per-request data travels in the event).
    type Request<'a>;
    /// Where `execute` writes (carried in the sink).
    type Output<'a>;

    /// Pure guard: the prepare route `params` takes, or `None` if invalid.
    fn prepare_route(params: &Self::Params) -> Option<usize>;
    /// Why `params` are invalid.
    fn params_error(params: &Self::Params) -> KernelMachineError;
    /// Action: pack along prepare route `route`.
    fn prepare(route: usize, params: &Self::Params) -> Result<Self::Prepared, KernelMachineError>;

    /// Pure guard: `Ok` if `limits` can be bound for `kernel`.
    fn check_limits(
        kernel: &Self::Prepared,
        limits: &Self::Limits,
    ) -> Result<(), KernelMachineError>;
    /// Action: size the workspace for `limits`.
    fn bind(
        kernel: &Self::Prepared,
        limits: &Self::Limits,
    ) -> Result<Self::Workspace, KernelMachineError>;

    /// Pure guard: `Ok` if the request fits the kernel and the bound limits.
    fn check_request(
        kernel: &Self::Prepared,
        limits: &Self::Limits,
        request: &Self::Request<'_>,
        output: &Self::Output<'_>,
    ) -> Result<(), KernelMachineError>;
    /// Pure guard: whether the request has enough independent work to fork.
    fn worth_splitting(kernel: &Self::Prepared, request: &Self::Request<'_>) -> bool;
    /// Action: compute, on `lanes` (a one-lane share on the serial route).
    fn run(
        kernel: &Self::Prepared,
        workspace: &mut Self::Workspace,
        request: &Self::Request<'_>,
        output: &mut Self::Output<'_>,
        lanes: &SubPool<'_>,
    ) -> Result<(), KernelError>;
}
