//! Pure predicates of `conv_transpose1d`: one guard per prepare route (the
//! algorithm the data-plane kernel runs), the bind-limit and request shape
//! checks and the lane-split test.

use super::actions::PackedConvTranspose1d;
use super::events::{ConvTranspose1dKernelParams, ConvTranspose1dLimits, ConvTranspose1dRequest};
use crate::kernels::KernelMachineError;
use voxlane_actors::kernels::conv1d::{Conv1dRoute, TIME_CHUNK};
use voxlane_actors::kernels::conv_transpose1d::{ConvTranspose1dParams, CO_CHUNK};

/// Prepare route indices, in table order.
pub mod route {
    /// Causal streaming transposed conv (overlap carried between executes).
    pub const STREAMING: usize = 0;
    /// All output phases as one stride-1 direct conv (`dilation == 1`).
    pub const POLYPHASE: usize = 1;
    /// GEMM per output-channel block, then overlap-add (col2im).
    pub const COL2IM: usize = 2;
    /// One input channel per group, off the polyphase route: direct scatter.
    pub const SCATTER: usize = 3;
    /// The polyphase conv on bf16 values (AMX-BF16 tiles), on request.
    pub const POLYPHASE_BF16: usize = 4;
}

use crate::kernels::guards::conv_weights_problem;
pub use crate::kernels::guards::MAX_ELEMENTS;

/// The kernel takes a polyphase route (f32 or bf16): `dilation == 1` and not asked for GEMM.
pub fn is_polyphase(p: &ConvTranspose1dKernelParams) -> bool {
    p.conv.dilation == 1 && p.dense_route != Conv1dRoute::Gemm
}

/// Output frames for `t_in` input frames (`None` if the padding trims more
/// than there is, or on overflow).
pub fn out_len(c: &ConvTranspose1dParams, t_in: usize) -> Option<usize> {
    if t_in == 0 {
        return Some(0);
    }
    (t_in - 1)
        .checked_mul(c.stride)?
        .checked_add(c.kernel.checked_sub(1)?.checked_mul(c.dilation)?)?
        .checked_add(1 + c.output_padding)?
        .checked_sub(c.padding.checked_mul(2)?)
}

fn weights_problem(p: &ConvTranspose1dKernelParams) -> Option<String> {
    let c = &p.conv;
    conv_weights_problem(
        (c.c_in, c.c_out / c.groups, c.kernel),
        "c_in·c_out/groups·kernel",
        p.weight.len(),
        p.bias.as_ref().map(Vec::len),
        c.c_out,
    )
}

/// Why `p` cannot be prepared, if it cannot.
pub fn params_problem(p: &ConvTranspose1dKernelParams) -> Option<String> {
    let c = &p.conv;
    if let Err(e) = c.validate() {
        return Some(e.to_string());
    }
    let span = c
        .kernel
        .checked_sub(1)
        .and_then(|k| k.checked_mul(c.dilation));
    if span
        .and_then(|s| s.checked_add(2 + c.output_padding))
        .is_none()
    {
        return Some(format!("kernel span overflows: {c:?}"));
    }
    if let Some(problem) = weights_problem(p) {
        return Some(problem);
    }
    if is_polyphase(p) {
        // The polyphase conv packs stride · c_out · c_in/groups · ⌈kernel/stride⌉ weights.
        let phase_weights = c
            .stride
            .checked_mul(c.c_out)
            .and_then(|n| n.checked_mul(c.c_in / c.groups))
            .and_then(|n| n.checked_mul(c.kernel.div_ceil(c.stride)))
            .filter(|n| *n <= MAX_ELEMENTS);
        if phase_weights.is_none() {
            return Some(format!(
                "stride {} is too large to split into phases",
                c.stride
            ));
        }
    }
    if p.streaming
        && (c.padding != 0 || c.output_padding != 0 || c.dilation != 1 || c.kernel < c.stride)
    {
        return Some(format!(
            "a streaming transposed conv needs padding 0, output_padding 0, dilation 1 and kernel ≥ stride: {c:?}"
        ));
    }
    None
}

fn batch(p: &ConvTranspose1dKernelParams) -> bool {
    !p.streaming && params_problem(p).is_none()
}

fn one_input_channel_per_group(p: &ConvTranspose1dKernelParams) -> bool {
    p.conv.c_in / p.conv.groups == 1
}

/// Valid params asking for a causal streaming transposed conv (Mimi).
pub fn guard_streaming_causal(p: &ConvTranspose1dKernelParams) -> bool {
    p.streaming && params_problem(p).is_none()
}

/// A valid batch transposed conv the kernel runs as one polyphase direct conv.
pub fn guard_polyphase(p: &ConvTranspose1dKernelParams) -> bool {
    batch(p) && is_polyphase(p) && p.dense_route == Conv1dRoute::Direct
}

