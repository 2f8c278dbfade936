//! 1-D convolution (batch 1, channel-major `[C, T]` f32), batch and streaming.
//!
//! Routes (each runs on the bound [`SimdLevel`], capped at the CPU's):
//! - direct ([`Conv1dRoute::Direct`], the default for `C_in/groups > 1`): a
//!   register-blocked microkernel, [`MR`] output channels × 2–4 vectors of
//!   time, accumulating `w[co, ci, k] · x[ci, t + k·d]` straight from the
//!   padded input (no im2col). Weights are packed once at bind time as
//!   `[group][co block][ci][k][MR]`; input channels are blocked by
//!   [`CI_BLOCK`] to stay in L1/L2. `stride > 1` is first rewritten as a
//!   stride-1 conv over the `stride` phases of the input (`k·d = q·s + r`
//!   reads phase `r` at offset `q`). This is the Kokoro/Mimi hot path.
//! - GEMM ([`Conv1dRoute::Gemm`]): one [`sgemm`] per kernel tap on a strided
//!   view of the padded input (`out[:, t] += W_k · x[:, t·s + k·d]`), into
//!   per-chunk tiles. Kept as a cross-check and fallback.
//! - depthwise (`C_in/groups == 1`, any channel multiplier): a vector loop
//!   over time per output channel.
//!
//! The dense routes split output time into fixed chunks of [`TIME_CHUNK`]
//! frames, the depthwise route splits channels into fixed blocks: chunk
//! boundaries depend only on the shapes, so outputs are bit-identical for
//! every thread budget. A [`Conv1dWorkspace`] reserved at bind time for the
//! largest input makes `forward` allocation-free (it grows only if too small).

use std::sync::Mutex;

use voxlane_runtime::weights::Buf;
use voxlane_runtime::Fork;

use super::conv1d_bf16::Bf16Conv;
use super::cpu::{simd_level, SimdLevel};
use super::elementwise::simd::{dispatch, SimdFn, Vf32, MAX_LANES};
use super::error::{check_len, KernelError};
use super::sgemm::{sgemm, MatRef};

/// Output frames per parallel chunk of the GEMM route (fixed: determinism).
pub const TIME_CHUNK: usize = 128;

/// Elements per parallel chunk of the padding copy (whole rows).
const PAD_CHUNK: usize = 1 << 14;
/// Parallel units the direct route aims for, splitting output rows when a
/// step has fewer time chunks than this.
const MIN_UNITS: usize = 8;
/// Output channels per parallel chunk of the depthwise route.
const DW_ROWS: usize = 16;
/// Output channels per microkernel block of the direct route.
pub const MR: usize = 6;
/// Input channels per cache block of the direct route.
pub const CI_BLOCK: usize = 64;

/// How the input is extended beyond its ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PadMode {
    /// Zeros.
    #[default]
    Zeros,
    /// Mirror without repeating the edge (PyTorch `reflect`); needs `pad < T`.
    Reflect,
    /// Repeat the edge sample (PyTorch `replicate`).
    Replicate,
}

/// Shape and hyper-parameters of a 1-D convolution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Conv1dParams {
    /// Input channels.
    pub c_in: usize,
    /// Output channels.
    pub c_out: usize,
    /// Kernel taps.
    pub kernel: usize,
    /// Step between output frames, in input frames.
    pub stride: usize,
    /// Spacing between taps.
    pub dilation: usize,
    /// Frames added before the input.
    pub pad_left: usize,
    /// Frames added after the input.
    pub pad_right: usize,
    /// Channel groups; `groups == c_in` is depthwise.
    pub groups: usize,
    /// What the padding contains.
    pub pad_mode: PadMode,
}

