//! Pure predicates of `lstm`: one guard per prepare route (direction count
//! and weight layout), the bind-limit and request shape checks and the
//! lane-split test.

use super::actions::PackedLstm;
use super::events::{LstmDirection, LstmLayout, LstmLimits, LstmParams, LstmRequest, OnnxLstm};
use crate::kernels::KernelMachineError;
use voxlane_actors::kernels::conv1d::TIME_CHUNK;

/// Prepare route indices, in table order.
pub mod route {
    /// PyTorch layout, one direction.
    pub const UNIDIRECTIONAL: usize = 0;
    /// PyTorch layout, forward and reverse.
    pub const BIDIRECTIONAL: usize = 1;
    /// ONNX layout (gates i, o, f, c), one or two directions.
    pub const ONNX: usize = 2;
}

pub use crate::kernels::guards::MAX_ELEMENTS;

fn len_problem(what: &str, got: usize, want: usize) -> Option<String> {
    (got != want).then(|| format!("{what} holds {got} values, expected {want}"))
}

/// `(4H·I, 4H·H, 4H)`, or `None` if a size is zero or too large.
fn gate_sizes(p: &LstmParams) -> Option<(usize, usize, usize)> {
    if p.input == 0 || p.hidden == 0 {
        return None;
    }
    let g = p.hidden.checked_mul(4)?;
    let ih = g.checked_mul(p.input)?;
    let hh = g.checked_mul(p.hidden)?;
    (ih.max(hh).checked_mul(2)? <= MAX_ELEMENTS).then_some((ih, hh, g))
}

fn direction_problem(d: &LstmDirection, ih: usize, hh: usize, g: usize) -> Option<String> {
    len_problem("weight_ih", d.w_ih.len(), ih)
        .or_else(|| len_problem("weight_hh", d.w_hh.len(), hh))
        .or_else(|| {
            d.b_ih
                .as_ref()
                .and_then(|b| len_problem("bias_ih", b.len(), g))
        })
        .or_else(|| {
            d.b_hh
                .as_ref()
                .and_then(|b| len_problem("bias_hh", b.len(), g))
        })
}

fn onnx_problem(o: &OnnxLstm, ih: usize, hh: usize, g: usize) -> Option<String> {
    if o.directions != 1 && o.directions != 2 {
        return Some(format!(
            "ONNX LSTM directions must be 1 (forward) or 2 (bidirectional), got {}",
            o.directions
        ));
    }
    let nd = o.directions;
    len_problem("ONNX W", o.w.len(), nd * ih)
        .or_else(|| len_problem("ONNX R", o.r.len(), nd * hh))
        .or_else(|| {
            o.b.as_ref()
                .and_then(|b| len_problem("ONNX B", b.len(), nd * 2 * g))
        })
}

/// Why `p` cannot be prepared, if it cannot.
pub fn params_problem(p: &LstmParams) -> Option<String> {
    let Some((ih, hh, g)) = gate_sizes(p) else {
        return Some(format!(
            "input {} and hidden {} must be positive and the weights at most {MAX_ELEMENTS} values",
            p.input, p.hidden
        ));
    };
    match &p.weights {
        LstmLayout::PyTorch(dirs) if dirs.is_empty() || dirs.len() > 2 => {
            Some(format!("an LSTM has 1 or 2 directions, got {}", dirs.len()))
        }
        LstmLayout::PyTorch(dirs) => dirs.iter().enumerate().find_map(|(i, d)| {
            direction_problem(d, ih, hh, g).map(|m| format!("direction {i}: {m}"))
        }),
        LstmLayout::Onnx(o) => onnx_problem(o, ih, hh, g),
    }
}

fn pytorch_directions(p: &LstmParams) -> Option<usize> {
    match &p.weights {
        LstmLayout::PyTorch(dirs) => Some(dirs.len()),
        LstmLayout::Onnx(_) => None,
    }
}

/// Consistent PyTorch-layout weights of one direction.
pub fn guard_unidirectional(p: &LstmParams) -> bool {
    pytorch_directions(p) == Some(1) && params_problem(p).is_none()
}

/// Consistent PyTorch-layout weights of two directions (forward, reverse).
pub fn guard_bidirectional(p: &LstmParams) -> bool {
    pytorch_directions(p) == Some(2) && params_problem(p).is_none()
}

/// Consistent ONNX-layout weights (gates i, o, f, c), forward or bidirectional.
pub fn guard_onnx_layout(p: &LstmParams) -> bool {
    matches!(p.weights, LstmLayout::Onnx(_)) && params_problem(p).is_none()
}

/// The prepare route `p` takes, in table order, or `None` if no guard holds.
pub fn prepare_route(p: &LstmParams) -> Option<usize> {
    let guards: [fn(&LstmParams) -> bool; 3] =
        [guard_unidirectional, guard_bidirectional, guard_onnx_layout];
    guards.iter().position(|g| g(p))
}

/// `Ok` if a workspace for `l` fits `k`.
pub fn check_limits(k: &PackedLstm, l: &LstmLimits) -> Result<(), KernelMachineError> {
    if l.max_t == 0 {
        return Err(KernelMachineError::Limits(
            "max_t must be at least 1".into(),
        ));
    }
    // The largest buffers: projected gates [dirs·4H, T] and the input [I, T].
    let rows = (k.directions() * 4 * k.hidden()).max(k.input());
    if l.max_t.checked_mul(rows).is_none_or(|n| n > MAX_ELEMENTS) {
        return Err(KernelMachineError::Limits(format!(
            "max_t {} needs a workspace over {MAX_ELEMENTS} elements",
            l.max_t
        )));
    }
    Ok(())
}

/// `Ok` if `x` is `[t, I]` with `1 ≤ t ≤ max_t` and `out` is `[t, directions · H]`.
pub fn check_request(
    k: &PackedLstm,
    l: &LstmLimits,
    r: &LstmRequest<'_>,
    out: &[f32],
) -> Result<(), KernelMachineError> {
    let shape = |m: String| Err(KernelMachineError::Shape(m));
    if r.t == 0 {
        return shape("empty input: t must be at least 1".into());
    }
    if r.t > l.max_t {
        return shape(format!("t {} exceeds the bound max_t {}", r.t, l.max_t));
    }
    // t ≤ max_t, so the sizes below fit (checked at bind).
    if r.x.len() != r.t * k.input() {
        return shape(format!(
            "x holds {} values, t·input = {}",
            r.x.len(),
            r.t * k.input()
        ));
    }
    let width = k.directions() * k.hidden();
    if out.len() != r.t * width {
        return shape(format!(
            "out holds {} values, t·directions·hidden = {}",
            out.len(),
            r.t * width
        ));
    }
    Ok(())
}

/// Two directions (one lane each) or more than one time chunk of input projection.
pub fn worth_splitting(k: &PackedLstm, r: &LstmRequest<'_>) -> bool {
    k.directions() > 1 || r.t > TIME_CHUNK
}
