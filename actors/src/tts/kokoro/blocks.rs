//! Style-conditioned building blocks shared by Kokoro's decoder, generator and
//! prosody predictor, each computing what the int8 export computes:
//!
//! - [`AdaIn1d`]: `fc` (`MatMulInteger` 128 → 2C) gives γ ‖ β; instance norm
//!   over time (`ReduceMean/Sub/Pow/Sqrt/Div`, ε = 1e-5), then `(1 + γ)·x̂ + β`,
//!   applied with its activation row by row ([`super::adain_rows`]).
//! - [`AdainResBlk1d`] (StyleTTS2's block; `encode`, `decode.*`, `F0.*`,
//!   `N.*`): residual `norm1 → LeakyReLU 0.2 → [pool: depthwise ConvTranspose
//!   ×2] → conv1 → norm2 → LeakyReLU 0.2 → conv2`; shortcut `[nearest ×2] →
//!   [conv1x1]`; output `(residual + shortcut) / √2`.
//! - [`AdaInResBlock1`] (the generator's `resblocks.*` / `noise_res.*`): per
//!   dilation `d`: `xt = adain1 → Snake α1 → conv (dilation d) → adain2 →
//!   Snake α2 → conv`, `x = xt + x`.
//!
//! Blocks are loaded by their node-name prefix (e.g. `/decoder/decoder/encode`,
//! `/encoder/F0.1`) so every weight is reached through its consuming node.
//! Elementwise passes are split into fixed chunks (rows for the norms), so
//! outputs are bit-identical for every thread budget.

use voxlane_runtime::Fork;

use super::adain_rows::{adain_rows, adain_rows_from, Activation, RowParams};
use super::graph::{KokoroError, KokoroGraph};
use super::lane_qconv::{merge_range, LaneQConv, LaneQConvWorkspace};
use super::pointwise;
use super::quant::QLinear;
use crate::kernels::conv_transpose1d::{
    ConvTranspose1d, ConvTranspose1dParams, ConvTranspose1dWorkspace,
};
use crate::kernels::cpu::simd_level;
use crate::kernels::elementwise::activations::leaky_relu;
use crate::kernels::error::check_len;
use crate::kernels::matmul::MatmulWorkspace;

/// Instance-norm epsilon of every AdaIN in the export.
pub const ADAIN_EPS: f32 = 1e-5;
/// LeakyReLU slope inside [`AdainResBlk1d`].
const BLOCK_SLOPE: f32 = 0.2;
/// `√2` as the graph's divisor constant.
const SQRT_2: f32 = std::f32::consts::SQRT_2;
/// Elements per parallel chunk of pointwise passes.
pub const POINT_CHUNK: usize = 1 << 14;
/// Rough elements per parallel chunk of the norms (whole rows).
const NORM_CHUNK: usize = 1 << 14;

pub(crate) use voxlane_runtime::memory::grow;

/// LeakyReLU in place, split into fixed chunks over the pool.
pub fn par_leaky_relu(pool: &impl Fork, x: &mut [f32], slope: f32) -> Result<(), KokoroError> {
    let level = simd_level();
    pool.for_each_chunk_mut(x, POINT_CHUNK, |_, c| leaky_relu(level, c, slope))?;
    Ok(())
}

/// `a ← a + b` elementwise over fixed chunks.
pub fn par_add(pool: &impl Fork, a: &mut [f32], b: &[f32]) -> Result<(), KokoroError> {
    check_len("add operand", a.len(), b.len())?;
    pool.for_each_chunk_mut(a, POINT_CHUNK, |i, c| {
        let o = i * POINT_CHUNK;
        let m = c.len();
        pointwise::add(c, &b[o..o + m]);
    })?;
    Ok(())
}

/// Rows of `t` per norm chunk (at least one).
fn rows_per_chunk(t: usize) -> usize {
    (NORM_CHUNK / t.max(1)).max(1)
}

/// An AdaIN: the style projection and the instance norm it modulates.
#[derive(Debug, Clone)]
pub struct AdaIn1d {
    fc: QLinear,
    channels: usize,
}