impl Conv1dParams {
    /// A stride-1, undilated, unpadded, ungrouped convolution.
    pub fn new(c_in: usize, c_out: usize, kernel: usize) -> Self {
        Self {
            c_in,
            c_out,
            kernel,
            stride: 1,
            dilation: 1,
            pad_left: 0,
            pad_right: 0,
            groups: 1,
            pad_mode: PadMode::Zeros,
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

    /// Set left and right padding.
    pub fn padding(mut self, left: usize, right: usize) -> Self {
        self.pad_left = left;
        self.pad_right = right;
        self
    }

    /// Set the number of groups.
    pub fn groups(mut self, groups: usize) -> Self {
        self.groups = groups;
        self
    }

    /// Set the padding mode.
    pub fn pad_mode(mut self, mode: PadMode) -> Self {
        self.pad_mode = mode;
        self
    }

    /// Input frames one output frame sees: `(kernel − 1)·dilation + 1`.
    pub fn span(&self) -> usize {
        (self.kernel - 1) * self.dilation + 1
    }

    /// Weight elements: `c_out · c_in/groups · kernel`.
    pub fn weight_len(&self) -> usize {
        self.c_out * (self.c_in / self.groups.max(1)) * self.kernel
    }

    /// Check that the parameters describe a valid convolution.
    pub fn validate(&self) -> Result<(), KernelError> {
        let bad = |what, detail: String| Err(KernelError::Param { what, detail });
        if self.c_in == 0 || self.c_out == 0 || self.kernel == 0 {
            return bad("conv1d shape", format!("zero-sized: {self:?}"));
        }
        if self.stride == 0 || self.dilation == 0 {
            return bad("conv1d stride/dilation", format!("must be ≥ 1: {self:?}"));
        }
        if self.groups == 0
            || !self.c_in.is_multiple_of(self.groups)
            || !self.c_out.is_multiple_of(self.groups)
        {
            return bad(
                "conv1d groups",
                format!(
                    "{} must divide c_in {} and c_out {}",
                    self.groups, self.c_in, self.c_out
                ),
            );
        }
        Ok(())
    }

    /// Padded input length for `t_in` input frames.
    pub fn padded_len(&self, t_in: usize) -> usize {
        t_in + self.pad_left + self.pad_right
    }

    /// Output frames for `t_in` input frames.
    pub fn out_len(&self, t_in: usize) -> Result<usize, KernelError> {
        out_len_padded(self.padded_len(t_in), self.span(), self.stride)
    }
}

/// Output frames of a conv over `t_pad` already padded frames.
pub(crate) fn out_len_padded(
    t_pad: usize,
    span: usize,
    stride: usize,
) -> Result<usize, KernelError> {
    if t_pad < span {
        return Err(KernelError::Param {
            what: "conv1d input length",
            detail: format!("padded length {t_pad} is shorter than the kernel span {span}"),
        });
    }
    Ok((t_pad - span) / stride + 1)
}

/// Write `x: [C, t]` into `dst: [C, pl + t + pr]` with the padding of `mode`;
/// `zero` is what [`PadMode::Zeros`] writes (the zero point for quantized input).
pub(crate) fn pad_into<T: Copy>(
    x: &[T],
    t: usize,
    pl: usize,
    pr: usize,
    mode: PadMode,
    zero: T,
    dst: &mut [T],
) -> Result<(), KernelError> {
    check_pad(t, pl, pr, mode)?;
    pad_rows(x, t, pl, pr, mode, zero, dst);
    Ok(())
}

/// Whether rows of `t` frames can be padded by `(pl, pr)` in `mode`.
pub(crate) fn check_pad(t: usize, pl: usize, pr: usize, mode: PadMode) -> Result<(), KernelError> {
    if t == 0 && mode != PadMode::Zeros && pl + pr > 0 {
        return Err(KernelError::Param {
            what: "conv1d padding",
            detail: "cannot reflect/replicate an empty input".into(),
        });
    }
    if mode == PadMode::Reflect && (pl >= t || pr >= t) {
        return Err(KernelError::Param {
            what: "conv1d padding",
            detail: format!("reflect padding ({pl}, {pr}) must be < input length {t}"),
        });
    }
    Ok(())
}

/// [`pad_into`]'s copy, for a padding [`check_pad`] accepted.
pub(crate) fn pad_rows<T: Copy>(
    x: &[T],
    t: usize,
    pl: usize,
    pr: usize,
    mode: PadMode,
    zero: T,
    dst: &mut [T],
) {
    let tp = pl + t + pr;
    for (src, row) in x.chunks_exact(t.max(1)).zip(dst.chunks_exact_mut(tp)) {
        row[pl..pl + t].copy_from_slice(&src[..t]);
        for j in 0..pl {
            row[j] = match mode {
                PadMode::Zeros => zero,
                PadMode::Reflect => src[pl - j],
                PadMode::Replicate => src[0],
            };
        }
        for j in 0..pr {
            row[pl + t + j] = match mode {
                PadMode::Zeros => zero,
                PadMode::Reflect => src[t - 2 - j],
                PadMode::Replicate => src[t - 1],
            };
        }
    }
}

/// Readable reference: direct loops with f64 accumulation. Returns `[c_out, t_out]`.
pub fn conv1d_reference(
    p: &Conv1dParams,
    weight: &[f32],
    bias: Option<&[f32]>,
    x: &[f32],
    t_in: usize,
) -> Result<Vec<f32>, KernelError> {
    p.validate()?;
    check_len("conv1d weight", p.weight_len(), weight.len())?;
    check_len("conv1d input", p.c_in * t_in, x.len())?;
    let tp = p.padded_len(t_in);
    let mut xp = vec![0.0; p.c_in * tp];
    pad_into(x, t_in, p.pad_left, p.pad_right, p.pad_mode, 0.0, &mut xp)?;
    let t_out = p.out_len(t_in)?;
    let (cig, cog) = (p.c_in / p.groups, p.c_out / p.groups);
    let mut y = vec![0.0; p.c_out * t_out];
    for co in 0..p.c_out {
        let g = co / cog;
        for t in 0..t_out {
            let mut acc = bias.map_or(0.0, |b| b[co] as f64);
            for ci in 0..cig {
                for k in 0..p.kernel {
                    let xv = xp[(g * cig + ci) * tp + t * p.stride + k * p.dilation];
                    acc += weight[(co * cig + ci) * p.kernel + k] as f64 * xv as f64;
                }
            }
            y[co * t_out + t] = acc as f32;
        }
    }
    Ok(y)
}

/// A raw output pointer shared by lanes that write disjoint regions.
#[derive(Clone, Copy)]
pub(crate) struct SharedOut(pub(crate) *mut f32);
// SAFETY: lanes write disjoint index sets only (documented at each use).
unsafe impl Send for SharedOut {}
// SAFETY: as above.
unsafe impl Sync for SharedOut {}

impl SharedOut {
    /// The pointer (a method, so closures capture the whole `Sync` wrapper).
    pub(crate) fn ptr(&self) -> *mut f32 {
        self.0
    }
}

/// Reusable scratch for [`Conv1d::forward`]; sized once, shared by any number of convs.
#[derive(Debug, Default, Clone)]
pub struct Conv1dWorkspace {
    /// Padded input `[C_in, T_pad]`.
    xpad: Vec<f32>,
    scratch: Scratch,
}

/// Route-specific scratch, separate from `xpad` so both can be borrowed at once.
#[derive(Debug, Default, Clone)]
struct Scratch {
    /// GEMM route: per-chunk output tiles `[chunks][C_out · TIME_CHUNK]`.
    tiles: Vec<f32>,
    /// Strided direct route: the padded input split into `stride` phases.
    phase: Vec<f32>,
    /// bf16 route: the input as bf16 channel pairs.
    pairs: Vec<u32>,
}

impl Conv1dWorkspace {
    /// Swap the padded-input buffer with `buf`: a caller holding a buffer
    /// that is dead during [`Conv1d::forward`] lends it (and takes it back
    /// with a second swap), so the two never both hold a long tensor.
    pub fn swap_padded(&mut self, buf: &mut Vec<f32>) {
        std::mem::swap(&mut self.xpad, buf);
    }

    /// Floats held (sizing reports).
    pub fn floats(&self) -> usize {
        self.xpad.len()
            + self.scratch.tiles.len()
            + self.scratch.phase.len()
            + self.scratch.pairs.len()
    }

    /// An empty workspace; grow it with [`Conv1dWorkspace::reserve`].
    pub fn new() -> Self {
        Self::default()
    }

    /// Grow so `conv` runs on inputs of up to `max_t_in` frames without allocating.
    pub fn reserve(&mut self, conv: &Conv1d, max_t_in: usize) -> Result<(), KernelError> {
        let p = &conv.params;
        let tp = p.padded_len(max_t_in);
        grow(&mut self.xpad, p.c_in * tp);
        self.scratch.reserve(conv, tp)
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.floats() * 4
    }
}

impl Scratch {
    fn reserve(&mut self, conv: &Conv1d, tp: usize) -> Result<(), KernelError> {
        let p = &conv.params;
        let t_out = out_len_padded(tp, p.span(), p.stride)?;
        match &conv.route {
            Route::Gemm => grow(
                &mut self.tiles,
                t_out.div_ceil(TIME_CHUNK) * p.c_out * TIME_CHUNK,
            ),
            Route::Phase(inner) => {
                let u = t_out + inner.params.kernel - 1;
                grow(&mut self.phase, inner.params.c_in * u);
                if let Route::Bf16(b) = &inner.route {
                    voxlane_runtime::memory::grow(&mut self.pairs, b.pack_len(u));
                }
            }
            Route::Bf16(b) => voxlane_runtime::memory::grow(&mut self.pairs, b.pack_len(tp)),
            Route::Depthwise | Route::Direct => {}
        }
        Ok(())
    }
}

/// Grow `v` to `n` elements plus [`MAX_LANES`] of slack, so a vector that
/// starts inside the last row may read past its end without leaving the buffer.
fn grow(v: &mut Vec<f32>, n: usize) {
    voxlane_runtime::memory::grow(v, n + MAX_LANES);
}

/// Which algorithm a dense (`C_in/groups > 1`) convolution uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Conv1dRoute {
    /// Register-blocked direct microkernel; `stride > 1` is first split into
    /// `stride` input phases, making it a stride-1 conv. The fast default.
    #[default]
    Direct,
    /// One [`sgemm`] per kernel tap on a strided view of the input.
    Gemm,
    /// As `Direct` with weights and inputs rounded to bf16 and f32 sums:
    /// AMX-BF16 tiles where the CPU has them, the same bits emulated
    /// elsewhere (slower than `Direct` there). See [`super::conv1d_bf16`].
    Bf16,
}

/// How the bound weights are laid out.
#[derive(Debug, Clone)]
enum Route {
    /// `[c_out, 1, kernel]` as given.
    Depthwise,
    /// `[groups][co block][c_in/groups][kernel][MR]`, zero-padded rows.
    Direct,
    /// Stride 1 on bf16 tiles (it owns the packed weights).
    Bf16(Bf16Conv),
    /// A stride-1 conv over the `stride` phases of the input (it owns the weights).
    Phase(Box<Conv1d>),
    /// `[groups][kernel][c_out/groups][c_in/groups]`, one matrix per tap.
    Gemm,
}

/// A bound 1-D convolution: parameters, weights in the route's layout, bias.
#[derive(Debug, Clone)]
pub struct Conv1d {
    params: Conv1dParams,
    route: Route,
    /// Owned, or (direct route) mapped from a weights cache.
    weights: Buf<f32>,
    bias: Option<Vec<f32>>,
    level: SimdLevel,
}

impl Conv1d {
    /// Bind weights `[c_out, c_in/groups, kernel]` and optional bias `[c_out]` (direct route).
    pub fn new(
        params: Conv1dParams,
        weight: &[f32],
        bias: Option<&[f32]>,
    ) -> Result<Self, KernelError> {
        Self::with_route(params, weight, bias, Conv1dRoute::Direct)
    }

