//! Int8 1-D convolution as onnxruntime runs Kokoro's int8 export:
//! `DynamicQuantizeLinear` (activations → u8 per tensor) + `ConvInteger`
//! (u8 activations × int8/uint8 weights, per-output-channel zero point → i32)
//! + dequantization `acc · (a_scale · w_scale[co]) + bias[co]`.
//!
//! `ConvInteger` computes, in wrapping i32 arithmetic,
//! `y[co, t] = Σ_{ci ∈ group(co), k} (x̃[ci, t·s + k·d] − x_zp) · (w[co, ci, k] − w_zp[co])`
//! where `x̃` is the input padded with `x_zp` (ONNX pads the quantized tensor
//! with its zero point, so padding stands for 0.0 and adds nothing).
//! Reflect/replicate padding (a separate `Pad` in ONNX) copies quantized
//! samples, which equals quantizing the padded float tensor.
//!
//! Routes (all exact modulo 2³², so every route equals [`conv_integer_reference`]):
//! - dense (`C_in/groups > 1`): the padded u8 input is packed once per call as
//!   `[group][ci/4][stride phase][u][4]` (four consecutive input channels per
//!   i32 lane; a stride is split into phases so every tap is a contiguous
//!   load), weights once at bind time as `[group][co block][ci/4][k][MR][4]`.
//!   Register tiles of [`MR`] output channels × up to 64 frames accumulate
//!   `Σ x·w` with `vpdpbusd` (AVX-512 VNNI), or by widening the input to i16
//!   and `vpmaddwd` against weights stored as i16 for that route (AVX2; exact,
//!   unlike the saturating `vpmaddubsw`; twice the bytes, ~15% off a Kokoro
//!   second on Zen 3), or scalar.
//!   On the AVX2 route a stride-1, one-group conv with `k ≥ 3` takes
//!   Winograd F(6,3) or F(6,4) tiles instead (`kernels/conv1d_winograd.rs`):
//!   4/9 of the `vpmaddwd`s per three taps, 3/8 per four (the multiply pipe
//!   is the limit), exact, so its sums are the direct route's bits.
//!   The zero points are then applied with precomputed sums:
//!   `Σ(x−zx)(w−zw) = Σxw − zx·Σw − zw·Σx + N·zx·zw`, `Σx` being the sum of
//!   the input window (per frame, from per-frame column sums).
//! - depthwise (`C_in/groups == 1`): direct `Σ (x − zx)·(w − zw)` per row.
//!
//! uint8 weights are stored shifted to int8 (`w − 128`, zero point likewise),
//! which leaves every `w − zw` unchanged. Output time is split into fixed
//! chunks of [`TIME_CHUNK`] frames (depthwise: fixed channel blocks), so
//! results never depend on the thread budget. A [`Conv1dInt8Workspace`]
//! reserved for the largest input makes every call allocation-free.

use voxlane_runtime::Fork;

use super::conv1d::{check_pad, out_len_padded, pad_into, pad_rows, Conv1dParams};
use super::conv1d_winograd as winograd;
use super::cpu::{self, simd_level, SimdLevel};
use super::error::{check_len, KernelError};
use super::matmul::{quantize_activations, ActivationQuant, IntWeights};
use super::quantize;
use super::WEIGHT_PREFETCH;
use voxlane_runtime::memory::grow;
use voxlane_runtime::weights::Buf;

/// Output channels per register tile of the dense route.
pub const MR: usize = 6;
/// Output channels per AMX block (two 16-row weight tiles).
const AMX_CO: usize = 32;
/// Output frames per AMX block (two 16-column input tiles).
const AMX_T: usize = 32;
#[cfg(target_arch = "x86_64")]
const _: () = assert!(AMX_CO == crate::kernels::amx::BLOCK && AMX_T == crate::kernels::amx::BLOCK);
/// Output frames per parallel chunk (fixed: determinism).
pub const TIME_CHUNK: usize = 128;

/// Output blocks of the Winograd GEMM sharing one pass over a unit's input
/// panels (one slot's panel stays in L1 while their weights stream).
const BLOCK_GROUP: usize = 8;

/// Winograd weights (bytes) from which a conv reads them once per batch of
/// units rather than once per unit (see `run_winograd`): past every core's
/// L2, where the units' re-reads come from memory. Below it the unit-major
/// order wins (measured: 256 channels k3, 1 MB, 2 lanes: 5% slower weight-major).
const WEIGHT_MAJOR_BYTES: usize = 2 << 20;

/// Parallel units a dense conv aims for, splitting its output channels when
/// it has fewer time chunks than this.
const MIN_UNITS: usize = 8;
/// Most output frames of one register tile.
const TILE: usize = 64;
/// Output channels per parallel block of the depthwise route.
const DW_ROWS: usize = 16;
/// Input elements per parallel chunk of the activation quantization.
const QUANT_CHUNK: usize = 1 << 14;

/// The one dequantization formula (as onnxruntime's `Cast · (a_scale · w_scale) + bias`).
#[inline]
pub fn dequantize(acc: i32, a_scale: f32, w_scale: f32, bias: Option<f32>) -> f32 {
    let v = acc as f32 * (a_scale * w_scale);
    match bias {
        Some(b) => v + b,
        None => v,
    }
}

fn per_channel<T: Copy>(what: &'static str, v: &[T], n: usize) -> Result<Vec<T>, KernelError> {
    match v.len() {
        1 => Ok(vec![v[0]; n]),
        l if l == n => Ok(v.to_vec()),
        l => Err(KernelError::Param {
            what,
            detail: format!("need 1 or c_out={n} values, got {l}"),
        }),
    }
}

/// Weight elements as i32, their length, and the valid zero-point range.
fn weight_values(w: IntWeights<'_>) -> (usize, std::ops::RangeInclusive<i32>) {
    match w {
        IntWeights::I8(d) => (d.len(), -128..=127),
        IntWeights::U8(d) => (d.len(), 0..=255),
    }
}

fn weight_at(w: IntWeights<'_>, i: usize) -> i32 {
    match w {
        IntWeights::I8(d) => d[i] as i32,
        IntWeights::U8(d) => d[i] as i32,
    }
}

fn check_weights(
    p: &Conv1dParams,
    w: IntWeights<'_>,
    w_zero_points: &[i32],
) -> Result<Vec<i32>, KernelError> {
    p.validate()?;
    let (len, range) = weight_values(w);
    check_len("conv1d int8 weight", p.weight_len(), len)?;
    let zps = per_channel("conv1d int8 zero points", w_zero_points, p.c_out)?;
    if let Some(z) = zps.iter().find(|z| !range.contains(*z)) {
        return Err(KernelError::Param {
            what: "conv1d int8 zero points",
            detail: format!("{z} is outside {range:?}"),
        });
    }
    Ok(zps)
}

/// Readable `ConvInteger` reference: `[c_out, t_out]` i32 from u8 `xq: [c_in, t_in]`.
pub fn conv_integer_reference(
    p: &Conv1dParams,
    w: IntWeights<'_>,
    w_zero_points: &[i32],
    xq: &[u8],
    x_zero_point: u8,
    t_in: usize,
) -> Result<Vec<i32>, KernelError> {
    let zps = check_weights(p, w, w_zero_points)?;
    check_len("conv1d int8 input", p.c_in * t_in, xq.len())?;
    let tp = p.padded_len(t_in);
    let mut xp = vec![0u8; p.c_in * tp];
    pad_into(
        xq,
        t_in,
        p.pad_left,
        p.pad_right,
        p.pad_mode,
        x_zero_point,
        &mut xp,
    )?;
    let t_out = p.out_len(t_in)?;
    let (cig, cog, zx) = (p.c_in / p.groups, p.c_out / p.groups, x_zero_point as i32);
    let mut y = vec![0i32; p.c_out * t_out];
    for co in 0..p.c_out {
        let g = co / cog;
        for t in 0..t_out {
            let mut acc = 0i32;
            for ci in 0..cig {
                for k in 0..p.kernel {
                    let xv = xp[(g * cig + ci) * tp + t * p.stride + k * p.dilation] as i32;
                    let wv = weight_at(w, (co * cig + ci) * p.kernel + k);
                    acc = acc.wrapping_add((xv - zx).wrapping_mul(wv - zps[co]));
                }
            }
            y[co * t_out + t] = acc;
        }
    }
    Ok(y)
}

/// Readable reference of [`Conv1dInt8::forward`]: quantize (`DynamicQuantizeLinear`),
/// [`conv_integer_reference`], [`dequantize`] (+ bias). Returns `[c_out, t_out]`.
#[allow(clippy::too_many_arguments)]
pub fn conv1d_int8_reference(
    p: &Conv1dParams,
    w: IntWeights<'_>,
    w_scales: &[f32],
    w_zero_points: &[i32],
    bias: Option<&[f32]>,
    x: &[f32],
    t_in: usize,
) -> Result<Vec<f32>, KernelError> {
    let scales = per_channel("conv1d int8 scales", w_scales, p.c_out)?;
    let mut xq = vec![0u8; x.len()];
    let aq = quantize_activations(x, &mut xq)?;
    let acc = conv_integer_reference(p, w, w_zero_points, &xq, aq.zero_point, t_in)?;
    let t_out = p.out_len(t_in)?;
    Ok(acc
        .iter()
        .enumerate()
        .map(|(i, &a)| {
            let co = i / t_out.max(1);
            dequantize(a, aq.scale, scales[co], bias.map(|b| b[co]))
        })
        .collect())
}

/// Which integer kernel a level maps to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IntRoute {
    Scalar,
    /// `vpmaddwd` on i16-widened inputs and [`Tiles::Wide`] weights.
    Avx2,
    /// AVX-VNNI: `vpdpbusd` on 256-bit registers, [`Tiles::Vector`] weights.
    AvxVnni,
    /// AVX-512 VNNI.
    Vnni,
}

/// Whether a dense conv at `level` runs on AMX tiles (`allowed` by the conv).
fn amx_wanted(level: SimdLevel, allowed: bool) -> bool {
    let f = cpu::features();
    allowed && level.min(simd_level()) == SimdLevel::Avx512 && f.amx_int8 && f.avx512_vnni
}

/// Readable bytes an AMX route needs past the packed input: its last
/// channel tile reads whole 16-block rows (zero weights meet them) and its
/// input tiles up to 16 frames past a row.
fn amx_slack(tiles: Tiles, cbs: usize, cb_stride: usize) -> usize {
    match tiles {
        Tiles::Amx => (cbs.div_ceil(16) * 16 - cbs) * cb_stride + 4 * AMX_T + 64,
        Tiles::Vector | Tiles::Wide | Tiles::Winograd(_) => 0,
    }
}

fn int_route(level: SimdLevel) -> IntRoute {
    match level.min(simd_level()) {
        SimdLevel::Avx512 if cpu::features().avx512_vnni => IntRoute::Vnni,
        SimdLevel::Avx512 | SimdLevel::Avx2 if cpu::features().avx_vnni => IntRoute::AvxVnni,
        // Without VNNI, AVX-512 machines use the exact AVX2 widening route.
        SimdLevel::Avx512 | SimdLevel::Avx2 => IntRoute::Avx2,
        SimdLevel::Scalar => IntRoute::Scalar,
    }
}

/// Which optional tiles a conv may take (both on by default; tests and
/// benches turn them off to compare).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Allow {
    amx: bool,
    winograd: bool,
}

impl Allow {
    const ALL: Allow = Allow {
        amx: true,
        winograd: true,
    };
}

/// Which register tiles the dense weights are packed for: one copy only
/// (the weights are most of a model's memory), re-packed when the route changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tiles {
    /// `[group][co block of MR][ci/4][k][MR][4]`: the VNNI/scalar tiles.
    Vector,
    /// As `Vector`, each weight a little-endian i16 (two bytes): the AVX2
    /// route's `vpmaddwd` operand, widened at bind time so its inner loop is
    /// a broadcast load, multiplies and adds (no per-weight shuffles).
    Wide,
    /// `[group][co block of 32][ci/64][k][2][16][64]`: AMX weight tiles
    /// (16 output channels × 64 input channels each, 4-channel groups).
    Amx,
    /// The AVX2 route's Winograd F(6,3) or F(6,4) weights (stride 1, one
    /// group; see [`winograd`]): `[slot][co block][ci/4][tap group][MR][4]` i16.
    Winograd(winograd::Kind),
}

impl Tiles {
    /// The tiles a dense conv with parameters `p` at `level` runs on (AMX
    /// and Winograd tiles where the conv allows them).
    fn for_route(level: SimdLevel, allow: Allow, p: &Conv1dParams) -> Self {
        if amx_wanted(level, allow.amx) {
            Tiles::Amx
        } else if int_route(level) == IntRoute::Avx2 && allow.winograd && winograd::eligible(p) {
            Tiles::Winograd(winograd::Kind::for_kernel(p.kernel))
        } else if int_route(level) == IntRoute::Avx2 {
            Tiles::Wide
        } else {
            Tiles::Vector
        }
    }

