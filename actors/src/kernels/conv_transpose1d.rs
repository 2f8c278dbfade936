//! Transposed 1-D convolution (batch 1, `[C, T]` f32), batch and streaming.
//!
//! Routes:
//! - polyphase (default, `dilation == 1`): output phase `ρ = (j + p) mod s`
//!   only meets taps `k ≡ ρ (mod s)`, so all `s` phases together are one
//!   stride-1 [`Conv1d`] with `s·c_out` outputs and `⌈K/s⌉` taps over the
//!   left-padded input, run on the direct AVX-512/AVX2 microkernel, then
//!   interleaved into the output.
//! - GEMM + col2im (`C_in/groups > 1`): per block of [`CO_CHUNK`] output
//!   channels, one [`sgemm`] computes every tap's contribution
//!   `cols[(co, k), t] = Σ_ci w[ci, co, k] · x[ci, t]`, then an overlap-add
//!   scatters `cols` into `y[co, t·s + k·d − p]`. Blocks own whole output
//!   rows, so lanes never share an output element.
//! - depthwise-style (`C_in/groups == 1`, e.g. Mimi's channel-wise upsample):
//!   a direct scatter loop per output channel.
//!
//! Channel blocks are fixed-size, so outputs are bit-identical for every
//! thread budget.

use std::sync::Mutex;

use voxlane_runtime::weights::Buf;
use voxlane_runtime::Fork;

use super::conv1d::{Conv1d, Conv1dParams, Conv1dRoute, Conv1dWorkspace};
use super::cpu::SimdLevel;
use super::error::{check_len, KernelError};
use super::sgemm::{sgemm, MatRef};
use voxlane_runtime::memory::grow;

/// Output channels per parallel block (fixed: determinism).
pub const CO_CHUNK: usize = 8;

/// Shape and hyper-parameters of a transposed 1-D convolution (PyTorch semantics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConvTranspose1dParams {
    /// Input channels.
    pub c_in: usize,
    /// Output channels.
    pub c_out: usize,
    /// Kernel taps.
    pub kernel: usize,
    /// Upsampling factor.
    pub stride: usize,
    /// Spacing between taps.
    pub dilation: usize,
    /// Frames trimmed from both ends of the full output.
    pub padding: usize,
    /// Extra frames added at the end (bias only beyond the full output).
    pub output_padding: usize,
    /// Channel groups.
    pub groups: usize,
}

impl ConvTranspose1dParams {
    /// A stride-1, undilated, unpadded, ungrouped transposed convolution.
    pub fn new(c_in: usize, c_out: usize, kernel: usize) -> Self {
        Self {
            c_in,
            c_out,
            kernel,
            stride: 1,
            dilation: 1,
            padding: 0,
            output_padding: 0,
            groups: 1,
        }
    }

    /// Set the stride.
    pub fn stride(mut self, stride: usize) -> Self {
        self.stride = stride;
        self
    }

    /// Set the dilation.
    pub fn dilation(mut self, dilation: usize) -> Self {
        self.dilation = dilation;
        self
    }

    /// Set padding and output padding.
    pub fn padding(mut self, padding: usize, output_padding: usize) -> Self {
        self.padding = padding;
        self.output_padding = output_padding;
        self
    }

    /// Set the number of groups.
    pub fn groups(mut self, groups: usize) -> Self {
        self.groups = groups;
        self
    }

    /// Weight elements: `c_in · c_out/groups · kernel`.
    pub fn weight_len(&self) -> usize {
        self.c_in * (self.c_out / self.groups.max(1)) * self.kernel
    }

    /// Check that the parameters describe a valid transposed convolution.
    pub fn validate(&self) -> Result<(), KernelError> {
        let bad = |what, detail: String| Err(KernelError::Param { what, detail });
        if self.c_in == 0 || self.c_out == 0 || self.kernel == 0 {
            return bad("conv_transpose1d shape", format!("zero-sized: {self:?}"));
        }
        if self.stride == 0 || self.dilation == 0 {
            return bad(
                "conv_transpose1d stride/dilation",
                format!("must be ≥ 1: {self:?}"),
            );
        }
        if self.groups == 0
            || !self.c_in.is_multiple_of(self.groups)
            || !self.c_out.is_multiple_of(self.groups)
        {
            return bad(
                "conv_transpose1d groups",
                format!("must divide both channel counts: {self:?}"),
            );
        }
        if self.output_padding >= self.stride.max(self.dilation) {
            return bad(
                "conv_transpose1d output_padding",
                format!("must be < stride or dilation: {self:?}"),
            );
        }
        Ok(())
    }

