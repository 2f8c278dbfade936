//! onnxruntime-exact int8 building blocks of Kokoro's export, on the kernels.
//!
//! * [`dynamic_quantize`]: `DynamicQuantizeLinear` (per tensor, u8,
//!   round-half-to-even, range widened to include 0).
//! * [`QLinear`]: `DynamicQuantizeLinear → MatMulInteger → Cast · (x_scale ·
//!   w_scale[n]) + bias` on [`crate::kernels::matmul`].
//! * [`QConv`]: `DynamicQuantizeLinear → ConvInteger → + Floor(bias /
//!   bias_scale) (int32) → Cast · bias_scale` on [`crate::kernels::conv1d_int8`].
//! * [`QLstm`]: com.microsoft `DynamicQuantizeLSTM` as onnxruntime runs it:
//!   the whole input sequence is quantized once per tensor for the input GEMM,
//!   and the previous hidden state `h` is quantized per step (per direction)
//!   for the recurrent GEMM; each GEMM is dequantized with `x_scale · w_scale[dir]`,
//!   the two are summed, then the (W + R) bias is added before the gates
//!   (iofc order). Zero initial state.
//!
//! Each block has a readable `*_reference` beside the fast path.

use std::borrow::Cow;
use voxlane_runtime::{Fork, LaneError};

use super::bind_cache::BindCache;
use super::graph::KokoroError;
use super::qgemm::{self, PackedInt8, QGemmScratch};
use crate::kernels::conv1d::Conv1dParams;
use crate::kernels::conv1d_int8::{Conv1dInt8, Conv1dInt8Workspace, PreparedBufs};
use crate::kernels::cpu::simd_level;
use crate::kernels::elementwise::fast_math::{sigmoid_inplace, tanh_inplace};
use crate::kernels::matmul::{
    matmul_ws, quantize_activations, ActivationQuant, IntWeights, MatmulWorkspace, Weights,
};
use crate::kernels::KernelError;
use voxlane_runtime::memory::grow;

/// `DynamicQuantizeLinear` of `x` into `dst` (same length); returns scale and zero point.
pub fn dynamic_quantize(x: &[f32], dst: &mut [u8]) -> Result<ActivationQuant, KernelError> {
    quantize_activations(x, dst)
}

/// A one-thread [`Fork`]: runs every index in order on the caller.
///
/// Used inside a lane that already owns its share of the pool (e.g. one LSTM
/// direction), where forking again per step would cost more than it gains.
#[derive(Debug, Clone, Copy, Default)]
pub struct Serial;

impl Fork for Serial {
    fn threads(&self) -> usize {
        1
    }

    fn fork(&self, n: usize, f: &(dyn Fn(usize) + Sync)) -> Result<(), LaneError> {
        (0..n).for_each(f);
        Ok(())
    }
}

/// A bind cache and a weight's name in it (its packing is mapped from the
/// cache, or recorded into it), or none (packed as usual).
pub type CacheKey<'a> = Option<(&'a BindCache, &'a str)>;

/// A packed `MatMulInteger` weight: the broadcast-VNNI layout where the CPU
/// has it, else the dot-product kernel (both exact, so the results agree).
#[derive(Debug, Clone)]
enum Packed {
    Vnni(PackedInt8),
    Dot(Weights),
}

impl Packed {
    /// Pack `w() [k, n]` with per-column (or single) scales and zero points;
    /// with a bind cache and the weight's name in it, mapped from the cache
    /// where it holds this packing (else recorded into it; `w` is read only
    /// to pack).
    fn new<'w>(
        cache: CacheKey<'_>,
        k: usize,
        n: usize,
        w: impl FnOnce() -> Cow<'w, [i8]>,
        scale: &[f32],
        zero: &[i8],
    ) -> Result<Self, KokoroError> {
        if qgemm::available() {
            let pack = || PackedInt8::new(k, n, &w(), scale, zero);
            return Ok(Self::Vnni(match cache {
                Some((c, name)) => c.qgemm_or(name, k, n, pack)?,
                None => pack()?,
            }));
        }
        let zps: Vec<i32> = zero.iter().map(|&z| i32::from(z)).collect();
        Ok(Self::Dot(Weights::int8_kn(&w(), n, k, scale, &zps)?))
    }

    #[allow(clippy::too_many_arguments)]
    fn run(
        &self,
        pool: &impl Fork,
        x: &[f32],
        m: usize,
        k: usize,
        bias: Option<&[f32]>,
        out: &mut [f32],
        mm: &mut MatmulWorkspace,
        qs: &mut QGemmScratch,
    ) -> Result<(), KokoroError> {
        match self {
            Self::Vnni(p) => p.gemm(pool, x, m, bias, out, qs)?,
            Self::Dot(w) => matmul_ws(x, m, k, w, bias, out, mm, pool)?,
        }
        Ok(())
    }

    /// One row through [`Packed::run`], serial and without bias (the
    /// broadcast-VNNI layout's one-row route where the CPU has it).
    fn matvec(
        &self,
        x: &[f32],
        out: &mut [f32],
        mm: &mut MatmulWorkspace,
        qs: &mut QGemmScratch,
    ) -> Result<(), KokoroError> {
        match self {
            Self::Vnni(p) => p.gemv(x, out, qs)?,
            Self::Dot(w) => matmul_ws(x, 1, x.len(), w, None, out, mm, &Serial)?,
        }
        Ok(())
    }
}