    /// The tiles' name in a weights cache (see [`PreparedInt8`]).
    fn name(self) -> &'static str {
        match self {
            Tiles::Vector => "vector-i8",
            Tiles::Wide => "wide-i16",
            Tiles::Amx => "amx-i8",
            Tiles::Winograd(winograd::Kind::F63) => "wino63-i16",
            Tiles::Winograd(winograd::Kind::F64) => "wino64-i16",
        }
    }

    /// Bytes per packed weight.
    fn width(self) -> usize {
        match self {
            Tiles::Wide | Tiles::Winograd(_) => 2,
            Tiles::Vector | Tiles::Amx => 1,
        }
    }

    /// Store weight `v` (an i8 value) at packed byte index `i`.
    fn put(self, packed: &mut [i8], i: usize, v: i32) {
        match self {
            Tiles::Wide | Tiles::Winograd(_) => {
                let [lo, hi] = (v as i16).to_le_bytes();
                packed[i] = lo as i8;
                packed[i + 1] = hi as i8;
            }
            Tiles::Vector | Tiles::Amx => packed[i] = v as i8,
        }
    }

    /// The weight at packed byte index `i`.
    fn get(self, packed: &[i8], i: usize) -> i32 {
        match self {
            Tiles::Wide | Tiles::Winograd(_) => {
                i16::from_le_bytes([packed[i] as u8, packed[i + 1] as u8]) as i32
            }
            Tiles::Vector | Tiles::Amx => packed[i] as i32,
        }
    }

    /// Pack weights `src` (`[c_out][c_in/groups][k]`, shifted i8) for these
    /// tiles, the padding (outputs past a block, inputs past a 4-group) zero.
    fn pack(self, p: &Conv1dParams, cbs: usize, src: &[i8]) -> Vec<i8> {
        let (cig, cog, k) = (p.c_in / p.groups, p.c_out / p.groups, p.kernel);
        let at = |co: usize, ci: usize, tap: usize| src[(co * cig + ci) * k + tap] as i32;
        if let Tiles::Winograd(_) = self {
            return winograd::pack_weights(p, MR, cbs, src);
        }
        let mut out = vec![0i8; self.len(p.groups, cog, cbs, k)];
        if self == Tiles::Amx {
            for g in 0..p.groups {
                for o in 0..cog {
                    for ci in 0..cig {
                        for tap in 0..k {
                            let v = at(g * cog + o, ci, tap);
                            self.put(&mut out, self.index(g, o, ci, tap, cog, cbs, k), v);
                        }
                    }
                }
            }
            return out;
        }
        // Vector and Wide: written in storage order, padding left zero (a
        // model's load time).
        let width = self.width();
        let mut i = 0;
        for g in 0..p.groups {
            for b in 0..cog.div_ceil(MR) {
                for cb in 0..cbs {
                    for tap in 0..k {
                        for r in 0..MR {
                            let o = b * MR + r;
                            for ci in 4 * cb..4 * cb + 4 {
                                if o < cog && ci < cig {
                                    self.put(&mut out, i, at(g * cog + o, ci, tap));
                                }
                                i += width;
                            }
                        }
                    }
                }
            }
        }
        debug_assert_eq!(i, out.len());
        out
    }

    /// Packed length (bytes) for `groups` groups of `cog` outputs, `cbs` channel blocks, `k` taps.
    fn len(self, groups: usize, cog: usize, cbs: usize, k: usize) -> usize {
        match self {
            Tiles::Vector | Tiles::Wide => {
                groups * cog.div_ceil(MR) * cbs * k * MR * 4 * self.width()
            }
            Tiles::Amx => groups * cog.div_ceil(AMX_CO) * cbs.div_ceil(16) * k * AMX_CO * 64,
            Tiles::Winograd(_) => groups * winograd::weights_len(cog, MR, cbs, k),
        }
    }

    /// The shifted weight (group `g`, local output `o`, input `ci`, tap) of a packing.
    #[allow(clippy::too_many_arguments)]
    fn weight(
        self,
        packed: &[i8],
        g: usize,
        o: usize,
        ci: usize,
        tap: usize,
        cog: usize,
        cbs: usize,
        k: usize,
    ) -> i32 {
        match self {
            // One group only (see `winograd::eligible`).
            Tiles::Winograd(_) => winograd::weight_of(packed, o, ci, tap, MR, cog, cbs, k),
            _ => self.get(packed, self.index(g, o, ci, tap, cog, cbs, k)),
        }
    }

    /// Byte index of weight (group `g`, local output `o`, input `ci`, tap) in the packing.
    #[allow(clippy::too_many_arguments)]
    fn index(
        self,
        g: usize,
        o: usize,
        ci: usize,
        tap: usize,
        cog: usize,
        cbs: usize,
        k: usize,
    ) -> usize {
        match self {
            // Winograd weights are transformed: read them through `weight`.
            Tiles::Vector | Tiles::Wide | Tiles::Winograd(_) => {
                let (blocks, b, r) = (cog.div_ceil(MR), o / MR, o % MR);
                let i = ((((g * blocks + b) * cbs + ci / 4) * k + tap) * MR + r) * 4 + ci % 4;
                i * self.width()
            }
            Tiles::Amx => {
                let (blocks, b, m) = (cog.div_ceil(AMX_CO), o / AMX_CO, o % AMX_CO);
                let (kcs, kc, kk) = (cbs.div_ceil(16), ci / 64, ci % 64);
                (((((g * blocks + b) * kcs + kc) * k + tap) * AMX_CO) + m) * 64 + kk
            }
        }
    }
}

/// A dense conv's packed weights, borrowed for a weights cache.
#[derive(Debug, Clone, Copy)]
pub struct PreparedInt8<'a> {
    /// The tiles they are packed for (this route's; see [`Conv1dInt8::with_prepared`]).
    pub tiles: &'static str,
    /// Packed weights.
    pub packed: &'a [i8],
    /// Per output channel, the sum of its shifted weights.
    pub wsum: &'a [i32],
}

/// A dense conv's packed weights handed back from a weights cache (mapped in place).
#[derive(Debug, Clone)]
pub struct PreparedBufs {
    /// The tiles' name as [`PreparedInt8::tiles`] gave it.
    pub tiles: String,
    /// Packed weights.
    pub packed: Buf<i8>,
    /// Per output channel, the sum of its shifted weights.
    pub wsum: Vec<i32>,
}

/// How the bound weights are laid out.
#[derive(Debug, Clone)]
enum Layout {
    /// Shifted i8 weights (zero-padded) in [`Tiles`] order, with
    /// `Σ_{ci,k} w` per output channel.
    Dense {
        packed: Buf<i8>,
        wsum: Vec<i32>,
        tiles: Tiles,
    },
    /// `[c_out][k]` centered weights `w − zw`.
    Depthwise { centered: Vec<i32> },
}

/// A bound int8 1-D convolution.
#[derive(Debug, Clone)]
pub struct Conv1dInt8 {
    params: Conv1dParams,
    layout: Layout,
    /// Zero point per output channel, in the shifted (int8) domain.
    zero: Vec<i32>,
    /// Any non-zero `zero` (else the window sums are not needed).
    any_zero: bool,
    scale: Vec<f32>,
    bias: Option<Vec<f32>>,
    /// `ci/4` blocks per group.
    cbs: usize,
    /// Per tap `k`: `k·d = q·s + r` as `(q, r)`.
    taps: Vec<(usize, usize)>,
    level: SimdLevel,
    /// AMX and Winograd tiles allowed (see [`Conv1dInt8::set_amx`]).
    allow: Allow,
}

/// Reusable scratch for [`Conv1dInt8`]; sized once, shared by any number of convs.
#[derive(Debug, Default, Clone)]
pub struct Conv1dInt8Workspace {
    /// Quantized input `[c_in, t_in]` ([`Conv1dInt8::forward`] only).
    xq: Vec<u8>,
    /// Per quantization chunk: `[min, max]`.
    minmax: Vec<[f32; 2]>,
    pack: PackScratch,
}

/// The packed-input buffers, separate from `xq` so both can be borrowed at once.
#[derive(Debug, Default, Clone)]
struct PackScratch {
    /// Padded input `[c_in, t_pad]`.
    xpad: Vec<u8>,
    /// Dense route: `[group][ci/4][stride][row][4]`.
    xpack: Vec<u8>,
    /// Dense route with weight zero points: `[group][t_pad]` channel sums.
    colsum: Vec<i32>,
    /// Byte offset of each tap inside a packed channel block (Winograd: of
    /// each tap group inside a transformed block).
    tap_off: Vec<usize>,
    /// Winograd route: the input's phases ([`winograd::Geometry`]).
    phases: Vec<u8>,
    /// Winograd route: one batch of transformed tiles.
    transformed: Vec<i16>,
}

impl Conv1dInt8Workspace {
    /// An empty workspace; grow it with [`Conv1dInt8Workspace::reserve`].
    pub fn new() -> Self {
        Self::default()
    }

    /// Grow so `conv` runs on inputs of up to `max_t_in` frames without allocating.
    pub fn reserve(&mut self, conv: &Conv1dInt8, max_t_in: usize) -> Result<(), KernelError> {
        let p = &conv.params;
        let n = p.c_in * max_t_in;
        grow(&mut self.xq, n);
        grow(&mut self.minmax, n.div_ceil(QUANT_CHUNK));
        let tp = p.padded_len(max_t_in);
        // Padded lengths below the span are errors at call time; nothing to size.
        if tp >= p.span() {
            conv.reserve_pack(&mut self.pack, tp)?;
        }
        Ok(())
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.xq.len()
            + self.minmax.len() * 8
            + self.pack.xpad.len()
            + self.pack.xpack.len()
            + self.pack.colsum.len() * 4
            + self.pack.tap_off.len() * 8
            + self.pack.phases.len()
            + self.pack.transformed.len() * 2
    }
}

/// A raw output pointer shared by lanes that write disjoint regions.
#[derive(Clone, Copy)]
struct Shared<T>(*mut T);
// SAFETY: lanes write disjoint index sets only (documented at each use).
unsafe impl<T> Send for Shared<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for Shared<T> {}

impl<T> Shared<T> {
    /// The pointer (a method, so closures capture the whole `Sync` wrapper).
    fn ptr(&self) -> *mut T {
        self.0
    }
}

/// Where finished outputs go.
#[derive(Clone, Copy)]
enum Sink {
    /// `ConvInteger`'s i32 `[c_out, t_out]`.
    Int(Shared<i32>),
    /// Dequantized f32 `[c_out, t_out]` with the activation scale.
    Float(Shared<f32>, f32),
    /// `out = (acc + bias_q[co]) · s` into f32 `[c_out, t_out]` (the export's
    /// dequantization with its floored bias); with `add`, `out +=` (a residual `Add`).
    Dequant {
        out: Shared<f32>,
        scale: f32,
        bias_q: Shared<i32>,
        add: bool,
    },
}

impl Conv1dInt8 {
    /// Bind weights `[c_out, c_in/groups, kernel]` (int8 or uint8) with per-output-channel
    /// (or single) scales and zero points, and an optional f32 bias `[c_out]`.
    pub fn new(
        params: Conv1dParams,
        weights: IntWeights<'_>,
        w_scales: &[f32],
        w_zero_points: &[i32],
        bias: Option<&[f32]>,
    ) -> Result<Self, KernelError> {
        Self::bind(params, weights, w_scales, w_zero_points, bias, None)
    }

    /// As [`Conv1dInt8::new`], taking a dense conv's packed weights from a
    /// weights cache ([`Conv1dInt8::prepared`] of an earlier bind) instead
    /// of packing them; an error when they are not what this route packs
    /// (other tiles, other lengths, a depthwise conv).
    pub fn with_prepared(
        params: Conv1dParams,
        weights: IntWeights<'_>,
        w_scales: &[f32],
        w_zero_points: &[i32],
        bias: Option<&[f32]>,
        prepared: PreparedBufs,
    ) -> Result<Self, KernelError> {
        Self::bind(
            params,
            weights,
            w_scales,
            w_zero_points,
            bias,
            Some(prepared),
        )
    }