    /// Output frames for `t_in` input frames: `(t−1)·s − 2p + d·(k−1) + op + 1`.
    pub fn out_len(&self, t_in: usize) -> Result<usize, KernelError> {
        if t_in == 0 {
            return Ok(0);
        }
        let full =
            (t_in - 1) * self.stride + (self.kernel - 1) * self.dilation + 1 + self.output_padding;
        full.checked_sub(2 * self.padding)
            .ok_or_else(|| KernelError::Param {
                what: "conv_transpose1d padding",
                detail: format!(
                    "padding {} trims more than the {full} output frames",
                    self.padding
                ),
            })
    }
}

/// Readable reference: direct scatter with f64 accumulation. Returns `[c_out, out_len]`.
pub fn conv_transpose1d_reference(
    p: &ConvTranspose1dParams,
    weight: &[f32],
    bias: Option<&[f32]>,
    x: &[f32],
    t_in: usize,
) -> Result<Vec<f32>, KernelError> {
    p.validate()?;
    check_len("conv_transpose1d weight", p.weight_len(), weight.len())?;
    check_len("conv_transpose1d input", p.c_in * t_in, x.len())?;
    let t_out = p.out_len(t_in)?;
    let (cig, cog) = (p.c_in / p.groups, p.c_out / p.groups);
    let mut acc = vec![0.0f64; p.c_out * t_out];
    for co in 0..p.c_out {
        let b = bias.map_or(0.0, |b| b[co] as f64);
        acc[co * t_out..(co + 1) * t_out].fill(b);
    }
    for ci in 0..p.c_in {
        let g = ci / cig;
        for col in 0..cog {
            let co = g * cog + col;
            for k in 0..p.kernel {
                let w = weight[(ci * cog + col) * p.kernel + k] as f64;
                for t in 0..t_in {
                    let j = (t * p.stride + k * p.dilation) as isize - p.padding as isize;
                    if j >= 0 && (j as usize) < t_out {
                        acc[co * t_out + j as usize] += w * x[ci * t_in + t] as f64;
                    }
                }
            }
        }
    }
    Ok(acc.into_iter().map(|v| v as f32).collect())
}

/// Reusable scratch for [`ConvTranspose1d::forward`]; sized once for the max input length.
#[derive(Debug, Default, Clone)]
pub struct ConvTranspose1dWorkspace {
    /// GEMM route: per-block results `[blocks][CO_CHUNK · kernel][t_in]`.
    cols: Vec<f32>,
    /// Polyphase route: input with right zero padding `[c_in, t_in + extra]`.
    xin: Vec<f32>,
    /// Polyphase route: phase outputs `[groups][stride][c_out/groups][t_in + extra]`.
    phases: Vec<f32>,
    conv: Conv1dWorkspace,
}

impl ConvTranspose1dWorkspace {
    /// Swap the polyphase route's phase outputs with `buf`: a caller
    /// holding a buffer that is dead during [`ConvTranspose1d::forward`]
    /// lends it (and takes it back with a second swap), so the two never
    /// both hold a long tensor.
    pub fn swap_phases(&mut self, buf: &mut Vec<f32>) {
        std::mem::swap(&mut self.phases, buf);
    }

    /// Floats held (sizing reports).
    pub fn floats(&self) -> usize {
        self.cols.len() + self.xin.len() + self.phases.len() + self.conv.floats()
    }

    /// An empty workspace.
    pub fn new() -> Self {
        Self::default()
    }

    /// Grow so `conv` runs on inputs of up to `max_t_in` frames without allocating.
    pub fn reserve(&mut self, conv: &ConvTranspose1d, max_t_in: usize) -> Result<(), KernelError> {
        let p = &conv.params;
        match &conv.inner {
            None => grow(
                &mut self.cols,
                p.c_out.div_ceil(CO_CHUNK) * CO_CHUNK * p.kernel * max_t_in,
            ),
            Some(inner) => {
                let tl = conv.phase_len(max_t_in)?;
                grow(&mut self.xin, p.c_in * tl);
                grow(&mut self.phases, p.stride * p.c_out * tl);
                self.conv.reserve(inner, tl)?;
            }
        }
        Ok(())
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        (self.cols.len() + self.xin.len() + self.phases.len()) * 4 + self.conv.bytes()
    }
}

