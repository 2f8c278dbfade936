//! Causal convolutions with moshi's streaming semantics over weights shared
//! by every session: the model owns the packed [`Conv1d`] /
//! [`ConvTranspose1d`], a session owns only the carried history.
//!
//! - conv: the last `span − stride` input frames are prepended to the next
//!   step (zeros at start, or the first sample repeated for `replicate`), so
//!   a batch call is one big step from a fresh history.
//! - transposed conv: the `kernel − stride` overlapping output frames are
//!   carried (minus bias) into the next step's start, as `StreamingConvTranspose1d`.

use super::error::MimiError;
use crate::kernels::conv1d::{Conv1d, Conv1dParams, Conv1dWorkspace};
use crate::kernels::conv_transpose1d::{
    ConvTranspose1d, ConvTranspose1dParams, ConvTranspose1dWorkspace,
};
use voxlane_runtime::Fork;

/// Scratch shared by every conv of one session (sized at construction).
#[derive(Debug, Default)]
pub struct ConvScratch {
    /// `[c_in, history + t]` input with its history prepended.
    cat: Vec<f32>,
    /// Untrimmed transposed-conv output.
    full: Vec<f32>,
    ws: Conv1dWorkspace,
    tr_ws: ConvTranspose1dWorkspace,
}

fn grow(v: &mut Vec<f32>, n: usize) {
    if v.len() < n {
        v.resize(n, 0.0);
    }
}

/// Carried input frames of one causal conv.
#[derive(Debug, Clone)]
pub struct ConvHistory {
    prev: Vec<f32>,
    first: bool,
}

impl ConvHistory {
    /// Back to the start of a stream.
    pub fn reset(&mut self) {
        self.prev.fill(0.0);
        self.first = true;
    }
}

/// A causal (left-padded) 1-D convolution, moshi `StreamingConv1d`.
#[derive(Debug, Clone)]
pub struct CausalConv {
    conv: Conv1d,
    c_in: usize,
    c_out: usize,
    stride: usize,
    hist: usize,
    replicate: bool,
}

impl CausalConv {
    /// Bind torch-layout weights `[c_out, c_in/groups, kernel]` and an optional bias.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        c_in: usize,
        c_out: usize,
        kernel: usize,
        stride: usize,
        dilation: usize,
        groups: usize,
        weight: &[f32],
        bias: Option<&[f32]>,
        replicate: bool,
    ) -> Result<Self, MimiError> {
        let params = Conv1dParams::new(c_in, c_out, kernel)
            .stride(stride)
            .dilation(dilation)
            .groups(groups);
        let span = params.span();
        if span < stride {
            return Err(MimiError::Input(format!(
                "conv kernel span {span} shorter than stride {stride}"
            )));
        }
        Ok(Self {
            conv: Conv1d::new(params, weight, bias)?,
            c_in,
            c_out,
            stride,
            hist: span - stride,
            replicate,
        })
    }

    /// Output channels.
    pub fn c_out(&self) -> usize {
        self.c_out
    }

    /// Output frames for `t` input frames.
    pub fn out_len(&self, t: usize) -> usize {
        t / self.stride
    }

    /// A fresh history.
    pub fn history(&self) -> ConvHistory {
        ConvHistory {
            prev: vec![0.0; self.c_in * self.hist],
            first: true,
        }
    }

    /// Grow `sc` so steps of up to `t` input frames allocate nothing.
    pub fn reserve(&self, sc: &mut ConvScratch, t: usize) -> Result<(), MimiError> {
        grow(&mut sc.cat, self.c_in * (self.hist + t));
        sc.ws.reserve(&self.conv, self.hist + t)?;
        Ok(())
    }

    /// `x: [c_in, t]` (t a positive multiple of the stride) → `out: [c_out, t / stride]`.
    pub fn step(
        &self,
        pool: &impl Fork,
        st: &mut ConvHistory,
        x: &[f32],
        t: usize,
        out: &mut [f32],
        sc: &mut ConvScratch,
    ) -> Result<(), MimiError> {
        if t == 0 || !t.is_multiple_of(self.stride) || x.len() != self.c_in * t {
            return Err(MimiError::Input(format!(
                "conv step of {t} frames ({} values) for {} channels, stride {}",
                x.len(),
                self.c_in,
                self.stride
            )));
        }
        let out = &mut out[..self.c_out * (t / self.stride)];
        let hist = self.hist;
        if hist == 0 {
            self.conv.forward(pool, x, t, out, &mut sc.ws)?;
            return Ok(());
        }
        let tc = hist + t;
        grow(&mut sc.cat, self.c_in * tc);
        let cat = &mut sc.cat[..self.c_in * tc];
        for ci in 0..self.c_in {
            let row = &mut cat[ci * tc..(ci + 1) * tc];
            let src = &x[ci * t..(ci + 1) * t];
            let prev = &mut st.prev[ci * hist..(ci + 1) * hist];
            if st.first && self.replicate {
                prev.fill(src[0]);
            }
            row[..hist].copy_from_slice(prev);
            row[hist..].copy_from_slice(src);
            prev.copy_from_slice(&row[t..]);
        }
        st.first = false;
        self.conv.forward(pool, cat, tc, out, &mut sc.ws)?;
        Ok(())
    }
}