/// A `MatMulInteger` layer as stored: int8 weight `[k, n]`, per-output-channel
/// scale and zero point, bias. [`StoredQLinear::pack`] binds it; the bound
/// layer does not keep these bytes.
#[derive(Debug, Clone)]
pub struct StoredQLinear<'a> {
    /// Input features.
    pub k: usize,
    /// Output features.
    pub n: usize,
    /// Weight `[k, n]` as stored in ONNX (borrowed from the model's map where raw).
    pub weight: Cow<'a, [i8]>,
    /// Weight scale, `[n]` (or `[1]`).
    pub w_scale: Vec<f32>,
    /// Weight zero point, `[n]` (or `[1]`).
    pub w_zero: Vec<i8>,
    /// Float bias `[n]` of the following Add, if any.
    pub bias: Option<Vec<f32>>,
}

/// A bound `MatMulInteger` layer: its weight packed for this CPU.
#[derive(Debug, Clone)]
pub struct QLinear {
    /// Input features.
    pub k: usize,
    /// Output features.
    pub n: usize,
    /// Float bias `[n]` of the following Add, if any.
    pub bias: Option<Vec<f32>>,
    packed: Packed,
}

fn per_channel<T: Copy>(v: &[T], i: usize) -> T {
    if v.len() == 1 {
        v[0]
    } else {
        v[i]
    }
}

impl StoredQLinear<'_> {
    /// Transpose to `[n, k]` and pack for this CPU.
    pub fn pack(self) -> Result<QLinear, KokoroError> {
        self.pack_cached(None)
    }

    /// As [`StoredQLinear::pack`], through a bind cache.
    pub fn pack_cached(self, cache: CacheKey<'_>) -> Result<QLinear, KokoroError> {
        let packed = Packed::new(
            cache,
            self.k,
            self.n,
            || Cow::Borrowed(&self.weight[..]),
            &self.w_scale,
            &self.w_zero,
        )?;
        if let Some(b) = &self.bias {
            crate::kernels::error::check_len("qlinear bias", self.n, b.len())?;
        }
        Ok(QLinear {
            k: self.k,
            n: self.n,
            bias: self.bias,
            packed,
        })
    }

    /// Layers sharing one input fused along the outputs (e.g. q, k, v): since
    /// they share the quantized activation, one GEMM gives identical results.
    pub fn concat_outputs(
        parts: &[&StoredQLinear<'_>],
    ) -> Result<StoredQLinear<'static>, KokoroError> {
        let k = parts.first().map_or(0, |p| p.k);
        if parts.iter().any(|p| p.k != k) || k == 0 {
            return Err(KokoroError::Kernel(KernelError::Param {
                what: "qlinear concat",
                detail: "parts must share a positive input width".into(),
            }));
        }
        let n: usize = parts.iter().map(|p| p.n).sum();
        let mut weight = Vec::with_capacity(k * n);
        for r in 0..k {
            for p in parts {
                weight.extend_from_slice(&p.weight[r * p.n..(r + 1) * p.n]);
            }
        }
        let (mut w_scale, mut w_zero) = (Vec::with_capacity(n), Vec::with_capacity(n));
        for p in parts {
            w_scale.extend((0..p.n).map(|c| per_channel(&p.w_scale, c)));
            w_zero.extend((0..p.n).map(|c| per_channel(&p.w_zero, c)));
        }
        let bias = if parts.iter().all(|p| p.bias.is_some()) {
            Some(
                parts
                    .iter()
                    .flat_map(|p| p.bias.iter().flatten().copied())
                    .collect(),
            )
        } else {
            None
        };
        Ok(StoredQLinear {
            k,
            n,
            weight: Cow::Owned(weight),
            w_scale,
            w_zero,
            bias,
        })
    }

    /// Readable reference of [`QLinear::forward`] on this stored layer.
    pub fn forward_reference(&self, x: &[f32], m: usize) -> Result<Vec<f32>, KokoroError> {
        let mut xq = vec![0u8; x.len()];
        let aq = dynamic_quantize(x, &mut xq)?;
        crate::kernels::error::check_len("qlinear input", m * self.k, x.len())?;
        let mut out = vec![0.0f32; m * self.n];
        for r in 0..m {
            for c in 0..self.n {
                let zw = i32::from(per_channel(&self.w_zero, c));
                let mut acc = 0i32;
                for i in 0..self.k {
                    let a = i32::from(xq[r * self.k + i]) - i32::from(aq.zero_point);
                    let w = i32::from(self.weight[i * self.n + c]) - zw;
                    acc = acc.wrapping_add(a * w);
                }
                let v = acc as f32 * (aq.scale * per_channel(&self.w_scale, c));
                out[r * self.n + c] = match &self.bias {
                    Some(b) => v + b[c],
                    None => v,
                };
            }
        }
        Ok(out)
    }
}