impl AdaIn1d {
    /// Load the AdaIN whose module prefix is `module` (e.g. `/decoder/decoder/encode/norm1`).
    pub fn load(g: &KokoroGraph<'_>, module: &str) -> Result<Self, KokoroError> {
        let fc = g.qlinear(&format!("{module}/fc/Gemm_MatMul_quant"))?;
        if fc.n % 2 != 0 {
            return Err(KokoroError::BadNode {
                node: module.to_string(),
                detail: format!("fc has {} outputs, expected an even 2C", fc.n),
            });
        }
        let channels = fc.n / 2;
        Ok(Self { fc, channels })
    }

    /// Channels C it normalises.
    pub fn channels(&self) -> usize {
        self.channels
    }

    /// Style width the `fc` expects.
    pub fn style_dim(&self) -> usize {
        self.fc.k
    }

    /// γ ‖ β `[2C]` for `style` `[style_dim]`.
    pub fn style_params(
        &self,
        pool: &impl Fork,
        style: &[f32],
        gb: &mut [f32],
        ws: &mut MatmulWorkspace,
    ) -> Result<(), KokoroError> {
        self.fc.forward(pool, style, 1, gb, ws)
    }
}

/// The AdaIN + LeakyReLU parameters of `AdainResBlk1d`'s norms.
fn leaky_params<'a>(gamma: &'a [f32], beta: &'a [f32]) -> RowParams<'a> {
    RowParams {
        gamma,
        beta,
        eps: ADAIN_EPS,
        act: Activation::LeakyRelu(BLOCK_SLOPE),
    }
}

/// `dst = act(adain(src))` for `[C, t]` with `p`'s per-row parameters, in
/// row chunks on the lanes; returns the range of `dst` (chunk ranges merge
/// exactly, so it does not depend on the budget).
fn adain_on_lanes(
    pool: &impl Fork,
    src: &[f32],
    dst: &mut [f32],
    t: usize,
    p: RowParams<'_>,
) -> Result<[f32; 2], KokoroError> {
    check_len("adain input", dst.len(), src.len())?;
    check_len("adain style params", dst.len() / t.max(1), p.gamma.len())?;
    if t == 0 {
        return Ok([0.0, 0.0]);
    }
    let rows = rows_per_chunk(t);
    let range = std::sync::Mutex::new([0.0f32, 0.0f32]);
    pool.for_each_chunk_mut(dst, rows * t, |i, chunk| {
        let (r0, n) = (i * rows, chunk.len() / t);
        let r = adain_rows_from(&src[r0 * t..(r0 + n) * t], chunk, t, p.rows(r0, n));
        if let Ok(mut m) = range.lock() {
            *m = merge_range(*m, &r);
        }
    })?;
    Ok(range.into_inner().unwrap_or([0.0, 0.0]))
}

/// Scratch shared by the blocks (grown on demand, never shrunk).
#[derive(Debug, Default)]
pub struct BlockWorkspace {
    a: Vec<f32>,
    b: Vec<f32>,
    c: Vec<f32>,
    gb: Vec<f32>,
    qconv: LaneQConvWorkspace,
    ct: ConvTranspose1dWorkspace,
    mm: MatmulWorkspace,
}

impl BlockWorkspace {
    /// An empty workspace.
    pub fn new() -> Self {
        Self::default()
    }
}

/// StyleTTS2's `AdainResBlk1d` (optionally ×2 upsampling).
#[derive(Debug, Clone)]
pub struct AdainResBlk1d {
    norm1: AdaIn1d,
    norm2: AdaIn1d,
    conv1: LaneQConv,
    conv2: LaneQConv,
    /// Learned shortcut (`dim_in != dim_out`).
    conv1x1: Option<LaneQConv>,
    /// Depthwise ×2 transposed conv on the residual (upsampling blocks only).
    pool: Option<ConvTranspose1d>,
    c_in: usize,
    c_out: usize,
}

