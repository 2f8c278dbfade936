//! Effects of `kernel_attention`: one planning action per RoPE convention,
//! the cache construction at bind, and the step.

use super::events::{AttentionLimits, AttentionRequest};
use crate::kernels::KernelMachineError;
use voxlane_actors::kernels::attention::{attention_step, AttentionConfig, KvCache, RopeLayout};
use voxlane_actors::kernels::KernelError;
use voxlane_runtime::SubPool;

/// The prepared kernel: a validated layer configuration (the cache it needs
/// is built at bind, sized for the bound step).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AttentionPlan {
    cfg: AttentionConfig,
}

impl AttentionPlan {
    /// The layer configuration.
    pub fn config(&self) -> &AttentionConfig {
        &self.cfg
    }

    /// The RoPE convention, if any.
    pub fn rope_layout(&self) -> Option<RopeLayout> {
        self.cfg.rope.map(|r| r.layout)
    }
}

fn plan(
    cfg: &AttentionConfig,
    layout: Option<RopeLayout>,
    action: &str,
) -> Result<AttentionPlan, KernelMachineError> {
    if cfg.rope.map(|r| r.layout) != layout {
        return Err(KernelMachineError::Params(format!(
            "{action} called for another RoPE convention"
        )));
    }
    cfg.validate()
        .map_err(|e| KernelMachineError::Params(e.to_string()))?;
    Ok(AttentionPlan { cfg: *cfg })
}

/// Plan a layer whose RoPE rotates interleaved pairs.
pub fn effect_plan_rope_interleaved(
    cfg: &AttentionConfig,
) -> Result<AttentionPlan, KernelMachineError> {
    plan(
        cfg,
        Some(RopeLayout::Interleaved),
        "effect_plan_rope_interleaved",
    )
}

/// Plan a layer whose RoPE rotates halves.
pub fn effect_plan_rope_halves(cfg: &AttentionConfig) -> Result<AttentionPlan, KernelMachineError> {
    plan(cfg, Some(RopeLayout::Halves), "effect_plan_rope_halves")
}

/// Plan a layer without RoPE.
pub fn effect_plan_no_rope(cfg: &AttentionConfig) -> Result<AttentionPlan, KernelMachineError> {
    plan(cfg, None, "effect_plan_no_rope")
}

/// An empty KV cache (position 0) sized for steps of up to `max_t` positions.
pub fn effect_build_cache(
    p: &AttentionPlan,
    l: &AttentionLimits,
) -> Result<KvCache, KernelMachineError> {
    KvCache::new(AttentionConfig {
        max_step: l.max_t,
        ..p.cfg
    })
    .map_err(|e| KernelMachineError::Limits(e.to_string()))
}

/// Append the step to the cache and attend it causally on `lanes`.
pub fn effect_attend(
    cache: &mut KvCache,
    r: &AttentionRequest<'_>,
    out: &mut [f32],
    lanes: &SubPool<'_>,
) -> Result<(), KernelError> {
    attention_step(r.q, r.k, r.v, r.t, cache, out, lanes)
}
