//! Kokoro's iSTFTNet generator (`/decoder/decoder/generator/...`, GRAPH.md
//! stage 6): decoder features `[512, T]` (T = 2F) + f0 `[T]` + style → the
//! `conv_post` spectrum `[22, 60·T + 1]` and audio `[300·T]`.
//!
//! ```text
//! f0 → source → STFT ─┬─ noise_convs.0 (k12 s6) → noise_res.0 ─┐
//!                     └─ noise_convs.1 (k1)     → noise_res.1 ─┼──────────┐
//! x → LReLU .1 → ups.0 (×10) → + ──────────────────────────────┘          │
//!   → mean(resblocks.0..2) → LReLU .1 → ups.1 (×6) → reflect pad (1,0) → + ┘
//!   → mean(resblocks.3..5) → LReLU .01 → conv_post → iSTFT → audio
//! ```
//!
//! Float parts (`ups.*`, `conv_post`) run on the f32 conv kernels, every
//! `ConvInteger` on [`LaneQConv`]; the resblocks dominate the cost.

use voxlane_runtime::Fork;

use super::blocks::{
    grow, par_add, par_leaky_relu, AdaInResBlock1, ResBlock1Workspace, POINT_CHUNK,
};
use super::graph::{FloatConv, KokoroError, KokoroGraph};
use super::lane_qconv::LaneQConv;
use super::pointwise;
use super::source::{HarmonicSource, PhaseState, UPSAMPLE};
use super::stft::{Istft, IstftWorkspace, SourceStft, CHANNELS};
use crate::kernels::conv1d::{Conv1d, Conv1dParams, Conv1dWorkspace};
use crate::kernels::conv_transpose1d::{
    ConvTranspose1d, ConvTranspose1dParams, ConvTranspose1dWorkspace,
};
use crate::kernels::error::check_len;

const G: &str = "/decoder/decoder/generator";
const P: &str = "decoder.decoder.generator";
/// Resblocks averaged after each upsampling stage.
const KERNELS: usize = 3;

/// The bound generator.
#[derive(Debug, Clone)]
pub struct Generator {
    source: HarmonicSource,
    stft: SourceStft,
    noise_convs: [LaneQConv; 2],
    noise_res: [AdaInResBlock1; 2],
    ups: [ConvTranspose1d; 2],
    /// Output channels of `ups.0` / `ups.1`.
    ups_ch: [usize; 2],
    resblocks: Vec<AdaInResBlock1>,
    conv_post: Conv1d,
    istft: Istft,
}

/// Scratch for [`Generator::forward`] (grown on demand, never shrunk).
#[derive(Debug, Default)]
///
/// At the last stage's rate only `x`, `acc`, `tmp` and the resblock's own
/// buffers are live: the upsampler writes into `tmp` and each noise branch
/// into `acc` just before they are needed (both free at that point).
pub struct GeneratorWorkspace {
    har: Vec<f32>,
    spec: Vec<f32>,
    x: Vec<f32>,
    acc: Vec<f32>,
    tmp: Vec<f32>,
    rb: ResBlock1Workspace,
    ct: ConvTranspose1dWorkspace,
    conv: Conv1dWorkspace,
    istft: IstftWorkspace,
}

impl GeneratorWorkspace {
    /// An empty workspace.
    pub fn new() -> Self {
        Self::default()
    }
}

/// Where a window sits in its utterance, for the harmonic source.
#[derive(Debug, Default, Clone, Copy)]
pub struct SourceWindow {
    /// First f0 frame (2× the decoder rate) of the window.
    pub frame0: usize,
    /// [`HarmonicSource::phase_state`] of the f0 frames before it.
    pub phase: PhaseState,
}

impl SourceWindow {
    /// The window starting at f0 frame `frame0` of the utterance whose f0 is `f0_all`.
    pub fn at(f0_all: &[f32], frame0: usize) -> Self {
        let frame0 = frame0.min(f0_all.len());
        Self {
            frame0,
            phase: HarmonicSource::phase_state(&f0_all[..frame0]),
        }
    }
}

/// Stage timings of one [`Generator::forward`] call, in seconds.
#[derive(Debug, Default, Clone, Copy)]
pub struct GeneratorTimes {
    /// Harmonic source + STFT.
    pub source: f64,
    /// noise_convs + noise_res.
    pub noise: f64,
    /// ups.0 + resblocks.0..2.
    pub stage0: f64,
    /// ups.1 + resblocks.3..5.
    pub stage1: f64,
    /// conv_post + iSTFT.
    pub post: f64,
}

