//! Pure predicates of `conv1d`: one guard per prepare route (the algorithm
//! the data-plane kernel runs), the bind-limit and request shape checks and
//! the lane-split test.

use super::actions::PackedConv1d;
use super::events::{Conv1dKernelParams, Conv1dLimits, Conv1dRequest};
use crate::kernels::KernelMachineError;
use voxlane_actors::kernels::conv1d::{Conv1dParams, Conv1dRoute, PadMode, TIME_CHUNK};

/// Prepare route indices, in table order.
pub mod route {
    /// Causal streaming conv (history carried between executes).
    pub const STREAMING: usize = 0;
    /// Depthwise (`c_in/groups == 1`, any channel multiplier).
    pub const DEPTHWISE: usize = 1;
    /// Dense, stride 1: the direct microkernel.
    pub const DENSE_DIRECT: usize = 2;
    /// Dense, stride > 1: split into input phases, then the direct microkernel.
    pub const DENSE_PHASES: usize = 3;
    /// Dense, GEMM per kernel tap (the cross-check route, on request).
    pub const DENSE_GEMM: usize = 4;
    /// Dense on bf16 values (AMX-BF16 tiles), any stride, on request.
    pub const DENSE_BF16: usize = 5;
}

/// Output channels per parallel block of the kernel's depthwise route
/// (its private `DW_ROWS`); only decides whether forking can help.
pub const DEPTHWISE_ROWS: usize = 16;

use crate::kernels::guards::conv_weights_problem;
pub use crate::kernels::guards::MAX_ELEMENTS;

/// `(kernel − 1)·dilation + 1`, or `None` on overflow.
pub fn span(c: &Conv1dParams) -> Option<usize> {
    c.kernel
        .checked_sub(1)?
        .checked_mul(c.dilation)?
        .checked_add(1)
}

/// One weight per input channel of its group.
pub fn is_depthwise(c: &Conv1dParams) -> bool {
    c.groups > 0 && c.c_in / c.groups == 1
}

fn dense_phases(p: &Conv1dKernelParams) -> bool {
    !is_depthwise(&p.conv) && p.conv.stride > 1 && p.dense_route == Conv1dRoute::Direct
}

/// Whether the kernel splits `p` into stride phases (its weights grow by the stride).
fn split_into_phases(p: &Conv1dKernelParams) -> bool {
    !is_depthwise(&p.conv) && p.conv.stride > 1 && p.dense_route != Conv1dRoute::Gemm
}

fn weights_problem(p: &Conv1dKernelParams) -> Option<String> {
    let c = &p.conv;
    conv_weights_problem(
        (c.c_out, c.c_in / c.groups, c.kernel),
        "c_out·c_in/groups·kernel",
        p.weight.len(),
        p.bias.as_ref().map(Vec::len),
        c.c_out,
    )
}

/// Why `p` cannot be prepared, if it cannot.
pub fn params_problem(p: &Conv1dKernelParams) -> Option<String> {
    let c = &p.conv;
    if let Err(e) = c.validate() {
        return Some(e.to_string());
    }
    let Some(span) = span(c) else {
        return Some(format!("kernel span overflows: {c:?}"));
    };
    if let Some(problem) = weights_problem(p) {
        return Some(problem);
    }
    if split_into_phases(p) {
        // The phase route packs c_out · c_in/groups · stride · ⌈span/stride⌉ weights.
        let phase_weights = c
            .c_out
            .checked_mul(c.c_in / c.groups)
            .and_then(|n| n.checked_mul(c.stride))
            .and_then(|n| n.checked_mul((span - 1) / c.stride + 1))
            .filter(|n| *n <= MAX_ELEMENTS);
        if phase_weights.is_none() {
            return Some(format!(
                "stride {} is too large to split into phases",
                c.stride
            ));
        }
    }
    if p.streaming.is_some() {
        if c.pad_left != 0 || c.pad_right != 0 {
            return Some(format!(
                "a streaming conv must be unpadded (its history is the causal padding), got ({}, {})",
                c.pad_left, c.pad_right
            ));
        }
        if span < c.stride {
            return Some(format!(
                "a streaming conv needs span {span} ≥ stride {}",
                c.stride
            ));
        }
    }
    None
}

fn batch(p: &Conv1dKernelParams) -> bool {
    p.streaming.is_none() && params_problem(p).is_none()
}

fn dense_batch(p: &Conv1dKernelParams) -> bool {
    batch(p) && !is_depthwise(&p.conv)
}

/// Valid params asking for a causal streaming conv (Mimi).
pub fn guard_streaming_causal(p: &Conv1dKernelParams) -> bool {
    p.streaming.is_some() && params_problem(p).is_none()
}

/// A valid batch conv with one input channel per group (depthwise, any multiplier).
pub fn guard_depthwise(p: &Conv1dKernelParams) -> bool {
    batch(p) && is_depthwise(&p.conv)
}

