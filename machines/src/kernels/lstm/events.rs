//! Payloads of `lstm`'s events.

/// PyTorch-layout weights of one direction (owned).
#[derive(Debug, Clone, PartialEq)]
pub struct LstmDirection {
    /// `weight_ih`: `[4H, I]`, gate blocks i, f, g, o.
    pub w_ih: Vec<f32>,
    /// `weight_hh`: `[4H, H]`.
    pub w_hh: Vec<f32>,
    /// `bias_ih`: `[4H]`, if present.
    pub b_ih: Option<Vec<f32>>,
    /// `bias_hh`: `[4H]`, if present.
    pub b_hh: Option<Vec<f32>>,
}

/// ONNX `LSTM` initializers (gate blocks i, o, f, c), forward or bidirectional.
#[derive(Debug, Clone, PartialEq)]
pub struct OnnxLstm {
    /// 1 (`direction = "forward"`) or 2 (`"bidirectional"`).
    pub directions: usize,
    /// `W`: `[directions, 4H, I]`.
    pub w: Vec<f32>,
    /// `R`: `[directions, 4H, H]`.
    pub r: Vec<f32>,
    /// `B`: `[directions, 8H]` (`Wb` then `Rb`), if present.
    pub b: Option<Vec<f32>>,
}

/// The weights, in the layout they were stored in.
#[derive(Debug, Clone, PartialEq)]
pub enum LstmLayout {
    /// PyTorch layout: one entry per direction (forward, then reverse).
    PyTorch(Vec<LstmDirection>),
    /// ONNX layout, reordered at prepare.
    Onnx(OnnxLstm),
}

/// `prepare`: sizes and weights.
#[derive(Debug, Clone, PartialEq)]
pub struct LstmParams {
    /// Input features `I`.
    pub input: usize,
    /// Hidden size `H`.
    pub hidden: usize,
    /// The weights.
    pub weights: LstmLayout,
}

/// `bind`: the longest sequence the workspace must serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LstmLimits {
    /// Most time steps of one execute.
    pub max_t: usize,
}

/// `execute`: the input `[t, I]` (the output `[t, directions · H]` travels in the sink).
#[derive(Debug, Clone, Copy)]
pub struct LstmRequest<'a> {
    /// Input, time-major, `t · I` values.
    pub x: &'a [f32],
    /// Time steps.
    pub t: usize,
}
