//! Effects of `conv1d`: one packing action per prepare route, sizing the
//! workspace (or the stream) at bind, and the convolution itself.

use super::events::{CausalHistory, Conv1dKernelParams, Conv1dLimits, Conv1dRequest};
use crate::kernels::KernelMachineError;
use voxlane_actors::kernels::conv1d::{
    Conv1d, Conv1dParams, Conv1dRoute, Conv1dWorkspace, StreamingConv1d,
};
use voxlane_actors::kernels::KernelError;
use voxlane_runtime::SubPool;

/// The prepared kernel: weights packed in the route's layout, and whether it streams.
#[derive(Debug, Clone)]
pub struct PackedConv1d {
    conv: Conv1d,
    streaming: Option<CausalHistory>,
}

impl PackedConv1d {
    /// The convolution's parameters (unpadded when streaming).
    pub fn params(&self) -> &Conv1dParams {
        self.conv.params()
    }

    /// `Some(history)` on the streaming route.
    pub fn streaming(&self) -> Option<CausalHistory> {
        self.streaming
    }

    /// Input frames a streaming conv carries between steps (`span − stride`; 0 in batch).
    pub fn history_frames(&self) -> usize {
        let c = self.params();
        match self.streaming {
            Some(_) => c.span().saturating_sub(c.stride),
            None => 0,
        }
    }

    /// Output frames for `t_in` input frames, or `None` if the input is
    /// too short (batch) or not a positive multiple of the stride (streaming).
    pub fn out_len(&self, t_in: usize) -> Option<usize> {
        let c = self.params();
        match self.streaming {
            Some(_) => (t_in > 0 && t_in.is_multiple_of(c.stride)).then(|| t_in / c.stride),
            None => {
                let padded = t_in.checked_add(c.pad_left)?.checked_add(c.pad_right)?;
                let span = super::guards::span(c)?;
                (padded >= span).then(|| (padded - span) / c.stride + 1)
            }
        }
    }

    /// The batch convolution a stream reproduces chunk by chunk (causal left
    /// padding `span − stride` of the history's mode); the params themselves in batch.
    pub fn batch_params(&self) -> Conv1dParams {
        let c = *self.params();
        match self.streaming {
            Some(h) => c.padding(self.history_frames(), 0).pad_mode(h.pad_mode()),
            None => c,
        }
    }
}

/// Scratch sized at bind: a batch workspace, or the stream with its history.
#[derive(Debug, Clone)]
pub enum Conv1dScratch {
    /// Batch routes: padded input and route scratch for the largest input.
    Batch(Conv1dWorkspace),
    /// Streaming route: the causal stream (history, buffers, packed weights).
    Stream(Box<StreamingConv1d>),
}

fn pack(
    p: &Conv1dKernelParams,
    route: Conv1dRoute,
    streaming: Option<CausalHistory>,
) -> Result<PackedConv1d, KernelMachineError> {
    let conv = Conv1d::with_route(p.conv, &p.weight, p.bias.as_deref(), route)?;
    Ok(PackedConv1d { conv, streaming })
}

/// Pack for a causal stream (the dense route as requested; the history is set up at bind).
pub fn effect_build_streaming(p: &Conv1dKernelParams) -> Result<PackedConv1d, KernelMachineError> {
    pack(p, p.dense_route, p.streaming)
}

/// Keep the `[c_out, 1, kernel]` weights as given (vector loop over time per channel).
pub fn effect_pack_depthwise(p: &Conv1dKernelParams) -> Result<PackedConv1d, KernelMachineError> {
    pack(p, Conv1dRoute::Direct, None)
}

/// Pack `[group][co block][ci][k][MR]` for the direct microkernel.
pub fn effect_pack_direct(p: &Conv1dKernelParams) -> Result<PackedConv1d, KernelMachineError> {
    pack(p, Conv1dRoute::Direct, None)
}

/// Rewrite the strided conv as a stride-1 conv over the `stride` input phases.
pub fn effect_pack_phases(p: &Conv1dKernelParams) -> Result<PackedConv1d, KernelMachineError> {
    pack(p, Conv1dRoute::Direct, None)
}

/// Pack bf16 weight tiles (AMX-BF16's A layout; strided convs as their phases).
pub fn effect_pack_bf16(p: &Conv1dKernelParams) -> Result<PackedConv1d, KernelMachineError> {
    pack(p, Conv1dRoute::Bf16, None)
}

/// Pack one `[c_out/groups, c_in/groups]` matrix per kernel tap for the GEMM route.
pub fn effect_pack_gemm(p: &Conv1dKernelParams) -> Result<PackedConv1d, KernelMachineError> {
    pack(p, Conv1dRoute::Gemm, None)
}

/// Size the workspace (or start the stream) for inputs of up to `l.max_t_in` frames.
pub fn effect_size_workspace(
    k: &PackedConv1d,
    l: &Conv1dLimits,
) -> Result<Conv1dScratch, KernelMachineError> {
    Ok(match k.streaming {
        Some(h) => Conv1dScratch::Stream(Box::new(StreamingConv1d::new(
            k.conv.clone(),
            l.max_t_in,
            h.pad_mode(),
        )?)),
        None => Conv1dScratch::Batch(k.conv.workspace(l.max_t_in)?),
    })
}

/// Convolve `x` into `out` on `lanes` (one stream step when streaming).
pub fn effect_convolve(
    k: &PackedConv1d,
    ws: &mut Conv1dScratch,
    r: &Conv1dRequest<'_>,
    out: &mut [f32],
    lanes: &SubPool<'_>,
) -> Result<(), KernelError> {
    match ws {
        Conv1dScratch::Batch(ws) => k.conv.forward(lanes, r.x, r.t_in, out, ws),
        Conv1dScratch::Stream(stream) => stream.step(lanes, r.x, r.t_in, out),
    }
}
