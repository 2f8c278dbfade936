//! [`QConv`]'s exact arithmetic with every pass on the lanes.
//!
//! `QConv::forward` quantizes the input and dequantizes the output on the
//! calling thread; on the generator's `[128, 60·T]` activations those two
//! serial passes cost more than the integer convolution itself. This runs the
//! same three steps split into fixed chunks (so results stay bit-identical
//! for every thread budget, and equal to `QConv::forward`):
//! 1. `DynamicQuantizeLinear`: per-chunk min/max reduced in chunk order, then
//!    `q = clamp(round_half_even(x / scale) + zp, 0, 255)`;
//! 2. `ConvInteger` on [`Conv1dInt8`];
//! 3. `Cast(acc + Floor(bias / s)) · s` with `s = x_scale · w_scale`, done
//!    in the integer kernel's epilogue ([`Conv1dInt8::conv_integer_dequant`],
//!    or `_add` for a residual), so the i32 tensor never reaches memory;
//!    [`LaneQConv::forward_rows`] keeps the separate pass as the reference.

use voxlane_runtime::Fork;

use super::blocks::grow;
use super::graph::KokoroError;
use super::pointwise;
use super::quant::QConv;
use crate::kernels::conv1d::Conv1dParams;
use crate::kernels::conv1d_int8::{Conv1dInt8, Conv1dInt8Workspace};
use crate::kernels::error::check_len;
use crate::kernels::matmul::ActivationQuant;

/// Elements per parallel chunk of the quantize and dequantize passes.
const CHUNK: usize = 1 << 14;

/// Combine two `[lo, hi]` ranges (exact, so any order gives the same result).
pub fn merge_range(a: [f32; 2], b: &[f32; 2]) -> [f32; 2] {
    [a[0].min(b[0]), a[1].max(b[1])]
}

/// A `ConvInteger` layer (as [`QConv`]) whose every pass runs on the lanes.
#[derive(Debug, Clone)]
pub struct LaneQConv {
    params: Conv1dParams,
    w_scale: f32,
    bias: Option<Vec<f32>>,
    conv: Conv1dInt8,
}

/// Scratch for [`LaneQConv::forward`]; one serves any number of convs.
#[derive(Debug, Default)]
pub struct LaneQConvWorkspace {
    xq: Vec<u8>,
    acc: Vec<i32>,
    minmax: Vec<[f32; 2]>,
    bias_q: Vec<i32>,
    conv: Conv1dInt8Workspace,
}

impl LaneQConvWorkspace {
    /// An empty workspace.
    pub fn new() -> Self {
        Self::default()
    }
}

/// `DynamicQuantizeLinear` of `x` into `xq` over fixed chunks.
/// `range` is `[min(0, x…), max(0, x…)]` when the caller already knows it.
pub fn quantize_on_lanes(
    pool: &impl Fork,
    x: &[f32],
    xq: &mut [u8],
    range: Option<[f32; 2]>,
    minmax: &mut Vec<[f32; 2]>,
) -> Result<ActivationQuant, KokoroError> {
    check_len("quantized activations", x.len(), xq.len())?;
    let [lo, hi] = match range {
        Some(r) => r,
        None => {
            let chunks = x.len().div_ceil(CHUNK);
            grow(minmax, chunks);
            pool.for_each_chunk_mut(&mut minmax[..chunks], 1, |i, mm| {
                mm[0] = pointwise::range(&x[i * CHUNK..((i + 1) * CHUNK).min(x.len())]);
            })?;
            minmax[..chunks].iter().fold([0.0f32, 0.0f32], merge_range)
        }
    };
    // The expressions of `ActivationQuant::for_tensor`.
    let scale = if hi == lo { 1.0 } else { (hi - lo) / 255.0 };
    let zp = (0.0 - lo / scale).clamp(0.0, 255.0).round_ties_even();
    let aq = ActivationQuant {
        scale,
        zero_point: zp as u8,
    };
    pool.for_each_chunk_mut(xq, CHUNK, |i, d| {
        pointwise::quantize(&x[i * CHUNK..i * CHUNK + d.len()], scale, zp, d);
    })?;
    Ok(aq)
}

impl LaneQConv {
    /// Take over a resolved [`QConv`] and the weights it already bound (one
    /// packing per conv: packing is most of a model's load time).
    pub fn new(q: QConv) -> Result<Self, KokoroError> {
        Ok(Self {
            params: q.params,
            w_scale: q.w_scale,
            bias: q.bias,
            conv: q.conv,
        })
    }