/// A causal transposed conv (right trim carried over), moshi `StreamingConvTranspose1d`.
#[derive(Debug, Clone)]
pub struct CausalConvTr {
    conv: ConvTranspose1d,
    c_out: usize,
    c_in: usize,
    kernel: usize,
    stride: usize,
}

impl CausalConvTr {
    /// Bind torch-layout weights `[c_in, c_out/groups, kernel]` and an optional bias.
    pub fn new(
        c_in: usize,
        c_out: usize,
        kernel: usize,
        stride: usize,
        groups: usize,
        weight: &[f32],
        bias: Option<&[f32]>,
    ) -> Result<Self, MimiError> {
        if kernel < stride {
            return Err(MimiError::Input(format!(
                "transposed conv kernel {kernel} shorter than stride {stride}"
            )));
        }
        let params = ConvTranspose1dParams::new(c_in, c_out, kernel)
            .stride(stride)
            .groups(groups);
        Ok(Self {
            conv: ConvTranspose1d::new(params, weight, bias)?,
            c_out,
            c_in,
            kernel,
            stride,
        })
    }

    /// Output channels.
    pub fn c_out(&self) -> usize {
        self.c_out
    }

    /// Output frames for `t` input frames.
    pub fn out_len(&self, t: usize) -> usize {
        t * self.stride
    }

    /// A fresh carried overlap `[c_out, kernel − stride]`.
    pub fn partial(&self) -> Vec<f32> {
        vec![0.0; self.c_out * (self.kernel - self.stride)]
    }

    /// Grow `sc` so steps of up to `t` input frames allocate nothing.
    pub fn reserve(&self, sc: &mut ConvScratch, t: usize) -> Result<(), MimiError> {
        grow(
            &mut sc.full,
            self.c_out * ((t - 1) * self.stride + self.kernel),
        );
        sc.tr_ws.reserve(&self.conv, t)?;
        Ok(())
    }

    /// `x: [c_in, t]` → `out: [c_out, t · stride]`; `partial` carries the overlap.
    pub fn step(
        &self,
        pool: &impl Fork,
        partial: &mut [f32],
        x: &[f32],
        t: usize,
        out: &mut [f32],
        sc: &mut ConvScratch,
    ) -> Result<(), MimiError> {
        if t == 0 || x.len() != self.c_in * t {
            return Err(MimiError::Input(format!(
                "transposed conv step of {t} frames ({} values) for {} channels",
                x.len(),
                self.c_in
            )));
        }
        let (s, pt) = (self.stride, self.kernel - self.stride);
        let lf = (t - 1) * s + self.kernel;
        grow(&mut sc.full, self.c_out * lf);
        let full = &mut sc.full[..self.c_out * lf];
        self.conv.forward(pool, x, t, full, &mut sc.tr_ws)?;
        let n = t * s;
        for co in 0..self.c_out {
            let row = &mut full[co * lf..(co + 1) * lf];
            let carry = &mut partial[co * pt..(co + 1) * pt];
            for (r, c) in row.iter_mut().zip(carry.iter()) {
                *r += c;
            }
            out[co * n..(co + 1) * n].copy_from_slice(&row[..n]);
            let b = self.conv.bias().map_or(0.0, |b| b[co]);
            for (c, r) in carry.iter_mut().zip(&row[n..]) {
                *c = r - b;
            }
        }
        Ok(())
    }
}
