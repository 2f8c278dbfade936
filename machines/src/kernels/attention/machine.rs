//! `kernel_attention` plugged into the shared kernel machine.

use super::actions::{
    effect_attend, effect_build_cache, effect_plan_no_rope, effect_plan_rope_halves,
    effect_plan_rope_interleaved, AttentionPlan,
};
use super::events::{AttentionLimits, AttentionRequest};
use super::guards::{self, params_problem, route};
use crate::kernels::{Kernel, KernelContract, KernelMachineError};
use voxlane_actors::kernels::attention::{AttentionConfig, KvCache};
use voxlane_actors::kernels::KernelError;
use voxlane_runtime::SubPool;

/// The attention kernel's contract.
pub struct Attention;

/// A ready-to-drive `kernel_attention` machine.
pub type AttentionKernel = Kernel<Attention>;

impl KernelContract for Attention {
    const SPEC: crate::core::MachineSpec = super::table::SPEC;
    const PREPARE_ROUTES: &'static [(&'static str, &'static str)] = &[
        ("guard_rope_interleaved", "effect_plan_rope_interleaved"),
        ("guard_rope_halves", "effect_plan_rope_halves"),
        ("guard_no_rope", "effect_plan_no_rope"),
    ];
    type Params = AttentionConfig;
    type Prepared = AttentionPlan;
    type Limits = AttentionLimits;
    type Workspace = KvCache;
    type Request<'a> = AttentionRequest<'a>;
    type Output<'a> = &'a mut [f32];

    fn prepare_route(cfg: &AttentionConfig) -> Option<usize> {
        guards::prepare_route(cfg)
    }

    fn params_error(cfg: &AttentionConfig) -> KernelMachineError {
        KernelMachineError::Params(params_problem(cfg).unwrap_or_default())
    }

    fn prepare(r: usize, cfg: &AttentionConfig) -> Result<AttentionPlan, KernelMachineError> {
        match r {
            route::INTERLEAVED => effect_plan_rope_interleaved(cfg),
            route::HALVES => effect_plan_rope_halves(cfg),
            route::NONE => effect_plan_no_rope(cfg),
            other => Err(KernelMachineError::Params(format!(
                "no prepare route {other}"
            ))),
        }
    }

    fn check_limits(p: &AttentionPlan, l: &AttentionLimits) -> Result<(), KernelMachineError> {
        guards::check_limits(p, l)
    }

    fn bind(p: &AttentionPlan, l: &AttentionLimits) -> Result<KvCache, KernelMachineError> {
        effect_build_cache(p, l)
    }

    fn check_request(
        p: &AttentionPlan,
        l: &AttentionLimits,
        r: &AttentionRequest<'_>,
        out: &&mut [f32],
    ) -> Result<(), KernelMachineError> {
        guards::check_request(p, l, r, out)
    }

    fn worth_splitting(p: &AttentionPlan, _r: &AttentionRequest<'_>) -> bool {
        guards::worth_splitting(p)
    }

    fn run(
        _p: &AttentionPlan,
        cache: &mut KvCache,
        r: &AttentionRequest<'_>,
        out: &mut &mut [f32],
        lanes: &SubPool<'_>,
    ) -> Result<(), KernelError> {
        effect_attend(cache, r, out, lanes)
    }
}