impl QLinear {
    /// Bind (transpose to `[n, k]` and pack) a `MatMulInteger` weight.
    pub fn new(
        k: usize,
        n: usize,
        weight: Vec<i8>,
        w_scale: Vec<f32>,
        w_zero: Vec<i8>,
        bias: Option<Vec<f32>>,
    ) -> Result<Self, KokoroError> {
        StoredQLinear {
            k,
            n,
            weight: Cow::Owned(weight),
            w_scale,
            w_zero,
            bias,
        }
        .pack()
    }

    /// `out[m, n] = dequant(MatMulInteger(quant(x[m, k]), W)) + bias` (x quantized as one tensor).
    pub fn forward(
        &self,
        pool: &impl Fork,
        x: &[f32],
        m: usize,
        out: &mut [f32],
        ws: &mut MatmulWorkspace,
    ) -> Result<(), KokoroError> {
        // The VNNI route keeps its (small) quantized copy of `x` per call;
        // `ws` serves the dot-product route.
        self.forward_with(pool, x, m, out, ws, &mut QGemmScratch::default())
    }

    /// As [`QLinear::forward`], the VNNI route's quantized input in `qs`
    /// (reused: no allocation once it has seen an input this large).
    pub fn forward_with(
        &self,
        pool: &impl Fork,
        x: &[f32],
        m: usize,
        out: &mut [f32],
        ws: &mut MatmulWorkspace,
        qs: &mut QGemmScratch,
    ) -> Result<(), KokoroError> {
        self.packed
            .run(pool, x, m, self.k, self.bias.as_deref(), out, ws, qs)
    }
}

/// A `ConvInteger` layer: uint8 weight `[c_out, c_in/g, k]`, per-tensor scale and zero
/// point, and a float bias the graph floor-quantizes with `x_scale · w_scale`.
#[derive(Debug, Clone)]
pub struct QConv {
    /// Shape and attributes.
    pub params: Conv1dParams,
    /// Weight scale.
    pub w_scale: f32,
    /// Weight zero point.
    pub w_zero: u8,
    /// Float bias `[c_out]`, if any.
    pub bias: Option<Vec<f32>>,
    /// The bound (packed) weights; the stored ones are not kept.
    pub(crate) conv: Conv1dInt8,
}

/// Scratch for [`QConv::forward`]; one can serve any number of convs.
#[derive(Debug, Default, Clone)]
pub struct QConvWorkspace {
    xq: Vec<u8>,
    acc: Vec<i32>,
    conv: Conv1dInt8Workspace,
}

impl QConvWorkspace {
    /// Grow so `conv` runs on inputs of up to `max_t_in` frames without allocating.
    pub fn reserve(&mut self, conv: &QConv, max_t_in: usize) -> Result<(), KokoroError> {
        let p = &conv.params;
        grow(&mut self.xq, p.c_in * max_t_in);
        grow(&mut self.acc, p.c_out * p.out_len(max_t_in)?);
        self.conv.reserve(&conv.conv, max_t_in)?;
        Ok(())
    }
}

impl QConv {
    /// Bind a `ConvInteger` weight.
    pub fn new(
        params: Conv1dParams,
        weight: &[u8],
        w_scale: f32,
        w_zero: u8,
        bias: Option<Vec<f32>>,
    ) -> Result<Self, KokoroError> {
        Self::with_cache(params, weight, w_scale, w_zero, bias, None)
    }

    /// As [`QConv::new`], with the dense conv's packed weights from a bind
    /// cache (packed as usual when they are absent or not this route's).
    pub fn with_cache(
        params: Conv1dParams,
        weight: &[u8],
        w_scale: f32,
        w_zero: u8,
        bias: Option<Vec<f32>>,
        prepared: Option<PreparedBufs>,
    ) -> Result<Self, KokoroError> {
        if let Some(b) = &bias {
            crate::kernels::error::check_len("qconv bias", params.c_out, b.len())?;
        }
        let (w, s, z) = (IntWeights::U8(weight), [w_scale], [i32::from(w_zero)]);
        let conv = match prepared.map(|p| Conv1dInt8::with_prepared(params, w, &s, &z, None, p)) {
            Some(Ok(conv)) => conv,
            _ => Conv1dInt8::new(params, w, &s, &z, None)?,
        };
        Ok(Self {
            params,
            w_scale,
            w_zero,
            bias,
            conv,
        })
    }

