//! `conv1d` plugged into the shared kernel machine.

use super::actions::{
    effect_build_streaming, effect_convolve, effect_pack_bf16, effect_pack_depthwise,
    effect_pack_direct, effect_pack_gemm, effect_pack_phases, effect_size_workspace, Conv1dScratch,
    PackedConv1d,
};
use super::events::{Conv1dKernelParams, Conv1dLimits, Conv1dRequest};
use super::guards::{self, params_problem, route};
use crate::kernels::{Kernel, KernelContract, KernelMachineError};
use voxlane_actors::kernels::KernelError;
use voxlane_runtime::SubPool;

/// The conv1d kernel's contract.
pub struct Conv1dContract;

/// A ready-to-drive `conv1d` machine.
pub type Conv1dKernel = Kernel<Conv1dContract>;

impl KernelContract for Conv1dContract {
    const SPEC: crate::core::MachineSpec = super::table::SPEC;
    const PREPARE_ROUTES: &'static [(&'static str, &'static str)] = &[
        ("guard_streaming_causal", "effect_build_streaming"),
        ("guard_depthwise", "effect_pack_depthwise"),
        ("guard_dense_direct", "effect_pack_direct"),
        ("guard_dense_phases", "effect_pack_phases"),
        ("guard_dense_gemm", "effect_pack_gemm"),
        ("guard_dense_bf16", "effect_pack_bf16"),
    ];
    type Params = Conv1dKernelParams;
    type Prepared = PackedConv1d;
    type Limits = Conv1dLimits;
    type Workspace = Conv1dScratch;
    type Request<'a> = Conv1dRequest<'a>;
    type Output<'a> = &'a mut [f32];

    fn prepare_route(p: &Conv1dKernelParams) -> Option<usize> {
        guards::prepare_route(p)
    }

    fn params_error(p: &Conv1dKernelParams) -> KernelMachineError {
        KernelMachineError::Params(params_problem(p).unwrap_or_default())
    }

    fn prepare(r: usize, p: &Conv1dKernelParams) -> Result<PackedConv1d, KernelMachineError> {
        match r {
            route::STREAMING => effect_build_streaming(p),
            route::DEPTHWISE => effect_pack_depthwise(p),
            route::DENSE_DIRECT => effect_pack_direct(p),
            route::DENSE_PHASES => effect_pack_phases(p),
            route::DENSE_GEMM => effect_pack_gemm(p),
            route::DENSE_BF16 => effect_pack_bf16(p),
            other => Err(KernelMachineError::Params(format!(
                "no prepare route {other}"
            ))),
        }
    }

    fn check_limits(k: &PackedConv1d, l: &Conv1dLimits) -> Result<(), KernelMachineError> {
        guards::check_limits(k, l)
    }

    fn bind(k: &PackedConv1d, l: &Conv1dLimits) -> Result<Conv1dScratch, KernelMachineError> {
        effect_size_workspace(k, l)
    }

    fn check_request(
        k: &PackedConv1d,
        l: &Conv1dLimits,
        r: &Conv1dRequest<'_>,
        out: &&mut [f32],
    ) -> Result<(), KernelMachineError> {
        guards::check_request(k, l, r, out)
    }

    fn worth_splitting(k: &PackedConv1d, r: &Conv1dRequest<'_>) -> bool {
        guards::worth_splitting(k, r)
    }

    fn run(
        k: &PackedConv1d,
        ws: &mut Conv1dScratch,
        r: &Conv1dRequest<'_>,
        out: &mut &mut [f32],
        lanes: &SubPool<'_>,
    ) -> Result<(), KernelError> {
        effect_convolve(k, ws, r, out, lanes)
    }
}