impl AdainResBlk1d {
    /// Load the block with node-name prefix `prefix` (e.g. `/decoder/decoder/decode.3`).
    pub fn load(g: &KokoroGraph<'_>, prefix: &str) -> Result<Self, KokoroError> {
        let norm1 = AdaIn1d::load(g, &format!("{prefix}/norm1"))?;
        let norm2 = AdaIn1d::load(g, &format!("{prefix}/norm2"))?;
        let conv1 = LaneQConv::new(g.qconv(&format!("{prefix}/conv1/Conv_quant"))?)?;
        let conv2 = LaneQConv::new(g.qconv(&format!("{prefix}/conv2/Conv_quant"))?)?;
        let c_in = norm1.channels();
        let c_out = conv2.params().c_out;
        let conv1x1 = match g.node(&format!("{prefix}/conv1x1/Conv_quant")) {
            Ok(_) => Some(LaneQConv::new(
                g.qconv(&format!("{prefix}/conv1x1/Conv_quant"))?,
            )?),
            Err(_) => None,
        };
        let pool = match g.node(&format!("{prefix}/pool/ConvTranspose")) {
            Ok(_) => {
                let fc = g.float_conv(&format!("{prefix}/pool/ConvTranspose"))?;
                let [ci, cog, k] = fc.dims;
                let p = ConvTranspose1dParams::new(ci, cog * fc.groups, k)
                    .stride(fc.stride)
                    .padding(fc.pad, fc.output_padding)
                    .groups(fc.groups);
                Some(ConvTranspose1d::new(p, &fc.weight, fc.bias.as_deref())?)
            }
            Err(_) => None,
        };
        let block = Self {
            norm1,
            norm2,
            conv1,
            conv2,
            conv1x1,
            pool,
            c_in,
            c_out,
        };
        block.check(prefix)?;
        Ok(block)
    }

    fn check(&self, prefix: &str) -> Result<(), KokoroError> {
        let bad = |detail: String| KokoroError::BadNode {
            node: prefix.to_string(),
            detail,
        };
        let (p1, p2) = (self.conv1.params(), self.conv2.params());
        if p1.c_in != self.c_in || p1.c_out != self.c_out || p2.c_in != self.c_out {
            return Err(bad(format!(
                "conv shapes {}→{}, {}→{} disagree with norm1 width {}",
                p1.c_in, p1.c_out, p2.c_in, p2.c_out, self.c_in
            )));
        }
        if self.norm2.channels() != self.c_out {
            return Err(bad("norm2 width differs from conv1 outputs".into()));
        }
        match &self.conv1x1 {
            Some(sc) if sc.params().c_in != self.c_in || sc.params().c_out != self.c_out => {
                Err(bad("conv1x1 shape disagrees with the block".into()))
            }
            None if self.c_in != self.c_out => Err(bad("no conv1x1 although widths differ".into())),
            _ => Ok(()),
        }
    }

    /// Input channels.
    pub fn c_in(&self) -> usize {
        self.c_in
    }

    /// Output channels.
    pub fn c_out(&self) -> usize {
        self.c_out
    }

    /// Output frames for `t` input frames (×2 when upsampling).
    pub fn out_len(&self, t: usize) -> usize {
        if self.pool.is_some() {
            2 * t
        } else {
            t
        }
    }