    /// Output frames for `t_in` input frames.
    pub fn out_len(&self, t_in: usize) -> Result<usize, KokoroError> {
        Ok(self.params.out_len(t_in)?)
    }

    /// `out[c_out, t_out]` from `x[c_in, t_in]` exactly as the export computes it.
    pub fn forward(
        &self,
        pool: &impl Fork,
        x: &[f32],
        t_in: usize,
        out: &mut [f32],
        ws: &mut QConvWorkspace,
    ) -> Result<(), KokoroError> {
        let p = &self.params;
        let n = p.c_in * t_in;
        crate::kernels::error::check_len("qconv input", n, x.len())?;
        let t_out = p.out_len(t_in)?;
        crate::kernels::error::check_len("qconv output", p.c_out * t_out, out.len())?;
        grow(&mut ws.xq, n);
        grow(&mut ws.acc, p.c_out * t_out);
        let aq = dynamic_quantize(x, &mut ws.xq[..n])?;
        let acc = &mut ws.acc[..p.c_out * t_out];
        self.conv
            .conv_integer(pool, &ws.xq[..n], aq.zero_point, t_in, acc, &mut ws.conv)?;
        self.dequantize(aq.scale, acc, t_out, out);
        Ok(())
    }

    /// `Cast(acc + Floor(bias / s)) · s` with `s = x_scale · w_scale`.
    fn dequantize(&self, x_scale: f32, acc: &[i32], t_out: usize, out: &mut [f32]) {
        let s = x_scale * self.w_scale;
        for (co, (o, a)) in out
            .chunks_exact_mut(t_out.max(1))
            .zip(acc.chunks_exact(t_out.max(1)))
            .enumerate()
        {
            // ONNX Cast float → int32 of an already floored value is exact.
            let bq = self.bias.as_ref().map_or(0, |b| (b[co] / s).floor() as i32);
            for (o, &a) in o.iter_mut().zip(a) {
                *o = a.wrapping_add(bq) as f32 * s;
            }
        }
    }
}

/// A `DynamicQuantizeLSTM` as stored in the export: [`StoredQLstm::pack`]
/// binds it; the bound [`QLstm`] keeps only its packed weights.
#[derive(Debug, Clone)]
pub struct StoredQLstm<'a> {
    /// Input features.
    pub input: usize,
    /// Hidden size H.
    pub hidden: usize,
    /// Directions (1 or 2).
    pub dirs: usize,
    /// W `[dirs, input, 4H]`, gates iofc (borrowed from the model's map where raw).
    pub w: Cow<'a, [i8]>,
    /// R `[dirs, H, 4H]`, gates iofc (as `w`).
    pub r: Cow<'a, [i8]>,
    /// B `[dirs, 8H]`: W bias (iofc) then R bias (iofc).
    pub b: Vec<f32>,
    /// Per-direction scales of W and R.
    pub scales: [Vec<f32>; 2],
    /// Per-direction zero points of W and R.
    pub zeros: [Vec<i8>; 2],
}

/// A bidirectional (or forward) `DynamicQuantizeLSTM`.
#[derive(Debug, Clone)]
pub struct QLstm {
    /// Input features.
    pub input: usize,
    /// Hidden size H.
    pub hidden: usize,
    /// Directions (1 or 2).
    pub dirs: usize,
    /// Input projection of all directions: `[input, dirs·4H]` packed.
    w_packed: Packed,
    /// Recurrent weights per direction: `[H, 4H]` packed.
    r_packed: Vec<Packed>,
    /// `Wb + Rb` per direction `[dirs, 4H]`.
    bias: Vec<f32>,
}

/// Scratch of one direction.
#[derive(Debug, Default, Clone)]
struct DirScratch {
    /// Hidden states `[t, H]`.
    hs: Vec<f32>,
    gates: Vec<f32>,
    rec: Vec<f32>,
    h: Vec<f32>,
    c: Vec<f32>,
    tanh_c: Vec<f32>,
    mm: MatmulWorkspace,
    qs: QGemmScratch,
}

/// Scratch for [`QLstm::forward`].
#[derive(Debug, Default, Clone)]
pub struct QLstmWorkspace {
    xproj: Vec<f32>,
    xmm: MatmulWorkspace,
    xqs: QGemmScratch,
    dirs: Vec<DirScratch>,
}

