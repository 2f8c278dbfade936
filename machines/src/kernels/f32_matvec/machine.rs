//! `kernel_f32_matvec` plugged into the shared kernel machine.

use super::actions::{effect_matvec, effect_pack_f32, PackedMatvec};
use super::events::{MatvecParams, MatvecRequest};
use super::guards::{check_request, guard_weights_valid, params_problem, worth_splitting};
use crate::kernels::{Kernel, KernelContract, KernelMachineError};
use voxlane_actors::kernels::KernelError;
use voxlane_runtime::SubPool;

/// The f32 matvec kernel's contract.
pub struct F32Matvec;

/// A ready-to-drive `kernel_f32_matvec` machine.
pub type F32MatvecKernel = Kernel<F32Matvec>;

impl KernelContract for F32Matvec {
    const SPEC: crate::core::MachineSpec = super::table::SPEC;
    const PREPARE_ROUTES: &'static [(&'static str, &'static str)] =
        &[("guard_weights_valid", "effect_pack_f32")];
    type Params = MatvecParams;
    type Prepared = PackedMatvec;
    type Limits = ();
    type Workspace = ();
    type Request<'a> = MatvecRequest<'a>;
    type Output<'a> = &'a mut [f32];

    fn prepare_route(p: &MatvecParams) -> Option<usize> {
        guard_weights_valid(p).then_some(0)
    }

    fn params_error(p: &MatvecParams) -> KernelMachineError {
        KernelMachineError::Params(params_problem(p).unwrap_or_default())
    }

    fn prepare(_route: usize, p: &MatvecParams) -> Result<PackedMatvec, KernelMachineError> {
        Ok(effect_pack_f32(p))
    }

    fn check_limits(_k: &PackedMatvec, _l: &()) -> Result<(), KernelMachineError> {
        Ok(())
    }

    fn bind(_k: &PackedMatvec, _l: &()) -> Result<(), KernelMachineError> {
        Ok(())
    }

    fn check_request(
        k: &PackedMatvec,
        _l: &(),
        r: &MatvecRequest<'_>,
        y: &&mut [f32],
    ) -> Result<(), KernelMachineError> {
        check_request(k, r, y)
    }

    fn worth_splitting(k: &PackedMatvec, _r: &MatvecRequest<'_>) -> bool {
        worth_splitting(k)
    }

    fn run(
        k: &PackedMatvec,
        _ws: &mut (),
        r: &MatvecRequest<'_>,
        y: &mut &mut [f32],
        lanes: &SubPool<'_>,
    ) -> Result<(), KernelError> {
        effect_matvec(k, r, y, lanes)
    }
}