/// Transposed conv `name` (`fc`, its weight possibly not read yet), its
/// packing through the graph's bind cache.
fn conv_transpose(
    g: &KokoroGraph<'_>,
    name: &str,
    fc: &FloatConv,
) -> Result<ConvTranspose1d, KokoroError> {
    let [ci, cog, k] = fc.dims;
    let p = ConvTranspose1dParams::new(ci, cog * fc.groups, k)
        .stride(fc.stride)
        .padding(fc.pad, fc.output_padding)
        .groups(fc.groups);
    let bind = || -> Result<_, KokoroError> {
        let weight = match fc.weight.is_empty() {
            true => std::borrow::Cow::Owned(g.float_conv(name)?.weight),
            false => std::borrow::Cow::Borrowed(&fc.weight[..]),
        };
        Ok(ConvTranspose1d::new(p, &weight, fc.bias.as_deref())?)
    };
    match g.cache() {
        Some(c) => c.conv_transpose_or(name, p, fc.bias.as_deref(), bind),
        None => bind(),
    }
}

fn first_input_f32s(g: &KokoroGraph<'_>, node: &str, i: usize) -> Result<Vec<f32>, KokoroError> {
    // An initializer in the int8 export; possibly a `Constant` in a plain one.
    g.const_input_f32s(node, i)
}

impl Generator {
    /// Load every generator weight from the graph (packed once).
    pub fn load(g: &KokoroGraph<'_>) -> Result<Self, KokoroError> {
        let lw = first_input_f32s(g, &format!("{G}/m_source/l_linear/MatMul"), 1)?;
        let lb = first_input_f32s(g, &format!("{G}/m_source/l_linear/Add"), 0)?;
        let source = HarmonicSource::new(&lw, lb.first().copied().unwrap_or(0.0))?;
        let stft = SourceStft::new(&first_input_f32s(g, &format!("{G}/STFT"), 2)?)?;
        let noise_convs = [
            LaneQConv::new(g.qconv(&format!("{G}/noise_convs.0/Conv_quant"))?)?,
            LaneQConv::new(g.qconv(&format!("{G}/noise_convs.1/Conv_quant"))?)?,
        ];
        let noise_res = [
            AdaInResBlock1::load(g, &format!("{G}/noise_res.0"), &format!("{P}.noise_res.0"))?,
            AdaInResBlock1::load(g, &format!("{G}/noise_res.1"), &format!("{P}.noise_res.1"))?,
        ];
        let ups_names = [0, 1].map(|i| format!("{G}/ups.{i}/ConvTranspose"));
        let u0 = g.float_conv_meta(&ups_names[0])?;
        let u1 = g.float_conv_meta(&ups_names[1])?;
        let ups_ch = [u0.dims[1] * u0.groups, u1.dims[1] * u1.groups];
        let ups = [
            conv_transpose(g, &ups_names[0], &u0)?,
            conv_transpose(g, &ups_names[1], &u1)?,
        ];
        let resblocks = (0..2 * KERNELS)
            .map(|i| {
                AdaInResBlock1::load(
                    g,
                    &format!("{G}/resblocks.{i}"),
                    &format!("{P}.resblocks.{i}"),
                )
            })
            .collect::<Result<Vec<_>, _>>()?;
        let cp = g.float_conv(&format!("{G}/conv_post/Conv"))?;
        let [co, ci, k] = cp.dims;
        let conv_post = Conv1d::new(
            Conv1dParams::new(ci * cp.groups, co, k)
                .padding(cp.pad, cp.pad)
                .dilation(cp.dilation)
                .groups(cp.groups),
            &cp.weight,
            cp.bias.as_deref(),
        )?;
        let basis = first_input_f32s(g, &format!("{G}/istft/stft/ConvTranspose"), 1)?;
        let wsum = first_input_f32s(g, &format!("{G}/istft/stft/Slice_1"), 0)?;
        let istft = Istft::new(&basis, &wsum)?;
        let gen = Self {
            source,
            stft,
            noise_convs,
            noise_res,
            ups,
            ups_ch,
            resblocks,
            conv_post,
            istft,
        };
        gen.check()?;
        Ok(gen)
    }