impl QLstmWorkspace {
    /// Grow for sequences of up to `max_t` steps.
    pub fn reserve(&mut self, lstm: &QLstm, max_t: usize) {
        let g = 4 * lstm.hidden;
        grow(&mut self.xproj, max_t * lstm.dirs * g);
        self.xmm = MatmulWorkspace::new(max_t, lstm.input);
        self.dirs.resize_with(lstm.dirs, DirScratch::default);
        for d in &mut self.dirs {
            grow(&mut d.hs, max_t * lstm.hidden);
            grow(&mut d.gates, g);
            grow(&mut d.rec, g);
            grow(&mut d.h, lstm.hidden);
            grow(&mut d.c, lstm.hidden);
            grow(&mut d.tanh_c, lstm.hidden);
            d.mm = MatmulWorkspace::new(1, lstm.hidden);
        }
    }
}

impl QLstm {
    /// Bind a `DynamicQuantizeLSTM` (weights as stored in the export).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        input: usize,
        hidden: usize,
        dirs: usize,
        w: Vec<i8>,
        r: Vec<i8>,
        b: Vec<f32>,
        scales: [Vec<f32>; 2],
        zeros: [Vec<i8>; 2],
    ) -> Result<Self, KokoroError> {
        StoredQLstm {
            input,
            hidden,
            dirs,
            w: Cow::Owned(w),
            r: Cow::Owned(r),
            b,
            scales,
            zeros,
        }
        .pack()
    }
}

impl StoredQLstm<'_> {
    /// Pack the weights for this CPU (input projection of both directions as
    /// one GEMM, recurrent weights per direction).
    pub fn pack(&self) -> Result<QLstm, KokoroError> {
        self.pack_cached(None)
    }

    /// As [`StoredQLstm::pack`], through a bind cache (entries `<name>/W`
    /// and `<name>/R<direction>`).
    pub fn pack_cached(&self, cache: CacheKey<'_>) -> Result<QLstm, KokoroError> {
        use crate::kernels::error::check_len;
        let StoredQLstm {
            input,
            hidden,
            dirs,
            ref w,
            ref r,
            ref b,
            ref scales,
            ref zeros,
        } = *self;
        let g = 4 * hidden;
        check_len("qlstm W", dirs * input * g, w.len())?;
        check_len("qlstm R", dirs * hidden * g, r.len())?;
        check_len("qlstm B", dirs * 2 * g, b.len())?;
        for v in scales {
            check_len("qlstm scales", dirs, v.len())?;
        }
        for v in zeros {
            check_len("qlstm zero points", dirs, v.len())?;
        }
        // W as one `[input, dirs·4H]` matrix: both directions share the
        // quantized input, so one GEMM serves them (scales per column).
        let wcat = || {
            let mut wcat = Vec::with_capacity(w.len());
            for i in 0..input {
                for d in 0..dirs {
                    wcat.extend_from_slice(&w[(d * input + i) * g..(d * input + i + 1) * g]);
                }
            }
            Cow::Owned(wcat)
        };
        let w_sc: Vec<f32> = (0..dirs)
            .flat_map(|d| std::iter::repeat_n(scales[0][d], g))
            .collect();
        let w_zp: Vec<i8> = (0..dirs)
            .flat_map(|d| std::iter::repeat_n(zeros[0][d], g))
            .collect();
        let key = |part: String| cache.map(|(c, name)| (c, format!("{name}/{part}")));
        let wkey = key("W".into());
        let w_packed = Packed::new(
            wkey.as_ref().map(|(c, n)| (*c, n.as_str())),
            input,
            dirs * g,
            wcat,
            &w_sc,
            &w_zp,
        )?;
        let mut r_packed = Vec::with_capacity(dirs);
        let mut bias = Vec::with_capacity(dirs * g);
        for d in 0..dirs {
            let rkey = key(format!("R{d}"));
            r_packed.push(Packed::new(
                rkey.as_ref().map(|(c, n)| (*c, n.as_str())),
                hidden,
                g,
                || Cow::Borrowed(&r[d * hidden * g..(d + 1) * hidden * g]),
                &[scales[1][d]],
                &[zeros[1][d]],
            )?);
            let bd = &b[d * 2 * g..(d + 1) * 2 * g];
            bias.extend((0..g).map(|j| bd[j] + bd[g + j]));
        }
        Ok(QLstm {
            input,
            hidden,
            dirs,
            w_packed,
            r_packed,
            bias,
        })
    }

    /// Readable reference of [`QLstm::forward`] (exact `exp`-based gates).
    pub fn forward_reference(&self, x: &[f32], t: usize) -> Result<Vec<f32>, KokoroError> {
        let (h, g, k) = (self.hidden, 4 * self.hidden, self.input);
        let mut xq = vec![0u8; x.len()];
        let ax = dynamic_quantize(x, &mut xq)?;
        let mut out = vec![0.0f32; t * self.dirs * h];
        let sig = |v: f32| 1.0 / (1.0 + (-v).exp());
        for d in 0..self.dirs {
            let (wd, rd) = (&self.w[d * k * g..], &self.r[d * h * g..]);
            let (zw, zr) = (i32::from(self.zeros[0][d]), i32::from(self.zeros[1][d]));
            let (mut hs, mut cs) = (vec![0.0f32; h], vec![0.0f32; h]);
            let mut hq = vec![0u8; h];
            for step in 0..t {
                let s = if d == 0 { step } else { t - 1 - step };
                let ah = dynamic_quantize(&hs, &mut hq)?;
                let mut gates = vec![0.0f32; g];
                for (j, gate) in gates.iter_mut().enumerate() {
                    let mut ax_acc = 0i32;
                    for i in 0..k {
                        let a = i32::from(xq[s * k + i]) - i32::from(ax.zero_point);
                        ax_acc += a * (i32::from(wd[i * g + j]) - zw);
                    }
                    let mut ah_acc = 0i32;
                    for i in 0..h {
                        let a = i32::from(hq[i]) - i32::from(ah.zero_point);
                        ah_acc += a * (i32::from(rd[i * g + j]) - zr);
                    }
                    let xp = ax_acc as f32 * (ax.scale * self.scales[0][d]);
                    let hp = ah_acc as f32 * (ah.scale * self.scales[1][d]);
                    let bd = &self.b[d * 2 * g..];
                    *gate = (hp + xp) + (bd[j] + bd[g + j]);
                }
                for j in 0..h {
                    let (i_g, o_g) = (sig(gates[j]), sig(gates[h + j]));
                    let (f_g, c_g) = (sig(gates[2 * h + j]), gates[3 * h + j].tanh());
                    cs[j] = cs[j] * f_g + i_g * c_g;
                    hs[j] = o_g * cs[j].tanh();
                }
                out[s * self.dirs * h + d * h..][..h].copy_from_slice(&hs);
            }
        }
        Ok(out)
    }
}