    /// Shape and attributes.
    pub fn params(&self) -> &Conv1dParams {
        &self.params
    }

    /// Output frames for `t_in` input frames.
    pub fn out_len(&self, t_in: usize) -> Result<usize, KokoroError> {
        Ok(self.params.out_len(t_in)?)
    }

    /// `out[c_out, t_out]` from `x[c_in, t_in]`, bit-identical to
    /// `QConv::forward`; `range` is `x`'s `[min(0, x…), max(0, x…)]` when the
    /// caller knows it (saves the range pass).
    pub fn forward(
        &self,
        pool: &impl Fork,
        x: &[f32],
        t_in: usize,
        range: Option<[f32; 2]>,
        out: &mut [f32],
        ws: &mut LaneQConvWorkspace,
    ) -> Result<(), KokoroError> {
        self.dequantized(pool, x, t_in, range, out, false, ws)
    }

    /// `out += conv(x)` (the residual `Add` after the dequantization), with
    /// `x`'s range if known: [`LaneQConv::forward_rows`] with
    /// `pointwise::dequantize_add` as its finish, bit for bit, the
    /// dequantization done in the integer kernel's epilogue.
    pub fn forward_add(
        &self,
        pool: &impl Fork,
        x: &[f32],
        t_in: usize,
        range: Option<[f32; 2]>,
        out: &mut [f32],
        ws: &mut LaneQConvWorkspace,
    ) -> Result<(), KokoroError> {
        self.dequantized(pool, x, t_in, range, out, true, ws)
    }

    /// `out = conv(x)` dequantized in the integer kernel's epilogue; then,
    /// with `finish`, `finish(out_row, co)` on every output row on the lanes
    /// (e.g. a norm over the row), returning the merge of the ranges it
    /// reports. The bits of [`LaneQConv::forward_rows`] with
    /// `pointwise::dequantize` before the same `finish`.
    #[allow(clippy::too_many_arguments)]
    pub fn forward_then<F>(
        &self,
        pool: &impl Fork,
        x: &[f32],
        t_in: usize,
        range: Option<[f32; 2]>,
        out: &mut [f32],
        ws: &mut LaneQConvWorkspace,
        finish: F,
    ) -> Result<[f32; 2], KokoroError>
    where
        F: Fn(&mut [f32], usize) -> [f32; 2] + Sync,
    {
        self.dequantized(pool, x, t_in, range, out, false, ws)?;
        rows_on_lanes(pool, out, self.params.out_len(t_in)?, finish)
    }

    /// As [`LaneQConv::forward_then`] with the output written over the
    /// input, for a conv that keeps the shape (`c_out = c_in`, `t_out =
    /// t_in`): the input is read only to quantize it, so a resblock needs
    /// one full-length buffer fewer. The same bits.
    pub fn forward_then_in_place<F>(
        &self,
        pool: &impl Fork,
        buf: &mut [f32],
        t_in: usize,
        range: Option<[f32; 2]>,
        ws: &mut LaneQConvWorkspace,
        finish: F,
    ) -> Result<[f32; 2], KokoroError>
    where
        F: Fn(&mut [f32], usize) -> [f32; 2] + Sync,
    {
        let p = &self.params;
        if p.c_out != p.c_in || p.out_len(t_in)? != t_in {
            return Err(KokoroError::Input(format!(
                "an in-place conv keeps its shape: {} → {} channels, {t_in} → {} frames",
                p.c_in,
                p.c_out,
                p.out_len(t_in)?
            )));
        }
        let Some(aq) = self.quantize_input(pool, buf, t_in, range, buf.len(), ws)? else {
            return Ok([0.0, 0.0]);
        };
        self.integer_into(pool, aq, t_in, buf, false, ws)?;
        rows_on_lanes(pool, buf, t_in, finish)
    }

    /// Quantize `x`, then the integer conv dequantized (or added, `add`) into `out`.
    #[allow(clippy::too_many_arguments)]
    fn dequantized(
        &self,
        pool: &impl Fork,
        x: &[f32],
        t_in: usize,
        range: Option<[f32; 2]>,
        out: &mut [f32],
        add: bool,
        ws: &mut LaneQConvWorkspace,
    ) -> Result<(), KokoroError> {
        let Some(aq) = self.quantize_input(pool, x, t_in, range, out.len(), ws)? else {
            return Ok(());
        };
        self.integer_into(pool, aq, t_in, out, add, ws)
    }