/// The polyphase route's stride-1 conv: phase ρ, tap q reads
/// `x[u + q − (M − 1)]`, i.e. the original tap `ρ + (M − 1 − q)·s` (zero
/// past the kernel), for `M = ⌈kernel/stride⌉` taps.
fn phase_params(p: &ConvTranspose1dParams) -> Conv1dParams {
    let m = p.kernel.div_ceil(p.stride);
    Conv1dParams::new(p.c_in, p.stride * p.c_out, m)
        .groups(p.groups)
        .padding(m - 1, 0)
}

/// The polyphase conv's bias: each output channel's, once per phase.
fn phase_bias(p: &ConvTranspose1dParams, bias: &[f32]) -> Vec<f32> {
    let (s, cog) = (p.stride, p.c_out / p.groups);
    let mut b2 = vec![0.0; s * p.c_out];
    for gi in 0..p.groups {
        for rho in 0..s {
            for col in 0..cog {
                b2[(gi * s + rho) * cog + col] = bias[gi * cog + col];
            }
        }
    }
    b2
}

/// A bound transposed convolution: parameters, weights `[c_in, c_out/groups, kernel]`, bias.
#[derive(Debug, Clone)]
pub struct ConvTranspose1d {
    params: ConvTranspose1dParams,
    /// `[c_in, c_out/groups, kernel]` (GEMM route only; the polyphase conv owns its own).
    weight: Vec<f32>,
    bias: Option<Vec<f32>>,
    /// Polyphase route: the stride-1 conv computing every output phase.
    inner: Option<Box<Conv1d>>,
}

impl ConvTranspose1d {
    /// Bind weights `[c_in, c_out/groups, kernel]` and optional bias `[c_out]` (polyphase route where possible).
    pub fn new(
        params: ConvTranspose1dParams,
        weight: &[f32],
        bias: Option<&[f32]>,
    ) -> Result<Self, KernelError> {
        Self::with_route(params, weight, bias, Conv1dRoute::Direct)
    }

    /// As [`ConvTranspose1d::new`]; `Direct` picks the polyphase route when
    /// `dilation == 1` (`Bf16`: the same on bf16 values), `Gemm` (or a
    /// dilation) the GEMM + col2im route.
    pub fn with_route(
        params: ConvTranspose1dParams,
        weight: &[f32],
        bias: Option<&[f32]>,
        route: Conv1dRoute,
    ) -> Result<Self, KernelError> {
        params.validate()?;
        check_len("conv_transpose1d weight", params.weight_len(), weight.len())?;
        if let Some(b) = bias {
            check_len("conv_transpose1d bias", params.c_out, b.len())?;
        }
        let p = &params;
        if route == Conv1dRoute::Gemm || p.dilation != 1 {
            return Ok(Self {
                params,
                weight: weight.to_vec(),
                bias: bias.map(<[f32]>::to_vec),
                inner: None,
            });
        }
        let (s, k, g) = (p.stride, p.kernel, p.groups);
        let (cig, cog) = (p.c_in / g, p.c_out / g);
        let m = k.div_ceil(s);
        let ip = phase_params(p);
        // Inner output o2 = (group, phase ρ, column) in its group's s·cog
        // outputs; its tap q reads original tap ρ + (M − 1 − q)·s (zero past
        // the kernel). Read straight from `weight` while the inner conv
        // packs (no intermediate copy of the phase weights).
        // Per (o2, q), looked up (a division per weight was most of a
        // model's load): the weight's offset in its input channel's row
        // (`[cog][k]`), or none past the kernel.
        let offset: Vec<usize> = (0..s * cog * m)
            .map(|i| {
                let (o2, q) = (i / m, i % m);
                let (rho, col) = (o2 / cog, o2 % cog);
                let tap = rho + (m - 1 - q) * s;
                if tap < k {
                    col * k + tap
                } else {
                    usize::MAX
                }
            })
            .collect();
        let at = |gi: usize, o2: usize, cil: usize, q: usize| {
            let row = &weight[(gi * cig + cil) * cog * k..][..cog * k];
            row.get(offset[o2 * m + q]).copied().unwrap_or(0.0)
        };
        let b2 = bias.map(|b| phase_bias(p, b));
        let inner = Conv1d::with_route_from(ip, at, b2.as_deref(), route)?;
        Ok(Self {
            params,
            weight: Vec::new(),
            bias: bias.map(<[f32]>::to_vec),
            inner: Some(Box::new(inner)),
        })
    }

    /// The polyphase conv's packed weights where it runs the direct route
    /// (what a weights cache keeps), else `None`.
    pub fn packed_phases(&self) -> Option<&[f32]> {
        self.inner.as_ref()?.direct_packed()
    }