    /// A dense conv's packed weights as a weights cache stores them; `None`
    /// for a depthwise conv (nothing packed).
    pub fn prepared(&self) -> Option<PreparedInt8<'_>> {
        match &self.layout {
            Layout::Dense {
                packed,
                wsum,
                tiles,
            } => Some(PreparedInt8 {
                tiles: tiles.name(),
                packed,
                wsum,
            }),
            Layout::Depthwise { .. } => None,
        }
    }

    fn bind(
        params: Conv1dParams,
        weights: IntWeights<'_>,
        w_scales: &[f32],
        w_zero_points: &[i32],
        bias: Option<&[f32]>,
        prepared: Option<PreparedBufs>,
    ) -> Result<Self, KernelError> {
        let zps = check_weights(&params, weights, w_zero_points)?;
        let scale = per_channel("conv1d int8 scales", w_scales, params.c_out)?;
        if let Some(b) = bias {
            check_len("conv1d int8 bias", params.c_out, b.len())?;
        }
        let p = &params;
        let (cig, k) = (p.c_in / p.groups, p.kernel);
        let shift = match weights {
            IntWeights::I8(_) => 0,
            IntWeights::U8(_) => 128,
        };
        // Shifted weight value: uint8 − 128 fits i8 and keeps w − zw.
        let at = |co: usize, ci: usize, tap: usize| {
            weight_at(weights, (co * cig + ci) * k + tap) - shift
        };
        let zero: Vec<i32> = zps.iter().map(|z| z - shift).collect();
        let cbs = cig.div_ceil(4);
        if cig == 1 && prepared.is_some() {
            return Err(KernelError::Param {
                what: "conv1d int8 prepared weights",
                detail: "a depthwise conv packs no weights".into(),
            });
        }
        let layout = if cig == 1 {
            let mut centered = vec![0i32; p.c_out * k];
            for co in 0..p.c_out {
                for tap in 0..k {
                    centered[co * k + tap] = at(co, 0, tap) - zero[co];
                }
            }
            Layout::Depthwise { centered }
        } else if let Some(prep) = prepared {
            let tiles = Tiles::for_route(simd_level(), Allow::ALL, p);
            let want = tiles.len(p.groups, p.c_out / p.groups, cbs, k);
            if prep.tiles != tiles.name() || prep.packed.len() != want || prep.wsum.len() != p.c_out
            {
                return Err(KernelError::Param {
                    what: "conv1d int8 prepared weights",
                    detail: format!(
                        "{} tiles of {} bytes and {} sums, this route packs {} tiles of {want} bytes and {} sums",
                        prep.tiles,
                        prep.packed.len(),
                        prep.wsum.len(),
                        tiles.name(),
                        p.c_out
                    ),
                });
            }
            Layout::Dense {
                packed: prep.packed,
                wsum: prep.wsum,
                tiles,
            }
        } else {
            let tiles = Tiles::for_route(simd_level(), Allow::ALL, p);
            // In range by construction: i8 as is, u8 − 128 (one pass, in order).
            let src: Vec<i8> = match weights {
                IntWeights::I8(d) => d.to_vec(),
                IntWeights::U8(d) => d.iter().map(|&v| (v as i32 - 128) as i8).collect(),
            };
            let packed = tiles.pack(p, cbs, &src);
            let wsum = src
                .chunks_exact(cig * k)
                .map(|row| row.iter().fold(0i32, |s, &v| s.wrapping_add(v as i32)))
                .collect();
            Layout::Dense {
                packed: packed.into(),
                wsum,
                tiles,
            }
        };
        let taps = (0..k)
            .map(|tap| (tap * p.dilation / p.stride, tap * p.dilation % p.stride))
            .collect();
        Ok(Self {
            params,
            layout,
            any_zero: zero.iter().any(|&z| z != 0),
            zero,
            scale,
            bias: bias.map(<[f32]>::to_vec),
            cbs,
            taps,
            level: simd_level(),
            allow: Allow::ALL,
        })
    }

    /// The convolution's parameters.
    pub fn params(&self) -> &Conv1dParams {
        &self.params
    }

    /// Choose the SIMD route (capped at what the CPU supports; default: the best).
    pub fn set_level(&mut self, level: SimdLevel) {
        self.level = level;
        self.repack();
    }

    /// Allow AMX tiles at the AVX-512 level where the CPU has them (default:
    /// on); off keeps the VNNI route (tests compare the two).
    pub fn set_amx(&mut self, on: bool) {
        self.allow.amx = on;
        self.repack();
    }

    /// Allow the Winograd tiles on the AVX2 route where the shape takes them
    /// (default: on); off keeps the direct tiles (benches compare the two).
    pub fn set_winograd(&mut self, on: bool) {
        self.allow.winograd = on;
        self.repack();
    }

    /// The dense weights' tiles by name (`None` for a depthwise conv).
    pub fn tiles(&self) -> Option<&'static str> {
        self.prepared().map(|p| p.tiles)
    }

    /// Whether the dense route runs on AMX tiles.
    pub fn uses_amx(&self) -> bool {
        matches!(
            self.layout,
            Layout::Dense {
                tiles: Tiles::Amx,
                ..
            }
        )
    }

    /// Re-pack dense weights for the tiles the current route needs (the same
    /// bytes, permuted; bind-time work).
    fn repack(&mut self) {
        let want = Tiles::for_route(self.level, self.allow, &self.params);
        let p = self.params;
        let (cog, k, cbs) = (p.c_out / p.groups, p.kernel, self.cbs);
        if let Layout::Dense { packed, tiles, .. } = &mut self.layout {
            if *tiles == want {
                return;
            }
            let (old, cig) = (*tiles, p.c_in / p.groups);
            let mut src = vec![0i8; p.c_out * cig * k];
            for (i, v) in src.iter_mut().enumerate() {
                let (co, ci, tap) = (i / (cig * k), i / k % cig, i % k);
                *v = old.weight(packed, co / cog, co % cog, ci, tap, cog, cbs, k) as i8;
            }
            *packed = want.pack(&p, cbs, &src).into();
            *tiles = want;
        }
    }

    /// A workspace sized for inputs of up to `max_t_in` frames.
    pub fn workspace(&self, max_t_in: usize) -> Result<Conv1dInt8Workspace, KernelError> {
        let mut ws = Conv1dInt8Workspace::new();
        ws.reserve(self, max_t_in)?;
        Ok(ws)
    }

    /// Packed row length (in 4-byte frames) per stride phase for `tp` padded frames.
    fn pack_row(&self, tp: usize, t_out: usize) -> usize {
        let p = &self.params;
        let q_max = (p.span() - 1) / p.stride;
        // Tiles compute whole 16-frame vectors: rows reach past the last output.
        tp.div_ceil(p.stride).max(t_out.div_ceil(16) * 16 + q_max)
    }

    fn reserve_pack(&self, ps: &mut PackScratch, tp: usize) -> Result<(), KernelError> {
        let p = &self.params;
        let t_out = out_len_padded(tp, p.span(), p.stride)?;
        grow(&mut ps.xpad, p.c_in * tp);
        if let Layout::Dense {
            tiles: Tiles::Winograd(_),
            ..
        } = self.layout
        {
            // Sized for any lane count a call may bring.
            for lanes in 1..=winograd::MAX_BATCH_LANES {
                let geo = winograd::Geometry::new(p, t_out, lanes);
                grow(&mut ps.phases, geo.phase_len());
                // Slack to align the units to cache lines.
                grow(&mut ps.transformed, geo.transformed_len() + 32);
            }
            if self.any_zero {
                grow(&mut ps.colsum, tp);
            }
            grow(&mut ps.tap_off, p.kernel);
        } else if let Layout::Dense { tiles, .. } = self.layout {
            let row = self.pack_row(tp, t_out);
            let cb_stride = p.stride * row * 4;
            grow(
                &mut ps.xpack,
                p.groups * self.cbs * cb_stride + amx_slack(tiles, self.cbs, cb_stride),
            );
            if self.any_zero {
                grow(&mut ps.colsum, p.groups * tp);
            }
            grow(&mut ps.tap_off, p.kernel);
        }
        Ok(())
    }

    /// `out: [c_out, out_len(t_in)]` f32 from `x: [c_in, t_in]` f32: quantize per
    /// tensor (`DynamicQuantizeLinear`), integer conv, dequantize, add bias.
    pub fn forward(
        &self,
        pool: &impl Fork,
        x: &[f32],
        t_in: usize,
        out: &mut [f32],
        ws: &mut Conv1dInt8Workspace,
    ) -> Result<(), KernelError> {
        let p = &self.params;
        let n = p.c_in * t_in;
        check_len("conv1d int8 input", n, x.len())?;
        check_len("conv1d int8 output", p.c_out * p.out_len(t_in)?, out.len())?;
        grow(&mut ws.xq, n);
        grow(&mut ws.minmax, n.div_ceil(QUANT_CHUNK));
        let aq = quantize_into(
            pool,
            int_route(self.level),
            x,
            &mut ws.xq[..n],
            &mut ws.minmax,
        )?;
        let sink = Sink::Float(Shared(out.as_mut_ptr()), aq.scale);
        self.run(pool, &ws.xq[..n], aq.zero_point, t_in, sink, &mut ws.pack)
    }

    /// As [`Conv1dInt8::forward`] from an already quantized `xq: [c_in, t_in]`
    /// (e.g. the previous stage's output) with its parameters `aq`.
    pub fn forward_quantized(
        &self,
        pool: &impl Fork,
        xq: &[u8],
        aq: ActivationQuant,
        t_in: usize,
        out: &mut [f32],
        ws: &mut Conv1dInt8Workspace,
    ) -> Result<(), KernelError> {
        let p = &self.params;
        check_len("conv1d int8 output", p.c_out * p.out_len(t_in)?, out.len())?;
        let sink = Sink::Float(Shared(out.as_mut_ptr()), aq.scale);
        self.run(pool, xq, aq.zero_point, t_in, sink, &mut ws.pack)
    }

    /// ONNX `ConvInteger`: `out: [c_out, out_len(t_in)]` i32 from `xq: [c_in, t_in]` u8.
    pub fn conv_integer(
        &self,
        pool: &impl Fork,
        xq: &[u8],
        x_zero_point: u8,
        t_in: usize,
        out: &mut [i32],
        ws: &mut Conv1dInt8Workspace,
    ) -> Result<(), KernelError> {
        let p = &self.params;
        check_len("conv1d int8 output", p.c_out * p.out_len(t_in)?, out.len())?;
        let sink = Sink::Int(Shared(out.as_mut_ptr()));
        self.run(pool, xq, x_zero_point, t_in, sink, &mut ws.pack)
    }

    /// `ConvInteger` dequantized into `out: [c_out, out_len(t_in)]` in the
    /// kernel's epilogue: `out = (acc + bias_q[co]) as f32 · s` (the export's
    /// `Cast(acc + Floor(bias / s)) · s`), the bits of
    /// [`Conv1dInt8::conv_integer`] followed by that pass, without the i32
    /// tensor's round trip through memory.
    #[allow(clippy::too_many_arguments)]
    pub fn conv_integer_dequant(
        &self,
        pool: &impl Fork,
        xq: &[u8],
        x_zero_point: u8,
        t_in: usize,
        bias_q: &[i32],
        s: f32,
        out: &mut [f32],
        ws: &mut Conv1dInt8Workspace,
    ) -> Result<(), KernelError> {
        self.dequant_into(pool, xq, x_zero_point, t_in, bias_q, s, out, false, ws)
    }

    /// As [`Conv1dInt8::conv_integer_dequant`], added into `out` (`out += …`).
    #[allow(clippy::too_many_arguments)]
    pub fn conv_integer_add(
        &self,
        pool: &impl Fork,
        xq: &[u8],
        x_zero_point: u8,
        t_in: usize,
        bias_q: &[i32],
        s: f32,
        out: &mut [f32],
        ws: &mut Conv1dInt8Workspace,
    ) -> Result<(), KernelError> {
        self.dequant_into(pool, xq, x_zero_point, t_in, bias_q, s, out, true, ws)
    }

    #[allow(clippy::too_many_arguments)]
    fn dequant_into(
        &self,
        pool: &impl Fork,
        xq: &[u8],
        x_zero_point: u8,
        t_in: usize,
        bias_q: &[i32],
        s: f32,
        out: &mut [f32],
        add: bool,
        ws: &mut Conv1dInt8Workspace,
    ) -> Result<(), KernelError> {
        let p = &self.params;
        check_len("conv1d int8 output", p.c_out * p.out_len(t_in)?, out.len())?;
        check_len("conv1d int8 quantized bias", p.c_out, bias_q.len())?;
        let sink = Sink::Dequant {
            out: Shared(out.as_mut_ptr()),
            scale: s,
            // Only read.
            bias_q: Shared(bias_q.as_ptr().cast_mut()),
            add,
        };
        self.run(pool, xq, x_zero_point, t_in, sink, &mut ws.pack)
    }

    /// Pad, pack and convolve; `sink` was checked to hold `c_out · t_out` values.
    fn run(
        &self,
        pool: &impl Fork,
        xq: &[u8],
        zx: u8,
        t_in: usize,
        sink: Sink,
        ps: &mut PackScratch,
    ) -> Result<(), KernelError> {
        let p = &self.params;
        check_len("conv1d int8 input", p.c_in * t_in, xq.len())?;
        let tp = p.padded_len(t_in);
        let t_out = p.out_len(t_in)?;
        self.reserve_pack(ps, tp)?;
        // Padding rows on the lanes (a plain copy, any split gives the same bytes).
        check_pad(t_in, p.pad_left, p.pad_right, p.pad_mode)?;
        let rows = (QUANT_CHUNK / tp.max(1)).max(1);
        pool.for_each_chunk_mut(&mut ps.xpad[..p.c_in * tp], rows * tp, |i, dst| {
            let r0 = i * rows;
            let n = dst.len() / tp;
            let src = &xq[r0 * t_in..(r0 + n) * t_in];
            pad_rows(src, t_in, p.pad_left, p.pad_right, p.pad_mode, zx, dst);
        })?;
        if t_out == 0 {
            return Ok(());
        }
        match &self.layout {
            Layout::Depthwise { centered } => {
                self.run_depthwise(pool, centered, &ps.xpad[..p.c_in * tp], tp, t_out, zx, sink)
            }
            Layout::Dense {
                packed,
                wsum,
                tiles,
            } => self.run_dense(pool, packed, wsum, *tiles, ps, tp, t_out, zx, sink),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn run_depthwise(
        &self,
        pool: &impl Fork,
        centered: &[i32],
        xpad: &[u8],
        tp: usize,
        t_out: usize,
        zx: u8,
        sink: Sink,
    ) -> Result<(), KernelError> {
        let p = &self.params;
        let (mult, k) = (p.c_out / p.c_in, p.kernel);
        let zx = zx as i32;
        pool.for_each_chunk(p.c_out, DW_ROWS, |range| {
            let mut acc = [0i32; TILE];
            for co in range {
                let src = &xpad[(co / mult) * tp..(co / mult + 1) * tp];
                let w = &centered[co * k..(co + 1) * k];
                for t0 in (0..t_out).step_by(TILE) {
                    let n = TILE.min(t_out - t0);
                    let acc = &mut acc[..n];
                    acc.fill(0);
                    for (tap, &wk) in w.iter().enumerate() {
                        let x0 = t0 * p.stride + tap * p.dilation;
                        for (i, a) in acc.iter_mut().enumerate() {
                            let xv = src[x0 + i * p.stride] as i32 - zx;
                            *a = a.wrapping_add(xv.wrapping_mul(wk));
                        }
                    }
                    // Centered weights: the zero points are already applied.
                    self.finish_row(co, acc, 0, None, sink, t_out, t0);
                }
            }
        })?;
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn run_dense(
        &self,
        pool: &impl Fork,
        packed: &[i8],
        wsum: &[i32],
        tiles: Tiles,
        ps: &mut PackScratch,
        tp: usize,
        t_out: usize,
        zx: u8,
        sink: Sink,
    ) -> Result<(), KernelError> {
        if let Tiles::Winograd(_) = tiles {
            return self.run_winograd(pool, packed, wsum, ps, tp, t_out, zx, sink);
        }
        let p = &self.params;
        let (s, k, cbs) = (p.stride, p.kernel, self.cbs);
        let cig = p.c_in / p.groups;
        let row = self.pack_row(tp, t_out);
        let cb_stride = s * row * 4;
        for (off, &(q, r)) in ps.tap_off.iter_mut().zip(&self.taps) {
            *off = (r * row + q) * 4;
        }
        // Pack: [group][ci/4][phase r][u][4] = xpad[4·cb + j][u·s + r]; the
        // fake channels past c_in/groups and frames past the input are 0.
        let xpad = &ps.xpad[..p.c_in * tp];
        let xpack = &mut ps.xpack[..p.groups * cbs * cb_stride];
        pool.for_each_chunk_mut(xpack, cb_stride, |i, blk| {
            let (g, cb) = (i / cbs, i % cbs);
            let src = |j: usize| &xpad[(g * cig + 4 * cb + j) * tp..][..tp];
            if s == 1 && cig - 4 * cb >= 4 {
                // The common case: interleave four channel rows.
                let (head, tail) = blk.split_at_mut(4 * tp);
                let rows = src(0).iter().zip(src(1)).zip(src(2)).zip(src(3));
                for (d, (((a, b), c), e)) in head.chunks_exact_mut(4).zip(rows) {
                    d.copy_from_slice(&[*a, *b, *c, *e]);
                }
                tail.fill(0);
                return;
            }
            blk.fill(0);
            for j in 0..4.min(cig - 4 * cb) {
                for r in 0..s {
                    let dst = &mut blk[r * row * 4..(r + 1) * row * 4];
                    for (d, x) in dst
                        .chunks_exact_mut(4)
                        .zip(src(j).iter().skip(r).step_by(s))
                    {
                        d[j] = *x;
                    }
                }
            }
        })?;
        self.column_sums(pool, xpad, &mut ps.colsum, tp)?;
        let ctx = Dense {
            conv: self,
            packed,
            wsum,
            // The AMX route's tiles read its slack too (see `amx_slack`).
            xpack: &ps.xpack[..p.groups * cbs * cb_stride + amx_slack(tiles, cbs, cb_stride)],
            colsum: if self.any_zero { &ps.colsum[..] } else { &[] },
            tap_off: &ps.tap_off[..k],
            cb_stride,
            tp,
            t_out,
            zx: zx as i32,
            sink,
            route: int_route(self.level),
            width: tiles.width(),
            centered: false,
        };
        // Units of TIME_CHUNK frames × a share of the output-channel blocks:
        // short inputs (a decoder's hundred frames) still give every lane
        // work. Integer sums are exact, so any split gives the same bits.
        let time_chunks = t_out.div_ceil(TIME_CHUNK);
        let co_block = match tiles {
            Tiles::Amx => AMX_CO,
            Tiles::Vector | Tiles::Wide | Tiles::Winograd(_) => MR,
        };
        let blocks = (p.c_out / p.groups).div_ceil(co_block);
        let parts = MIN_UNITS.div_ceil(time_chunks).clamp(1, blocks);
        let per_part = blocks.div_ceil(parts);
        let parts = blocks.div_ceil(per_part);
        pool.for_each_chunk(time_chunks * parts, 1, |units| {
            for u in units {
                let (tc, part) = (u / parts, u % parts);
                let t0 = tc * TIME_CHUNK;
                let b0 = part * per_part;
                let (frames, blocks) = (
                    t0..(t0 + TIME_CHUNK).min(t_out),
                    b0..(b0 + per_part).min(blocks),
                );
                match tiles {
                    Tiles::Amx => ctx.chunk_amx(frames, blocks),
                    Tiles::Vector | Tiles::Wide | Tiles::Winograd(_) => ctx.chunk(frames, blocks),
                }
            }
        })?;
        Ok(())
    }

    /// Per-frame channel sums of each group of the padded input, for the
    /// weight zero points (nothing without them).
    fn column_sums(
        &self,
        pool: &impl Fork,
        xpad: &[u8],
        colsum: &mut [i32],
        tp: usize,
    ) -> Result<(), KernelError> {
        if !self.any_zero {
            return Ok(());
        }
        let p = &self.params;
        let cig = p.c_in / p.groups;
        // The raw writes below rely on it.
        assert!(colsum.len() >= p.groups * tp && xpad.len() >= p.c_in * tp);
        let colsum = Shared(colsum.as_mut_ptr());
        pool.for_each_chunk(tp, 1024, |range| {
            for g in 0..p.groups {
                // SAFETY: this chunk alone writes frames `range` of each group
                // row, inside the `groups · tp` sums asserted above.
                let dst = unsafe {
                    std::slice::from_raw_parts_mut(
                        colsum.ptr().add(g * tp + range.start),
                        range.len(),
                    )
                };
                dst.fill(0);
                for ci in 0..cig {
                    let src = &xpad[(g * cig + ci) * tp..][range.clone()];
                    for (d, x) in dst.iter_mut().zip(src) {
                        *d += *x as i32;
                    }
                }
            }
        })?;
        Ok(())
    }

    /// The Winograd route of a dense conv ([`winograd`]): phases, then per
    /// batch of tiles the transform and the slot GEMMs with their output
    /// transform, zero-point correction and sink.
    #[allow(clippy::too_many_arguments)]
    fn run_winograd(
        &self,
        pool: &impl Fork,
        packed: &[i8],
        wsum: &[i32],
        ps: &mut PackScratch,
        tp: usize,
        t_out: usize,
        zx: u8,
        sink: Sink,
    ) -> Result<(), KernelError> {
        let p = &self.params;
        let geo = winograd::Geometry::new(p, t_out, pool.threads());
        let cbs = self.cbs;
        let xpad = &ps.xpad[..p.c_in * tp];
        let plen = geo.phase_len() / cbs;
        pool.for_each_chunk_mut(&mut ps.phases[..geo.phase_len()], plen, |cb, dst| {
            winograd::pack_phases(&geo, xpad, p.c_in, tp, cb, dst)
        })?;
        self.column_sums(pool, xpad, &mut ps.colsum, tp)?;
        let blocks = p.c_out.div_ceil(MR);
        let phases = &ps.phases[..geo.phase_len()];
        let ctx = Dense {
            conv: self,
            packed,
            wsum,
            // The units carry their inputs (a tail tap's rows too).
            xpack: &[],
            colsum: if self.any_zero { &ps.colsum[..tp] } else { &[] },
            // The Winograd GEMM reads one run per slot and phase (see
            // `winograd_rows`): no tap offsets or channel-block stride.
            tap_off: &[],
            cb_stride: 0,
            tp,
            t_out,
            zx: zx as i32,
            sink,
            route: IntRoute::Avx2,
            width: 2,
            centered: true,
        };
        // Cache-line aligned units (the tiles' loads never split a line).
        let al = ps.transformed.as_ptr().align_offset(64);
        let ul = geo.unit_len();
        let threads = pool.threads();
        // Weights past every core's L2 (the decoder's 1024-channel convs hold
        // 18 MB) stream from memory: read them once per batch, not per unit.
        let weight_major = packed.len() >= WEIGHT_MAJOR_BYTES;
        for u0 in (0..geo.units()).step_by(geo.batch_units) {
            let units = (geo.units() - u0).min(geo.batch_units);
            let buf = &mut ps.transformed[al..][..units * ul];
            // A weight-major batch of several units, like one with too few
            // units for the lanes, is transformed first, then multiplied.
            let weight_major = weight_major && units > 1;
            let own_units = threads == 1 || units >= winograd::UNITS_PER_LANE * threads;
            if own_units && !weight_major {
                // Each unit transformed and multiplied by the lane that
                // claims it: no barrier between, no tile read across cores.
                pool.for_each_chunk_mut(buf, ul, |u, v| {
                    winograd::transform_unit(&geo, phases, (u0 + u) * winograd::UNIT_Q, v);
                    ctx.winograd_unit(&geo, v, u0 + u, 0..blocks);
                })?;
                continue;
            }
            pool.for_each_chunk_mut(buf, ul, |u, v| {
                winograd::transform_unit(&geo, phases, (u0 + u) * winograd::UNIT_Q, v)
            })?;
            let v = &*buf;
            if weight_major {
                // Each claim takes one group of output blocks through every
                // unit, its weights read from memory once (measured, capped
                // to AVX2, 1024 channels, 144 frames, weights cold: 1 lane
                // 6.9 → 5.6 ms, 2 lanes 3.3 → 3.0 ms; 500 frames 19.4 → 15.1 ms).
                pool.for_each_chunk(blocks.div_ceil(BLOCK_GROUP), 1, |groups| {
                    for g in groups {
                        let range = g * BLOCK_GROUP..((g + 1) * BLOCK_GROUP).min(blocks);
                        for unit in 0..units {
                            let v = &v[unit * ul..][..ul];
                            ctx.winograd_unit(&geo, v, u0 + unit, range.clone());
                        }
                    }
                })?;
                continue;
            }
            // Too few units for the lanes: split their output blocks too
            // (integer sums are exact, so any split gives the same bits).
            let parts = (4 * threads).div_ceil(units).clamp(1, blocks);
            let per_part = blocks.div_ceil(parts);
            let parts = blocks.div_ceil(per_part);
            pool.for_each_chunk(units * parts, 1, |us| {
                for u in us {
                    let (unit, part) = (u / parts, u % parts);
                    let b0 = part * per_part;
                    let range = b0..(b0 + per_part).min(blocks);
                    ctx.winograd_unit(&geo, &v[unit * ul..][..ul], u0 + unit, range);
                }
            })?;
        }
        Ok(())
    }

    /// Apply the zero-point correction and write `acc` (`acc.len()` frames from
    /// `t` of output channel `co`) to the sink.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn finish_row(
        &self,
        co: usize,
        acc: &mut [i32],
        base: i32,
        window: Option<(i32, &[i32])>,
        sink: Sink,
        t_out: usize,
        t: usize,
    ) {
        let n = acc.len();
        if let Sink::Dequant {
            out,
            scale,
            bias_q,
            add,
        } = sink
        {
            // One pass: `(acc + base − zw·Σx) + bias_q` folds into one
            // wrapping sum (exact modulo 2³², as the separate passes are).
            // SAFETY: frames t..t+n of row co belong to the calling chunk alone
            // and lie inside the checked output; `bias_q` holds c_out values.
            let (row, b) = unsafe {
                (
                    std::slice::from_raw_parts_mut(out.ptr().add(co * t_out + t), n),
                    *bias_q.ptr().add(co),
                )
            };
            // The row's next frames (the next unit's or chunk's): rows sit
            // `t_out` apart, too many streams for the hardware prefetcher, and
            // a residual `add` reads them.
            #[cfg(target_arch = "x86_64")]
            if t + 2 * n <= t_out {
                let next = out.ptr().wrapping_add(co * t_out + t + n);
                for line in (0..n).step_by(16) {
                    // SAFETY: a prefetch never faults; the address is inside the output.
                    unsafe {
                        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                            next.wrapping_add(line).cast(),
                        )
                    };
                }
            }
            let c = base.wrapping_add(b);
            match window {
                None => store(
                    row,
                    acc.iter().map(|a| a.wrapping_add(c) as f32 * scale),
                    add,
                ),
                Some((zw, sums)) => store(
                    row,
                    acc.iter().zip(sums).map(|(a, s)| {
                        a.wrapping_add(c).wrapping_sub(zw.wrapping_mul(*s)) as f32 * scale
                    }),
                    add,
                ),
            }
            return;
        }
        // Plain zip loops over whole slices: they vectorize.
        for a in acc.iter_mut() {
            *a = a.wrapping_add(base);
        }
        if let Some((zw, s)) = window {
            for (a, s) in acc.iter_mut().zip(s) {
                *a = a.wrapping_sub(zw.wrapping_mul(*s));
            }
        }
        match sink {
            Sink::Int(out) => {
                // SAFETY: frames t..t+n of row co belong to the calling chunk alone
                // and lie inside the checked [c_out, t_out] output.
                let row =
                    unsafe { std::slice::from_raw_parts_mut(out.ptr().add(co * t_out + t), n) };
                row.copy_from_slice(acc);
            }
            Sink::Float(out, a_scale) => {
                // SAFETY: as above.
                let row =
                    unsafe { std::slice::from_raw_parts_mut(out.ptr().add(co * t_out + t), n) };
                // Same expression as `dequantize`, hoisted per row.
                let m = a_scale * self.scale[co];
                match &self.bias {
                    Some(b) => {
                        let b = b[co];
                        for (o, a) in row.iter_mut().zip(acc.iter()) {
                            *o = *a as f32 * m + b;
                        }
                    }
                    None => {
                        for (o, a) in row.iter_mut().zip(acc.iter()) {
                            *o = *a as f32 * m;
                        }
                    }
                }
            }
            // Handled above in one pass.
            Sink::Dequant { .. } => {}
        }
    }
}