    /// `out: [c_out, out_len(t)]` from `x: [c_in, t]` and the block's style `style`.
    pub fn forward(
        &self,
        pool: &impl Fork,
        x: &[f32],
        t: usize,
        style: &[f32],
        out: &mut [f32],
        ws: &mut BlockWorkspace,
    ) -> Result<(), KokoroError> {
        check_len("adain resblock input", self.c_in * t, x.len())?;
        let to = self.out_len(t);
        check_len("adain resblock output", self.c_out * to, out.len())?;
        let (ci, co) = (self.c_in, self.c_out);
        // `to ≥ t`; every buffer holds the wider side at the output rate.
        let cap = ci.max(co) * to;
        grow(&mut ws.a, cap);
        grow(&mut ws.b, cap);
        grow(&mut ws.c, cap);
        grow(&mut ws.gb, 2 * ci.max(co));
        // Shortcut into `out`: [nearest ×2] → [conv1x1].
        let sc_in: &[f32] = if self.pool.is_some() {
            let up = &mut ws.a[..ci * to];
            pool.for_each_chunk_mut(up, to, |c, row| {
                for (j, v) in row.iter_mut().enumerate() {
                    *v = x[c * t + j / 2];
                }
            })?;
            &ws.a[..ci * to]
        } else {
            x
        };
        match &self.conv1x1 {
            Some(sc) => sc.forward(pool, sc_in, to, None, out, &mut ws.qconv)?,
            None => out.copy_from_slice(sc_in),
        }
        // Residual: norm1 → actv → [pool] → conv1 → norm2 → actv → conv2,
        // each norm + activation one row pass that also gives the next
        // conv's quantization range (norm2's in conv1's row epilogue).
        let gb = &mut ws.gb[..2 * ci.max(co)];
        self.norm1
            .style_params(pool, style, &mut gb[..2 * ci], &mut ws.mm)?;
        let h = &mut ws.b[..ci * t];
        let (g1, b1) = gb[..2 * ci].split_at(ci);
        let r1 = adain_on_lanes(pool, x, h, t, leaky_params(g1, b1))?;
        let (h, r1): (&[f32], _) = match &self.pool {
            Some(ct) => {
                let up = &mut ws.a[..ci * to];
                ct.forward(pool, &ws.b[..ci * t], t, up, &mut ws.ct)?;
                (&ws.a[..ci * to], None)
            }
            None => (&ws.b[..ci * t], Some(r1)),
        };
        self.norm2
            .style_params(pool, style, &mut gb[..2 * co], &mut ws.mm)?;
        let (g2, b2) = gb[..2 * co].split_at(co);
        let p2 = leaky_params(g2, b2);
        let r = &mut ws.c[..co * to];
        let r2 = self
            .conv1
            .forward_then(pool, h, to, r1, r, &mut ws.qconv, |row, c| {
                adain_rows(row, to, p2.rows(c, 1))
            })?;
        let y = &mut ws.b[..co * to];
        self.conv2
            .forward(pool, &ws.c[..co * to], to, Some(r2), y, &mut ws.qconv)?;
        // (residual + shortcut) / √2, as Add then Div.
        let r2 = &ws.b[..co * to];
        pool.for_each_chunk_mut(out, POINT_CHUNK, |i, c| {
            let o = i * POINT_CHUNK;
            let m = c.len();
            pointwise::add_div(c, &r2[o..o + m], SQRT_2);
        })?;
        Ok(())
    }
}

/// One dilation branch of [`AdaInResBlock1`].
#[derive(Debug, Clone)]
struct SnakeBranch {
    adain1: AdaIn1d,
    /// Snake α and 1/α before `conv1`.
    alpha1: Vec<f32>,
    inv_alpha1: Vec<f32>,
    conv1: LaneQConv,
    adain2: AdaIn1d,
    /// Snake α and 1/α before `conv2`.
    alpha2: Vec<f32>,
    inv_alpha2: Vec<f32>,
    conv2: LaneQConv,
}

/// The generator's `AdaINResBlock1` (Snake activations, 3 dilations).
#[derive(Debug, Clone)]
pub struct AdaInResBlock1 {
    branches: Vec<SnakeBranch>,
    channels: usize,
}

/// Scratch for [`AdaInResBlock1::forward`].
#[derive(Debug, Default)]
pub struct ResBlock1Workspace {
    xt: Vec<f32>,
    gb: Vec<f32>,
    gb2: Vec<f32>,
    /// Shared with the generator's noise convs (one set of int8 buffers).
    pub(crate) qconv: LaneQConvWorkspace,
    mm: MatmulWorkspace,
}

impl ResBlock1Workspace {
    /// An empty workspace.
    pub fn new() -> Self {
        Self::default()
    }
}

