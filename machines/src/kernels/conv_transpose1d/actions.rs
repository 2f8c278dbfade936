//! Effects of `conv_transpose1d`: one packing action per prepare route,
//! sizing the workspace (or the stream) at bind, and the transposed
//! convolution itself.

use super::events::{ConvTranspose1dKernelParams, ConvTranspose1dLimits, ConvTranspose1dRequest};
use crate::kernels::KernelMachineError;
use voxlane_actors::kernels::conv1d::Conv1dRoute;
use voxlane_actors::kernels::conv_transpose1d::{
    ConvTranspose1d, ConvTranspose1dParams, ConvTranspose1dWorkspace, StreamingConvTranspose1d,
};
use voxlane_actors::kernels::KernelError;
use voxlane_runtime::SubPool;

/// The prepared kernel: weights packed in the route's layout, and whether it streams.
#[derive(Debug, Clone)]
pub struct PackedConvTranspose1d {
    conv: ConvTranspose1d,
    streaming: bool,
}

impl PackedConvTranspose1d {
    /// The transposed convolution's parameters.
    pub fn params(&self) -> &ConvTranspose1dParams {
        self.conv.params()
    }

    /// Whether this is the streaming route.
    pub fn streaming(&self) -> bool {
        self.streaming
    }

    /// Output frames for `t_in` input frames: `t_in · stride` when
    /// streaming, else PyTorch's length (`None` if the padding trims more).
    pub fn out_len(&self, t_in: usize) -> Option<usize> {
        if self.streaming {
            t_in.checked_mul(self.params().stride)
        } else {
            super::guards::out_len(self.params(), t_in)
        }
    }
}

/// Scratch sized at bind: a batch workspace, or the stream with its carried overlap.
#[derive(Debug, Clone)]
pub enum ConvTranspose1dScratch {
    /// Batch routes: route scratch for the largest input.
    Batch(ConvTranspose1dWorkspace),
    /// Streaming route: the causal stream (overlap, buffers, packed weights).
    Stream(Box<StreamingConvTranspose1d>),
}

fn pack(
    p: &ConvTranspose1dKernelParams,
    route: Conv1dRoute,
    streaming: bool,
) -> Result<PackedConvTranspose1d, KernelMachineError> {
    let conv = ConvTranspose1d::with_route(p.conv, &p.weight, p.bias.as_deref(), route)?;
    Ok(PackedConvTranspose1d { conv, streaming })
}

/// Pack for a causal stream (polyphase unless GEMM was asked for; the overlap is set up at bind).
pub fn effect_build_streaming(
    p: &ConvTranspose1dKernelParams,
) -> Result<PackedConvTranspose1d, KernelMachineError> {
    pack(p, p.dense_route, true)
}

/// Repack every output phase as one stride-1 conv for the direct microkernel.
pub fn effect_pack_polyphase(
    p: &ConvTranspose1dKernelParams,
) -> Result<PackedConvTranspose1d, KernelMachineError> {
    pack(p, Conv1dRoute::Direct, false)
}

/// Repack every output phase as one stride-1 conv of bf16 weight tiles.
pub fn effect_pack_polyphase_bf16(
    p: &ConvTranspose1dKernelParams,
) -> Result<PackedConvTranspose1d, KernelMachineError> {
    pack(p, Conv1dRoute::Bf16, false)
}

/// Keep `[c_in, c_out/groups, kernel]` for one GEMM per channel block plus overlap-add.
pub fn effect_pack_col2im(
    p: &ConvTranspose1dKernelParams,
) -> Result<PackedConvTranspose1d, KernelMachineError> {
    pack(p, Conv1dRoute::Gemm, false)
}

/// Keep `[c_in, c_out/groups, kernel]` for the direct scatter loop.
pub fn effect_pack_scatter(
    p: &ConvTranspose1dKernelParams,
) -> Result<PackedConvTranspose1d, KernelMachineError> {
    pack(p, Conv1dRoute::Gemm, false)
}

/// Size the workspace (or start the stream) for inputs of up to `l.max_t_in` frames.
pub fn effect_size_workspace(
    k: &PackedConvTranspose1d,
    l: &ConvTranspose1dLimits,
) -> Result<ConvTranspose1dScratch, KernelMachineError> {
    Ok(if k.streaming {
        ConvTranspose1dScratch::Stream(Box::new(StreamingConvTranspose1d::new(
            k.conv.clone(),
            l.max_t_in,
        )?))
    } else {
        ConvTranspose1dScratch::Batch(k.conv.workspace(l.max_t_in)?)
    })
}

/// Transposed-convolve `x` into `out` on `lanes` (one stream step when streaming).
pub fn effect_convolve_transposed(
    k: &PackedConvTranspose1d,
    ws: &mut ConvTranspose1dScratch,
    r: &ConvTranspose1dRequest<'_>,
    out: &mut [f32],
    lanes: &SubPool<'_>,
) -> Result<(), KernelError> {
    match ws {
        ConvTranspose1dScratch::Batch(ws) => k.conv.forward(lanes, r.x, r.t_in, out, ws),
        ConvTranspose1dScratch::Stream(stream) => stream.step(lanes, r.x, r.t_in, out),
    }
}