/// A valid dense batch conv with stride 1 on the direct route.
pub fn guard_dense_direct(p: &Conv1dKernelParams) -> bool {
    dense_batch(p) && p.conv.stride == 1 && p.dense_route == Conv1dRoute::Direct
}

/// A valid dense batch conv with stride > 1 on the direct route.
pub fn guard_dense_phases(p: &Conv1dKernelParams) -> bool {
    dense_batch(p) && dense_phases(p)
}

/// A valid dense batch conv asking for the GEMM route.
pub fn guard_dense_gemm(p: &Conv1dKernelParams) -> bool {
    dense_batch(p) && p.dense_route == Conv1dRoute::Gemm
}

/// A valid dense batch conv asking for bf16 values (strided convs split into phases first).
pub fn guard_dense_bf16(p: &Conv1dKernelParams) -> bool {
    dense_batch(p) && p.dense_route == Conv1dRoute::Bf16
}

/// The prepare route `p` takes, in table order, or `None` if no guard holds.
pub fn prepare_route(p: &Conv1dKernelParams) -> Option<usize> {
    let guards: [fn(&Conv1dKernelParams) -> bool; 6] = [
        guard_streaming_causal,
        guard_depthwise,
        guard_dense_direct,
        guard_dense_phases,
        guard_dense_gemm,
        guard_dense_bf16,
    ];
    guards.iter().position(|g| g(p))
}

/// `Ok` if a workspace for `l` fits `k` and can serve at least one request.
pub fn check_limits(k: &PackedConv1d, l: &Conv1dLimits) -> Result<(), KernelMachineError> {
    let c = k.params();
    let bad = |m: String| Err(KernelMachineError::Limits(m));
    if l.max_t_in == 0 {
        return bad("max_t_in must be at least 1".into());
    }
    let history = k.history_frames();
    let frames = match k.streaming() {
        Some(_) => l.max_t_in.checked_add(history),
        None => l
            .max_t_in
            .checked_add(c.pad_left)
            .and_then(|t| t.checked_add(c.pad_right)),
    };
    let fits = frames
        .and_then(|f| f.checked_mul(c.c_in.max(c.c_out)))
        .is_some_and(|n| n <= MAX_ELEMENTS);
    if !fits {
        return bad(format!(
            "max_t_in {} needs a workspace over {MAX_ELEMENTS} elements",
            l.max_t_in
        ));
    }
    if k.streaming().is_some() && l.max_t_in < c.stride {
        return bad(format!(
            "max_t_in {} is less than one streaming step (stride {})",
            l.max_t_in, c.stride
        ));
    }
    if k.streaming().is_none() && k.out_len(l.max_t_in).is_none() {
        return bad(format!(
            "max_t_in {} padded by ({}, {}) is shorter than the kernel span: no request could run",
            l.max_t_in, c.pad_left, c.pad_right
        ));
    }
    Ok(())
}

/// `Ok` if `x` is `[c_in, t_in]` with `1 ≤ t_in ≤ max_t_in` (a multiple of
/// the stride when streaming) and `out` is `[c_out, out_len(t_in)]`.
pub fn check_request(
    k: &PackedConv1d,
    l: &Conv1dLimits,
    r: &Conv1dRequest<'_>,
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
    // t_in ≤ max_t_in, so c_in · t_in fits (checked at bind).
    if r.x.len() != c.c_in * r.t_in {
        return shape(format!(
            "x holds {} values, c_in·t_in = {}",
            r.x.len(),
            c.c_in * r.t_in
        ));
    }
    if k.streaming().is_some() && !r.t_in.is_multiple_of(c.stride) {
        return shape(format!(
            "a streaming step takes a multiple of stride {} frames, got {}",
            c.stride, r.t_in
        ));
    }
    if k.streaming().is_none()
        && c.pad_mode == PadMode::Reflect
        && (c.pad_left >= r.t_in || c.pad_right >= r.t_in)
    {
        return shape(format!(
            "reflect padding ({}, {}) needs more than that many input frames, got {}",
            c.pad_left, c.pad_right, r.t_in
        ));
    }
    let Some(t_out) = k.out_len(r.t_in) else {
        return shape(format!(
            "t_in {} padded by ({}, {}) is shorter than the kernel span {}",
            r.t_in,
            c.pad_left,
            c.pad_right,
            c.span()
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

/// More than one fixed chunk of output (time chunks, or channel blocks when depthwise).
pub fn worth_splitting(k: &PackedConv1d, r: &Conv1dRequest<'_>) -> bool {
    let c = k.params();
    if is_depthwise(c) {
        c.c_out > DEPTHWISE_ROWS
    } else {
        k.out_len(r.t_in).is_some_and(|t| t > TIME_CHUNK)
    }
}