impl AdaInResBlock1 {
    /// Load the block at node prefix `prefix` (e.g. `/decoder/decoder/generator/resblocks.0`)
    /// whose PyTorch parameters are named `param` + `.alpha1.0` etc.
    pub fn load(g: &KokoroGraph<'_>, prefix: &str, param: &str) -> Result<Self, KokoroError> {
        let mut branches = Vec::new();
        let mut j = 0;
        while g.node(&format!("{prefix}/convs1.{j}/Conv_quant")).is_ok() {
            let alpha = |name: String| -> Result<Vec<f32>, KokoroError> {
                let t = g.tensor(&name)?;
                g.f32s(&t)
            };
            let (alpha1, alpha2) = (
                alpha(format!("{param}.alpha1.{j}"))?,
                alpha(format!("{param}.alpha2.{j}"))?,
            );
            // The export folds `1/α` into a constant: f32 division, as here.
            let inv = |a: &[f32]| a.iter().map(|&v| 1.0 / v).collect::<Vec<f32>>();
            branches.push(SnakeBranch {
                adain1: AdaIn1d::load(g, &format!("{prefix}/adain1.{j}"))?,
                inv_alpha1: inv(&alpha1),
                inv_alpha2: inv(&alpha2),
                alpha1,
                alpha2,
                conv1: LaneQConv::new(g.qconv(&format!("{prefix}/convs1.{j}/Conv_quant"))?)?,
                adain2: AdaIn1d::load(g, &format!("{prefix}/adain2.{j}"))?,
                conv2: LaneQConv::new(g.qconv(&format!("{prefix}/convs2.{j}/Conv_quant"))?)?,
            });
            j += 1;
        }
        let channels = branches.first().map_or(0, |b| b.adain1.channels());
        for b in &branches {
            let ok = [b.adain2.channels(), b.alpha1.len(), b.alpha2.len()]
                .iter()
                .all(|&c| c == channels)
                && [&b.conv1, &b.conv2]
                    .iter()
                    .all(|c| c.params().c_in == channels && c.params().c_out == channels);
            if !ok {
                return Err(KokoroError::BadNode {
                    node: prefix.to_string(),
                    detail: format!("branch widths disagree with {channels} channels"),
                });
            }
        }
        if branches.is_empty() {
            return Err(KokoroError::MissingNode(format!(
                "{prefix}/convs1.0/Conv_quant"
            )));
        }
        Ok(Self { branches, channels })
    }

    /// Channels in and out.
    pub fn channels(&self) -> usize {
        self.channels
    }

    /// `x: [C, t]` in place: every branch adds its residual.
    ///
    /// Per branch: `xt = snake(adain1(x))` row by row (with the range for its
    /// quantization), `conv1`, whose dequantized rows go straight through
    /// `adain2` and the second Snake (over `xt`), `conv2`, whose dequantized rows are added
    /// onto `x`: three passes over the activations besides the convs.
    pub fn forward(
        &self,
        pool: &impl Fork,
        x: &mut [f32],
        t: usize,
        style: &[f32],
        ws: &mut ResBlock1Workspace,
    ) -> Result<(), KokoroError> {
        let c = self.channels;
        check_len("resblock input", c * t, x.len())?;
        if t == 0 {
            return Ok(());
        }
        grow(&mut ws.xt, c * t);
        grow(&mut ws.gb, 2 * c);
        grow(&mut ws.gb2, 2 * c);
        for b in &self.branches {
            b.adain1
                .style_params(pool, style, &mut ws.gb[..2 * c], &mut ws.mm)?;
            b.adain2
                .style_params(pool, style, &mut ws.gb2[..2 * c], &mut ws.mm)?;
            let (g1, b1) = ws.gb[..2 * c].split_at(c);
            let (g2, b2) = ws.gb2[..2 * c].split_at(c);
            let p1 = RowParams {
                gamma: g1,
                beta: b1,
                eps: ADAIN_EPS,
                act: Activation::Snake {
                    alpha: &b.alpha1,
                    inv_alpha: &b.inv_alpha1,
                },
            };
            let p2 = RowParams {
                gamma: g2,
                beta: b2,
                eps: ADAIN_EPS,
                act: Activation::Snake {
                    alpha: &b.alpha2,
                    inv_alpha: &b.inv_alpha2,
                },
            };
            // xt = snake(adain1(x)).
            let r1 = adain_on_lanes(pool, x, &mut ws.xt[..c * t], t, p1)?;
            // y = snake(adain2(conv1(xt))), finished row by row, over `xt`
            // (the conv reads it only to quantize it).
            let r2 = b.conv1.forward_then_in_place(
                pool,
                &mut ws.xt[..c * t],
                t,
                Some(r1),
                &mut ws.qconv,
                |row, co| adain_rows(row, t, p2.rows(co, 1)),
            )?;
            // x += conv2(y), dequantized in the conv's epilogue.
            b.conv2
                .forward_add(pool, &ws.xt[..c * t], t, Some(r2), x, &mut ws.qconv)?;
        }
        Ok(())
    }
}