    /// The polyphase route from weights [`ConvTranspose1d::packed_phases`]
    /// gave (e.g. mapped from a weights cache), checked against `params`.
    pub fn with_packed_phases(
        params: ConvTranspose1dParams,
        packed: Buf<f32>,
        bias: Option<&[f32]>,
    ) -> Result<Self, KernelError> {
        params.validate()?;
        if let Some(b) = bias {
            check_len("conv_transpose1d bias", params.c_out, b.len())?;
        }
        if params.dilation != 1 {
            return Err(KernelError::Param {
                what: "conv_transpose1d packed phases",
                detail: "a dilated transposed conv has no polyphase route".into(),
            });
        }
        let b2 = bias.map(|b| phase_bias(&params, b));
        let inner = Conv1d::from_direct_packed(phase_params(&params), packed, b2.as_deref())?;
        Ok(Self {
            params,
            weight: Vec::new(),
            bias: bias.map(<[f32]>::to_vec),
            inner: Some(Box::new(inner)),
        })
    }

    /// Choose the SIMD route of the polyphase conv (capped at what the CPU supports).
    pub fn set_level(&mut self, level: SimdLevel) {
        if let Some(inner) = &mut self.inner {
            inner.set_level(level);
        }
    }

    /// Input frames the polyphase conv sees: `t_in` plus zeros so every output phase is covered.
    fn phase_len(&self, t_in: usize) -> Result<usize, KernelError> {
        let p = &self.params;
        let t_out = p.out_len(t_in)?;
        let u = (t_out + p.padding).div_ceil(p.stride);
        Ok(t_in.max(u))
    }

    #[allow(clippy::too_many_arguments)]
    fn forward_phases(
        &self,
        pool: &impl Fork,
        inner: &Conv1d,
        x: &[f32],
        t_in: usize,
        out: &mut [f32],
        t_out: usize,
        ws: &mut ConvTranspose1dWorkspace,
    ) -> Result<(), KernelError> {
        let p = &self.params;
        let (s, cog) = (p.stride, p.c_out / p.groups);
        let tl = self.phase_len(t_in)?;
        ws.reserve(self, t_in)?;
        let input = if tl == t_in {
            x
        } else {
            let xin = &mut ws.xin[..p.c_in * tl];
            for (dst, src) in xin.chunks_exact_mut(tl).zip(x.chunks_exact(t_in)) {
                dst[..t_in].copy_from_slice(src);
                dst[t_in..].fill(0.0);
            }
            &ws.xin[..p.c_in * tl]
        };
        let phases = &mut ws.phases[..s * p.c_out * tl];
        inner.forward(pool, input, tl, phases, &mut ws.conv)?;
        let phases = &ws.phases[..s * p.c_out * tl];
        // Interleave: y[co, u·s + ρ − p] = phase[(g·s + ρ)·cog + co_l][u].
        pool.for_each_chunk_mut(out, CO_CHUNK * t_out, |bi, rows| {
            for (r, row) in rows.chunks_exact_mut(t_out).enumerate() {
                let co = bi * CO_CHUNK + r;
                let (gi, col) = (co / cog, co % cog);
                for rho in 0..s {
                    let src = &phases[((gi * s + rho) * cog + col) * tl..][..tl];
                    let u0 = p.padding.saturating_sub(rho).div_ceil(s);
                    let j0 = u0 * s + rho - p.padding;
                    if j0 >= t_out {
                        continue;
                    }
                    for (o, v) in row[j0..].iter_mut().step_by(s).zip(&src[u0..]) {
                        *o = *v;
                    }
                }
            }
        })?;
        Ok(())
    }

    /// The parameters.
    pub fn params(&self) -> &ConvTranspose1dParams {
        &self.params
    }

    /// The bias, if any.
    pub fn bias(&self) -> Option<&[f32]> {
        self.bias.as_deref()
    }

    /// A workspace sized for inputs of up to `max_t_in` frames.
    pub fn workspace(&self, max_t_in: usize) -> Result<ConvTranspose1dWorkspace, KernelError> {
        let mut ws = ConvTranspose1dWorkspace::new();
        ws.reserve(self, max_t_in)?;
        Ok(ws)
    }