impl QLstm {
    /// A workspace for sequences of up to `max_t` steps.
    pub fn workspace(&self, max_t: usize) -> QLstmWorkspace {
        let mut ws = QLstmWorkspace::default();
        ws.reserve(self, max_t);
        ws
    }

    /// `out[t, dirs·H]` (forward ‖ backward) from `x[t, input]`, zero initial state.
    /// Directions run on separate lanes; the result does not depend on the budget.
    pub fn forward(
        &self,
        pool: &impl Fork,
        x: &[f32],
        t: usize,
        out: &mut [f32],
        ws: &mut QLstmWorkspace,
    ) -> Result<(), KokoroError> {
        use crate::kernels::error::check_len;
        let (h, g) = (self.hidden, 4 * self.hidden);
        check_len("qlstm input", t * self.input, x.len())?;
        check_len("qlstm output", t * self.dirs * h, out.len())?;
        if t == 0 {
            return Ok(());
        }
        if ws.dirs.len() != self.dirs || ws.xproj.len() < t * self.dirs * g {
            ws.reserve(self, t);
        }
        let n = self.dirs * g;
        let xproj = &mut ws.xproj[..t * n];
        self.w_packed.run(
            pool,
            x,
            t,
            self.input,
            None,
            xproj,
            &mut ws.xmm,
            &mut ws.xqs,
        )?;
        let xproj: &[f32] = xproj;
        let failed = std::sync::Mutex::new(None);
        pool.for_each_chunk_mut(&mut ws.dirs, 1, |d, st| {
            if let Err(e) = self.run_direction(d, xproj, t, &mut st[0]) {
                if let Ok(mut f) = failed.lock() {
                    *f = Some(e);
                }
            }
        })?;
        if let Some(e) = failed.into_inner().ok().flatten() {
            return Err(e);
        }
        for (d, st) in ws.dirs.iter().enumerate() {
            for s in 0..t {
                out[s * self.dirs * h + d * h..][..h].copy_from_slice(&st.hs[s * h..(s + 1) * h]);
            }
        }
        Ok(())
    }

    fn run_direction(
        &self,
        d: usize,
        xproj: &[f32],
        t: usize,
        st: &mut DirScratch,
    ) -> Result<(), KokoroError> {
        let (h, g) = (self.hidden, 4 * self.hidden);
        let n = self.dirs * g;
        let level = simd_level();
        let bias = &self.bias[d * g..(d + 1) * g];
        st.h[..h].fill(0.0);
        st.c[..h].fill(0.0);
        for step in 0..t {
            let s = if d == 0 { step } else { t - 1 - step };
            // Recurrent GEMM: h quantized per step as one tensor.
            self.r_packed[d].matvec(&st.h[..h], &mut st.rec[..g], &mut st.mm, &mut st.qs)?;
            let gates = &mut st.gates[..g];
            let xp = &xproj[s * n + d * g..s * n + (d + 1) * g];
            for j in 0..g {
                gates[j] = (st.rec[j] + xp[j]) + bias[j];
            }
            sigmoid_inplace(level, &mut gates[..3 * h]);
            tanh_inplace(level, &mut gates[3 * h..]);
            let (i_g, rest) = gates.split_at(h);
            let (o_g, rest) = rest.split_at(h);
            let (f_g, c_g) = rest.split_at(h);
            for (j, c) in st.c[..h].iter_mut().enumerate() {
                *c = *c * f_g[j] + i_g[j] * c_g[j];
            }
            st.tanh_c[..h].copy_from_slice(&st.c[..h]);
            tanh_inplace(level, &mut st.tanh_c[..h]);
            for ((hv, o), tc) in st.h[..h].iter_mut().zip(o_g).zip(&st.tanh_c[..h]) {
                *hv = o * tc;
            }
            st.hs[s * h..(s + 1) * h].copy_from_slice(&st.h[..h]);
        }
        Ok(())
    }
}