    /// As [`Conv1d::new`] with an explicit dense route (depthwise convs ignore it).
    pub fn with_route(
        params: Conv1dParams,
        weight: &[f32],
        bias: Option<&[f32]>,
        route: Conv1dRoute,
    ) -> Result<Self, KernelError> {
        params.validate()?;
        check_len("conv1d weight", params.weight_len(), weight.len())?;
        let p = &params;
        let (cig, cog, k) = (p.c_in / p.groups, p.c_out / p.groups, p.kernel);
        Self::with_route_from(
            params,
            |g: usize, o: usize, i: usize, tap: usize| weight[((g * cog + o) * cig + i) * k + tap],
            bias,
            route,
        )
    }

    /// As [`Conv1d::with_route`], each weight read through `at(group,
    /// output in group, input in group, tap)`: a caller that derives the
    /// weights (a transposed conv's phases) packs them without building the
    /// `[c_out, c_in/groups, kernel]` array first.
    pub fn with_route_from(
        params: Conv1dParams,
        at: impl Fn(usize, usize, usize, usize) -> f32,
        bias: Option<&[f32]>,
        route: Conv1dRoute,
    ) -> Result<Self, KernelError> {
        params.validate()?;
        if let Some(b) = bias {
            check_len("conv1d bias", params.c_out, b.len())?;
        }
        let p = &params;
        let (cig, cog, k) = (p.c_in / p.groups, p.c_out / p.groups, p.kernel);
        let plain = || {
            let mut w = Vec::with_capacity(p.weight_len());
            for g in 0..p.groups {
                for o in 0..cog {
                    for i in 0..cig {
                        w.extend((0..k).map(|tap| at(g, o, i, tap)));
                    }
                }
            }
            w
        };
        let (route, weights) = if cig == 1 {
            (Route::Depthwise, plain())
        } else if route == Conv1dRoute::Gemm {
            let mut packed = vec![0.0; p.weight_len()];
            for g in 0..p.groups {
                for tap in 0..k {
                    for o in 0..cog {
                        for i in 0..cig {
                            packed[((g * k + tap) * cog + o) * cig + i] = at(g, o, i, tap);
                        }
                    }
                }
            }
            (Route::Gemm, packed)
        } else if p.stride == 1 && route == Conv1dRoute::Bf16 {
            (
                Route::Bf16(Bf16Conv::new(p, &plain(), simd_level())),
                Vec::new(),
            )
        } else if p.stride == 1 {
            let blocks = cog.div_ceil(MR);
            let mut direct = vec![0.0; p.groups * blocks * cig * k * MR];
            // In runs of 16 inputs: a run's weights of every output sit in
            // 16 source rows per output block (a sweep of all inputs per
            // block would stride whole rows, and a transposed conv's source
            // strides whole output planes, missing the TLB on every read).
            const RUN: usize = 16;
            for g in 0..p.groups {
                for i0 in (0..cig).step_by(RUN) {
                    for b in 0..blocks {
                        for i in i0..(i0 + RUN).min(cig) {
                            let dst =
                                &mut direct[((g * blocks + b) * cig + i) * k * MR..][..k * MR];
                            for (tap, lanes) in dst.chunks_exact_mut(MR).enumerate() {
                                for (r, d) in lanes.iter_mut().enumerate() {
                                    let o = b * MR + r;
                                    if o < cog {
                                        *d = at(g, o, i, tap);
                                    }
                                }
                            }
                        }
                    }
                }
            }
            (Route::Direct, direct)
        } else {
            // Tap k reads x[t·s + k·d] = phase_r[t + q] with k·d = q·s + r: a
            // stride-1 conv over c_in·s phase channels with q < Q taps.
            let s = p.stride;
            let q_taps = (p.span() - 1) / s + 1;
            let inner_p = Conv1dParams::new(p.c_in * s, p.c_out, q_taps).groups(p.groups);
            let mut w2 = vec![0.0; inner_p.weight_len()];
            for g in 0..p.groups {
                for o in 0..cog {
                    for i in 0..cig {
                        for tap in 0..k {
                            let (q, r) = (tap * p.dilation / s, tap * p.dilation % s);
                            w2[((g * cog + o) * cig * s + i * s + r) * q_taps + q] =
                                at(g, o, i, tap);
                        }
                    }
                }
            }
            let inner = Conv1d::with_route(inner_p, &w2, bias, route)?;
            (Route::Phase(Box::new(inner)), Vec::new())
        };
        Ok(Self {
            params,
            route,
            weights: Buf::owned(weights),
            bias: bias.map(<[f32]>::to_vec),
            level: simd_level(),
        })
    }

