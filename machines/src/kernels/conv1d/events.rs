//! Payloads of `conv1d`'s events.

use voxlane_actors::kernels::conv1d::{Conv1dParams, Conv1dRoute, PadMode};

/// What a causal streaming conv sees before the first frame (moshi's pad modes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CausalHistory {
    /// Zeros (moshi `constant`).
    Zeros,
    /// The first input frame, repeated (moshi `replicate`).
    Replicate,
}

impl CausalHistory {
    /// The padding mode of the equivalent batch convolution.
    pub fn pad_mode(self) -> PadMode {
        match self {
            Self::Zeros => PadMode::Zeros,
            Self::Replicate => PadMode::Replicate,
        }
    }
}

/// `prepare`: shape, weights, bias, and how the convolution runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Conv1dKernelParams {
    /// Shape and hyper-parameters (PyTorch `Conv1d` semantics).
    pub conv: Conv1dParams,
    /// Weights `[c_out, c_in/groups, kernel]`.
    pub weight: Vec<f32>,
    /// Optional bias `[c_out]`.
    pub bias: Option<Vec<f32>>,
    /// Algorithm of a dense (`c_in/groups > 1`) conv: `Direct` (the fast
    /// default), the `Gemm` cross-check route, or `Bf16` values. Depthwise
    /// convs have one.
    pub dense_route: Conv1dRoute,
    /// `Some`: a causal streaming conv (the conv must be unpadded with
    /// `span ≥ stride`); each execute is one step of the stream.
    pub streaming: Option<CausalHistory>,
}

impl Conv1dKernelParams {
    /// A batch conv on the default (direct) route.
    pub fn new(conv: Conv1dParams, weight: Vec<f32>, bias: Option<Vec<f32>>) -> Self {
        Self {
            conv,
            weight,
            bias,
            dense_route: Conv1dRoute::Direct,
            streaming: None,
        }
    }

    /// Ask for the GEMM route (dense convs only).
    pub fn gemm(mut self) -> Self {
        self.dense_route = Conv1dRoute::Gemm;
        self
    }

    /// Ask for bf16 weights and inputs with f32 sums (dense convs only; AMX-BF16 tiles).
    pub fn bf16(mut self) -> Self {
        self.dense_route = Conv1dRoute::Bf16;
        self
    }

    /// Make it a causal streaming conv starting from `history`.
    pub fn streaming(mut self, history: CausalHistory) -> Self {
        self.streaming = Some(history);
        self
    }
}

/// `bind`: the largest request the workspace must serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Conv1dLimits {
    /// Most input frames of one execute (one step, when streaming).
    pub max_t_in: usize,
}

/// `execute`: the input `[c_in, t_in]` (the output `[c_out, out_len]` travels in the sink).
#[derive(Debug, Clone, Copy)]
pub struct Conv1dRequest<'a> {
    /// Input, channel-major, `c_in · t_in` values.
    pub x: &'a [f32],
    /// Input frames.
    pub t_in: usize,
}