/// Weight quantization as onnxruntime's `quantize_dynamic` did it for
/// Kokoro's int8 export, so a float (fp32) graph loads into the same int8
/// kernels as the int8 export: with `reduce_range` (7-bit ranges), INT8
/// weights symmetric (`[-64, 64]`, zero point 0), UINT8 conv weights
/// asymmetric (`[0, 127]`). As `quant_utils.compute_scale_zp`: the range
/// always includes 0, `scale = (rmax − rmin) / (qmax − qmin)` in f64 then
/// stored as f32 (1.0 when it is below `f32::MIN_POSITIVE`), the asymmetric
/// zero point `round(qmin − rmin / scale)`; then `QuantizeLinear`:
/// `q = round_half_even(w / scale) + zp`, saturated to the type.
/// Re-quantizing the int8 export's dequantized weights gives them back bit for bit.
pub mod weights {
    /// `[qmin, qmax]` of INT8 symmetric weights with `reduce_range`.
    pub const I8_RANGE: (f32, f32) = (-64.0, 64.0);
    /// `[qmin, qmax]` of UINT8 weights with `reduce_range`.
    pub const U8_RANGE: (f32, f32) = (0.0, 127.0);

    /// `(rmin, rmax)` of `w` widened to include 0.
    fn range(w: impl Iterator<Item = f32>) -> (f32, f32) {
        w.fold((0.0f32, 0.0f32), |(lo, hi), v| (lo.min(v), hi.max(v)))
    }

    /// `(scale, zero_point)` for `[rmin, rmax]` onto `[qmin, qmax]`.
    fn scale_zp(rmin: f32, rmax: f32, (qmin, qmax): (f32, f32), symmetric: bool) -> (f32, f32) {
        let (rmin, rmax) = if symmetric {
            let a = rmin.abs().max(rmax.abs());
            (-a, a)
        } else {
            (rmin, rmax)
        };
        let scale = f64::from(rmax - rmin) / f64::from(qmax - qmin);
        if scale < f64::from(f32::MIN_POSITIVE) {
            return (1.0, 0.0);
        }
        let zp = if symmetric {
            ((f64::from(qmin) + f64::from(qmax)) / 2.0).round_ties_even()
        } else {
            (f64::from(qmin) - f64::from(rmin) / scale).round_ties_even()
        };
        (scale as f32, zp as f32)
    }

    /// `QuantizeLinear` of one value, saturated to `[lo, hi]` (the storage type).
    fn quantize(v: f32, scale: f32, zp: f32, lo: f32, hi: f32) -> f32 {
        ((v / scale).round_ties_even() + zp).clamp(lo, hi)
    }

    /// INT8 symmetric, one scale for all of `w` (embeddings, one LSTM direction).
    pub fn i8_per_tensor(w: &[f32]) -> (Vec<i8>, f32) {
        let (lo, hi) = range(w.iter().copied());
        let (scale, _) = scale_zp(lo, hi, I8_RANGE, true);
        let q = w
            .iter()
            .map(|&v| quantize(v, scale, 0.0, -128.0, 127.0) as i8)
            .collect();
        (q, scale)
    }

    /// INT8 symmetric per output column of a `[k, n]` MatMul weight; returns
    /// the weight (same layout) and the `[n]` scales.
    pub fn i8_per_column(w: &[f32], k: usize, n: usize) -> (Vec<i8>, Vec<f32>) {
        let scales: Vec<f32> = (0..n)
            .map(|c| {
                let (lo, hi) = range((0..k).map(|r| w[r * n + c]));
                scale_zp(lo, hi, I8_RANGE, true).0
            })
            .collect();
        let q = w
            .iter()
            .enumerate()
            .map(|(i, &v)| quantize(v, scales[i % n], 0.0, -128.0, 127.0) as i8)
            .collect();
        (q, scales)
    }