    /// The direct route's packed weights (what a weights cache keeps; the
    /// layout is the same on every SIMD level), `None` on other routes.
    pub fn direct_packed(&self) -> Option<&[f32]> {
        matches!(self.route, Route::Direct).then_some(&self.weights[..])
    }

    /// A direct-route conv from weights [`Conv1d::direct_packed`] gave
    /// (e.g. mapped from a weights cache), checked against `params`.
    pub fn from_direct_packed(
        params: Conv1dParams,
        packed: Buf<f32>,
        bias: Option<&[f32]>,
    ) -> Result<Self, KernelError> {
        params.validate()?;
        let p = &params;
        let (cig, cog) = (p.c_in / p.groups, p.c_out / p.groups);
        if p.stride != 1 || cig == 1 {
            return Err(KernelError::Param {
                what: "conv1d packed weights",
                detail: format!("{p:?} does not run on the direct route"),
            });
        }
        let len = p.groups * cog.div_ceil(MR) * cig * p.kernel * MR;
        check_len("conv1d packed weights", len, packed.len())?;
        if let Some(b) = bias {
            check_len("conv1d bias", p.c_out, b.len())?;
        }
        Ok(Self {
            params,
            route: Route::Direct,
            weights: packed,
            bias: bias.map(<[f32]>::to_vec),
            level: simd_level(),
        })
    }

    /// The convolution's parameters.
    pub fn params(&self) -> &Conv1dParams {
        &self.params
    }

    /// Allow AMX-BF16 tiles on the bf16 route (default: on; off, the
    /// AVX-512 level takes `vdpbf16ps` where the CPU has AVX512-BF16).
    pub fn set_bf16_amx(&mut self, on: bool) {
        let level = self.level;
        match &mut self.route {
            Route::Bf16(b) => b.set_amx(on, level),
            Route::Phase(inner) => inner.set_bf16_amx(on),
            _ => {}
        }
    }

    /// Whether this conv (or its stride-1 phases) runs on AMX-BF16 tiles.
    pub fn uses_bf16_tiles(&self) -> bool {
        match &self.route {
            Route::Bf16(b) => b.uses_amx(),
            Route::Phase(inner) => inner.uses_bf16_tiles(),
            _ => false,
        }
    }

    /// Choose the SIMD route (capped at what the CPU supports; default: the best).
    pub fn set_level(&mut self, level: SimdLevel) {
        self.level = level;
        match &mut self.route {
            Route::Phase(inner) => inner.set_level(level),
            Route::Bf16(b) => b.set_level(level),
            _ => {}
        }
    }

    /// A workspace sized for inputs of up to `max_t_in` frames.
    pub fn workspace(&self, max_t_in: usize) -> Result<Conv1dWorkspace, KernelError> {
        let mut ws = Conv1dWorkspace::new();
        ws.reserve(self, max_t_in)?;
        Ok(ws)
    }

    /// `out: [c_out, out_len(t_in)] = conv(x: [c_in, t_in])`.
    pub fn forward(
        &self,
        pool: &impl Fork,
        x: &[f32],
        t_in: usize,
        out: &mut [f32],
        ws: &mut Conv1dWorkspace,
    ) -> Result<(), KernelError> {
        let p = &self.params;
        check_len("conv1d input", p.c_in * t_in, x.len())?;
        let tp = p.padded_len(t_in);
        let t_out = p.out_len(t_in)?;
        check_len("conv1d output", p.c_out * t_out, out.len())?;
        // Routes that read exactly `tp` frames per row (no slack past the
        // end) take an unpadded input as it is: one copy less.
        let exact_reads = matches!(self.route, Route::Bf16(_) | Route::Phase(_));
        if exact_reads && p.pad_left == 0 && p.pad_right == 0 {
            return self.run_padded(pool, x, tp, out, &mut ws.scratch);
        }
        grow(&mut ws.xpad, p.c_in * tp);
        // Padding rows on the lanes (a plain copy, any split gives the same values).
        check_pad(t_in, p.pad_left, p.pad_right, p.pad_mode)?;
        let rows = (PAD_CHUNK / tp.max(1)).max(1);
        pool.for_each_chunk_mut(&mut ws.xpad[..p.c_in * tp], rows * tp, |i, dst| {
            let r0 = i * rows;
            let src = &x[r0 * t_in..(r0 + dst.len() / tp) * t_in];
            pad_rows(src, t_in, p.pad_left, p.pad_right, p.pad_mode, 0.0, dst);
        })?;
        self.run_padded(pool, &ws.xpad, tp, out, &mut ws.scratch)
    }

    /// Convolve an already padded `xpad: [c_in, tp]` (no further padding);
    /// elements past `c_in · tp` are slack the direct route may read and ignore.
    fn run_padded(
        &self,
        pool: &impl Fork,
        xpad: &[f32],
        tp: usize,
        out: &mut [f32],
        scratch: &mut Scratch,
    ) -> Result<(), KernelError> {
        let p = &self.params;
        let t_out = out_len_padded(tp, p.span(), p.stride)?;
        check_len("conv1d output", p.c_out * t_out, out.len())?;
        if xpad.len() < p.c_in * tp {
            check_len("conv1d padded input", p.c_in * tp, xpad.len())?;
        }
        scratch.reserve(self, tp)?;
        match &self.route {
            Route::Depthwise => self.run_depthwise(pool, xpad, tp, t_out, out),
            Route::Direct => self.run_direct(pool, xpad, tp, t_out, out),
            Route::Bf16(b) => b.forward(
                pool,
                self.level,
                xpad,
                tp,
                self.bias.as_deref(),
                out,
                &mut scratch.pairs,
            ),
            Route::Gemm => self.run_gemm(pool, xpad, tp, t_out, out, &mut scratch.tiles),
            Route::Phase(inner) => {
                let (s, q) = (p.stride, inner.params.kernel);
                let u = t_out + q - 1;
                // Input rows split into their phases on the lanes (a copy).
                let rows = (PAD_CHUNK / (s * u).max(1)).max(1);
                let phase = &mut scratch.phase[..p.c_in * s * u];
                pool.for_each_chunk_mut(phase, rows * s * u, |i, chunk| {
                    for (j, block) in chunk.chunks_exact_mut(s * u).enumerate() {
                        let ci = i * rows + j;
                        let src = &xpad[ci * tp..(ci + 1) * tp];
                        for (r, dst) in block.chunks_exact_mut(u).enumerate() {
                            // Frames past the input only meet zero weights.
                            dst.fill(0.0);
                            for (d, x) in dst.iter_mut().zip(src.iter().skip(r).step_by(s)) {
                                *d = *x;
                            }
                        }
                    }
                })?;
                match &inner.route {
                    Route::Bf16(b) => b.forward(
                        pool,
                        inner.level,
                        &scratch.phase,
                        u,
                        inner.bias.as_deref(),
                        out,
                        &mut scratch.pairs,
                    ),
                    _ => inner.run_direct(pool, &scratch.phase, u, t_out, out),
                }
            }
        }
    }