/// Everything a dense chunk reads.
struct Dense<'a> {
    conv: &'a Conv1dInt8,
    packed: &'a [i8],
    wsum: &'a [i32],
    xpack: &'a [u8],
    colsum: &'a [i32],
    tap_off: &'a [usize],
    cb_stride: usize,
    tp: usize,
    t_out: usize,
    zx: i32,
    sink: Sink,
    route: IntRoute,
    /// Bytes per packed weight ([`Tiles::width`]).
    width: usize,
    /// The sums are of centered inputs (`x − 128`, the Winograd route's):
    /// `128·Σw` is added back with the zero-point correction.
    centered: bool,
}

impl Dense<'_> {
    /// `window[i]` = Σx over the input window of output frame `t0 + i` in
    /// group `g` (`Σ_k colsum[t·s + k·d]`), when weight zero points need it.
    fn window_sums(&self, g: usize, t0: usize, window: &mut [i32]) {
        if !self.conv.any_zero {
            return;
        }
        let p = &self.conv.params;
        let cs = &self.colsum[g * self.tp..(g + 1) * self.tp];
        for (i, w) in window.iter_mut().enumerate() {
            let base = (t0 + i) * p.stride;
            *w = (0..p.kernel).fold(0i32, |a, tap| a.wrapping_add(cs[base + tap * p.dilation]));
        }
    }

    /// Correct and sink accumulator rows (output channels from `co0`, frames
    /// `t..t + n`; `window` holds the window sums from frame `t`).
    fn finish_rows<'r>(
        &self,
        route: IntRoute,
        rows: impl Iterator<Item = &'r mut [i32]>,
        co0: usize,
        t: usize,
        n: usize,
        window: &[i32],
    ) {
        let p = &self.conv.params;
        let n_taps = ((p.c_in / p.groups) * p.kernel) as i32;
        for (r, a) in rows.enumerate() {
            let co = co0 + r;
            let zw = self.conv.zero[co];
            // N·zx·zw − zx·Σw (+ 128·Σw for centered sums), then − zw·Σx per frame.
            let zx = if self.centered {
                self.zx - 128
            } else {
                self.zx
            };
            let base = n_taps
                .wrapping_mul(self.zx)
                .wrapping_mul(zw)
                .wrapping_sub(zx.wrapping_mul(self.wsum[co]));
            let win = self.conv.any_zero.then(|| (zw, &window[..n]));
            finish(
                route,
                self.conv,
                co,
                &mut a[..n],
                base,
                win,
                self.sink,
                self.t_out,
                t,
            );
        }
    }

    /// Output frames `t0..t1` of every channel.
    fn chunk(&self, frames: std::ops::Range<usize>, block_range: std::ops::Range<usize>) {
        let (t0, t1) = (frames.start, frames.end);
        let p = &self.conv.params;
        let (cog, k, cbs) = (p.c_out / p.groups, p.kernel, self.conv.cbs);
        let blocks = cog.div_ceil(MR);
        let wblock = cbs * k * MR * 4 * self.width;
        let mut acc = [[0i32; TILE]; MR];
        let mut window = [0i32; TIME_CHUNK];
        let window = &mut window[..t1 - t0];
        let x_need = (cbs - 1) * self.cb_stride + self.tap_off.iter().max().copied().unwrap_or(0);
        for g in 0..p.groups {
            self.window_sums(g, t0, window);
            let x = &self.xpack[g * cbs * self.cb_stride..(g + 1) * cbs * self.cb_stride];
            for b in block_range.clone() {
                let rows = MR.min(cog - b * MR);
                let co0 = g * cog + b * MR;
                let w = &self.packed[(g * blocks + b) * wblock..(g * blocks + b + 1) * wblock];
                let mut t = t0;
                while t < t1 {
                    let n = TILE.min(t1 - t);
                    // Whole 16-frame vectors: stays inside the packed rows (see pack_row).
                    assert!(x.len() >= x_need + 4 * (t + n.div_ceil(16) * 16));
                    // The block's first frames bring its weights in.
                    let ahead = if t == t0 { WEIGHT_PREFETCH } else { 0 };
                    tile(
                        self.route,
                        x,
                        w,
                        cbs,
                        self.cb_stride,
                        self.tap_off,
                        t,
                        n,
                        ahead,
                        &mut acc,
                    );
                    let rows = acc.iter_mut().take(rows).map(|a| &mut a[..]);
                    self.finish_rows(self.route, rows, co0, t, n, &window[t - t0..]);
                    t += n;
                }
            }
        }
    }
}