    /// UINT8 asymmetric, one scale and zero point for all of `w` (conv weights).
    pub fn u8_per_tensor(w: &[f32]) -> (Vec<u8>, f32, u8) {
        let (lo, hi) = range(w.iter().copied());
        let (scale, zp) = scale_zp(lo, hi, U8_RANGE, false);
        let q = w
            .iter()
            .map(|&v| quantize(v, scale, zp, 0.0, 255.0) as u8)
            .collect();
        (q, scale, zp as u8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::matmul::ActivationQuant;

    #[test]
    fn fast_rounding_is_round_half_even() {
        let mut x = -300.0f32;
        while x < 300.0 {
            for v in [x, x + 0.5, -x - 0.5, x.next_up(), x.next_down()] {
                let q = ActivationQuant {
                    scale: 1.0,
                    zero_point: 128,
                };
                let want = (v.round_ties_even() + 128.0).clamp(0.0, 255.0) as u8;
                assert_eq!(q.quantize(v), want, "{v}");
            }
            x += 0.125;
        }
    }

    #[test]
    fn qlinear_fast_path_equals_reference() {
        let (k, n, m) = (70, 9, 5);
        let weight: Vec<i8> = (0..k * n).map(|i| ((i * 37) % 255) as i8).collect();
        let stored = StoredQLinear {
            k,
            n,
            weight: weight.into(),
            w_scale: (0..n).map(|i| 0.01 + i as f32 * 1e-3).collect(),
            w_zero: vec![0; n],
            bias: Some((0..n).map(|i| i as f32 * 0.1).collect()),
        };
        let l = stored.clone().pack().expect("bind");
        let x: Vec<f32> = (0..m * k)
            .map(|i| ((i * 7919) % 97) as f32 / 13.0 - 3.0)
            .collect();
        let mut out = vec![0.0f32; m * n];
        l.forward(&Serial, &x, m, &mut out, &mut MatmulWorkspace::default())
            .expect("forward");
        assert_eq!(out, stored.forward_reference(&x, m).expect("reference"));
    }

    #[test]
    fn qlstm_fast_path_follows_the_reference() {
        // Both directions, odd sizes, non-zero weight zero points; the fast
        // path's gate approximations stay within 1e-3 of the exact `exp`
        // gates here (measured ~1e-8: no requantization of h flipped).
        let (input, hidden, dirs, t) = (19, 7, 2, 13);
        let g = 4 * hidden;
        let wave = |n: usize, mul: usize| -> Vec<i8> {
            (0..n).map(|i| ((i * mul) % 129) as i8 - 64).collect()
        };
        let stored = StoredQLstm {
            input,
            hidden,
            dirs,
            w: wave(dirs * input * g, 37).into(),
            r: wave(dirs * hidden * g, 53).into(),
            b: (0..dirs * 2 * g)
                .map(|i| ((i % 11) as f32 - 5.0) * 0.05)
                .collect(),
            scales: [vec![0.004, 0.006], vec![0.01, 0.008]],
            zeros: [vec![0, 3], vec![-2, 0]],
        };
        let lstm = stored.pack().expect("pack");
        let x: Vec<f32> = (0..t * input)
            .map(|i| ((i * 7919) % 97) as f32 / 24.0 - 2.0)
            .collect();
        let mut out = vec![0.0f32; t * dirs * hidden];
        let mut ws = lstm.workspace(t);
        lstm.forward(&Serial, &x, t, &mut out, &mut ws)
            .expect("forward");
        let want = stored.forward_reference(&x, t).expect("reference");
        let spread = want.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        assert!(
            spread > 0.2,
            "the reference output is nearly flat: {spread}"
        );
        for (i, (a, b)) in out.iter().zip(&want).enumerate() {
            assert!((a - b).abs() <= 1e-3, "h[{i}]: fast {a} vs reference {b}");
        }
    }

    #[test]
    fn weight_quantizers_follow_quantize_dynamic() {
        // Symmetric INT8: absmax 64 → scale 1, ties to even, ±64 at the ends.
        let (q, s) = weights::i8_per_tensor(&[-64.0, 2.5, 3.5, -0.5, 10.2]);
        assert_eq!(s, 1.0);
        assert_eq!(q, vec![-64, 2, 4, 0, 10]);
        // Per column of [k=2, n=2].
        let (q, s) = weights::i8_per_column(&[1.0, -0.5, -2.0, 0.25], 2, 2);
        assert_eq!(s, vec![2.0 / 64.0, 0.5 / 64.0]);
        assert_eq!(q, vec![32, -64, -64, 32]);
        // Asymmetric UINT8 over [-1, 3]: scale 4/127, zero point round(127/4).
        let (q, s, z) = weights::u8_per_tensor(&[-1.0, 0.0, 3.0]);
        assert_eq!(s, (4.0f64 / 127.0) as f32);
        assert_eq!(z, 32);
        assert_eq!(q, vec![0, 32, 127]);
        // All zeros: scale 1, zero point 0.
        assert_eq!(weights::u8_per_tensor(&[0.0; 3]), (vec![0; 3], 1.0, 0));
    }
}
