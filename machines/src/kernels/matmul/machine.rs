//! `kernel_matmul` plugged into the shared kernel machine.

use super::actions::{
    effect_matmul, effect_pack_bf16, effect_pack_f16, effect_pack_f32, effect_pack_int8,
    effect_pack_q4_0, effect_pack_q4_0_act16, effect_pack_q8_0, effect_pack_q8_0_act16,
    effect_size_workspace, PackedMatmul,
};
use super::events::{MatmulLimits, MatmulParams, MatmulRequest};
use super::guards::{self, params_problem, route};
use crate::kernels::{Kernel, KernelContract, KernelMachineError};
use voxlane_actors::kernels::matmul::MatmulWorkspace;
use voxlane_actors::kernels::KernelError;
use voxlane_runtime::SubPool;

/// The matmul kernel's contract.
pub struct Matmul;

/// A ready-to-drive `kernel_matmul` machine.
pub type MatmulKernel = Kernel<Matmul>;

impl KernelContract for Matmul {
    const SPEC: crate::core::MachineSpec = super::table::SPEC;
    const PREPARE_ROUTES: &'static [(&'static str, &'static str)] = &[
        ("guard_weights_f32", "effect_pack_f32"),
        ("guard_weights_f16", "effect_pack_f16"),
        ("guard_weights_bf16", "effect_pack_bf16"),
        ("guard_weights_q8_0", "effect_pack_q8_0"),
        ("guard_weights_int8", "effect_pack_int8"),
        ("guard_weights_q4_0", "effect_pack_q4_0"),
        ("guard_weights_q8_0_act16", "effect_pack_q8_0_act16"),
        ("guard_weights_q4_0_act16", "effect_pack_q4_0_act16"),
    ];
    type Params = MatmulParams;
    type Prepared = PackedMatmul;
    type Limits = MatmulLimits;
    type Workspace = MatmulWorkspace;
    type Request<'a> = MatmulRequest<'a>;
    type Output<'a> = &'a mut [f32];

    fn prepare_route(p: &MatmulParams) -> Option<usize> {
        guards::prepare_route(p)
    }

    fn params_error(p: &MatmulParams) -> KernelMachineError {
        KernelMachineError::Params(params_problem(p).unwrap_or_default())
    }

    fn prepare(r: usize, p: &MatmulParams) -> Result<PackedMatmul, KernelMachineError> {
        match r {
            route::F32 => effect_pack_f32(p),
            route::F16 => effect_pack_f16(p),
            route::BF16 => effect_pack_bf16(p),
            route::Q8_0 => effect_pack_q8_0(p),
            route::Q8_0_ACT16 => effect_pack_q8_0_act16(p),
            route::INT8 => effect_pack_int8(p),
            route::Q4_0 => effect_pack_q4_0(p),
            route::Q4_0_ACT16 => effect_pack_q4_0_act16(p),
            other => Err(KernelMachineError::Params(format!(
                "no prepare route {other}"
            ))),
        }
    }

    fn check_limits(_k: &PackedMatmul, l: &MatmulLimits) -> Result<(), KernelMachineError> {
        guards::check_limits(l)
    }

    fn bind(k: &PackedMatmul, l: &MatmulLimits) -> Result<MatmulWorkspace, KernelMachineError> {
        Ok(effect_size_workspace(k, l))
    }

    fn check_request(
        k: &PackedMatmul,
        l: &MatmulLimits,
        r: &MatmulRequest<'_>,
        c: &&mut [f32],
    ) -> Result<(), KernelMachineError> {
        guards::check_request(k, l, r, c)
    }

    fn worth_splitting(k: &PackedMatmul, _r: &MatmulRequest<'_>) -> bool {
        guards::worth_splitting(k)
    }

    fn run(
        k: &PackedMatmul,
        ws: &mut MatmulWorkspace,
        r: &MatmulRequest<'_>,
        c: &mut &mut [f32],
        lanes: &SubPool<'_>,
    ) -> Result<(), KernelError> {
        effect_matmul(k, ws, r, c, lanes)
    }
}