    fn run_gemm(
        &self,
        pool: &impl Fork,
        xpad: &[f32],
        tp: usize,
        t_out: usize,
        out: &mut [f32],
        tiles: &mut [f32],
    ) -> Result<(), KernelError> {
        let p = &self.params;
        let (cig, cog, k) = (p.c_in / p.groups, p.c_out / p.groups, p.kernel);
        let tile_len = p.c_out * TIME_CHUNK;
        let chunks = t_out.div_ceil(TIME_CHUNK);
        let tiles = &mut tiles[..chunks * tile_len];
        let dst = SharedOut(out.as_mut_ptr());
        let failure: Mutex<Option<KernelError>> = Mutex::new(None);
        pool.for_each_chunk_mut(tiles, tile_len, |ci, tile| {
            let t0 = ci * TIME_CHUNK;
            let tc = TIME_CHUNK.min(t_out - t0);
            let result = (|| -> Result<(), KernelError> {
                for g in 0..p.groups {
                    let ctile = &mut tile[g * cog * tc..(g + 1) * cog * tc];
                    for tap in 0..k {
                        let w0 = (g * k + tap) * cog * cig;
                        let a = MatRef::row_major(&self.weights[w0..w0 + cog * cig], cig);
                        let x0 = g * cig * tp + t0 * p.stride + tap * p.dilation;
                        let b = MatRef {
                            data: &xpad[x0..],
                            row_stride: tp,
                            col_stride: p.stride,
                        };
                        sgemm(cog, tc, cig, a, b, ctile, tc, tap > 0)?;
                    }
                }
                Ok(())
            })();
            if let Err(e) = result {
                *failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
                return;
            }
            for co in 0..p.c_out {
                let bias = self.bias.as_ref().map_or(0.0, |b| b[co]);
                let src = &tile[co * tc..(co + 1) * tc];
                // SAFETY: chunk `ci` alone writes columns t0..t0+tc of each row,
                // all inside `out` (checked length c_out · t_out).
                let row =
                    unsafe { std::slice::from_raw_parts_mut(dst.ptr().add(co * t_out + t0), tc) };
                for (d, s) in row.iter_mut().zip(src) {
                    *d = s + bias;
                }
            }
        })?;
        match failure.into_inner().unwrap_or_else(|e| e.into_inner()) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn run_direct(
        &self,
        pool: &impl Fork,
        xpad: &[f32],
        tp: usize,
        t_out: usize,
        out: &mut [f32],
    ) -> Result<(), KernelError> {
        let dst = SharedOut(out.as_mut_ptr());
        // Units of TIME_CHUNK frames × a share of the output-row blocks: a
        // short streaming step still gives every lane work. Each output's
        // sum runs in the same order whichever unit computes it.
        let p = &self.params;
        let time_chunks = t_out.div_ceil(TIME_CHUNK);
        let blocks = (p.c_out / p.groups).div_ceil(MR);
        let parts = MIN_UNITS.div_ceil(time_chunks).clamp(1, blocks.max(1));
        let per_part = blocks.div_ceil(parts).max(1);
        let parts = blocks.div_ceil(per_part).max(1);
        pool.for_each_chunk(time_chunks * parts, 1, |units| {
            for u in units {
                let (tc, part) = (u / parts, u % parts);
                let t0 = tc * TIME_CHUNK;
                dispatch(
                    self.level,
                    DirectChunk {
                        conv: self,
                        xpad,
                        tp,
                        t_out,
                        t0,
                        t1: (t0 + TIME_CHUNK).min(t_out),
                        b0: part * per_part,
                        b1: ((part + 1) * per_part).min(blocks),
                        out: dst,
                    },
                )
            }
        })?;
        Ok(())
    }

    fn run_depthwise(
        &self,
        pool: &impl Fork,
        xpad: &[f32],
        tp: usize,
        t_out: usize,
        out: &mut [f32],
    ) -> Result<(), KernelError> {
        let p = &self.params;
        let mult = p.c_out / p.c_in;
        if t_out == 0 {
            return Ok(());
        }
        pool.for_each_chunk_mut(out, DW_ROWS * t_out, |ci, rows| {
            for (r, row) in rows.chunks_exact_mut(t_out).enumerate() {
                let co = ci * DW_ROWS + r;
                let src = &xpad[(co / mult) * tp..(co / mult + 1) * tp];
                let w = &self.weights[co * p.kernel..(co + 1) * p.kernel];
                let bias = self.bias.as_ref().map_or(0.0, |b| b[co]);
                dispatch(
                    self.level,
                    DepthwiseRow {
                        src,
                        w,
                        bias,
                        stride: p.stride,
                        dilation: p.dilation,
                        row,
                    },
                );
            }
        })?;
        Ok(())
    }
}

/// Moshi's causal `StreamingConv1d`: keeps the last `span − stride` input
/// frames and prepends them to the next step, so chunk-by-chunk output equals
/// the batch conv with causal left padding of `span − stride` frames.
#[derive(Debug, Clone)]
pub struct StreamingConv1d {
    conv: Conv1d,
    /// `[c_in, span − stride]` carried input frames.
    previous: Vec<f32>,
    /// Replicate the first sample into the initial history (else zeros).
    replicate: bool,
    first: bool,
    ws: Conv1dWorkspace,
}

impl StreamingConv1d {
    /// Wrap an unpadded conv; `pad_mode` is `Zeros` (moshi `constant`) or `Replicate`.
    pub fn new(conv: Conv1d, max_t_in: usize, pad_mode: PadMode) -> Result<Self, KernelError> {
        let p = conv.params;
        if p.pad_left != 0
            || p.pad_right != 0
            || p.span() < p.stride
            || pad_mode == PadMode::Reflect
        {
            return Err(KernelError::Param {
                what: "streaming conv1d",
                detail: format!("needs an unpadded conv with span ≥ stride and zero/replicate history: {p:?}, {pad_mode:?}"),
            });
        }
        let tp = p.span() - p.stride;
        let mut ws = Conv1dWorkspace::new();
        grow(&mut ws.xpad, p.c_in * (tp + max_t_in));
        ws.scratch.reserve(&conv, tp + max_t_in.max(p.stride))?;
        Ok(Self {
            previous: vec![0.0; p.c_in * tp],
            replicate: pad_mode == PadMode::Replicate,
            first: true,
            ws,
            conv,
        })
    }