    /// The integer conv of the input quantized into `ws.xq` (with `aq`),
    /// dequantized (or added, `add`) into `out`.
    fn integer_into(
        &self,
        pool: &impl Fork,
        aq: ActivationQuant,
        t_in: usize,
        out: &mut [f32],
        add: bool,
        ws: &mut LaneQConvWorkspace,
    ) -> Result<(), KokoroError> {
        let s = aq.scale * self.w_scale;
        ws.bias_q.clear();
        ws.bias_q
            .extend((0..self.params.c_out).map(|co| self.bias_q(co, s)));
        let (xq, bq) = (&ws.xq[..self.params.c_in * t_in], &ws.bias_q[..]);
        let zx = aq.zero_point;
        if add {
            self.conv
                .conv_integer_add(pool, xq, zx, t_in, bq, s, out, &mut ws.conv)?;
        } else {
            self.conv
                .conv_integer_dequant(pool, xq, zx, t_in, bq, s, out, &mut ws.conv)?;
        }
        Ok(())
    }

    /// Check the shapes and quantize `x` into `ws.xq`; `None` when the conv
    /// has no output frames.
    fn quantize_input(
        &self,
        pool: &impl Fork,
        x: &[f32],
        t_in: usize,
        range: Option<[f32; 2]>,
        out_len: usize,
        ws: &mut LaneQConvWorkspace,
    ) -> Result<Option<ActivationQuant>, KokoroError> {
        let p = &self.params;
        let n = p.c_in * t_in;
        check_len("qconv input", n, x.len())?;
        let t_out = p.out_len(t_in)?;
        check_len("qconv output", p.c_out * t_out, out_len)?;
        if t_out == 0 {
            return Ok(None);
        }
        grow(&mut ws.xq, n);
        let aq = quantize_on_lanes(pool, x, &mut ws.xq[..n], range, &mut ws.minmax)?;
        Ok(Some(aq))
    }

    /// The export's quantized bias of channel `co`, `Floor(bias / s)`.
    fn bias_q(&self, co: usize, s: f32) -> i32 {
        // ONNX Cast of an already floored float to int32 is exact.
        self.bias
            .as_deref()
            .map_or(0, |b| (b[co] / s).floor() as i32)
    }

    /// Quantize `x` (with its `[min(0, x…), max(0, x…)]` if known), run the
    /// integer conv, then call `finish(acc_row, bias_q, s, out_row, co)` for
    /// every output channel on the lanes; the plain dequantization is
    /// `out_row = (acc_row + bias_q) · s`. Returns the merge of the ranges
    /// `finish` reports (e.g. of what it wrote, for the next quantization).
    #[allow(clippy::too_many_arguments)]
    pub fn forward_rows<F>(
        &self,
        pool: &impl Fork,
        x: &[f32],
        t_in: usize,
        range: Option<[f32; 2]>,
        out: &mut [f32],
        ws: &mut LaneQConvWorkspace,
        finish: F,
    ) -> Result<[f32; 2], KokoroError>
    where
        F: Fn(&[i32], i32, f32, &mut [f32], usize) -> [f32; 2] + Sync,
    {
        let Some(aq) = self.quantize_input(pool, x, t_in, range, out.len(), ws)? else {
            return Ok([0.0, 0.0]);
        };
        let p = &self.params;
        let t_out = p.out_len(t_in)?;
        grow(&mut ws.acc, p.c_out * t_out);
        let acc = &mut ws.acc[..p.c_out * t_out];
        let xq = &ws.xq[..p.c_in * t_in];
        self.conv
            .conv_integer(pool, xq, aq.zero_point, t_in, acc, &mut ws.conv)?;
        let s = aq.scale * self.w_scale;
        let acc = &ws.acc[..p.c_out * t_out];
        rows_on_lanes(pool, out, t_out, |orow, co| {
            let arow = &acc[co * t_out..(co + 1) * t_out];
            finish(arow, self.bias_q(co, s), s, orow, co)
        })
    }
}