/// A valid batch transposed conv asking for bf16 values: the polyphase conv on tiles.
pub fn guard_polyphase_bf16(p: &ConvTranspose1dKernelParams) -> bool {
    batch(p) && is_polyphase(p) && p.dense_route == Conv1dRoute::Bf16
}

/// A valid batch transposed conv off the polyphase route with dense groups: GEMM + col2im.
pub fn guard_gemm_col2im(p: &ConvTranspose1dKernelParams) -> bool {
    batch(p) && !is_polyphase(p) && !one_input_channel_per_group(p)
}

/// A valid batch transposed conv off the polyphase route with one input channel per group.
pub fn guard_depthwise_scatter(p: &ConvTranspose1dKernelParams) -> bool {
    batch(p) && !is_polyphase(p) && one_input_channel_per_group(p)
}

/// The prepare route `p` takes, in table order, or `None` if no guard holds.
pub fn prepare_route(p: &ConvTranspose1dKernelParams) -> Option<usize> {
    let guards: [fn(&ConvTranspose1dKernelParams) -> bool; 5] = [
        guard_streaming_causal,
        guard_polyphase,
        guard_gemm_col2im,
        guard_depthwise_scatter,
        guard_polyphase_bf16,
    ];
    guards.iter().position(|g| g(p))
}

/// The largest workspace buffer for inputs of up to `max_t_in` frames.
fn workspace_elements(k: &PackedConvTranspose1d, max_t_in: usize) -> Option<usize> {
    let c = k.params();
    let t_out = out_len(c, max_t_in)?;
    // col2im blocks, polyphase input and phase outputs, the output itself.
    let cols = c
        .c_out
        .div_ceil(CO_CHUNK)
        .checked_mul(CO_CHUNK * c.kernel)?
        .checked_mul(max_t_in)?;
    let phase_len = max_t_in.max(t_out.checked_add(c.padding)?.div_ceil(c.stride));
    let phases = c.stride.checked_mul(c.c_out)?.checked_mul(phase_len)?;
    let input = c.c_in.checked_mul(phase_len)?;
    let output = c
        .c_out
        .checked_mul(t_out.max(max_t_in.checked_mul(c.stride)?))?;
    Some(cols.max(phases).max(input).max(output))
}

/// `Ok` if a workspace for `l` fits `k`.
pub fn check_limits(
    k: &PackedConvTranspose1d,
    l: &ConvTranspose1dLimits,
) -> Result<(), KernelMachineError> {
    let c = k.params();
    let bad = |m: String| Err(KernelMachineError::Limits(m));
    if l.max_t_in == 0 {
        return bad("max_t_in must be at least 1".into());
    }
    if out_len(c, l.max_t_in).is_none() {
        return bad(format!(
            "padding {} trims more than the output of max_t_in {}: no request could run",
            c.padding, l.max_t_in
        ));
    }
    if workspace_elements(k, l.max_t_in).is_none_or(|n| n > MAX_ELEMENTS) {
        return bad(format!(
            "max_t_in {} needs a workspace over {MAX_ELEMENTS} elements",
            l.max_t_in
        ));
    }
    Ok(())
}

/// `Ok` if `x` is `[c_in, t_in]` with `1 ≤ t_in ≤ max_t_in` and `out` is
/// `[c_out, out_len(t_in)]` (`t_in · stride` frames when streaming).
pub fn check_request(
    k: &PackedConvTranspose1d,
    l: &ConvTranspose1dLimits,
    r: &ConvTranspose1dRequest<'_>,
    out: &[f32],
) -> Result<(), KernelMachineError> {
    let c = k.params();
    let shape = |m: String| Err(KernelMachineError::Shape(m));
    if r.t_in == 0 {
        return shape("empty input: t_in must be at least 1".into());
    }
    if r.t_in > l.max_t_in {
        return shape(format!(
            "t_in {} exceeds the bound max_t_in {}",
            r.t_in, l.max_t_in
        ));
    }
    // t_in ≤ max_t_in, so every size below fits (checked at bind).
    if r.x.len() != c.c_in * r.t_in {
        return shape(format!(
            "x holds {} values, c_in·t_in = {}",
            r.x.len(),
            c.c_in * r.t_in
        ));
    }
    let Some(t_out) = k.out_len(r.t_in) else {
        return shape(format!(
            "padding {} trims more than the output of {} input frames",
            c.padding, r.t_in
        ));
    };
    if out.len() != c.c_out * t_out {
        return shape(format!(
            "out holds {} values, c_out·out_len = {}",
            out.len(),
            c.c_out * t_out
        ));
    }
    Ok(())
}

/// More than one fixed block of output channels or of time.
pub fn worth_splitting(k: &PackedConvTranspose1d, r: &ConvTranspose1dRequest<'_>) -> bool {
    k.params().c_out > CO_CHUNK || r.t_in > TIME_CHUNK
}