impl Dense<'_> {
    /// Winograd unit `unit` (its transformed tiles `v`), output blocks
    /// `block_range`: per group of blocks and phase, the
    /// eight slot GEMMs (slot outer: one slot's input panel stays in L1 while
    /// the blocks' weights stream), the output transform into frame rows,
    /// then the rows' finish.
    fn winograd_unit(
        &self,
        geo: &winograd::Geometry,
        v: &[i16],
        unit: usize,
        block_range: std::ops::Range<usize>,
    ) {
        match geo.kind {
            winograd::Kind::F63 => {
                self.winograd_unit_slots::<{ winograd::SLOTS }>(geo, v, unit, block_range)
            }
            winograd::Kind::F64 => {
                self.winograd_unit_slots::<{ winograd::SLOTS4 }>(geo, v, unit, block_range)
            }
        }
    }

    /// [`Dense::winograd_unit`] for a transform of `S` slots.
    fn winograd_unit_slots<const S: usize>(
        &self,
        geo: &winograd::Geometry,
        v: &[i16],
        unit: usize,
        block_range: std::ops::Range<usize>,
    ) {
        let t0 = unit * winograd::UNIT_Q * winograd::OUTS * geo.d;
        if t0 >= self.t_out {
            return;
        }
        // A last unit needing at most 8 tiles per phase computes only those.
        let half = (self.t_out - t0).div_ceil(winograd::OUTS * geo.d) <= 8;
        // Row buffers sized for the dilation (they are zeroed per unit).
        const F: usize = winograd::OUTS * winograd::UNIT_Q;
        const H: usize = winograd::UNIT_Q / 2;
        const Q: usize = winograd::UNIT_Q;
        match (geo.d, half) {
            (1, true) => self.winograd_rows::<F, H, S>(geo, v, t0, block_range),
            (1, false) => self.winograd_rows::<F, Q, S>(geo, v, t0, block_range),
            (2, true) => self.winograd_rows::<{ 2 * F }, H, S>(geo, v, t0, block_range),
            (2, false) => self.winograd_rows::<{ 2 * F }, Q, S>(geo, v, t0, block_range),
            (3 | 4, true) => self.winograd_rows::<{ 4 * F }, H, S>(geo, v, t0, block_range),
            (3 | 4, false) => self.winograd_rows::<{ 4 * F }, Q, S>(geo, v, t0, block_range),
            (_, true) => {
                self.winograd_rows::<{ winograd::MAX_DILATION * F }, H, S>(geo, v, t0, block_range)
            }
            (_, false) => {
                self.winograd_rows::<{ winograd::MAX_DILATION * F }, Q, S>(geo, v, t0, block_range)
            }
        }
    }

    /// [`Dense::winograd_unit`] from output frame `t0` with rows of
    /// `FRAMES ≥ 6·d·UNIT_Q` frames, computing `N` tiles per phase.
    fn winograd_rows<const FRAMES: usize, const N: usize, const S: usize>(
        &self,
        geo: &winograd::Geometry,
        v: &[i16],
        t0: usize,
        block_range: std::ops::Range<usize>,
    ) {
        const UQ: usize = winograd::UNIT_Q;
        assert!(winograd::OUTS * geo.d * UQ <= FRAMES && N <= UQ);
        const BG: usize = BLOCK_GROUP;
        let p = &self.conv.params;
        let (d, cbs) = (geo.d, geo.cbs);
        let n = (winograd::OUTS * d * N).min(self.t_out - t0);
        let mut window = [0i32; FRAMES];
        self.window_sums(0, t0, &mut window[..n]);
        let mut acc = [[[[0i32; N]; MR]; S]; BG];
        // A tail tap's sums, per output of the tile.
        let mut tail = [[[0i32; N]; MR]; winograd::OUTS];
        let k = p.kernel;
        let tail_at = winograd::tail_offset(p.c_out, MR, cbs, k);
        let wt = cbs * MR * 4 * 2;
        let mut rows = [[[0i32; FRAMES]; MR]; BG];
        let groups = geo.rhos;
        let wslot = cbs * groups * MR * 4 * 2;
        // Bytes between the reads of consecutive groups (and, past the
        // last group, channel blocks): a GEMM call's reads are one run.
        let row = 2 * winograd::ROW;
        let blocks = p.c_out.div_ceil(MR);
        let vb: &[u8] = winograd::bytes_of(v);
        let mut b0 = block_range.start;
        while b0 < block_range.end {
            let nb = BG.min(block_range.end - b0);
            for r0 in 0..d {
                for slot in 0..S {
                    let x = &vb[2 * geo.row_at(slot, r0)..];
                    // Whole 8-tile vectors of every channel block and group stay inside `v`.
                    assert!(x.len() >= (cbs * groups - 1) * row + 8 * UQ);
                    // Every channel block and group of the slot: one run
                    // of `cbs·groups` steps, a group's row apart.
                    for (bi, acc) in acc.iter_mut().take(nb).enumerate() {
                        let w = &self.packed[(slot * blocks + b0 + bi) * wslot..][..wslot];
                        tile_run::<N>(x, w, cbs * groups, row, &mut acc[slot]);
                    }
                }
                for (bi, (acc, rows)) in acc.iter().zip(rows.iter_mut()).take(nb).enumerate() {
                    let b = b0 + bi;
                    if winograd::tail(k, geo.kind) {
                        // The last tap directly from its input rows (u8),
                        // added in the output transform.
                        let w = &self.packed[tail_at + b * wt..][..wt];
                        for (j, tail) in tail.iter_mut().enumerate() {
                            let x = &vb[2 * geo.tail_row_at(r0, j)..][..cbs * row];
                            tile_run::<N>(x, w, cbs, row, tail);
                        }
                    }
                    let nr = MR.min(p.c_out - b * MR);
                    for (r, row) in rows.iter_mut().take(nr).enumerate() {
                        let sums: [&[i32; N]; S] = std::array::from_fn(|s| &acc[s][r]);
                        let direct = winograd::tail(k, geo.kind)
                            .then(|| std::array::from_fn(|j| &tail[j][r]));
                        winograd::untransform(&sums, direct, d, r0, row);
                    }
                }
            }
            for (bi, rows) in rows.iter_mut().take(nb).enumerate() {
                let b = b0 + bi;
                let nr = MR.min(p.c_out - b * MR);
                let rows = rows.iter_mut().take(nr).map(|a| &mut a[..]);
                self.finish_rows(self.route, rows, b * MR, t0, n, &window[..n]);
            }
            b0 += nb;
        }
    }
}

impl Dense<'_> {
    /// As [`Dense::chunk`] on AMX tiles: blocks of [`AMX_CO`] output
    /// channels × [`AMX_T`] frames, weights `[ci/64][k]` tile pairs.
    fn chunk_amx(&self, frames: std::ops::Range<usize>, block_range: std::ops::Range<usize>) {
        #[cfg(target_arch = "x86_64")]
        {
            let (t0, t1) = (frames.start, frames.end);
            let p = &self.conv.params;
            let (cog, k, cbs) = (p.c_out / p.groups, p.kernel, self.conv.cbs);
            let kcs = cbs.div_ceil(16);
            let blocks = cog.div_ceil(AMX_CO);
            let wblock = kcs * k * AMX_CO * 64;
            let mut acc = crate::kernels::amx::Acc::default();
            let mut window = [0i32; TIME_CHUNK];
            let window = &mut window[..t1 - t0];
            let max_off = self.tap_off.iter().max().copied().unwrap_or(0);
            // SAFETY: the route is chosen only where AMX-INT8 is detected and
            // the OS granted the tile state (`cpu::features`).
            unsafe { crate::kernels::amx::begin() };
            for g in 0..p.groups {
                self.window_sums(g, t0, window);
                let x = &self.xpack[g * cbs * self.cb_stride..];
                for b in block_range.clone() {
                    let rows = AMX_CO.min(cog - b * AMX_CO);
                    let co0 = g * cog + b * AMX_CO;
                    let w = &self.packed[(g * blocks + b) * wblock..(g * blocks + b + 1) * wblock];
                    let mut t = t0;
                    while t < t1 {
                        let n = AMX_T.min(t1 - t);
                        // Every input tile row read stays inside `x` (with its slack).
                        assert!(
                            x.len() >= (kcs * 16 - 1) * self.cb_stride + max_off + 4 * (t + AMX_T)
                        );
                        // The block's first frames bring its weights in.
                        let ahead = if t == t0 { WEIGHT_PREFETCH } else { 0 };
                        // SAFETY: reads checked above; `w` holds kcs·k tile pairs.
                        unsafe {
                            x86::tile_amx(
                                x.as_ptr().add(4 * t),
                                w.as_ptr(),
                                kcs,
                                self.cb_stride,
                                self.tap_off,
                                ahead,
                                &mut acc,
                            )
                        };
                        let rows = acc.0.iter_mut().take(rows).map(|a| &mut a[..]);
                        self.finish_rows(IntRoute::Vnni, rows, co0, t, n, &window[t - t0..]);
                        t += n;
                    }
                }
            }
            // SAFETY: as above; returns the tile state to its init state.
            unsafe { crate::kernels::amx::end() };
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (frames, block_range);
            unreachable!("AMX tiles are packed only on x86-64");
        }
    }
}

/// `row = values` or, with `add`, `row += values` (the residual `Add`).
#[inline(always)]
fn store(row: &mut [f32], values: impl Iterator<Item = f32>, add: bool) {
    if add {
        for (o, v) in row.iter_mut().zip(values) {
            *o += v;
        }
    } else {
        for (o, v) in row.iter_mut().zip(values) {
            *o = v;
        }
    }
}

/// `finish_row` compiled for the route's vector width (it autovectorizes).
#[allow(clippy::too_many_arguments)]
fn finish(
    route: IntRoute,
    conv: &Conv1dInt8,
    co: usize,
    acc: &mut [i32],
    base: i32,
    window: Option<(i32, &[i32])>,
    sink: Sink,
    t_out: usize,
    t: usize,
) {
    match route {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the route was derived from detected features.
        IntRoute::Vnni => unsafe {
            x86::finish_avx512(conv, co, acc, base, window, sink, t_out, t)
        },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above.
        IntRoute::Avx2 | IntRoute::AvxVnni => unsafe {
            x86::finish_avx2(conv, co, acc, base, window, sink, t_out, t)
        },
        _ => conv.finish_row(co, acc, base, window, sink, t_out, t),
    }
}

