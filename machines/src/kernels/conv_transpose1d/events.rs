//! Payloads of `conv_transpose1d`'s events.

use voxlane_actors::kernels::conv1d::Conv1dRoute;
use voxlane_actors::kernels::conv_transpose1d::ConvTranspose1dParams;

/// `prepare`: shape, weights, bias, and how the transposed convolution runs.
#[derive(Debug, Clone, PartialEq)]
pub struct ConvTranspose1dKernelParams {
    /// Shape and hyper-parameters (PyTorch `ConvTranspose1d` semantics).
    pub conv: ConvTranspose1dParams,
    /// Weights `[c_in, c_out/groups, kernel]`.
    pub weight: Vec<f32>,
    /// Optional bias `[c_out]`.
    pub bias: Option<Vec<f32>>,
    /// `Direct` (the default): polyphase where `dilation == 1`; `Bf16`: the
    /// same on bf16 values; `Gemm`: the GEMM + col2im route (the
    /// cross-check, and the only one for dilations).
    pub dense_route: Conv1dRoute,
    /// A causal streaming transposed conv (padding 0, dilation 1, kernel ≥
    /// stride): each execute is one step, emitting `t_in · stride` frames.
    pub streaming: bool,
}

impl ConvTranspose1dKernelParams {
    /// A batch transposed conv on the default route.
    pub fn new(conv: ConvTranspose1dParams, weight: Vec<f32>, bias: Option<Vec<f32>>) -> Self {
        Self {
            conv,
            weight,
            bias,
            dense_route: Conv1dRoute::Direct,
            streaming: false,
        }
    }

    /// Ask for the GEMM + col2im route.
    pub fn gemm(mut self) -> Self {
        self.dense_route = Conv1dRoute::Gemm;
        self
    }

    /// Ask for the polyphase conv on bf16 values (AMX-BF16 tiles; `dilation == 1`).
    pub fn bf16(mut self) -> Self {
        self.dense_route = Conv1dRoute::Bf16;
        self
    }

    /// Make it a causal streaming transposed conv.
    pub fn streaming(mut self) -> Self {
        self.streaming = true;
        self
    }
}

/// `bind`: the largest request the workspace must serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConvTranspose1dLimits {
    /// Most input frames of one execute (one step, when streaming).
    pub max_t_in: usize,
}

/// `execute`: the input `[c_in, t_in]` (the output `[c_out, out_len]` travels in the sink).
#[derive(Debug, Clone, Copy)]
pub struct ConvTranspose1dRequest<'a> {
    /// Input, channel-major, `c_in · t_in` values.
    pub x: &'a [f32],
    /// Input frames.
    pub t_in: usize,
}
