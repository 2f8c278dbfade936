//! Pure predicates of `kernel_attention`: one guard per RoPE convention (the
//! prepare routes), the bind limits, the request shape and the lane split.

use super::actions::AttentionPlan;
use super::events::{AttentionLimits, AttentionRequest};
use crate::kernels::KernelMachineError;
use voxlane_actors::kernels::attention::{AttentionConfig, RopeLayout};

/// Prepare route indices, in table order.
pub mod route {
    /// RoPE on interleaved pairs.
    pub const INTERLEAVED: usize = 0;
    /// RoPE on "rotate half" pairs.
    pub const HALVES: usize = 1;
    /// No RoPE.
    pub const NONE: usize = 2;
}

/// Why `cfg` cannot be prepared, if it cannot.
pub fn params_problem(cfg: &AttentionConfig) -> Option<String> {
    cfg.validate().err().map(|e| e.to_string())
}

fn valid_with(cfg: &AttentionConfig, layout: Option<RopeLayout>) -> bool {
    cfg.rope.map(|r| r.layout) == layout && params_problem(cfg).is_none()
}

/// A valid configuration with RoPE on interleaved pairs `(x[2i], x[2i+1])`.
pub fn guard_rope_interleaved(cfg: &AttentionConfig) -> bool {
    valid_with(cfg, Some(RopeLayout::Interleaved))
}

/// A valid configuration with RoPE on pairs `(x[i], x[i + D/2])`.
pub fn guard_rope_halves(cfg: &AttentionConfig) -> bool {
    valid_with(cfg, Some(RopeLayout::Halves))
}

/// A valid configuration without RoPE.
pub fn guard_no_rope(cfg: &AttentionConfig) -> bool {
    valid_with(cfg, None)
}

/// The prepare route `cfg` takes, in table order, or `None` if no guard holds.
pub fn prepare_route(cfg: &AttentionConfig) -> Option<usize> {
    let guards: [fn(&AttentionConfig) -> bool; 3] =
        [guard_rope_interleaved, guard_rope_halves, guard_no_rope];
    guards.iter().position(|g| g(cfg))
}

/// `1 ≤ max_t ≤ max_step`.
pub fn check_limits(plan: &AttentionPlan, l: &AttentionLimits) -> Result<(), KernelMachineError> {
    let max_step = plan.config().max_step;
    if l.max_t == 0 || l.max_t > max_step {
        return Err(KernelMachineError::Limits(format!(
            "max_t = {} is outside 1..={max_step}",
            l.max_t
        )));
    }
    Ok(())
}

/// `1 ≤ t ≤ max_t`, and `q`, `k`, `v`, `out` each hold `t · heads · head_dim` values.
pub fn check_request(
    plan: &AttentionPlan,
    l: &AttentionLimits,
    r: &AttentionRequest<'_>,
    out: &[f32],
) -> Result<(), KernelMachineError> {
    if r.t == 0 || r.t > l.max_t {
        return Err(KernelMachineError::Shape(format!(
            "t = {} is outside 1..={}",
            r.t, l.max_t
        )));
    }
    let width = plan.config().width();
    let want = r.t.checked_mul(width);
    for (what, got) in [
        ("q", r.q.len()),
        ("k", r.k.len()),
        ("v", r.v.len()),
        ("out", out.len()),
    ] {
        if want != Some(got) {
            return Err(KernelMachineError::Shape(format!(
                "{what} has {got} values, t*heads*head_dim = {}*{width}",
                r.t
            )));
        }
    }
    Ok(())
}

/// More than one fixed head range: forking can help.
pub fn worth_splitting(plan: &AttentionPlan) -> bool {
    plan.config().head_ranges > 1
}