    /// `out: [c_out, out_len(t_in)] = conv_transpose(x: [c_in, t_in])`.
    pub fn forward(
        &self,
        pool: &impl Fork,
        x: &[f32],
        t_in: usize,
        out: &mut [f32],
        ws: &mut ConvTranspose1dWorkspace,
    ) -> Result<(), KernelError> {
        let p = &self.params;
        check_len("conv_transpose1d input", p.c_in * t_in, x.len())?;
        let t_out = p.out_len(t_in)?;
        check_len("conv_transpose1d output", p.c_out * t_out, out.len())?;
        if t_out == 0 {
            return Ok(());
        }
        if let Some(inner) = &self.inner {
            return self.forward_phases(pool, inner, x, t_in, out, t_out, ws);
        }
        ws.reserve(self, t_in)?;
        let (cig, cog, k) = (p.c_in / p.groups, p.c_out / p.groups, p.kernel);
        let block_cols = CO_CHUNK * k * t_in;
        let failure: Mutex<Option<KernelError>> = Mutex::new(None);
        let cols = SharedCols(ws.cols.as_mut_ptr());
        pool.for_each_chunk_mut(out, CO_CHUNK * t_out, |bi, rows| {
            let co0 = bi * CO_CHUNK;
            let n_rows = rows.len() / t_out;
            for (r, row) in rows.chunks_exact_mut(t_out).enumerate() {
                row.fill(self.bias.as_ref().map_or(0.0, |b| b[co0 + r]));
            }
            if cig == 1 {
                self.scatter_direct(x, t_in, co0, rows, t_out);
                return;
            }
            // SAFETY: block `bi` alone uses cols[bi·block_cols ..][..block_cols],
            // which `reserve` sized for every block.
            let cols = unsafe {
                std::slice::from_raw_parts_mut(cols.ptr().add(bi * block_cols), block_cols)
            };
            // Rows of one block may straddle groups: one GEMM per group segment.
            let mut r0 = 0;
            while r0 < n_rows {
                let co = co0 + r0;
                let g = co / cog;
                let r1 = n_rows.min((g + 1) * cog - co0);
                let (a_col, m) = (co - g * cog, r1 - r0);
                let a = MatRef {
                    data: &self.weight[g * cig * cog * k + a_col * k..],
                    row_stride: 1,
                    col_stride: cog * k,
                };
                let b = MatRef::row_major(&x[g * cig * t_in..(g + 1) * cig * t_in], t_in);
                let c = &mut cols[r0 * k * t_in..r1 * k * t_in];
                if let Err(e) = sgemm(m * k, t_in, cig, a, b, c, t_in, false) {
                    *failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
                    return;
                }
                r0 = r1;
            }
            for (r, row) in rows.chunks_exact_mut(t_out).enumerate() {
                for tap in 0..k {
                    let src = &cols[(r * k + tap) * t_in..(r * k + tap + 1) * t_in];
                    self.overlap_add(tap, src, row);
                }
            }
        })?;
        match failure.into_inner().unwrap_or_else(|e| e.into_inner()) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// `row[t·s + tap·d − p] += src[t]` over the `t` that land inside `row`.
    #[inline]
    fn overlap_add(&self, tap: usize, src: &[f32], row: &mut [f32]) {
        let p = &self.params;
        let off = tap * p.dilation;
        // First t with t·s + off ≥ padding, first t past the end of the row.
        let t_lo = p.padding.saturating_sub(off).div_ceil(p.stride);
        let t_hi = (row.len() + p.padding)
            .saturating_sub(off)
            .div_ceil(p.stride)
            .min(src.len());
        if t_lo >= t_hi {
            return;
        }
        let j0 = t_lo * p.stride + off - p.padding;
        if p.stride == 1 {
            for (o, s) in row[j0..j0 + (t_hi - t_lo)].iter_mut().zip(&src[t_lo..t_hi]) {
                *o += s;
            }
        } else {
            for (o, s) in row[j0..].iter_mut().step_by(p.stride).zip(&src[t_lo..t_hi]) {
                *o += s;
            }
        }
    }

    /// Depthwise-style route: each output channel reads one input channel.
    fn scatter_direct(&self, x: &[f32], t_in: usize, co0: usize, rows: &mut [f32], t_out: usize) {
        let p = &self.params;
        let cog = p.c_out / p.groups;
        for (r, row) in rows.chunks_exact_mut(t_out).enumerate() {
            let co = co0 + r;
            let (ci, col) = (co / cog, co % cog);
            let xr = &x[ci * t_in..(ci + 1) * t_in];
            for tap in 0..p.kernel {
                let w = self.weight[(ci * cog + col) * p.kernel + tap];
                let off = tap * p.dilation;
                let t_lo = p.padding.saturating_sub(off).div_ceil(p.stride);
                let t_hi = (t_out + p.padding)
                    .saturating_sub(off)
                    .div_ceil(p.stride)
                    .min(t_in);
                if t_lo >= t_hi {
                    continue;
                }
                let j0 = t_lo * p.stride + off - p.padding;
                for (o, s) in row[j0..].iter_mut().step_by(p.stride).zip(&xr[t_lo..t_hi]) {
                    *o += w * s;
                }
            }
        }
    }
}

#[derive(Clone, Copy)]
struct SharedCols(*mut f32);
// SAFETY: lanes use disjoint per-block regions only (see `forward`).
unsafe impl Send for SharedCols {}
// SAFETY: as above.
unsafe impl Sync for SharedCols {}
impl SharedCols {
    fn ptr(&self) -> *mut f32 {
        self.0
    }
}

/// Moshi's `StreamingConvTranspose1d`: causal, trims `kernel − stride` frames
/// on the right, carrying them (minus bias) into the next step's start.
#[derive(Debug, Clone)]
pub struct StreamingConvTranspose1d {
    conv: ConvTranspose1d,
    /// `[c_out, kernel − stride]` overlap owed to the next step (bias removed).
    partial: Vec<f32>,
    /// Full (untrimmed) output of one step.
    full: Vec<f32>,
    ws: ConvTranspose1dWorkspace,
}

impl StreamingConvTranspose1d {
    /// Wrap an unpadded, undilated transposed conv with `kernel ≥ stride`; buffers sized for `max_t_in` frames per step.
    pub fn new(conv: ConvTranspose1d, max_t_in: usize) -> Result<Self, KernelError> {
        let p = conv.params;
        if p.padding != 0 || p.output_padding != 0 || p.dilation != 1 || p.kernel < p.stride {
            return Err(KernelError::Param {
                what: "streaming conv_transpose1d",
                detail: format!("needs padding 0, dilation 1 and kernel ≥ stride: {p:?}"),
            });
        }
        let pt = p.kernel - p.stride;
        let full = p.c_out * p.out_len(max_t_in.max(1))?;
        let ws = conv.workspace(max_t_in)?;
        Ok(Self {
            partial: vec![0.0; p.c_out * pt],
            full: vec![0.0; full],
            ws,
            conv,
        })
    }