/// `f(row, r)` on every row `r` of `out: [_, t]`, in fixed row chunks on the
/// lanes; returns the merge of the ranges it reports (exact, any order).
fn rows_on_lanes<F>(
    pool: &impl Fork,
    out: &mut [f32],
    t: usize,
    f: F,
) -> Result<[f32; 2], KokoroError>
where
    F: Fn(&mut [f32], usize) -> [f32; 2] + Sync,
{
    if t == 0 {
        return Ok([0.0, 0.0]);
    }
    let rows = (CHUNK / t).max(1);
    let merged = std::sync::Mutex::new([0.0f32, 0.0f32]);
    pool.for_each_chunk_mut(out, rows * t, |i, o| {
        let r = o
            .chunks_exact_mut(t)
            .enumerate()
            .fold([0.0f32, 0.0f32], |m, (r, row)| {
                merge_range(m, &f(row, i * rows + r))
            });
        if let Ok(mut m) = merged.lock() {
            *m = merge_range(*m, &r);
        }
    })?;
    Ok(merged.into_inner().unwrap_or([0.0, 0.0]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use voxlane_runtime::LanePool;

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    #[test]
    fn epilogue_dequantization_equals_the_separate_passes() {
        // Dilated, padded, odd lengths, a bias that floors negative and positive.
        for &(c_in, c_out, k, d, t) in
            &[(16, 16, 3, 1, 37), (12, 20, 7, 3, 130), (8, 5, 11, 5, 301)]
        {
            let pad = (k - 1) * d / 2;
            let p = Conv1dParams::new(c_in, c_out, k)
                .dilation(d)
                .padding(pad, pad);
            let weight: Vec<u8> = (0..p.weight_len())
                .map(|i| ((i * 97 + 13) % 256) as u8)
                .collect();
            let bias: Vec<f32> = (0..c_out).map(|i| i as f32 * 0.037 - 0.3).collect();
            let q = QConv::new(p, &weight, 0.004, 131, Some(bias)).expect("qconv");
            let conv = LaneQConv::new(q).expect("lane qconv");
            let x: Vec<f32> = (0..c_in * t)
                .map(|i| ((i * 7919) % 1009) as f32 * 0.01 - 4.0)
                .collect();
            let start: Vec<f32> = (0..c_out * t)
                .map(|i| (i % 13) as f32 * 0.1 - 0.6)
                .collect();
            // A row finish of the kind the resblocks use (values and their range).
            let square = |row: &mut [f32], co: usize| {
                for v in row.iter_mut() {
                    *v = *v * *v + co as f32;
                }
                pointwise::range(row)
            };
            for threads in [1, 2] {
                let pool = LanePool::new(threads).expect("pool");
                let mut ws = LaneQConvWorkspace::new();
                let case = format!("c_in={c_in} k={k} d={d} t={t} threads={threads}");
                // The reference: the i32 tensor, then `finish` as a separate pass.
                let mut separate = |add: bool, then: bool| {
                    let mut out = start.clone();
                    let r = conv
                        .forward_rows(
                            &pool,
                            &x,
                            t,
                            None,
                            &mut out,
                            &mut ws,
                            |acc, bq, s, row, co| {
                                if add {
                                    pointwise::dequantize_add(acc, bq, s, row);
                                } else {
                                    pointwise::dequantize(acc, bq, s, row);
                                }
                                if then {
                                    square(row, co)
                                } else {
                                    [0.0, 0.0]
                                }
                            },
                        )
                        .expect("forward_rows");
                    (out, r)
                };
                let (want_add, _) = separate(true, false);
                let (want_plain, _) = separate(false, false);
                let (want_then, r_want) = separate(false, true);
                let mut got = start.clone();
                conv.forward_add(&pool, &x, t, None, &mut got, &mut ws)
                    .expect("forward_add");
                assert_eq!(bits(&got), bits(&want_add), "add: {case}");
                let mut got = start.clone();
                conv.forward(&pool, &x, t, None, &mut got, &mut ws)
                    .expect("forward");
                assert_eq!(bits(&got), bits(&want_plain), "plain: {case}");
                let mut got = start.clone();
                let r_got = conv
                    .forward_then(&pool, &x, t, None, &mut got, &mut ws, square)
                    .expect("forward_then");
                assert_eq!(bits(&got), bits(&want_then), "then: {case}");
                assert_eq!(r_got, r_want, "then range: {case}");
                // Over its own input, where the conv keeps the shape;
                // refused where it does not.
                let mut buf = x.clone();
                let in_place =
                    conv.forward_then_in_place(&pool, &mut buf, t, None, &mut ws, square);
                if c_in == c_out {
                    assert_eq!(
                        in_place.expect("in place"),
                        r_want,
                        "in place range: {case}"
                    );
                    assert_eq!(bits(&buf), bits(&want_then), "in place: {case}");
                } else {
                    assert!(matches!(in_place, Err(KokoroError::Input(_))), "{case}");
                }
            }
        }
    }
}
