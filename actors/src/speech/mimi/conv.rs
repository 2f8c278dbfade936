//! Causal convolutions with moshi's streaming semantics over weights shared
//! by every session: the model owns the packed [`Conv1d`] /
//! [`ConvTranspose1d`], a session owns only the carried history.
//!
//! - conv: the last `span − stride` input frames are prepended to the next
//!   step (zeros at start, or the first sample repeated for `replicate`), so
//!   a batch call is one big step from a fresh history.
//! - transposed conv: the `kernel − stride` overlapping output frames are
//!   carried (minus bias) into the next step's start, as `StreamingConvTranspose1d`.
//!
//! Routes ([`ConvRoute`], chosen per layer from its streaming frame count,
//! the weight format from the bind contract):
//! the conv kernels vectorise over time, which idles most SIMD lanes and
//! every extra thread when a streaming step has only 2–16 output frames
//! (Mimi's deep layers). There the layer is a product over output rows:
//! im2col frames `[t, c_in·k]` against the torch weight `[c_out, c_in·k]`
//! (or frames `xᵀ` against `[c_out·k, c_in]`, then overlap-add, for the
//! transposed conv), computed by `matmul_ws` on f32 (or, by the bind
//! contract, q8_0: [`ConvRoute::MatmulQ8`]) weights: grouped
//! matvecs (each weight chunk read once per 4 frames, no allocation) for a
//! streaming step's few frames, `sgemm` tiles for long batch blocks; lanes
//! split output rows into fixed chunks, so the bits do not depend on the
//! thread budget. Long steps on the conv kernels may run on bf16 values
//! ([`ConvRoute::KernelBf16`], AMX-BF16 tiles) where the contract says so.

use super::error::MimiError;
use crate::kernels::conv1d::{Conv1d, Conv1dParams, Conv1dRoute, Conv1dWorkspace};
use crate::kernels::conv_transpose1d::{
    ConvTranspose1d, ConvTranspose1dParams, ConvTranspose1dWorkspace,
};
use crate::kernels::matmul::{matmul_ws, MatmulWorkspace, WeightFormat, Weights};
use voxlane_runtime::memory::grow;
use voxlane_runtime::Fork;

/// Output frames per block (bounds the im2col scratch of long batch calls).
const BLOCK_T: usize = 64;

/// Values per parallel chunk of a step's history copy.
const COPY_CHUNK: usize = 1 << 14;

/// Streaming steps with at most this many output frames take the matmul route
/// (official shapes: SEANet decoder 25 → 15 ms/frame against a limit of 4; none at 128).
pub const MATMUL_MAX_FRAMES: usize = 16;

/// How a layer computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConvRoute {
    /// The conv kernels (vectorised over time).
    Kernel,
    /// The conv kernels on bf16 weights and inputs with f32 sums
    /// ([`Conv1dRoute::Bf16`]: AMX-BF16 tiles).
    KernelBf16,
    /// im2col + dot products over output rows (few frames per step).
    Matmul,
    /// As [`ConvRoute::Matmul`] on q8_0 weights (a quarter of the bytes a
    /// streaming step reads; `c_in·k`, or `c_in` when transposed, a multiple of 32).
    MatmulQ8,
}

impl ConvRoute {
    /// Weights `[n, k]` in this matmul route's format.
    fn weights(self, w: Vec<f32>, n: usize, k: usize) -> Result<Weights, MimiError> {
        Ok(match self {
            ConvRoute::MatmulQ8 => Weights::q8_0_act16_from_f32(&w, n, k)?,
            _ => Weights::f32(w, n, k)?,
        })
    }

    /// This route on weights the bind contract planned in `format`: the
    /// matmul route becomes [`ConvRoute::MatmulQ8`] on q8_0, either route
    /// [`ConvRoute::KernelBf16`] on bf16.
    pub fn with_format(self, format: WeightFormat) -> Self {
        match (self, format) {
            (ConvRoute::Matmul, WeightFormat::Q8_0 | WeightFormat::Q8_0Act16) => {
                ConvRoute::MatmulQ8
            }
            (ConvRoute::Kernel | ConvRoute::Matmul, WeightFormat::Bf16) => ConvRoute::KernelBf16,
            (r, _) => r,
        }
    }