    fn check(&self) -> Result<(), KokoroError> {
        let ok = self.noise_convs[0].params().c_out == self.ups_ch[0]
            && self.noise_convs[1].params().c_out == self.ups_ch[1]
            && self.noise_res[0].channels() == self.ups_ch[0]
            && self.noise_res[1].channels() == self.ups_ch[1]
            && self.resblocks[..KERNELS]
                .iter()
                .all(|r| r.channels() == self.ups_ch[0])
            && self.resblocks[KERNELS..]
                .iter()
                .all(|r| r.channels() == self.ups_ch[1])
            && self.conv_post.params().c_in == self.ups_ch[1]
            && self.conv_post.params().c_out == CHANNELS;
        if ok {
            Ok(())
        } else {
            Err(KokoroError::BadNode {
                node: G.to_string(),
                detail: "generator stage widths disagree".into(),
            })
        }
    }

    /// Input channels (the decoder's output width).
    pub fn c_in(&self) -> usize {
        self.ups[0].params().c_in
    }

    /// `conv_post` frames for `t` input frames: `60·t + 1`.
    pub fn spec_len(&self, t: usize) -> usize {
        let (s0, s1) = (self.ups[0].params().stride, self.ups[1].params().stride);
        t * s0 * s1 + 1
    }

    /// Audio samples for `t` input frames: `300·t`.
    pub fn audio_len(t: usize) -> usize {
        t * UPSAMPLE
    }

    /// `conv_post: [22, 60t+1]` and `audio: [300t]` from `x: [512, t]`,
    /// `f0: [t]` and the decoder style `style: [128]`.
    #[allow(clippy::too_many_arguments)]
    pub fn forward(
        &self,
        pool: &impl Fork,
        x_in: &[f32],
        t: usize,
        f0: &[f32],
        style: &[f32],
        conv_post: &mut [f32],
        audio: &mut [f32],
        ws: &mut GeneratorWorkspace,
    ) -> Result<GeneratorTimes, KokoroError> {
        let whole = SourceWindow::default();
        self.forward_window(pool, x_in, t, f0, &whole, style, conv_post, audio, ws)
    }