/// `acc[r][i] = Σ_{cb,k,j} x[cb][tap k][t + i][j] · w[cb][k][r][j]` for `i < n`
/// (rounded up to whole vectors), `x` being one group's packed input; the
/// SIMD routes ask for weights `ahead` bytes ahead (0: none).
#[allow(clippy::too_many_arguments)]
fn tile(
    route: IntRoute,
    x: &[u8],
    w: &[i8],
    cbs: usize,
    cb_stride: usize,
    tap_off: &[usize],
    t: usize,
    n: usize,
    ahead: usize,
    acc: &mut [[i32; TILE]; MR],
) {
    // Only the x86 routes prefetch.
    #[cfg(not(target_arch = "x86_64"))]
    let _ = ahead;
    let width = if route == IntRoute::Avx2 { 2 } else { 1 };
    assert!(w.len() >= cbs * tap_off.len() * MR * 4 * width);
    match route {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: VNNI was detected; reads stay inside `x` (asserted by the
        // caller for whole 16-frame vectors) and `w` (asserted above).
        IntRoute::Vnni => unsafe {
            let xp = x.as_ptr().add(4 * t);
            match n.div_ceil(16) {
                1 => x86::tile_vnni::<1>(xp, w.as_ptr(), cbs, cb_stride, tap_off, ahead, acc),
                2 => x86::tile_vnni::<2>(xp, w.as_ptr(), cbs, cb_stride, tap_off, ahead, acc),
                3 => x86::tile_vnni::<3>(xp, w.as_ptr(), cbs, cb_stride, tap_off, ahead, acc),
                _ => x86::tile_vnni::<4>(xp, w.as_ptr(), cbs, cb_stride, tap_off, ahead, acc),
            }
        },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX-VNNI was detected; reads as above (two 8-frame vectors
        // per 16-frame step).
        IntRoute::AvxVnni => unsafe {
            x86::tile_avx_vnni(
                x.as_ptr().add(4 * t),
                w.as_ptr(),
                cbs,
                cb_stride,
                tap_off,
                n,
                ahead,
                acc,
            )
        },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX2 was detected; reads as above (8-frame vectors ≤ 16-frame ones).
        IntRoute::Avx2 => unsafe {
            x86::tile_avx2::<TILE>(
                x.as_ptr().add(4 * t),
                w.as_ptr(),
                cbs,
                cb_stride,
                tap_off,
                n,
                ahead,
                acc,
            )
        },
        _ => {
            for a in acc.iter_mut() {
                a[..n].fill(0);
            }
            let mut wi = 0;
            for cb in 0..cbs {
                for &off in tap_off {
                    let xr = &x[cb * cb_stride + off + 4 * t..][..4 * n];
                    for (r, a) in acc.iter_mut().enumerate() {
                        let wr = &w[wi + 4 * r..wi + 4 * r + 4];
                        for (o, xv) in a[..n].iter_mut().zip(xr.chunks_exact(4)) {
                            let d = (0..4).fold(0i32, |s, j| s + xv[j] as i32 * wr[j] as i32);
                            *o = o.wrapping_add(d);
                        }
                    }
                    wi += 4 * MR;
                }
            }
        }
    }
}

/// `acc[r][f] = Σ_i Σ_j x[i·stride + 8f + 2j] · w[(i·MR + r)·4 + j]` over
/// `steps` steps of i16 inputs (8 bytes a frame) and [`Tiles::Wide`]
/// weights: the Winograd GEMM's reads, as [`x86::tile_avx2_run`] runs them.
fn tile_run<const N: usize>(
    x: &[u8],
    w: &[i8],
    steps: usize,
    stride: usize,
    acc: &mut [[i32; N]; MR],
) {
    assert!(w.len() >= steps * MR * 4 * 2 && N.is_multiple_of(8));
    assert!(steps == 0 || x.len() >= (steps - 1) * stride + 8 * N);
    #[cfg(target_arch = "x86_64")]
    if cpu::features().avx2_fma {
        // SAFETY: AVX2 was detected; the reads of every step stay inside
        // `x` and `w` (asserted above).
        unsafe { x86::tile_avx2_run::<N>(x.as_ptr(), w.as_ptr(), steps, stride, acc) };
        return;
    }
    let xt = |i: usize| i16::from_le_bytes([x[i], x[i + 1]]) as i32;
    let wt = |i: usize| i16::from_le_bytes([w[i] as u8, w[i + 1] as u8]) as i32;
    for a in acc.iter_mut() {
        a.fill(0);
    }
    for i in 0..steps {
        for (r, a) in acc.iter_mut().enumerate() {
            for (f, o) in a.iter_mut().enumerate() {
                let d = (0..4).fold(0i32, |s, j| {
                    let xv = xt(i * stride + 8 * f + 2 * j);
                    s.wrapping_add(xv.wrapping_mul(wt(2 * ((i * MR + r) * 4 + j))))
                });
                *o = o.wrapping_add(d);
            }
        }
    }
}

/// `DynamicQuantizeLinear` of `x` into `dst` in fixed parallel chunks; equals
/// [`quantize_activations`] bit for bit (min/max and the per-element formula are exact).
fn quantize_into(
    pool: &impl Fork,
    route: IntRoute,
    x: &[f32],
    dst: &mut [u8],
    minmax: &mut [[f32; 2]],
) -> Result<ActivationQuant, KernelError> {
    check_len("quantized activations", x.len(), dst.len())?;
    let chunks = x.len().div_ceil(QUANT_CHUNK);
    pool.for_each_chunk_mut(&mut minmax[..chunks], 1, |i, mm| {
        let src = &x[i * QUANT_CHUNK..((i + 1) * QUANT_CHUNK).min(x.len())];
        mm[0] = range_of(route, src);
    })?;
    // The range always includes 0 (as `DynamicQuantizeLinear` widens it).
    let (lo, hi) = minmax[..chunks]
        .iter()
        .fold((0.0f32, 0.0f32), |(lo, hi), m| (lo.min(m[0]), hi.max(m[1])));
    let aq = ActivationQuant::from_range(lo, hi);
    pool.for_each_chunk_mut(dst, QUANT_CHUNK, |i, d| {
        let src = &x[i * QUANT_CHUNK..i * QUANT_CHUNK + d.len()];
        quantize_slice(route, aq, src, d);
    })?;
    Ok(aq)
}

/// The [`quantize`] route of an int route.
fn quant_level(route: IntRoute) -> SimdLevel {
    match route {
        IntRoute::Vnni => SimdLevel::Avx512,
        IntRoute::Avx2 | IntRoute::AvxVnni => SimdLevel::Avx2,
        IntRoute::Scalar => SimdLevel::Scalar,
    }
}

/// `[min(0, x…), max(0, x…)]`, NaNs ignored (as `f32::min`/`max`).
fn range_of(route: IntRoute, x: &[f32]) -> [f32; 2] {
    quantize::range_with(quant_level(route), x)
}

fn quantize_slice(route: IntRoute, aq: ActivationQuant, x: &[f32], dst: &mut [u8]) {
    quantize::quantize_with(quant_level(route), aq, x, dst)
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{Conv1dInt8, Sink, MR, TILE, WEIGHT_PREFETCH};
    use crate::kernels::amx;
    use std::arch::x86_64::*;

    /// `acc[c][f] = Σ_{kc, tap} w · x` for 32 channels × 32 frames on AMX
    /// tiles (i8 weights × u8 inputs).
    ///
    /// # Safety
    /// Needs AMX-INT8 after [`amx::begin`]. `x` points at frame `t` of a
    /// group's packed input: for every `kc < kcs`, `kr < 16`, `off` in
    /// `tap_off`, bytes `x + (16·kc + kr)·cb_stride + off + 0..128` must be
    /// readable; `w` must hold `kcs · taps` tile pairs of 2 KiB.
    pub(super) unsafe fn tile_amx(
        x: *const u8,
        w: *const i8,
        kcs: usize,
        cb_stride: usize,
        tap_off: &[usize],
        ahead: usize,
        acc: &mut amx::Acc,
    ) {
        amx::zero();
        let mut wp = w;
        for kc in 0..kcs {
            let xc = x.wrapping_add(16 * kc * cb_stride);
            for &off in tap_off {
                if ahead > 0 {
                    // The tile pair's 2 KiB, `ahead` bytes on.
                    for line in (0..2048).step_by(64) {
                        _mm_prefetch::<_MM_HINT_T0>(wp.wrapping_add(ahead + line));
                    }
                }
                let b0 = xc.wrapping_add(off);
                amx::step_su(
                    wp,
                    wp.wrapping_add(1024),
                    64,
                    b0,
                    b0.wrapping_add(64),
                    cb_stride,
                );
                wp = wp.wrapping_add(2048);
            }
        }
        amx::store(acc);
    }

    /// `MR × 16·NV` frames with `vpdpbusd` (u8 × i8 → i32, wrapping).
    ///
    /// # Safety
    /// Needs AVX-512F/BW + VNNI. `x` points at frame `t` of a group's packed
    /// input: every `x + cb·cb_stride + off + 64·NV` (cb < cbs, off in
    /// `tap_off`) must be readable, and `w` must hold `cbs·taps·MR·4` weights.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn tile_vnni<const NV: usize>(
        x: *const u8,
        w: *const i8,
        cbs: usize,
        cb_stride: usize,
        tap_off: &[usize],
        ahead: usize,
        acc: &mut [[i32; TILE]; MR],
    ) {
        // Constant-index loops only: keeps the MR × NV accumulators in registers.
        let mut a = [[_mm512_setzero_si512(); NV]; MR];
        let mut wp = w;
        for cb in 0..cbs {
            let xc = x.wrapping_add(cb * cb_stride);
            for &off in tap_off {
                let xr = xc.wrapping_add(off);
                if ahead > 0 {
                    _mm_prefetch::<_MM_HINT_T0>(wp.wrapping_add(ahead));
                }
                let mut xv = [_mm512_setzero_si512(); NV];
                #[allow(clippy::needless_range_loop)]
                for j in 0..NV {
                    xv[j] = _mm512_loadu_si512(xr.wrapping_add(64 * j) as *const _);
                }
                #[allow(clippy::needless_range_loop)]
                for r in 0..MR {
                    let wv =
                        _mm512_set1_epi32((wp.wrapping_add(4 * r) as *const i32).read_unaligned());
                    for j in 0..NV {
                        a[r][j] = _mm512_dpbusd_epi32(a[r][j], xv[j], wv);
                    }
                }
                wp = wp.wrapping_add(4 * MR);
            }
        }
        for (row, ar) in acc.iter_mut().zip(&a) {
            for (j, v) in ar.iter().enumerate() {
                _mm512_storeu_si512(row.as_mut_ptr().add(16 * j) as *mut _, *v);
            }
        }
    }

    /// `MR × n` frames (16 at a time: two 8-frame vectors) on AVX-VNNI's
    /// 256-bit `vpdpbusd`, [`Tiles::Vector`] weights; the VNNI route's sums.
    ///
    /// # Safety
    /// Needs AVX2 + AVX-VNNI; reads as [`tile_vnni`] for `⌈n/16⌉` 16-frame vectors.
    #[target_feature(enable = "avx2,avxvnni")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn tile_avx_vnni(
        x: *const u8,
        w: *const i8,
        cbs: usize,
        cb_stride: usize,
        tap_off: &[usize],
        n: usize,
        ahead: usize,
        acc: &mut [[i32; TILE]; MR],
    ) {
        let mut t = 0;
        while t < n {
            // lo: frames t..t+8, hi: t+8..t+16 (one i32 lane per frame).
            let mut lo = [_mm256_setzero_si256(); MR];
            let mut hi = [_mm256_setzero_si256(); MR];
            let mut wp = w;
            // The first 16 frames bring the weights in.
            let ahead = if t == 0 { ahead } else { 0 };
            for cb in 0..cbs {
                let xc = x.wrapping_add(cb * cb_stride + 4 * t);
                for &off in tap_off {
                    let xr = xc.wrapping_add(off);
                    let xl = _mm256_loadu_si256(xr as *const _);
                    let xh = _mm256_loadu_si256(xr.wrapping_add(32) as *const _);
                    if ahead > 0 {
                        _mm_prefetch::<_MM_HINT_T0>(wp.wrapping_add(ahead));
                    }
                    #[allow(clippy::needless_range_loop)]
                    for r in 0..MR {
                        let w4 = (wp.wrapping_add(4 * r) as *const i32).read_unaligned();
                        let wv = _mm256_set1_epi32(w4);
                        lo[r] = _mm256_dpbusd_avx_epi32(lo[r], xl, wv);
                        hi[r] = _mm256_dpbusd_avx_epi32(hi[r], xh, wv);
                    }
                    wp = wp.wrapping_add(4 * MR);
                }
            }
            for r in 0..MR {
                _mm256_storeu_si256(acc[r].as_mut_ptr().add(t) as *mut _, lo[r]);
                _mm256_storeu_si256(acc[r].as_mut_ptr().add(t + 8) as *mut _, hi[r]);
            }
            t += 16;
        }
    }

    /// `MR × n` frames (8 at a time) on `vpmaddwd` over u8 inputs widened to
    /// i16 and [`Tiles::Wide`] weights: exact, unlike the saturating
    /// `vpmaddubsw`; per 4 channels × tap, two input widenings serve `MR`
    /// rows of one broadcast load, two multiplies and two adds.
    ///
    /// # Safety
    /// Needs AVX2; reads as [`tile_vnni`] for `⌈n/8⌉` 8-frame vectors.
    #[target_feature(enable = "avx2")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn tile_avx2<const N: usize>(
        x: *const u8,
        w: *const i8,
        cbs: usize,
        cb_stride: usize,
        tap_off: &[usize],
        n: usize,
        ahead: usize,
        acc: &mut [[i32; N]; MR],
    ) {
        let mut t = 0;
        while t < n {
            // lo: frames t..t+4 (as pairs of channel pairs), hi: t+4..t+8.
            let mut lo = [_mm256_setzero_si256(); MR];
            let mut hi = [_mm256_setzero_si256(); MR];
            let mut wp = w;
            // The first 8 frames bring the weights in.
            let ahead = if t == 0 { ahead } else { 0 };
            for cb in 0..cbs {
                let xc = x.wrapping_add(cb * cb_stride + 4 * t);
                for &off in tap_off {
                    let xr = xc.wrapping_add(off);
                    let xl = _mm256_cvtepu8_epi16(_mm_loadu_si128(xr as *const _));
                    let xh = _mm256_cvtepu8_epi16(_mm_loadu_si128(xr.wrapping_add(16) as *const _));
                    if ahead > 0 {
                        _mm_prefetch::<_MM_HINT_T0>(wp.wrapping_add(ahead));
                    }
                    madd_step(xl, xh, wp, &mut lo, &mut hi);
                    wp = wp.wrapping_add(8 * MR);
                }
            }
            store_frames(&lo, &hi, acc, t);
            t += 8;
        }
    }

    /// One step of the AVX2 tiles: `MR` rows of four i16 weights (the same
    /// in every 64-bit lane) times both 4-frame input vectors, summed in.
    ///
    /// # Safety
    /// Needs AVX2; `wp` must hold `MR·4` i16 weights.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn madd_step(
        xl: __m256i,
        xh: __m256i,
        wp: *const i8,
        lo: &mut [__m256i; MR],
        hi: &mut [__m256i; MR],
    ) {
        #[allow(clippy::needless_range_loop)]
        for r in 0..MR {
            let w4 = (wp.wrapping_add(8 * r) as *const i64).read_unaligned();
            let wv = _mm256_set1_epi64x(w4);
            lo[r] = _mm256_add_epi32(lo[r], _mm256_madd_epi16(xl, wv));
            hi[r] = _mm256_add_epi32(hi[r], _mm256_madd_epi16(xh, wv));
        }
    }

    /// The AVX2 tiles' sums of frames `t..t + 8` into `acc` in frame order
    /// (per 128-bit lane they hold `[t0 t1 t4 t5 | t2 t3 t6 t7]`).
    ///
    /// # Safety
    /// Needs AVX2; `t + 8 ≤ N`.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn store_frames<const N: usize>(
        lo: &[__m256i; MR],
        hi: &[__m256i; MR],
        acc: &mut [[i32; N]; MR],
        t: usize,
    ) {
        for r in 0..MR {
            let s = _mm256_hadd_epi32(lo[r], hi[r]);
            let s = _mm256_permute4x64_epi64::<0b11_01_10_00>(s);
            _mm256_storeu_si256(acc[r].as_mut_ptr().add(t) as *mut _, s);
        }
    }

    /// As [`tile_avx2`] on i16 inputs read as one run: step `i` reads
    /// `x + i·stride` and the next `MR·4` weights (the Winograd route lays
    /// every channel block and tap group of a GEMM call out so): one
    /// pointer increment a step, no offset table.
    ///
    /// # Safety
    /// Needs AVX2; `x + i·stride + 16·N` must be readable for `i < steps`,
    /// and `w` must hold `steps·MR·4` i16 weights.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn tile_avx2_run<const N: usize>(
        x: *const u8,
        w: *const i8,
        steps: usize,
        stride: usize,
        acc: &mut [[i32; N]; MR],
    ) {
        let mut t = 0;
        while t < N {
            let mut lo = [_mm256_setzero_si256(); MR];
            let mut hi = [_mm256_setzero_si256(); MR];
            let (mut xr, mut wp) = (x.wrapping_add(8 * t), w);
            // The first 8 tiles bring the weights in (the rest find them in
            // L1): ask for them ahead, across 4 KB pages, which the hardware
            // prefetchers do not cross (measured, 1024 channels, 144 frames,
            // weights cold, 1 lane: 5.6 → 4.5 ms).
            let ahead = if t == 0 { WEIGHT_PREFETCH } else { 0 };
            for _ in 0..steps {
                let xl = _mm256_loadu_si256(xr as *const _);
                let xh = _mm256_loadu_si256(xr.wrapping_add(32) as *const _);
                if ahead > 0 {
                    _mm_prefetch::<_MM_HINT_T0>(wp.wrapping_add(ahead));
                }
                madd_step(xl, xh, wp, &mut lo, &mut hi);
                xr = xr.wrapping_add(stride);
                wp = wp.wrapping_add(8 * MR);
            }
            store_frames(&lo, &hi, acc, t);
            t += 8;
        }
    }

    /// `Conv1dInt8::finish_row` compiled for AVX-512.
    ///
    /// # Safety
    /// Needs AVX-512F/BW/VL/DQ; as `finish_row`.
    #[allow(clippy::too_many_arguments)]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")]
    pub(super) unsafe fn finish_avx512(
        conv: &Conv1dInt8,
        co: usize,
        acc: &mut [i32],
        base: i32,
        window: Option<(i32, &[i32])>,
        sink: Sink,
        t_out: usize,
        t: usize,
    ) {
        conv.finish_row(co, acc, base, window, sink, t_out, t)
    }

    /// `Conv1dInt8::finish_row` compiled for AVX2.
    ///
    /// # Safety
    /// Needs AVX2; as `finish_row`.
    #[allow(clippy::too_many_arguments)]
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn finish_avx2(
        conv: &Conv1dInt8,
        co: usize,
        acc: &mut [i32],
        base: i32,
        window: Option<(i32, &[i32])>,
        sink: Sink,
        t_out: usize,
        t: usize,
    ) {
        conv.finish_row(co, acc, base, window, sink, t_out, t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::conv1d::PadMode;
    use crate::kernels::cpu::available_levels;
    use proptest::prelude::*;
    use voxlane_runtime::LanePool;

    fn rnd(seed: u64, n: usize) -> Vec<u64> {
        crate::kernels::test_rng::states(seed)
            .take(n)
            .map(|s| s >> 33)
            .collect()
    }

    fn rnd_f32(seed: u64, n: usize) -> Vec<f32> {
        rnd(seed, n)
            .iter()
            .map(|v| (*v as f32 / (1u64 << 31) as f32) * 3.0 - 1.0)
            .collect()
    }

    /// Owned int8 or uint8 weights with matching zero points.
    struct W {
        i8s: Vec<i8>,
        u8s: Vec<u8>,
        signed: bool,
        zps: Vec<i32>,
        scales: Vec<f32>,
    }

    impl W {
        fn new(seed: u64, p: &Conv1dParams, signed: bool, per_channel: bool) -> Self {
            let r = rnd(seed, p.weight_len());
            let nz = if per_channel { p.c_out } else { 1 };
            let z = rnd(seed ^ 5, nz);
            let zps = z
                .iter()
                .map(|v| {
                    if signed {
                        (v % 256) as i32 - 128
                    } else {
                        (v % 256) as i32
                    }
                })
                .collect();
            Self {
                i8s: r.iter().map(|v| (v % 256) as u8 as i8).collect(),
                u8s: r.iter().map(|v| (v % 256) as u8).collect(),
                signed,
                zps,
                scales: rnd_f32(seed ^ 9, nz)
                    .iter()
                    .map(|v| v.abs() * 0.01 + 1e-4)
                    .collect(),
            }
        }

        /// Scales for every output channel (the zero points' count).
        fn zps_scales(&self) -> Vec<f32> {
            self.zps.iter().map(|_| 0.01).collect()
        }

        fn w(&self) -> IntWeights<'_> {
            if self.signed {
                IntWeights::I8(&self.i8s)
            } else {
                IntWeights::U8(&self.u8s)
            }
        }
    }

    fn params_strategy() -> impl Strategy<Value = (Conv1dParams, usize)> {
        (
            (1usize..10, 1usize..9, 1usize..8, 1usize..4, 1usize..5),
            (0usize..6, 0usize..6, 0usize..3, 1usize..200, 1usize..4),
            any::<bool>(),
        )
            .prop_map(|((cig, cog, k, s, d), (pl, pr, mode, t, g), dw)| {
                let mode = [PadMode::Zeros, PadMode::Reflect, PadMode::Replicate][mode];
                let mut p = Conv1dParams::new(cig * g, cog * g, k)
                    .stride(s)
                    .dilation(d)
                    .padding(pl, pr)
                    .groups(g)
                    .pad_mode(mode);
                if dw {
                    p.groups = p.c_in;
                    p.c_out = p.c_in * cog.min(3);
                }
                let t = t.max(p.span()).max(pl + 1).max(pr + 1);
                (p, t)
            })
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    /// The route each level takes on this CPU, checked against the reference
    /// on sizes off every block (13 inputs, 7 outputs, 37 frames, stride 2).
    fn route_matches_reference(level: SimdLevel, route: IntRoute, tiles: Tiles) {
        let p = Conv1dParams::new(13, 7, 3)
            .dilation(2)
            .stride(2)
            .padding(2, 1);
        let t = 37;
        let w = W::new(99, &p, true, true);
        let xq: Vec<u8> = rnd(7, p.c_in * t).iter().map(|v| (v % 256) as u8).collect();
        let want = conv_integer_reference(&p, w.w(), &w.zps, &xq, 131, t).unwrap();
        let mut conv = Conv1dInt8::new(p, w.w(), &w.scales, &w.zps, None).unwrap();
        conv.set_level(level);
        assert_eq!(int_route(level), route);
        assert!(matches!(conv.layout, Layout::Dense { tiles: tt, .. } if tt == tiles));
        let pool = LanePool::new(2).unwrap();
        let mut got = vec![i32::MIN; want.len()];
        let mut ws = Conv1dInt8Workspace::new();
        conv.conv_integer(&pool, &xq, 131, t, &mut got, &mut ws)
            .unwrap();
        assert_eq!(got, want);
    }

    #[test]
    fn avx2_route_runs_on_wide_weights() {
        let f = crate::kernels::cpu::features();
        if !f.avx2_fma || f.avx_vnni {
            eprintln!("skipped: the plain AVX2 route needs AVX2 without AVX-VNNI (VOXLANE_SIMD=avx2 on a VNNI CPU)");
            return;
        }
        route_matches_reference(SimdLevel::Avx2, IntRoute::Avx2, Tiles::Wide);
    }

    /// The AVX2 route's Winograd tiles return the reference's sums bit for
    /// bit: every kernel length's tap grouping, dilations (phases), ragged
    /// channel blocks and tiles, weight zero points, and the extremes.
    fn winograd_matches_reference(
        p: Conv1dParams,
        t: usize,
        seed: u64,
        signed: bool,
        extreme: bool,
    ) {
        let mut w = W::new(seed, &p, signed, true);
        let mut xq: Vec<u8> = rnd(seed ^ 3, p.c_in * t)
            .iter()
            .map(|v| (v % 256) as u8)
            .collect();
        if extreme {
            // Largest |Σ x·w|: every input 255, every weight −128 (zero point 0).
            xq.fill(255);
            w.i8s.fill(-128);
            w.u8s.fill(0);
            w.zps.fill(if signed { 0 } else { 128 });
        }
        let zx = (seed % 256) as u8;
        let want = conv_integer_reference(&p, w.w(), &w.zps, &xq, zx, t).unwrap();
        let mut conv = Conv1dInt8::new(p, w.w(), &w.zps_scales(), &w.zps, None).unwrap();
        conv.set_level(SimdLevel::Avx2);
        assert!(matches!(
            conv.layout,
            Layout::Dense {
                tiles: Tiles::Winograd(_),
                ..
            }
        ));
        if let Layout::Dense { packed, .. } = &conv.layout {
            let units = p
                .out_len(t)
                .unwrap()
                .div_ceil(6 * p.dilation * winograd::UNIT_Q);
            if p.c_in * p.c_out >= 100_000 {
                assert!(packed.len() >= WEIGHT_MAJOR_BYTES && units > 1, "{p:?}");
            }
        }
        let mut got = vec![i32::MIN; want.len()];
        let mut ws = Conv1dInt8Workspace::new();
        // A longer run of 255s first leaves its phases in the workspace:
        // the run under test must overwrite every input frame it reads.
        let long = t + 37;
        let t_long = p.out_len(long).unwrap();
        let mut junk = vec![0i32; p.c_out * t_long];
        let pool = LanePool::new(1).unwrap();
        conv.conv_integer(
            &pool,
            &vec![255u8; p.c_in * long],
            zx,
            long,
            &mut junk,
            &mut ws,
        )
        .unwrap();
        // One lane (each unit transformed and multiplied by its lane), and
        // two (the same, or, with fewer than 4 units a lane, the units'
        // output blocks split between the lanes).
        for threads in [1, 2] {
            let pool = LanePool::new(threads).unwrap();
            got.fill(i32::MIN);
            conv.conv_integer(&pool, &xq, zx, t, &mut got, &mut ws)
                .unwrap();
            assert_eq!(got, want, "{p:?} t {t} threads {threads}");
        }
        let pool = LanePool::new(2).unwrap();
        // Back to the direct tiles and again: the transformed weights invert.
        conv.set_level(SimdLevel::Scalar);
        conv.conv_integer(&pool, &xq, zx, t, &mut got, &mut ws)
            .unwrap();
        assert_eq!(got, want, "{p:?} t {t} after re-packing");
    }

    #[test]
    fn winograd_route_matches_reference_at_model_shapes_and_extremes() {
        if !crate::kernels::cpu::features().avx2_fma || crate::kernels::cpu::features().avx_vnni {
            eprintln!(
                "skipped: the Winograd tiles are the plain AVX2 route's (AVX2 without AVX-VNNI)"
            );
            return;
        }
        // Kokoro's generator convs (k 3/7/11, dilations 1/3/5, 64–256 channels)
        // and a decoder conv; the largest c_in·k the route takes at the extremes.
        for (i, (c_in, c_out, k, d, t)) in [
            (128, 128, 11, 5, 700),
            (64, 64, 7, 3, 333),
            (256, 256, 3, 1, 130),
            (1090, 64, 3, 1, 90),
            // Enough units that two lanes each take whole units.
            (24, 30, 7, 1, 1100),
            // Several whole dilated blocks, then a remainder.
            (12, 5, 3, 8, 900),
            (8, 3, 5, 2, 250),
            // Weights past `WEIGHT_MAJOR_BYTES` over several units (the
            // weight-major order), a last block and group part full.
            (512, 260, 3, 1, 200),
            (256, 236, 7, 2, 400),
        ]
        .into_iter()
        .enumerate()
        {
            let pad = (k - 1) * d / 2;
            let p = Conv1dParams::new(c_in, c_out, k)
                .dilation(d)
                .padding(pad, pad);
            winograd_matches_reference(p, t, i as u64, i % 2 == 0, false);
        }
        let p = Conv1dParams::new(winograd::MAX_TERMS / 11, 6, 11).padding(5, 5);
        assert!(winograd::eligible(&p));
        winograd_matches_reference(p, 40, 1, true, true);
        winograd_matches_reference(p, 40, 2, false, true);
        // A fifth tap group, or one term past the bound, takes the direct tiles.
        assert!(!winograd::eligible(&Conv1dParams::new(
            16,
            6,
            winograd::MAX_KERNEL + 1
        )));
        assert!(!winograd::eligible(&Conv1dParams::new(
            winograd::MAX_TERMS / 11 + 1,
            6,
            11
        )));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        #[test]
        fn winograd_route_matches_reference(
            c_in in 2usize..23,
            c_out in 1usize..15,
            k in 3usize..=winograd::MAX_KERNEL,
            d in 1usize..7,
            extra in 0usize..90,
            pads in (0usize..6, 0usize..6),
            seed in any::<u64>(),
            signed in any::<bool>(),
        ) {
            let f = crate::kernels::cpu::features();
            if f.avx2_fma && !f.avx_vnni {
                let p = Conv1dParams::new(c_in, c_out, k).dilation(d).padding(pads.0, pads.1);
                let t = p.span().saturating_sub(pads.0 + pads.1).max(1) + extra;
                winograd_matches_reference(p, t, seed, signed, false);
            }
        }
    }

    #[test]
    fn avx_vnni_route_matches_the_reference_where_the_cpu_has_it() {
        if !crate::kernels::cpu::features().avx_vnni {
            eprintln!("skipped: this CPU has no AVX-VNNI (or VOXLANE_SIMD caps it)");
            return;
        }
        route_matches_reference(SimdLevel::Avx2, IntRoute::AvxVnni, Tiles::Vector);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn integer_and_float_results_match_reference(
            (p, t) in params_strategy(),
            signed in any::<bool>(),
            per_channel in any::<bool>(),
            bias in any::<bool>(),
            seed in any::<u64>(),
        ) {
            let w = W::new(seed, &p, signed, per_channel);
            let b = rnd_f32(seed ^ 3, p.c_out);
            let bias = bias.then_some(&b[..]);
            let xq: Vec<u8> = rnd(seed ^ 7, p.c_in * t).iter().map(|v| (v % 256) as u8).collect();
            let zx = (seed % 256) as u8;
            let aq = ActivationQuant { scale: 0.0123, zero_point: zx };
            let want = conv_integer_reference(&p, w.w(), &w.zps, &xq, zx, t).unwrap();
            let t_out = p.out_len(t).unwrap();
            let want_f: Vec<f32> = want
                .iter()
                .enumerate()
                .map(|(i, &a)| {
                    let co = i / t_out;
                    let ws = w.scales[co % w.scales.len()];
                    dequantize(a, aq.scale, ws, bias.map(|b| b[co]))
                })
                .collect();
            let x = rnd_f32(seed ^ 11, p.c_in * t);
            let want_x = conv1d_int8_reference(&p, w.w(), &w.scales, &w.zps, bias, &x, t).unwrap();
            let pool = LanePool::new(2).unwrap();
            let mut conv = Conv1dInt8::new(p, w.w(), &w.scales, &w.zps, bias).unwrap();
            // Every level, and the AVX-512 level with and without AMX tiles.
            let routes = available_levels().into_iter().map(|l| (l, false))
                .chain(crate::kernels::cpu::features().amx_int8.then_some((SimdLevel::Avx512, true)));
            for (level, amx) in routes {
                conv.set_level(level);
                conv.set_amx(amx);
                prop_assert_eq!(conv.uses_amx(), amx && p.c_in / p.groups > 1);
                let mut ws = Conv1dInt8Workspace::new();
                let mut got = vec![i32::MIN; want.len()];
                conv.conv_integer(&pool, &xq, zx, t, &mut got, &mut ws).unwrap();
                prop_assert_eq!(&got, &want, "{:?} level {:?} amx {}", p, level, amx);
                let mut got_f = vec![f32::NAN; want.len()];
                conv.forward_quantized(&pool, &xq, aq, t, &mut got_f, &mut ws).unwrap();
                prop_assert_eq!(bits(&got_f), bits(&want_f), "{:?} level {:?} amx {}", p, level, amx);
                conv.forward(&pool, &x, t, &mut got_f, &mut ws).unwrap();
                prop_assert_eq!(bits(&got_f), bits(&want_x), "{:?} level {:?} amx {}", p, level, amx);
            }
        }

        #[test]
        fn quantization_matches_dynamic_quantize_linear(
            n in 0usize..40_000, seed in any::<u64>(), scale in 0.0f32..100.0, positive in any::<bool>(),
        ) {
            let mut x: Vec<f32> = rnd_f32(seed, n).iter().map(|v| v * scale).collect();
            if positive {
                x.iter_mut().for_each(|v| *v = v.abs() + 0.5);
            }
            if n > 7 {
                x[n / 2] = f32::NAN;
                x[n / 3] = -0.0;
            }
            let mut want = vec![0u8; n];
            let want_p = quantize_activations(&x, &mut want).unwrap();
            let pool = LanePool::new(2).unwrap();
            for level in available_levels() {
                let mut got = vec![1u8; n];
                let mut mm = vec![[0.0f32; 2]; n.div_ceil(QUANT_CHUNK)];
                let got_p = quantize_into(&pool, int_route(level), &x, &mut got, &mut mm).unwrap();
                prop_assert_eq!(got_p, want_p);
                prop_assert_eq!(&got, &want);
            }
        }
    }

    #[test]
    fn bit_identical_across_budgets_and_allocation_free() {
        let cases = [
            Conv1dParams::new(24, 20, 7).dilation(3).padding(9, 9),
            Conv1dParams::new(16, 32, 5).groups(16).padding(2, 2),
            Conv1dParams::new(12, 18, 4)
                .stride(2)
                .groups(3)
                .padding(1, 2),
            Conv1dParams::new(10, 14, 8).stride(4).padding(4, 0),
        ];
        for (i, p) in cases.into_iter().enumerate() {
            let t = 700;
            let w = W::new(i as u64, &p, i % 2 == 0, true);
            let b = rnd_f32(2, p.c_out);
            let x = rnd_f32(3, p.c_in * t);
            let conv = Conv1dInt8::new(p, w.w(), &w.scales, &w.zps, Some(&b)).unwrap();
            let mut ws = conv.workspace(t).unwrap();
            let bytes = ws.bytes();
            let mut first: Option<Vec<u32>> = None;
            for threads in 1..=4 {
                let pool = LanePool::new(threads).unwrap();
                let mut out = vec![0.0; p.c_out * p.out_len(t).unwrap()];
                // Shorter inputs reuse the same buffers.
                conv.forward(
                    &pool,
                    &x[..p.c_in * 300],
                    300,
                    &mut out[..p.c_out * p.out_len(300).unwrap()],
                    &mut ws,
                )
                .unwrap();
                conv.forward(&pool, &x, t, &mut out, &mut ws).unwrap();
                assert_eq!(ws.bytes(), bytes, "workspace grew after reserve");
                match &first {
                    None => first = Some(bits(&out)),
                    Some(f) => assert_eq!(f, &bits(&out), "{p:?} threads {threads}"),
                }
            }
        }
    }

    /// AMX blocks at the sizes the proptest's small shapes never reach:
    /// several 64-channel tiles (a partial last one), several 32-channel
    /// output blocks, time chunks, strides, groups and weight zero points.
    #[test]
    fn amx_route_equals_reference_at_model_sizes() {
        if !crate::kernels::cpu::features().amx_int8 {
            eprintln!("no AMX-INT8 here: the route is not taken");
            return;
        }
        let pool = LanePool::new(2).unwrap();
        for (p, t, signed) in [
            (
                Conv1dParams::new(130, 70, 3).dilation(2).padding(2, 2),
                300,
                false,
            ),
            (Conv1dParams::new(256, 64, 7).padding(3, 3), 200, true),
            (
                Conv1dParams::new(128, 96, 5).stride(2).groups(2),
                257,
                false,
            ),
            (
                Conv1dParams::new(22, 40, 12).stride(6).padding(3, 3),
                500,
                true,
            ),
        ] {
            let w = W::new(7, &p, signed, true);
            let xq: Vec<u8> = rnd(9, p.c_in * t).iter().map(|v| (v % 256) as u8).collect();
            let want = conv_integer_reference(&p, w.w(), &w.zps, &xq, 37, t).unwrap();
            let mut conv = Conv1dInt8::new(p, w.w(), &w.scales, &w.zps, None).unwrap();
            for amx in [true, false] {
                conv.set_amx(amx);
                assert_eq!(conv.uses_amx(), amx);
                let mut ws = conv.workspace(t).unwrap();
                let mut got = vec![i32::MIN; want.len()];
                conv.conv_integer(&pool, &xq, 37, t, &mut got, &mut ws)
                    .unwrap();
                assert_eq!(got, want, "{p:?} amx {amx}");
            }
        }
    }

    #[test]
    fn prepared_weights_bind_the_same_conv_and_foreign_ones_are_refused() {
        let pool = LanePool::new(2).unwrap();
        let (p, t) = (Conv1dParams::new(12, 10, 3).dilation(2).padding(2, 2), 41);
        let w = W::new(3, &p, false, false);
        let xq: Vec<u8> = rnd(4, p.c_in * t).iter().map(|v| (v % 256) as u8).collect();
        let want = conv_integer_reference(&p, w.w(), &w.zps, &xq, 9, t).unwrap();
        let a = Conv1dInt8::new(p, w.w(), &w.scales, &w.zps, None).unwrap();
        let prep = a.prepared().expect("a dense conv has packed weights");
        let bufs = PreparedBufs {
            tiles: prep.tiles.to_string(),
            packed: prep.packed.to_vec().into(),
            wsum: prep.wsum.to_vec(),
        };
        let b = Conv1dInt8::with_prepared(p, w.w(), &w.scales, &w.zps, None, bufs.clone()).unwrap();
        let mut ws = b.workspace(t).unwrap();
        let mut got = vec![i32::MIN; want.len()];
        b.conv_integer(&pool, &xq, 9, t, &mut got, &mut ws).unwrap();
        assert_eq!(got, want);

        let with = |bufs: PreparedBufs, p: Conv1dParams| {
            let w = W::new(3, &p, false, false);
            Conv1dInt8::with_prepared(p, w.w(), &w.scales, &w.zps, None, bufs)
        };
        let other_tiles = PreparedBufs {
            tiles: "other".into(),
            ..bufs.clone()
        };
        let short = PreparedBufs {
            packed: bufs.packed[1..].to_vec().into(),
            ..bufs.clone()
        };
        let sums = PreparedBufs {
            wsum: vec![0; 3],
            ..bufs.clone()
        };
        for (what, r) in [
            ("other tiles", with(other_tiles, p)),
            ("a short buffer", with(short, p)),
            ("other sums", with(sums, p)),
            (
                "another shape",
                with(bufs.clone(), Conv1dParams::new(12, 11, 3)),
            ),
            (
                "a depthwise conv",
                with(bufs, Conv1dParams::new(4, 4, 3).groups(4)),
            ),
        ] {
            match r {
                Err(KernelError::Param { what: w, .. }) => {
                    assert_eq!(w, "conv1d int8 prepared weights", "{what}")
                }
                other => panic!("{what}: expected a typed error, got {other:?}"),
            }
        }
    }

    #[test]
    fn int8_tracks_f32_conv() {
        use crate::kernels::conv1d::conv1d_reference;
        // Symmetric int8 weights: w ≈ q · scale. The int8 result stays near f32.
        let p = Conv1dParams::new(64, 32, 7).dilation(2).padding(6, 6);
        let t = 100;
        let q: Vec<i8> = rnd(1, p.weight_len())
            .iter()
            .map(|v| (v % 255) as i8)
            .collect();
        let scale = 0.004f32;
        let wf: Vec<f32> = q.iter().map(|v| *v as f32 * scale).collect();
        let x = rnd_f32(2, p.c_in * t);
        let want = conv1d_reference(&p, &wf, None, &x, t).unwrap();
        let conv = Conv1dInt8::new(p, IntWeights::I8(&q), &[scale], &[0], None).unwrap();
        let mut ws = conv.workspace(t).unwrap();
        let mut got = vec![0.0; want.len()];
        conv.forward(&LanePool::new(1).unwrap(), &x, t, &mut got, &mut ws)
            .unwrap();
        let err = got
            .iter()
            .zip(&want)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f32::max);
        let mag = want.iter().map(|v| v.abs()).fold(0.0, f32::max);
        assert!(err < 0.02 * mag, "max error {err} vs magnitude {mag}");
    }

    #[test]
    fn invalid_inputs_are_errors() {
        let p = Conv1dParams::new(4, 6, 3);
        let w = vec![0i8; p.weight_len()];
        // Zero point outside the int8 range; wrong scale count; wrong weight length.
        assert!(Conv1dInt8::new(p, IntWeights::I8(&w), &[1.0], &[200], None).is_err());
        assert!(Conv1dInt8::new(p, IntWeights::I8(&w), &[1.0, 2.0], &[0], None).is_err());
        assert!(Conv1dInt8::new(p, IntWeights::I8(&w[1..]), &[1.0], &[0], None).is_err());
        let conv = Conv1dInt8::new(p, IntWeights::I8(&w), &[1.0], &[0], None).unwrap();
        let pool = LanePool::new(1).unwrap();
        let mut ws = Conv1dInt8Workspace::new();
        let mut out = vec![0.0; 6];
        // Too short for the kernel span; wrong input length; wrong output length.
        assert!(conv
            .forward(&pool, &[0.0; 8], 2, &mut out, &mut ws)
            .is_err());
        assert!(conv
            .forward(&pool, &[0.0; 11], 3, &mut out, &mut ws)
            .is_err());
        assert!(conv
            .forward(&pool, &[0.0; 12], 3, &mut out[..5], &mut ws)
            .is_err());
        let mut iout = vec![0i32; 6];
        assert!(conv
            .conv_integer(&pool, &[0u8; 11], 0, 3, &mut iout, &mut ws)
            .is_err());
    }

    /// Ad-hoc timing against the f32 direct route and the direct tiles (run
    /// with `--ignored --nocapture`).
    #[test]
    #[ignore = "timing"]
    fn time_kokoro_int8() {
        use crate::kernels::conv1d::Conv1d;
        for (c, k, d, t) in [(256, 7, 3, 800), (128, 3, 1, 4800), (128, 11, 5, 4800)] {
            let pad = (k - 1) * d / 2;
            let p = Conv1dParams::new(c, c, k).dilation(d).padding(pad, pad);
            let wf = rnd_f32(1, p.weight_len());
            let wq: Vec<i8> = wf.iter().map(|v| (v * 60.0) as i8).collect();
            let x = rnd_f32(3, c * t);
            let f32c = Conv1d::new(p, &wf, None).unwrap();
            let int8 = Conv1dInt8::new(p, IntWeights::I8(&wq), &[0.01], &[0], None).unwrap();
            let mut fws = f32c.workspace(t).unwrap();
            let mut ws = int8.workspace(t).unwrap();
            let mut out = vec![0.0; c * p.out_len(t).unwrap()];
            let xq: Vec<u8> = (0..c * t).map(|i| (i % 251) as u8).collect();
            let aq = ActivationQuant {
                scale: 0.01,
                zero_point: 3,
            };
            // THREADS=n times the lane pool of n threads.
            let threads = std::env::var("THREADS")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(1);
            let pool = LanePool::new(threads).unwrap();
            // The best of 30 calls: the shared host's load only adds time.
            let time = |f: &mut dyn FnMut()| {
                f();
                (0..30)
                    .map(|_| {
                        let start = std::time::Instant::now();
                        f();
                        start.elapsed().as_secs_f64() * 1e3
                    })
                    .fold(f64::INFINITY, f64::min)
            };
            let tf = time(&mut || f32c.forward(&pool, &x, t, &mut out, &mut fws).unwrap());
            let ti = time(&mut || int8.forward(&pool, &x, t, &mut out, &mut ws).unwrap());
            let mut int8 = int8;
            let mut tq = [0.0; 2];
            for (on, tq) in [true, false].into_iter().zip(&mut tq) {
                int8.set_winograd(on);
                *tq = time(&mut || {
                    int8.forward_quantized(&pool, &xq, aq, t, &mut out, &mut ws)
                        .unwrap()
                });
            }
            println!(
                "{c} k{k} d{d} T{t}: f32 {tf:.3} ms, int8 {ti:.3} ms, int8 pre-quantized {:.3} ms, direct tiles {:.3} ms",
                tq[0], tq[1]
            );
        }
    }
}
