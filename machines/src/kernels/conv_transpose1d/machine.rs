//! `conv_transpose1d` plugged into the shared kernel machine.

use super::actions::{
    effect_build_streaming, effect_convolve_transposed, effect_pack_col2im, effect_pack_polyphase,
    effect_pack_polyphase_bf16, effect_pack_scatter, effect_size_workspace, ConvTranspose1dScratch,
    PackedConvTranspose1d,
};
use super::events::{ConvTranspose1dKernelParams, ConvTranspose1dLimits, ConvTranspose1dRequest};
use super::guards::{self, params_problem, route};
use crate::kernels::{Kernel, KernelContract, KernelMachineError};
use voxlane_actors::kernels::KernelError;
use voxlane_runtime::SubPool;

/// The transposed conv1d kernel's contract.
pub struct ConvTranspose1dContract;

/// A ready-to-drive `conv_transpose1d` machine.
pub type ConvTranspose1dKernel = Kernel<ConvTranspose1dContract>;

impl KernelContract for ConvTranspose1dContract {
    const SPEC: crate::core::MachineSpec = super::table::SPEC;
    const PREPARE_ROUTES: &'static [(&'static str, &'static str)] = &[
        ("guard_streaming_causal", "effect_build_streaming"),
        ("guard_polyphase", "effect_pack_polyphase"),
        ("guard_gemm_col2im", "effect_pack_col2im"),
        ("guard_depthwise_scatter", "effect_pack_scatter"),
        ("guard_polyphase_bf16", "effect_pack_polyphase_bf16"),
    ];
    type Params = ConvTranspose1dKernelParams;
    type Prepared = PackedConvTranspose1d;
    type Limits = ConvTranspose1dLimits;
    type Workspace = ConvTranspose1dScratch;
    type Request<'a> = ConvTranspose1dRequest<'a>;
    type Output<'a> = &'a mut [f32];

    fn prepare_route(p: &ConvTranspose1dKernelParams) -> Option<usize> {
        guards::prepare_route(p)
    }

    fn params_error(p: &ConvTranspose1dKernelParams) -> KernelMachineError {
        KernelMachineError::Params(params_problem(p).unwrap_or_default())
    }

    fn prepare(
        r: usize,
        p: &ConvTranspose1dKernelParams,
    ) -> Result<PackedConvTranspose1d, KernelMachineError> {
        match r {
            route::STREAMING => effect_build_streaming(p),
            route::POLYPHASE => effect_pack_polyphase(p),
            route::COL2IM => effect_pack_col2im(p),
            route::SCATTER => effect_pack_scatter(p),
            route::POLYPHASE_BF16 => effect_pack_polyphase_bf16(p),
            other => Err(KernelMachineError::Params(format!(
                "no prepare route {other}"
            ))),
        }
    }

    fn check_limits(
        k: &PackedConvTranspose1d,
        l: &ConvTranspose1dLimits,
    ) -> Result<(), KernelMachineError> {
        guards::check_limits(k, l)
    }

    fn bind(
        k: &PackedConvTranspose1d,
        l: &ConvTranspose1dLimits,
    ) -> Result<ConvTranspose1dScratch, KernelMachineError> {
        effect_size_workspace(k, l)
    }

    fn check_request(
        k: &PackedConvTranspose1d,
        l: &ConvTranspose1dLimits,
        r: &ConvTranspose1dRequest<'_>,
        out: &&mut [f32],
    ) -> Result<(), KernelMachineError> {
        guards::check_request(k, l, r, out)
    }

    fn worth_splitting(k: &PackedConvTranspose1d, r: &ConvTranspose1dRequest<'_>) -> bool {
        guards::worth_splitting(k, r)
    }

    fn run(
        k: &PackedConvTranspose1d,
        ws: &mut ConvTranspose1dScratch,
        r: &ConvTranspose1dRequest<'_>,
        out: &mut &mut [f32],
        lanes: &SubPool<'_>,
    ) -> Result<(), KernelError> {
        effect_convolve_transposed(k, ws, r, out, lanes)
    }
}
