//! Payloads of `kernel_attention`'s events (`prepare` takes an
//! [`AttentionConfig`](voxlane_actors::kernels::attention::AttentionConfig)).

/// `bind`: the largest step the cache must serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttentionLimits {
    /// Most new positions T of one request (at most the config's `max_step`).
    pub max_t: usize,
}

/// `execute`: the step's projections, each `[t, heads, head_dim]` (the output,
/// of the same shape, travels in the sink).
#[derive(Debug, Clone, Copy)]
pub struct AttentionRequest<'a> {
    /// Queries (before RoPE).
    pub q: &'a [f32],
    /// Keys (before RoPE).
    pub k: &'a [f32],
    /// Values.
    pub v: &'a [f32],
    /// New positions T.
    pub t: usize,
}
