//! Effects of `lstm`: packing per weight layout (the ONNX route reorders
//! the gate blocks once), sizing the workspace at bind, and the layer itself.

use super::events::{LstmDirection, LstmLayout, LstmLimits, LstmParams, LstmRequest};
use crate::kernels::KernelMachineError;
use voxlane_actors::kernels::lstm::{
    onnx_lstm_bias, onnx_to_pytorch_gates, Lstm, LstmWeights, LstmWorkspace,
};
use voxlane_actors::kernels::KernelError;
use voxlane_runtime::SubPool;

/// The prepared layer: the kernel's packed weights and the input size.
#[derive(Debug, Clone)]
pub struct PackedLstm {
    lstm: Lstm,
    input: usize,
}

impl PackedLstm {
    /// Input features `I`.
    pub fn input(&self) -> usize {
        self.input
    }

    /// Hidden size `H`.
    pub fn hidden(&self) -> usize {
        self.lstm.hidden()
    }

    /// Number of directions (1 or 2); the output has `directions · H` columns.
    pub fn directions(&self) -> usize {
        self.lstm.directions()
    }
}

fn view(d: &LstmDirection) -> LstmWeights<'_> {
    LstmWeights {
        w_ih: &d.w_ih,
        w_hh: &d.w_hh,
        b_ih: d.b_ih.as_deref(),
        b_hh: d.b_hh.as_deref(),
    }
}

fn pack_pytorch(p: &LstmParams) -> Result<PackedLstm, KernelMachineError> {
    let LstmLayout::PyTorch(dirs) = &p.weights else {
        return Err(KernelMachineError::Params(
            "expected PyTorch-layout weights".into(),
        ));
    };
    let views: Vec<LstmWeights<'_>> = dirs.iter().map(view).collect();
    Ok(PackedLstm {
        lstm: Lstm::new(p.input, p.hidden, &views)?,
        input: p.input,
    })
}

/// Pack one PyTorch-layout direction (input projection as a kernel-1 conv, `W_hh` as is).
pub fn effect_pack_unidirectional(p: &LstmParams) -> Result<PackedLstm, KernelMachineError> {
    pack_pytorch(p)
}

/// Pack forward and reverse PyTorch-layout directions (one projection for both).
pub fn effect_pack_bidirectional(p: &LstmParams) -> Result<PackedLstm, KernelMachineError> {
    pack_pytorch(p)
}

/// Reorder ONNX gate blocks (i, o, f, c) into PyTorch's (i, f, g, o), split
/// `B` into `bias_ih` and `bias_hh`, then pack as the PyTorch routes do.
pub fn effect_reorder_onnx_gates(p: &LstmParams) -> Result<PackedLstm, KernelMachineError> {
    let LstmLayout::Onnx(o) = &p.weights else {
        return Err(KernelMachineError::Params(
            "expected ONNX-layout weights".into(),
        ));
    };
    let (nd, h) = (o.directions, p.hidden);
    let w = onnx_to_pytorch_gates(&o.w, nd, h)?;
    let r = onnx_to_pytorch_gates(&o.r, nd, h)?;
    let (b_ih, b_hh) = match &o.b {
        Some(b) => {
            let (bi, bh) = onnx_lstm_bias(b, nd, h)?;
            (Some(bi), Some(bh))
        }
        None => (None, None),
    };
    let (ih, hh, g) = (4 * h * p.input, 4 * h * h, 4 * h);
    let views: Vec<LstmWeights<'_>> = (0..nd)
        .map(|d| LstmWeights {
            w_ih: &w[d * ih..(d + 1) * ih],
            w_hh: &r[d * hh..(d + 1) * hh],
            b_ih: b_ih.as_deref().map(|b| &b[d * g..(d + 1) * g]),
            b_hh: b_hh.as_deref().map(|b| &b[d * g..(d + 1) * g]),
        })
        .collect();
    Ok(PackedLstm {
        lstm: Lstm::new(p.input, p.hidden, &views)?,
        input: p.input,
    })
}

/// Size the workspace for sequences of up to `l.max_t` steps.
pub fn effect_size_workspace(
    k: &PackedLstm,
    l: &LstmLimits,
) -> Result<LstmWorkspace, KernelMachineError> {
    Ok(k.lstm.workspace(l.max_t)?)
}

/// Run the layer over `x` from a zero state into `out` on `lanes`.
pub fn effect_run_lstm(
    k: &PackedLstm,
    ws: &mut LstmWorkspace,
    r: &LstmRequest<'_>,
    out: &mut [f32],
    lanes: &SubPool<'_>,
) -> Result<(), KernelError> {
    k.lstm.forward(lanes, r.x, r.t, out, ws)
}