    /// The batch conv this stream reproduces: causal left padding `span − stride`.
    pub fn batch_params(&self) -> Conv1dParams {
        let p = self.conv.params;
        let mode = if self.replicate {
            PadMode::Replicate
        } else {
            PadMode::Zeros
        };
        p.padding(p.span() - p.stride, 0).pad_mode(mode)
    }

    /// Forget the history (start of a new stream).
    pub fn reset(&mut self) {
        self.previous.fill(0.0);
        self.first = true;
    }

    /// One step: `x: [c_in, t_in]` with `t_in` a positive multiple of the stride → `out: [c_out, t_in / stride]`.
    pub fn step(
        &mut self,
        pool: &impl Fork,
        x: &[f32],
        t_in: usize,
        out: &mut [f32],
    ) -> Result<(), KernelError> {
        let p = self.conv.params;
        if t_in == 0 || !t_in.is_multiple_of(p.stride) {
            return Err(KernelError::Param {
                what: "streaming conv1d step",
                detail: format!(
                    "{t_in} frames is not a positive multiple of stride {}",
                    p.stride
                ),
            });
        }
        check_len("streaming conv1d input", p.c_in * t_in, x.len())?;
        check_len(
            "streaming conv1d output",
            p.c_out * (t_in / p.stride),
            out.len(),
        )?;
        let hist = p.span() - p.stride;
        let tc = hist + t_in;
        grow(&mut self.ws.xpad, p.c_in * tc);
        let xpad = &mut self.ws.xpad[..p.c_in * tc];
        for ci in 0..p.c_in {
            let (row, src) = (
                &mut xpad[ci * tc..(ci + 1) * tc],
                &x[ci * t_in..(ci + 1) * t_in],
            );
            let prev = &mut self.previous[ci * hist..(ci + 1) * hist];
            if self.first && self.replicate {
                prev.fill(src[0]);
            }
            row[..hist].copy_from_slice(prev);
            row[hist..].copy_from_slice(src);
        }
        self.first = false;
        self.conv
            .run_padded(pool, &self.ws.xpad, tc, out, &mut self.ws.scratch)?;
        for ci in 0..p.c_in {
            let row = &self.ws.xpad[ci * tc..(ci + 1) * tc];
            self.previous[ci * hist..(ci + 1) * hist].copy_from_slice(&row[tc - hist..]);
        }
        Ok(())
    }
}

/// Output columns `t0..t1` of a stride-1 dense convolution (direct route).
struct DirectChunk<'a> {
    conv: &'a Conv1d,
    xpad: &'a [f32],
    tp: usize,
    t_out: usize,
    t0: usize,
    t1: usize,
    /// The blocks of MR output rows (within each group) this unit computes.
    b0: usize,
    b1: usize,
    /// `[c_out, t_out]`; this unit alone writes columns `t0..t1` of its rows.
    out: SharedOut,
}

impl SimdFn for DirectChunk<'_> {
    type Out = ();
    #[inline(always)]
    fn call<V: Vf32>(self) {
        // Register budget: MR × NV accumulators plus NV inputs and one weight.
        match V::LANES {
            8 => self.run::<V, 2>(),
            _ => self.run::<V, 4>(),
        }
    }
}

impl DirectChunk<'_> {
    #[inline(always)]
    fn run<V: Vf32, const NV: usize>(&self) {
        let p = &self.conv.params;
        let (cig, cog, k) = (p.c_in / p.groups, p.c_out / p.groups, p.kernel);
        let blocks = cog.div_ceil(MR);
        let l = V::LANES;
        for g in 0..p.groups {
            for ci0 in (0..cig).step_by(CI_BLOCK) {
                let cis = CI_BLOCK.min(cig - ci0);
                let first = ci0 == 0;
                for b in self.b0..self.b1.min(blocks) {
                    let rows = MR.min(cog - b * MR);
                    let co0 = g * cog + b * MR;
                    let w0 = ((g * blocks + b) * cig + ci0) * k * MR;
                    let w = &self.conv.weights[w0..w0 + cis * k * MR];
                    let x0 = (g * cig + ci0) * self.tp;
                    // To the end of the buffer: the tail block may read into the slack.
                    let x = &self.xpad[x0..];
                    let mut t = self.t0;
                    while t + NV * l <= self.t1 {
                        self.block::<V, NV>(w, x, cis, co0, rows, t, first, NV * l);
                        t += NV * l;
                    }
                    while t + l <= self.t1 {
                        self.block::<V, 1>(w, x, cis, co0, rows, t, first, l);
                        t += l;
                    }
                    if t < self.t1 && x.len() >= (cis - 1) * self.tp + t + l + (k - 1) * p.dilation
                    {
                        // Narrower than a vector: compute a whole one, keep the valid lanes.
                        self.block::<V, 1>(w, x, cis, co0, rows, t, first, self.t1 - t);
                    } else {
                        for tt in t..self.t1 {
                            self.column(w, x, cis, co0, rows, tt, first);
                        }
                    }
                }
            }
        }
    }

    /// `MR × NV·LANES` outputs at column `t` over the input channels of `x`;
    /// only the first `valid` columns are read from / written to `out`.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn block<V: Vf32, const NV: usize>(
        &self,
        w: &[f32],
        x: &[f32],
        cis: usize,
        co0: usize,
        rows: usize,
        t: usize,
        first: bool,
        valid: usize,
    ) {
        let p = &self.conv.params;
        let (k, d, tp, l) = (p.kernel, p.dilation, self.tp, V::LANES);
        let out = self.out.ptr();
        // Constant-index loops only: keeps the MR × NV accumulators in registers.
        let mut acc = [[V::splat(0.0); NV]; MR];
        #[allow(clippy::needless_range_loop)]
        for r in 0..MR {
            if r < rows {
                let row = (co0 + r) * self.t_out + t;
                for j in 0..NV {
                    acc[r][j] = if first {
                        V::splat(self.conv.bias.as_ref().map_or(0.0, |b| b[co0 + r]))
                    } else if valid == NV * l {
                        // SAFETY: row + NV·LANES ≤ (co0 + r)·t_out + t1 ≤ out.len();
                        // columns t0..t1 of every row belong to this chunk alone.
                        unsafe { V::load(out.wrapping_add(row + j * l)) }
                    } else {
                        let mut buf = [0.0f32; MAX_LANES];
                        let n = valid.saturating_sub(j * l).min(l);
                        // SAFETY: the first `valid` columns from `row` are this chunk's.
                        unsafe {
                            std::ptr::copy_nonoverlapping(
                                out.add(row + j * l),
                                buf.as_mut_ptr(),
                                n,
                            );
                            V::load(buf.as_ptr())
                        }
                    };
                }
            }
        }
        assert!(x.len() >= (cis - 1) * tp + t + NV * l + (k - 1) * d);
        assert!(w.len() >= cis * k * MR);
        // Pointer walk with wrapping arithmetic: no overflow/alignment checks
        // in the hot loop even in debug-assertion builds.
        let mut wr = w.as_ptr();
        for ci in 0..cis {
            let mut xr = x.as_ptr().wrapping_add(ci * tp + t);
            for _ in 0..k {
                // SAFETY: t + NV·LANES − 1 + (k − 1)·d < tp (t + NV·LANES ≤ t_out =
                // tp − (k − 1)·d) and ci < cis, so every load is inside `x`
                // (asserted above); `wr` walks the cis·k·MR weights of `w`.
                unsafe {
                    let mut xv = [V::splat(0.0); NV];
                    #[allow(clippy::needless_range_loop)]
                    for j in 0..NV {
                        xv[j] = V::load(xr.wrapping_add(j * l));
                    }
                    #[allow(clippy::needless_range_loop)]
                    for r in 0..MR {
                        let wv = V::broadcast(wr.wrapping_add(r));
                        for j in 0..NV {
                            acc[r][j] = wv.mul_add(xv[j], acc[r][j]);
                        }
                    }
                }
                wr = wr.wrapping_add(MR);
                xr = xr.wrapping_add(d);
            }
        }
        #[allow(clippy::needless_range_loop)]
        for r in 0..MR {
            if r < rows {
                let row = (co0 + r) * self.t_out + t;
                for j in 0..NV {
                    if valid == NV * l {
                        // SAFETY: as for the loads above.
                        unsafe { acc[r][j].store(out.wrapping_add(row + j * l)) };
                    } else {
                        let mut buf = [0.0f32; MAX_LANES];
                        let n = valid.saturating_sub(j * l).min(l);
                        // SAFETY: as above, `n` valid columns only.
                        unsafe {
                            acc[r][j].store(buf.as_mut_ptr());
                            std::ptr::copy_nonoverlapping(buf.as_ptr(), out.add(row + j * l), n);
                        }
                    }
                }
            }
        }
    }

    /// One output column (the tail narrower than a vector).
    #[allow(clippy::too_many_arguments)]
    fn column(
        &self,
        w: &[f32],
        x: &[f32],
        cis: usize,
        co0: usize,
        rows: usize,
        t: usize,
        first: bool,
    ) {
        let p = &self.conv.params;
        let (k, d, tp) = (p.kernel, p.dilation, self.tp);
        for r in 0..rows {
            let idx = (co0 + r) * self.t_out + t;
            // SAFETY: idx < out.len(), column t belongs to this chunk alone.
            let o = unsafe { &mut *self.out.ptr().add(idx) };
            let mut acc = if first {
                self.conv.bias.as_ref().map_or(0.0, |b| b[co0 + r])
            } else {
                *o
            };
            for ci in 0..cis {
                for tap in 0..k {
                    acc += w[(ci * k + tap) * MR + r] * x[ci * tp + t + tap * d];
                }
            }
            *o = acc;
        }
    }
}