    /// Whether layers on this route are products over output rows.
    fn is_matmul(self) -> bool {
        matches!(self, ConvRoute::Matmul | ConvRoute::MatmulQ8)
    }

    /// The conv kernels' dense route for this one.
    fn kernel_route(self) -> Conv1dRoute {
        match self {
            ConvRoute::KernelBf16 => Conv1dRoute::Bf16,
            _ => Conv1dRoute::Direct,
        }
    }

    /// The route for a layer whose streaming steps produce `frames` output frames.
    pub fn for_frames(frames: usize) -> Self {
        if frames <= MATMUL_MAX_FRAMES {
            ConvRoute::Matmul
        } else {
            ConvRoute::Kernel
        }
    }
}

/// A conv layer's weights in its route's layout.
#[derive(Debug, Clone)]
enum ConvImpl {
    Kernel(Conv1d),
    /// `[c_out, c_in·k]` (the torch layout) and the bias.
    Matmul(Weights, Option<Vec<f32>>),
}

/// A transposed conv layer's weights in its route's layout.
#[derive(Debug, Clone)]
enum ConvTrImpl {
    Kernel(ConvTranspose1d),
    /// `[c_out·k, c_in]`.
    Matmul(Weights),
}

/// Scratch shared by every conv of one session (sized at construction).
#[derive(Debug, Default)]
pub struct ConvScratch {
    /// `[c_in, history + t]` input with its history prepended.
    cat: Vec<f32>,
    /// Untrimmed transposed-conv output.
    full: Vec<f32>,
    /// Matmul route: `[BLOCK_T, c_in·k]` im2col frames (or `xᵀ`), and the
    /// transposed conv's `[c_out·k, BLOCK_T]` tap products.
    cols: Vec<f32>,
    rows: Vec<f32>,
    ws: Conv1dWorkspace,
    tr_ws: ConvTranspose1dWorkspace,
    /// Matmul route workspace (f32 weights need none; kept for the call).
    mm: MatmulWorkspace,
}

impl ConvScratch {
    /// Floats held (workspace rules).
    pub fn floats(&self) -> usize {
        self.cat.len()
            + self.full.len()
            + self.cols.len()
            + self.rows.len()
            + self.ws.floats()
            + self.tr_ws.floats()
            + self.mm.words()
    }
}

/// Carried input frames of one causal conv.
#[derive(Debug, Clone)]
pub struct ConvHistory {
    prev: Vec<f32>,
    first: bool,
}

impl ConvHistory {
    /// Floats held.
    pub fn floats(&self) -> usize {
        self.prev.len()
    }

    /// Back to the start of a stream.
    pub fn reset(&mut self) {
        self.prev.fill(0.0);
        self.first = true;
    }
}

/// A causal (left-padded) 1-D convolution, moshi `StreamingConv1d`.
#[derive(Debug, Clone)]
pub struct CausalConv {
    conv: ConvImpl,
    c_in: usize,
    kernel: usize,
    dilation: usize,
    c_out: usize,
    stride: usize,
    hist: usize,
    replicate: bool,
}

