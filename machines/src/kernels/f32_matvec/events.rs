//! Payloads of `kernel_f32_matvec`'s events.

/// `prepare`: the weight matrix (row-major `n × k`) and optional bias.
#[derive(Debug, Clone, PartialEq)]
pub struct MatvecParams {
    /// Output rows.
    pub n: usize,
    /// Input length.
    pub k: usize,
    /// Row-major weights, `n * k` values.
    pub weights: Vec<f32>,
    /// Optional bias, `n` values.
    pub bias: Option<Vec<f32>>,
}

/// `execute`: the input vector (the output `y[n]` travels in the sink).
#[derive(Debug, Clone, Copy)]
pub struct MatvecRequest<'a> {
    /// Input, `k` values.
    pub x: &'a [f32],
}