    /// As [`Generator::forward`] for a window of an utterance: the harmonic
    /// source continues the whole utterance's phase (see [`SourceWindow`]);
    /// everything else sees only the window.
    #[allow(clippy::too_many_arguments)]
    pub fn forward_window(
        &self,
        pool: &impl Fork,
        x_in: &[f32],
        t: usize,
        f0: &[f32],
        window: &SourceWindow,
        style: &[f32],
        conv_post: &mut [f32],
        audio: &mut [f32],
        ws: &mut GeneratorWorkspace,
    ) -> Result<GeneratorTimes, KokoroError> {
        let mut times = GeneratorTimes::default();
        let mut clock = std::time::Instant::now();
        let mut lap = |slot: &mut f64| {
            let now = std::time::Instant::now();
            *slot = (now - clock).as_secs_f64();
            clock = now;
        };
        check_len("generator input", self.c_in() * t, x_in.len())?;
        check_len("generator f0", t, f0.len())?;
        let ts = self.spec_len(t);
        check_len("generator conv_post", CHANNELS * ts, conv_post.len())?;
        check_len("generator audio", Self::audio_len(t), audio.len())?;
        if t == 0 {
            return Ok(times);
        }
        // Harmonic source and its STFT: [22, ts].
        let n_har = Self::audio_len(t);
        grow(&mut ws.har, n_har);
        self.source
            .forward_from(pool, f0, &window.phase, window.frame0, &mut ws.har[..n_har])?;
        if SourceStft::frames(n_har) != ts {
            return Err(KokoroError::Input(format!(
                "source STFT has {} frames, the upsampler {ts}",
                SourceStft::frames(n_har)
            )));
        }
        grow(&mut ws.spec, CHANNELS * ts);
        self.stft
            .forward(pool, &ws.har[..n_har], &mut ws.spec[..CHANNELS * ts])?;
        lap(&mut times.source);
        // Two upsampling stages, each adding its noise branch.
        let mut c = self.c_in();
        let mut tx = t;
        grow(&mut ws.x, c * tx);
        ws.x[..c * tx].copy_from_slice(x_in);
        for stage in 0..self.ups.len() {
            par_leaky_relu(pool, &mut ws.x[..c * tx], 0.1)?;
            let up = &self.ups[stage];
            let tu = up.params().out_len(tx)?;
            let cu = self.ups_ch[stage];
            grow(&mut ws.tmp, cu * tu);
            // `acc` is dead until the noise branch: the upsampler's phase
            // outputs use it (one full-length tensor fewer at the peak).
            ws.ct.swap_phases(&mut ws.acc);
            let up_done = up.forward(
                pool,
                &ws.x[..c * tx],
                tx,
                &mut ws.tmp[..cu * tu],
                &mut ws.ct,
            );
            ws.ct.swap_phases(&mut ws.acc);
            up_done?;
            // Stage 1: reflection pad (1, 0) → tu + 1 frames.
            let tp = if stage == 1 { tu + 1 } else { tu };
            grow(&mut ws.x, cu * tp);
            if stage == 1 {
                let (src, dst) = (&ws.tmp, &mut ws.x[..cu * tp]);
                pool.for_each_chunk_mut(dst, tp, |ch, row| {
                    let s = &src[ch * tu..(ch + 1) * tu];
                    row[0] = s[1.min(tu - 1)];
                    row[1..].copy_from_slice(s);
                })?;
            } else {
                ws.x[..cu * tp].copy_from_slice(&ws.tmp[..cu * tu]);
            }
            // The noise branch (source spectrum → conv → resblock) into `acc`.
            let noise_start = std::time::Instant::now();
            let (nc, nr) = (&self.noise_convs[stage], &self.noise_res[stage]);
            let tn = nc.out_len(ts)?;
            if tn != tp {
                return Err(KokoroError::Input(format!(
                    "noise branch {stage} has {tn} frames, the upsampler {tp}"
                )));
            }
            grow(&mut ws.acc, cu * tn);
            let spec = &ws.spec[..CHANNELS * ts];
            nc.forward(
                pool,
                spec,
                ts,
                None,
                &mut ws.acc[..cu * tn],
                &mut ws.rb.qconv,
            )?;
            nr.forward(pool, &mut ws.acc[..cu * tn], tn, style, &mut ws.rb)?;
            let noise_secs = noise_start.elapsed().as_secs_f64();
            times.noise += noise_secs;
            par_add(pool, &mut ws.x[..cu * tp], &ws.acc[..cu * tp])?;
            // Mean of the three resblocks, ((r0 + r1) + r2) / 3 as the graph
            // adds: r0 and r1 run on copies, the last one on `x` itself.
            let n = cu * tp;
            grow(&mut ws.acc, n);
            grow(&mut ws.tmp, n);
            let blocks = &self.resblocks[stage * KERNELS..(stage + 1) * KERNELS];
            for (k, rb) in blocks.iter().enumerate() {
                if k + 1 == blocks.len() {
                    rb.forward(pool, &mut ws.x[..n], tp, style, &mut ws.rb)?;
                    break;
                }
                let dst = if k == 0 { &mut ws.acc } else { &mut ws.tmp };
                dst[..n].copy_from_slice(&ws.x[..n]);
                rb.forward(pool, &mut dst[..n], tp, style, &mut ws.rb)?;
                if k > 0 {
                    par_add(pool, &mut ws.acc[..n], &ws.tmp[..n])?;
                }
            }
            let (acc, x) = (&ws.acc[..n], &mut ws.x[..n]);
            pool.for_each_chunk_mut(x, POINT_CHUNK, |i, ch| {
                let o = i * POINT_CHUNK;
                let m = ch.len();
                // ch ← (acc + ch) / 3.
                pointwise::add_div(ch, &acc[o..o + m], KERNELS as f32);
            })?;
            c = cu;
            tx = tp;
            // Stage times exclude their noise branches.
            let slot = if stage == 0 {
                &mut times.stage0
            } else {
                &mut times.stage1
            };
            lap(slot);
            *slot = (*slot - noise_secs).max(0.0);
        }
        // Post: LeakyReLU 0.01 → conv_post → iSTFT.
        par_leaky_relu(pool, &mut ws.x[..c * tx], 0.01)?;
        // `tmp` is dead here: conv_post pads its input into it.
        ws.conv.swap_padded(&mut ws.tmp);
        let post_done = self
            .conv_post
            .forward(pool, &ws.x[..c * tx], tx, conv_post, &mut ws.conv);
        ws.conv.swap_padded(&mut ws.tmp);
        post_done?;
        self.istft
            .forward(pool, conv_post, ts, audio, &mut ws.istft)?;
        lap(&mut times.post);
        Ok(times)
    }
}