impl CausalConv {
    /// Bind torch-layout weights `[c_out, c_in/groups, kernel]` and an optional bias
    /// (the matmul route needs `groups == 1`; grouped convs take the kernel).
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
        route: ConvRoute,
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
        let conv = if route.is_matmul() && groups == 1 {
            if weight.len() != c_out * c_in * kernel {
                return Err(MimiError::Input(format!(
                    "conv weight of {} values for {c_out}×{c_in}×{kernel}",
                    weight.len()
                )));
            }
            ConvImpl::Matmul(
                route.weights(weight.to_vec(), c_out, c_in * kernel)?,
                bias.map(<[f32]>::to_vec),
            )
        } else {
            ConvImpl::Kernel(Conv1d::with_route(
                params,
                weight,
                bias,
                route.kernel_route(),
            )?)
        };
        Ok(Self {
            conv,
            c_in,
            kernel,
            dilation,
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
        match &self.conv {
            ConvImpl::Kernel(c) => sc.ws.reserve(c, self.hist + t)?,
            ConvImpl::Matmul(w, _) => {
                grow(&mut sc.cols, BLOCK_T * self.c_in * self.kernel);
                grow(&mut sc.rows, BLOCK_T * self.c_out);
                sc.mm.reserve(w, BLOCK_T);
            }
        }
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
        if t == 0
            || !t.is_multiple_of(self.stride)
            || x.len() != self.c_in * t
            || out.len() < self.c_out * (t / self.stride)
            || st.prev.len() != self.c_in * self.hist
        {
            return Err(MimiError::Input(format!(
                "conv step of {t} frames ({} values, {} output slots, history {}) for {} → {} channels, stride {}",
                x.len(),
                out.len(),
                st.prev.len(),
                self.c_in,
                self.c_out,
                self.stride
            )));
        }
        let out = &mut out[..self.c_out * (t / self.stride)];
        let hist = self.hist;
        if hist == 0 {
            return self.run(pool, x, t, out, sc);
        }
        let tc = hist + t;
        grow(&mut sc.cat, self.c_in * tc);
        let cat = &mut sc.cat[..self.c_in * tc];
        if st.first && self.replicate {
            for (prev, src) in st.prev.chunks_exact_mut(hist).zip(x.chunks_exact(t)) {
                prev.fill(src[0]);
            }
        }
        st.first = false;
        // Rows `[history | x]`, then the new history (each row's last
        // `hist` frames), on the lanes: whole rows per chunk.
        let rows = (COPY_CHUNK / tc).max(1);
        let prev = &st.prev;
        pool.for_each_chunk_mut(cat, rows * tc, |i, chunk| {
            for (r, row) in chunk.chunks_exact_mut(tc).enumerate() {
                let ci = i * rows + r;
                row[..hist].copy_from_slice(&prev[ci * hist..(ci + 1) * hist]);
                row[hist..].copy_from_slice(&x[ci * t..(ci + 1) * t]);
            }
        })?;
        let cat = &*cat;
        pool.for_each_chunk_mut(&mut st.prev, rows * hist, |i, chunk| {
            for (r, p) in chunk.chunks_exact_mut(hist).enumerate() {
                let ci = i * rows + r;
                p.copy_from_slice(&cat[ci * tc + t..(ci + 1) * tc]);
            }
        })?;
        let cat = std::mem::take(&mut sc.cat);
        let r = self.run(pool, &cat[..self.c_in * tc], tc, out, sc);
        sc.cat = cat;
        r
    }

    /// The unpadded conv of `xp: [c_in, tp]` on this layer's route.
    fn run(
        &self,
        pool: &impl Fork,
        xp: &[f32],
        tp: usize,
        out: &mut [f32],
        sc: &mut ConvScratch,
    ) -> Result<(), MimiError> {
        let (w, bias) = match &self.conv {
            ConvImpl::Kernel(c) => return Ok(c.forward(pool, xp, tp, out, &mut sc.ws)?),
            ConvImpl::Matmul(w, b) => (w, b.as_deref()),
        };
        let (k, s, d) = (self.kernel, self.stride, self.dilation);
        let kk = self.c_in * k;
        let t_out = (tp - (k - 1) * d - 1) / s + 1;
        let out = &mut out[..self.c_out * t_out];
        let mut t0 = 0;
        while t0 < t_out {
            let tb = BLOCK_T.min(t_out - t0);
            // im2col `[tb, c_in·k]`: frame r holds x[ci, (t0 + r)·s + j·d] at ci·k + j.
            let cols = &mut sc.cols[..tb * kk];
            pool.for_each_chunk_mut(cols, kk, |r, row| {
                let at = (t0 + r) * s;
                for (ci, taps) in row.chunks_exact_mut(k).enumerate() {
                    let src = &xp[ci * tp + at..];
                    for (j, v) in taps.iter_mut().enumerate() {
                        *v = src[j * d];
                    }
                }
            })?;
            // `[tb, c_out]` frames, then transposed into the `[c_out, t_out]` layout.
            let rows = &mut sc.rows[..tb * self.c_out];
            matmul_ws(cols, tb, kk, w, None, rows, &mut sc.mm, pool)?;
            let (rows, c_out) = (&*rows, self.c_out);
            let per = (COPY_CHUNK / t_out).max(1);
            pool.for_each_chunk_mut(out, per * t_out, |i, chunk| {
                for (j, row) in chunk.chunks_exact_mut(t_out).enumerate() {
                    let co = i * per + j;
                    let b = bias.map_or(0.0, |b| b[co]);
                    for (r, v) in row[t0..t0 + tb].iter_mut().enumerate() {
                        *v = rows[r * c_out + co] + b;
                    }
                }
            })?;
            t0 += tb;
        }
        Ok(())
    }
}

/// A causal transposed conv (right trim carried over), moshi `StreamingConvTranspose1d`.
#[derive(Debug, Clone)]
pub struct CausalConvTr {
    conv: ConvTrImpl,
    bias: Option<Vec<f32>>,
    c_out: usize,
    c_in: usize,
    kernel: usize,
    stride: usize,
}

impl CausalConvTr {
    /// Bind torch-layout weights `[c_in, c_out/groups, kernel]` and an optional bias
    /// (the matmul route needs `groups == 1`).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        c_in: usize,
        c_out: usize,
        kernel: usize,
        stride: usize,
        groups: usize,
        weight: &[f32],
        bias: Option<&[f32]>,
        route: ConvRoute,
    ) -> Result<Self, MimiError> {
        if kernel < stride {
            return Err(MimiError::Input(format!(
                "transposed conv kernel {kernel} shorter than stride {stride}"
            )));
        }
        let params = ConvTranspose1dParams::new(c_in, c_out, kernel)
            .stride(stride)
            .groups(groups);
        let conv = if route.is_matmul() && groups == 1 {
            // [c_in, c_out, k] → [(c_out, k), c_in].
            let n = c_out * kernel;
            if weight.len() != c_in * n {
                return Err(MimiError::Input(format!(
                    "transposed conv weight of {} values for {c_in}×{c_out}×{kernel}",
                    weight.len()
                )));
            }
            let mut packed = vec![0.0; weight.len()];
            for ci in 0..c_in {
                for (j, v) in weight[ci * n..(ci + 1) * n].iter().enumerate() {
                    packed[j * c_in + ci] = *v;
                }
            }
            ConvTrImpl::Matmul(route.weights(packed, n, c_in)?)
        } else {
            ConvTrImpl::Kernel(ConvTranspose1d::with_route(
                params,
                weight,
                bias,
                route.kernel_route(),
            )?)
        };
        Ok(Self {
            conv,
            bias: bias.map(<[f32]>::to_vec),
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
        match &self.conv {
            ConvTrImpl::Kernel(c) => sc.tr_ws.reserve(c, t)?,
            ConvTrImpl::Matmul(w) => {
                grow(&mut sc.cols, BLOCK_T * self.c_in);
                grow(&mut sc.rows, BLOCK_T * self.c_out * self.kernel);
                sc.mm.reserve(w, BLOCK_T);
            }
        }
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
        if t == 0
            || x.len() != self.c_in * t
            || out.len() < self.c_out * t * self.stride
            || partial.len() != self.c_out * (self.kernel - self.stride)
        {
            return Err(MimiError::Input(format!(
                "transposed conv step of {t} frames ({} values, {} output slots, carry {}) for {} → {} channels",
                x.len(),
                out.len(),
                partial.len(),
                self.c_in,
                self.c_out
            )));
        }
        let (s, pt) = (self.stride, self.kernel - self.stride);
        let lf = (t - 1) * s + self.kernel;
        grow(&mut sc.full, self.c_out * lf);
        let full = &mut sc.full[..self.c_out * lf];
        match &self.conv {
            ConvTrImpl::Kernel(c) => c.forward(pool, x, t, full, &mut sc.tr_ws)?,
            ConvTrImpl::Matmul(w) => {
                // Bias everywhere (as torch), then overlap-add each input
                // frame's taps, in frame order per output row; rows on the lanes.
                let per = (COPY_CHUNK / lf).max(1);
                let bias = self.bias.as_deref();
                pool.for_each_chunk_mut(&mut full[..], per * lf, |i, chunk| {
                    for (j, row) in chunk.chunks_exact_mut(lf).enumerate() {
                        row.fill(bias.map_or(0.0, |b| b[i * per + j]));
                    }
                })?;
                let (k, n, c_in) = (self.kernel, self.c_out * self.kernel, self.c_in);
                let mut t0 = 0;
                while t0 < t {
                    let tb = BLOCK_T.min(t - t0);
                    // [(c_out, k), tb] = W' · x[:, t0..t0 + tb], from frames `xᵀ`.
                    let cols = &mut sc.cols[..tb * c_in];
                    pool.for_each_chunk_mut(cols, c_in, |r, row| {
                        for (ci, v) in row.iter_mut().enumerate() {
                            *v = x[ci * t + t0 + r];
                        }
                    })?;
                    // `[tb, (c_out, k)]` tap products, overlap-added frame by frame.
                    let rows = &mut sc.rows[..tb * n];
                    matmul_ws(cols, tb, c_in, w, None, rows, &mut sc.mm, pool)?;
                    let rows = &*rows;
                    pool.for_each_chunk_mut(&mut full[..], per * lf, |i, chunk| {
                        for (j, row) in chunk.chunks_exact_mut(lf).enumerate() {
                            let co = i * per + j;
                            for (r, frame) in rows.chunks_exact(n).enumerate() {
                                let taps = &frame[co * k..(co + 1) * k];
                                let at = (t0 + r) * s;
                                for (d, v) in row[at..at + k].iter_mut().zip(taps) {
                                    *d += v;
                                }
                            }
                        }
                    })?;
                    t0 += tb;
                }
            }
        }
        // Per row: add the carried overlap, emit the first `n` frames, carry
        // the rest (less the bias, added again next step); rows on the lanes.
        let n = t * s;
        let rows = (COPY_CHUNK / lf).max(1);
        let carried = &*partial;
        pool.for_each_chunk_mut(full, rows * lf, |i, chunk| {
            for (j, row) in chunk.chunks_exact_mut(lf).enumerate() {
                let co = i * rows + j;
                for (r, c) in row.iter_mut().zip(&carried[co * pt..(co + 1) * pt]) {
                    *r += c;
                }
            }
        })?;
        let full = &*full;
        pool.for_each_chunk_mut(&mut out[..self.c_out * n], rows * n, |i, chunk| {
            for (j, o) in chunk.chunks_exact_mut(n).enumerate() {
                let co = i * rows + j;
                o.copy_from_slice(&full[co * lf..co * lf + n]);
            }
        })?;
        if pt > 0 {
            pool.for_each_chunk_mut(partial, rows * pt, |i, chunk| {
                for (j, carry) in chunk.chunks_exact_mut(pt).enumerate() {
                    let co = i * rows + j;
                    let b = self.bias.as_ref().map_or(0.0, |b| b[co]);
                    for (c, r) in carry.iter_mut().zip(&full[co * lf + n..(co + 1) * lf]) {
                        *c = r - b;
                    }
                }
            })?;
        }
        Ok(())
    }
}