/// One output row of a depthwise convolution.
struct DepthwiseRow<'a> {
    src: &'a [f32],
    w: &'a [f32],
    bias: f32,
    stride: usize,
    dilation: usize,
    row: &'a mut [f32],
}

impl SimdFn for DepthwiseRow<'_> {
    type Out = ();
    #[inline(always)]
    fn call<V: Vf32>(self) {
        let (src, w, d, s) = (self.src, self.w, self.dilation, self.stride);
        let n = self.row.len();
        let mut t = 0;
        if s == 1 {
            // Four vectors of outputs per pass: independent FMA chains.
            let step = 4 * V::LANES;
            let sp = src.as_ptr();
            while t + step <= n {
                let mut acc = [V::splat(self.bias); 4];
                for (k, &wk) in w.iter().enumerate() {
                    let wv = V::splat(wk);
                    for (j, a) in acc.iter_mut().enumerate() {
                        // SAFETY: t + step − 1 + k·d ≤ (n − 1) + (K − 1)·d < tp = src.len().
                        *a = wv.mul_add(unsafe { V::load(sp.add(t + j * V::LANES + k * d)) }, *a);
                    }
                }
                for (j, a) in acc.iter().enumerate() {
                    // SAFETY: t + step ≤ n = row.len().
                    unsafe { a.store(self.row.as_mut_ptr().add(t + j * V::LANES)) };
                }
                t += step;
            }
        }
        for (i, o) in self.row.iter_mut().enumerate().skip(t) {
            let mut acc = self.bias;
            for (k, &wk) in w.iter().enumerate() {
                acc += wk * src[i * s + k * d];
            }
            *o = acc;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::cpu::available_levels;
    use crate::kernels::test_rng::centered as rnd_vec;
    use proptest::prelude::*;
    use voxlane_runtime::LanePool;

    /// Per-element bound 1e-5·Σ|a·w| + 1e-6, with Σ|a·w| from the reference on |x|, |w|.
    fn assert_close(p: &Conv1dParams, w: &[f32], x: &[f32], t: usize, got: &[f32], want: &[f32]) {
        let aw: Vec<f32> = w.iter().map(|v| v.abs()).collect();
        let ax: Vec<f32> = x.iter().map(|v| v.abs()).collect();
        let mag = conv1d_reference(p, &aw, None, &ax, t).unwrap();
        assert_eq!(got.len(), want.len());
        for i in 0..got.len() {
            let bound = 1e-5 * mag[i] + 1e-6;
            assert!(
                (got[i] - want[i]).abs() <= bound,
                "{p:?} element {i}: {} vs {} (bound {bound})",
                got[i],
                want[i]
            );
        }
    }

    fn params_strategy() -> impl Strategy<Value = (Conv1dParams, usize)> {
        (
            1usize..5,
            1usize..4,
            1usize..8,
            1usize..4,
            1usize..4,
            0usize..5,
            0usize..5,
            0usize..3,
            1usize..300,
        )
            .prop_flat_map(|(cig, cog, k, s, d, pl, pr, mode, t)| {
                (
                    Just((cig, cog, k, s, d, pl, pr, mode, t)),
                    1usize..4,
                    any::<bool>(),
                )
            })
            .prop_map(|((cig, cog, k, s, d, pl, pr, mode, t), g, dw)| {
                let (cig, cog) = if dw { (1, cog) } else { (cig, cog) };
                let mode = [PadMode::Zeros, PadMode::Reflect, PadMode::Replicate][mode];
                let mut p = Conv1dParams::new(cig * g, cog * g, k)
                    .stride(s)
                    .dilation(d)
                    .padding(pl, pr)
                    .groups(g)
                    .pad_mode(mode);
                let t = t.max(p.span()).max(pl + 1).max(pr + 1);
                if dw && g > 1 {
                    p.groups = p.c_in;
                    p.c_out = p.c_in * cog;
                }
                (p, t)
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        #[test]
        fn matches_reference((p, t) in params_strategy(), bias in any::<bool>(), seed in any::<u64>()) {
            let w = rnd_vec(seed, p.weight_len());
            let b = rnd_vec(seed ^ 7, p.c_out);
            let x = rnd_vec(seed ^ 99, p.c_in * t);
            let bias = bias.then_some(&b[..]);
            let want = conv1d_reference(&p, &w, bias, &x, t).unwrap();
            let pool = LanePool::new(2).unwrap();
            for route in [Conv1dRoute::Direct, Conv1dRoute::Gemm] {
                let mut conv = Conv1d::with_route(p, &w, bias, route).unwrap();
                for level in available_levels() {
                    conv.set_level(level);
                    let mut ws = Conv1dWorkspace::new();
                    let mut got = vec![f32::NAN; want.len()];
                    conv.forward(&pool, &x, t, &mut got, &mut ws).unwrap();
                    assert_close(&p, &w, &x, t, &got, &want);
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(40))]

        #[test]
        fn streaming_equals_batch(
            cin in 1usize..6, cout in 1usize..6, k in 1usize..8, s in 1usize..4, d in 1usize..3,
            replicate in any::<bool>(), depthwise in any::<bool>(),
            chunks in prop::collection::vec(1usize..5, 1..6), seed in any::<u64>(),
        ) {
            let (cout, groups) = if depthwise { (cin, cin) } else { (cout, 1) };
            let p = Conv1dParams::new(cin, cout, k).stride(s).dilation(d).groups(groups);
            prop_assume!(p.span() >= s);
            let frames: usize = chunks.iter().sum();
            let t = frames * s;
            let w = rnd_vec(seed, p.weight_len());
            let b = rnd_vec(seed ^ 3, cout);
            let x = rnd_vec(seed ^ 9, cin * t);
            let mode = if replicate { PadMode::Replicate } else { PadMode::Zeros };
            let pool = LanePool::new(2).unwrap();
            let mut st = StreamingConv1d::new(Conv1d::new(p, &w, Some(&b)).unwrap(), 8, mode).unwrap();
            let bp = st.batch_params();
            let want = conv1d_reference(&bp, &w, Some(&b), &x, t).unwrap();
            prop_assert_eq!(want.len(), cout * frames);
            let mut got = vec![0.0; cout * frames];
            let mut f0 = 0;
            for &c in &chunks {
                let tc = c * s;
                let xc: Vec<f32> = (0..cin).flat_map(|ci| x[ci * t + f0 * s..ci * t + f0 * s + tc].to_vec()).collect();
                let mut oc = vec![0.0; cout * c];
                st.step(&pool, &xc, tc, &mut oc).unwrap();
                for co in 0..cout {
                    got[co * frames + f0..co * frames + f0 + c].copy_from_slice(&oc[co * c..(co + 1) * c]);
                }
                f0 += c;
            }
            assert_close(&bp, &w, &x, t, &got, &want);
        }
    }

    #[test]
    fn bit_identical_across_budgets() {
        let cases = [
            Conv1dParams::new(24, 20, 7).dilation(3).padding(9, 9),
            Conv1dParams::new(16, 16, 5).groups(16).padding(2, 2),
            Conv1dParams::new(12, 18, 4)
                .stride(2)
                .groups(3)
                .padding(1, 2),
            Conv1dParams::new(10, 14, 8).stride(4).padding(4, 0),
        ];
        let routes = [Conv1dRoute::Direct, Conv1dRoute::Gemm];
        for (p, route) in cases.into_iter().flat_map(|p| routes.map(|r| (p, r))) {
            let t = 700;
            let w = rnd_vec(1, p.weight_len());
            let b = rnd_vec(2, p.c_out);
            let x = rnd_vec(3, p.c_in * t);
            let conv = Conv1d::with_route(p, &w, Some(&b), route).unwrap();
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
        let p = Conv1dParams::new(4, 6, 3).groups(4);
        assert!(Conv1d::new(p, &[0.0; 18], None).is_err());
        let p = Conv1dParams::new(2, 2, 3);
        let conv = Conv1d::new(p, &[0.0; 12], None).unwrap();
        let pool = LanePool::new(1).unwrap();
        let mut ws = Conv1dWorkspace::new();
        let mut out = vec![0.0; 2];
        // Too short for the kernel span.
        assert!(conv
            .forward(&pool, &[0.0; 4], 2, &mut out, &mut ws)
            .is_err());
        // Wrong input length.
        assert!(conv
            .forward(&pool, &[0.0; 5], 3, &mut out, &mut ws)
            .is_err());
        let p = Conv1dParams::new(1, 1, 3)
            .padding(3, 0)
            .pad_mode(PadMode::Reflect);
        assert!(conv1d_reference(&p, &[0.0; 3], None, &[0.0; 3], 3).is_err());
    }

    /// Ad-hoc timing of Kokoro/Mimi-sized convs (run with `--ignored --nocapture`).
    #[test]
    #[ignore]
    fn time_kokoro_conv() {
        let cases = [
            (
                Conv1dParams::new(256, 256, 7).dilation(3).padding(9, 9),
                800,
            ),
            (
                Conv1dParams::new(256, 256, 3).dilation(1).padding(1, 1),
                800,
            ),
            (
                Conv1dParams::new(128, 128, 11).dilation(5).padding(25, 25),
                4800,
            ),
            (Conv1dParams::new(128, 256, 8).stride(4), 1920),
            (Conv1dParams::new(512, 256, 2), 480),
            (
                Conv1dParams::new(512, 512, 5).groups(512).padding(2, 2),
                800,
            ),
        ];
        for (p, t) in cases {
            let w = rnd_vec(1, p.weight_len());
            let x = rnd_vec(3, p.c_in * t);
            let conv = Conv1d::new(p, &w, Some(&rnd_vec(2, p.c_out))).unwrap();
            let mut ws = conv.workspace(t).unwrap();
            let t_out = p.out_len(t).unwrap();
            let mut out = vec![0.0; p.c_out * t_out];
            for threads in [1, 2] {
                let pool = LanePool::new(threads).unwrap();
                conv.forward(&pool, &x, t, &mut out, &mut ws).unwrap();
                let n = 10;
                let start = std::time::Instant::now();
                for _ in 0..n {
                    conv.forward(&pool, &x, t, &mut out, &mut ws).unwrap();
                }
                let dt = start.elapsed().as_secs_f64() / n as f64;
                let flops = 2.0 * p.weight_len() as f64 * t_out as f64;
                println!(
                    "c_in {} c_out {} k {} d {} s {} g {} T {t}, threads {threads}: {:.2} ms, {:.1} GFLOP/s",
                    p.c_in, p.c_out, p.kernel, p.dilation, p.stride, p.groups,
                    dt * 1e3,
                    flops / dt / 1e9
                );
            }
        }
    }
}
