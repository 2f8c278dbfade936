//! `lstm` plugged into the shared kernel machine.

use super::actions::{
    effect_pack_bidirectional, effect_pack_unidirectional, effect_reorder_onnx_gates,
    effect_run_lstm, effect_size_workspace, PackedLstm,
};
use super::events::{LstmLimits, LstmParams, LstmRequest};
use super::guards::{self, params_problem, route};
use crate::kernels::{Kernel, KernelContract, KernelMachineError};
use voxlane_actors::kernels::lstm::LstmWorkspace;
use voxlane_actors::kernels::KernelError;
use voxlane_runtime::SubPool;

/// The LSTM kernel's contract.
pub struct LstmContract;

/// A ready-to-drive `lstm` machine.
pub type LstmKernel = Kernel<LstmContract>;

impl KernelContract for LstmContract {
    const SPEC: crate::core::MachineSpec = super::table::SPEC;
    const PREPARE_ROUTES: &'static [(&'static str, &'static str)] = &[
        ("guard_unidirectional", "effect_pack_unidirectional"),
        ("guard_bidirectional", "effect_pack_bidirectional"),
        ("guard_onnx_layout", "effect_reorder_onnx_gates"),
    ];
    type Params = LstmParams;
    type Prepared = PackedLstm;
    type Limits = LstmLimits;
    type Workspace = LstmWorkspace;
    type Request<'a> = LstmRequest<'a>;
    type Output<'a> = &'a mut [f32];

    fn prepare_route(p: &LstmParams) -> Option<usize> {
        guards::prepare_route(p)
    }

    fn params_error(p: &LstmParams) -> KernelMachineError {
        KernelMachineError::Params(params_problem(p).unwrap_or_default())
    }

    fn prepare(r: usize, p: &LstmParams) -> Result<PackedLstm, KernelMachineError> {
        match r {
            route::UNIDIRECTIONAL => effect_pack_unidirectional(p),
            route::BIDIRECTIONAL => effect_pack_bidirectional(p),
            route::ONNX => effect_reorder_onnx_gates(p),
            other => Err(KernelMachineError::Params(format!(
                "no prepare route {other}"
            ))),
        }
    }

    fn check_limits(k: &PackedLstm, l: &LstmLimits) -> Result<(), KernelMachineError> {
        guards::check_limits(k, l)
    }

    fn bind(k: &PackedLstm, l: &LstmLimits) -> Result<LstmWorkspace, KernelMachineError> {
        effect_size_workspace(k, l)
    }

    fn check_request(
        k: &PackedLstm,
        l: &LstmLimits,
        r: &LstmRequest<'_>,
        out: &&mut [f32],
    ) -> Result<(), KernelMachineError> {
        guards::check_request(k, l, r, out)
    }

    fn worth_splitting(k: &PackedLstm, r: &LstmRequest<'_>) -> bool {
        guards::worth_splitting(k, r)
    }

    fn run(
        k: &PackedLstm,
        ws: &mut LstmWorkspace,
        r: &LstmRequest<'_>,
        out: &mut &mut [f32],
        lanes: &SubPool<'_>,
    ) -> Result<(), KernelError> {
        effect_run_lstm(k, ws, r, out, lanes)
    }
}