    /// Forget the carried overlap (start of a new stream).
    pub fn reset(&mut self) {
        self.partial.fill(0.0);
    }

    /// Output frames for a step of `t_in` input frames: `t_in · stride`.
    pub fn out_len(&self, t_in: usize) -> usize {
        t_in * self.conv.params.stride
    }

    /// One step: `x: [c_in, t_in]` → `out: [c_out, t_in · stride]`.
    pub fn step(
        &mut self,
        pool: &impl Fork,
        x: &[f32],
        t_in: usize,
        out: &mut [f32],
    ) -> Result<(), KernelError> {
        let p = self.conv.params;
        let (s, pt) = (p.stride, p.kernel - p.stride);
        check_len(
            "streaming conv_transpose1d output",
            p.c_out * t_in * s,
            out.len(),
        )?;
        if t_in == 0 {
            return Ok(());
        }
        let lf = p.out_len(t_in)?;
        if self.full.len() < p.c_out * lf {
            self.full.resize(p.c_out * lf, 0.0);
        }
        let full = &mut self.full[..p.c_out * lf];
        self.conv.forward(pool, x, t_in, full, &mut self.ws)?;
        let n = t_in * s;
        for co in 0..p.c_out {
            let row = &mut full[co * lf..(co + 1) * lf];
            let carry = &mut self.partial[co * pt..(co + 1) * pt];
            for (r, c) in row.iter_mut().zip(carry.iter()) {
                *r += c;
            }
            out[co * n..(co + 1) * n].copy_from_slice(&row[..n]);
            let b = self.conv.bias.as_ref().map_or(0.0, |b| b[co]);
            for (c, r) in carry.iter_mut().zip(&row[n..]) {
                *c = r - b;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::test_rng::centered as rnd_vec;
    use proptest::prelude::*;
    use voxlane_runtime::LanePool;

    fn assert_close(
        p: &ConvTranspose1dParams,
        w: &[f32],
        x: &[f32],
        t: usize,
        got: &[f32],
        want: &[f32],
    ) {
        let aw: Vec<f32> = w.iter().map(|v| v.abs()).collect();
        let ax: Vec<f32> = x.iter().map(|v| v.abs()).collect();
        let mag = conv_transpose1d_reference(p, &aw, None, &ax, t).unwrap();
        assert_eq!(got.len(), want.len());
        for i in 0..got.len() {
            let bound = 1e-5 * mag[i] + 1e-6;
            assert!(
                (got[i] - want[i]).abs() <= bound,
                "{p:?} element {i}: {} vs {}",
                got[i],
                want[i]
            );
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        #[test]
        fn matches_reference(
            cig in 1usize..5, cog in 1usize..5, g in 1usize..4, k in 1usize..9, s in 1usize..5,
            d in 1usize..3, pad in 0usize..4, op in 0usize..3, t in 1usize..60, bias in any::<bool>(), seed in any::<u64>(),
        ) {
            let mut p = ConvTranspose1dParams::new(cig * g, cog * g, k).stride(s).dilation(d).groups(g);
            p.output_padding = op.min(s.max(d) - 1);
            p.padding = pad;
            prop_assume!(p.out_len(t).is_ok());
            let w = rnd_vec(seed, p.weight_len());
            let b = rnd_vec(seed ^ 5, p.c_out);
            let x = rnd_vec(seed ^ 77, p.c_in * t);
            let bias = bias.then_some(&b[..]);
            let want = conv_transpose1d_reference(&p, &w, bias, &x, t).unwrap();
            let pool = LanePool::new(2).unwrap();
            for route in [Conv1dRoute::Direct, Conv1dRoute::Gemm] {
                let mut conv = ConvTranspose1d::with_route(p, &w, bias, route).unwrap();
                for level in crate::kernels::cpu::available_levels() {
                    conv.set_level(level);
                    let mut ws = ConvTranspose1dWorkspace::new();
                    let mut got = vec![f32::NAN; want.len()];
                    conv.forward(&pool, &x, t, &mut got, &mut ws).unwrap();
                    assert_close(&p, &w, &x, t, &got, &want);
                }
            }
        }

        #[test]
        fn streaming_equals_batch(
            cin in 1usize..6, cout in 1usize..6, depthwise in any::<bool>(), s in 1usize..5, extra in 0usize..5,
            chunks in prop::collection::vec(1usize..6, 1..6), seed in any::<u64>(),
        ) {
            let (cout, groups) = if depthwise { (cin, cin) } else { (cout, 1) };
            let p = ConvTranspose1dParams::new(cin, cout, s + extra).stride(s).groups(groups);
            let t: usize = chunks.iter().sum();
            let w = rnd_vec(seed, p.weight_len());
            let b = rnd_vec(seed ^ 3, cout);
            let x = rnd_vec(seed ^ 9, cin * t);
            // Batch: full transposed conv, trimmed by kernel − stride on the right.
            let full = conv_transpose1d_reference(&p, &w, Some(&b), &x, t).unwrap();
            let lf = p.out_len(t).unwrap();
            let pool = LanePool::new(2).unwrap();
            let conv = ConvTranspose1d::new(p, &w, Some(&b)).unwrap();
            let mut st = StreamingConvTranspose1d::new(conv, 6).unwrap();
            let mut got = vec![0.0; cout * t * s];
            let mut t0 = 0;
            for &c in &chunks {
                let xc: Vec<f32> = (0..cin).flat_map(|ci| x[ci * t + t0..ci * t + t0 + c].to_vec()).collect();
                let mut oc = vec![0.0; cout * c * s];
                st.step(&pool, &xc, c, &mut oc).unwrap();
                for co in 0..cout {
                    got[co * t * s + t0 * s..co * t * s + (t0 + c) * s].copy_from_slice(&oc[co * c * s..(co + 1) * c * s]);
                }
                t0 += c;
            }
            for co in 0..cout {
                for j in 0..t * s {
                    let (g, wv) = (got[co * t * s + j], full[co * lf + j]);
                    prop_assert!((g - wv).abs() <= 1e-5 * (1.0 + wv.abs()), "co {co} j {j}: {g} vs {wv}");
                }
            }
        }
    }

    #[test]
    fn bit_identical_across_budgets() {
        for (p, route) in [
            ConvTranspose1dParams::new(24, 20, 12)
                .stride(6)
                .padding(3, 0),
            ConvTranspose1dParams::new(16, 16, 3)
                .stride(2)
                .padding(1, 1)
                .groups(16),
            ConvTranspose1dParams::new(12, 18, 4).stride(2).groups(3),
        ]
        .into_iter()
        .flat_map(|p| [Conv1dRoute::Direct, Conv1dRoute::Gemm].map(|r| (p, r)))
        {
            let t = 150;
            let w = rnd_vec(1, p.weight_len());
            let b = rnd_vec(2, p.c_out);
            let x = rnd_vec(3, p.c_in * t);
            let conv = ConvTranspose1d::with_route(p, &w, Some(&b), route).unwrap();
            let mut ws = conv.workspace(t).unwrap();
            let mut first: Option<Vec<f32>> = None;
            for threads in 1..=4 {
                let pool = LanePool::new(threads).unwrap();
                let mut out = vec![0.0; p.c_out * p.out_len(t).unwrap()];
                conv.forward(&pool, &x, t, &mut out, &mut ws).unwrap();
                match &first {
                    None => first = Some(out),
                    Some(f) => assert!(f.iter().zip(&out).all(|(a, b)| a.to_bits() == b.to_bits())),
                }
            }
        }
    }

    #[test]
    fn invalid_inputs_are_errors() {
        let p = ConvTranspose1dParams::new(4, 6, 3).groups(4);
        assert!(p.validate().is_err());
        let p = ConvTranspose1dParams::new(1, 1, 3).padding(0, 1);
        assert!(p.validate().is_err());
        let p = ConvTranspose1dParams::new(1, 1, 3).padding(3, 0);
        assert!(p.out_len(1).is_err());
        let conv = ConvTranspose1d::new(
            ConvTranspose1dParams::new(1, 1, 2).stride(4),
            &[0.0; 2],
            None,
        )
        .unwrap();
        assert!(StreamingConvTranspose1d::new(conv, 4).is_err());
    }

    /// Ad-hoc timing of Kokoro's upsampling convs (run with `--ignored --nocapture`).
    #[test]
    #[ignore]
    fn time_kokoro_upsample() {
        let pool = LanePool::new(1).unwrap();
        for (p, t) in [
            (
                ConvTranspose1dParams::new(512, 256, 20)
                    .stride(10)
                    .padding(5, 0),
                80,
            ),
            (
                ConvTranspose1dParams::new(256, 128, 12)
                    .stride(6)
                    .padding(3, 0),
                800,
            ),
        ] {
            let w = rnd_vec(1, p.weight_len());
            let x = rnd_vec(3, p.c_in * t);
            let t_out = p.out_len(t).unwrap();
            let mut out = vec![0.0; p.c_out * t_out];
            for route in [Conv1dRoute::Direct, Conv1dRoute::Gemm] {
                let conv = ConvTranspose1d::with_route(p, &w, None, route).unwrap();
                let mut ws = conv.workspace(t).unwrap();
                conv.forward(&pool, &x, t, &mut out, &mut ws).unwrap();
                let n = 10;
                let st = std::time::Instant::now();
                for _ in 0..n {
                    conv.forward(&pool, &x, t, &mut out, &mut ws).unwrap();
                }
                let dt = st.elapsed().as_secs_f64() / n as f64;
                let flops = 2.0 * p.weight_len() as f64 * t as f64;
                println!(
                    "{} -> {} k {} s {} T {t} {route:?}: {:.2} ms, {:.1} GFLOP/s",
                    p.c_in,
                    p.c_out,
                    p.kernel,
                    p.stride,
                    dt * 1e3,
                    flops / dt / 1e9
                );
            }
        }
    }

    #[test]
    fn packed_phases_bind_the_same_conv() {
        let p = ConvTranspose1dParams::new(6, 5, 7).stride(3).padding(2, 1);
        let w = rnd_vec(31, p.weight_len());
        let b = rnd_vec(32, 5);
        let conv = ConvTranspose1d::new(p, &w, Some(&b)).expect("conv");
        let packed = conv.packed_phases().expect("polyphase route").to_vec();
        let again = ConvTranspose1d::with_packed_phases(p, Buf::owned(packed.clone()), Some(&b))
            .expect("from packed phases");
        let (t_in, pool) = (9, LanePool::new(2).expect("pool"));
        let x = rnd_vec(33, 6 * t_in);
        let t_out = p.out_len(t_in).expect("len");
        let mut ws = conv.workspace(t_in).expect("workspace");
        let (mut y0, mut y1) = (vec![0.0; 5 * t_out], vec![0.0; 5 * t_out]);
        conv.forward(&pool, &x, t_in, &mut y0, &mut ws)
            .expect("forward");
        again
            .forward(&pool, &x, t_in, &mut y1, &mut ws)
            .expect("forward");
        assert_eq!(y0, y1);
        // Weights of another shape are refused.
        assert!(
            ConvTranspose1d::with_packed_phases(p, Buf::owned(packed[1..].to_vec()), Some(&b))
                .is_err()
        );
    }
}
