//! Kokoro's decoder front (`/decoder/decoder/...` up to the generator,
//! GRAPH.md stage 5): `asr [512, F]`, `f0 [2F]`, `n [2F]` and the decoder
//! style `[128]` → features `[512, 2F]` for the generator.
//!
//! `F0_conv`/`N_conv` (ConvInteger 1→1, k3 s2) bring f0/n to F frames;
//! `encode` (AdainResBlk1d 514→1024) runs on `[asr ‖ F0 ‖ N]`; `asr_res`
//! (ConvInteger 512→64, k1) is concatenated back before each of
//! `decode.0..3` (1090 → 1024, 1024, 1024, 512 with ×2 upsampling):
//! inputs `[x ‖ asr_res ‖ F0 ‖ N]`.

use voxlane_runtime::Fork;

use super::blocks::{grow, AdainResBlk1d, BlockWorkspace};
use super::graph::{KokoroError, KokoroGraph};
use super::lane_qconv::{LaneQConv, LaneQConvWorkspace};
use crate::kernels::error::check_len;

const D: &str = "/decoder/decoder";

/// The bound decoder.
#[derive(Debug, Clone)]
pub struct Decoder {
    f0_conv: LaneQConv,
    n_conv: LaneQConv,
    asr_res: LaneQConv,
    encode: AdainResBlk1d,
    decode: Vec<AdainResBlk1d>,
}

/// Scratch for [`Decoder::forward`] (grown on demand, never shrunk).
#[derive(Debug, Default)]
pub struct DecoderWorkspace {
    f0: Vec<f32>,
    n: Vec<f32>,
    res: Vec<f32>,
    cat: Vec<f32>,
    x: Vec<f32>,
    qconv: LaneQConvWorkspace,
    block: BlockWorkspace,
}

impl DecoderWorkspace {
    /// An empty workspace.
    pub fn new() -> Self {
        Self::default()
    }
}

/// `dst[..] = [a ‖ b ‖ c ‖ …]` along channels (rows of `t`).
fn concat(dst: &mut [f32], parts: &[&[f32]]) {
    let mut o = 0;
    for p in parts {
        dst[o..o + p.len()].copy_from_slice(p);
        o += p.len();
    }
}

impl Decoder {
    /// Load every decoder weight from the graph (packed once).
    pub fn load(g: &KokoroGraph<'_>) -> Result<Self, KokoroError> {
        let f0_conv = LaneQConv::new(g.qconv(&format!("{D}/F0_conv/Conv_quant"))?)?;
        let n_conv = LaneQConv::new(g.qconv(&format!("{D}/N_conv/Conv_quant"))?)?;
        let asr_res = LaneQConv::new(g.qconv(&format!("{D}/asr_res/asr_res.0/Conv_quant"))?)?;
        let encode = AdainResBlk1d::load(g, &format!("{D}/encode"))?;
        let mut decode = Vec::new();
        let mut i = 0;
        while g.node(&format!("{D}/decode.{i}/conv1/Conv_quant")).is_ok() {
            decode.push(AdainResBlk1d::load(g, &format!("{D}/decode.{i}"))?);
            i += 1;
        }
        let dec = Self {
            f0_conv,
            n_conv,
            asr_res,
            encode,
            decode,
        };
        dec.check()?;
        Ok(dec)
    }

    fn check(&self) -> Result<(), KokoroError> {
        let asr = self.asr_res.params().c_in;
        let res = self.asr_res.params().c_out;
        let mut ok = self.encode.c_in() == asr + 2 && !self.decode.is_empty();
        let mut c = self.encode.c_out();
        let last = self.decode.len().saturating_sub(1);
        for (i, d) in self.decode.iter().enumerate() {
            ok &= d.c_in() == c + res + 2;
            // asr_res/F0/N stay at F frames: only the last block may upsample.
            ok &= i == last || d.out_len(1) == 1;
            c = d.c_out();
        }
        if ok {
            Ok(())
        } else {
            Err(KokoroError::BadNode {
                node: D.to_string(),
                detail: "decoder block widths disagree".into(),
            })
        }
    }

    /// Width of the `asr` input (512).
    pub fn asr_dim(&self) -> usize {
        self.asr_res.params().c_in
    }

    /// Output channels (512).
    pub fn c_out(&self) -> usize {
        self.decode.last().map_or(0, |d| d.c_out())
    }

    /// Output frames for F input frames (2F).
    pub fn out_len(&self, f: usize) -> usize {
        self.decode.iter().fold(f, |t, d| d.out_len(t))
    }

    /// `out: [512, 2F]` from `asr: [512, F]`, `f0, n: [2F]` and `style: [128]`.
    #[allow(clippy::too_many_arguments)]
    pub fn forward(
        &self,
        pool: &impl Fork,
        asr: &[f32],
        f: usize,
        f0: &[f32],
        n: &[f32],
        style: &[f32],
        out: &mut [f32],
        ws: &mut DecoderWorkspace,
    ) -> Result<(), KokoroError> {
        let a = self.asr_dim();
        check_len("decoder asr", a * f, asr.len())?;
        check_len("decoder f0", 2 * f, f0.len())?;
        check_len("decoder n", 2 * f, n.len())?;
        check_len("decoder output", self.c_out() * self.out_len(f), out.len())?;
        if f == 0 {
            return Ok(());
        }
        for (conv, src, dst) in [
            (&self.f0_conv, f0, &mut ws.f0),
            (&self.n_conv, n, &mut ws.n),
        ] {
            let tf = conv.out_len(2 * f)?;
            if tf != f {
                return Err(KokoroError::Input(format!(
                    "f0/n of {} frames give {tf} decoder frames, expected {f}",
                    2 * f
                )));
            }
            grow(dst, f);
            conv.forward(pool, src, 2 * f, None, &mut dst[..f], &mut ws.qconv)?;
        }
        let res_c = self.asr_res.params().c_out;
        grow(&mut ws.res, res_c * f);
        self.asr_res
            .forward(pool, asr, f, None, &mut ws.res[..res_c * f], &mut ws.qconv)?;
        // encode on [asr ‖ F0 ‖ N].
        let c_enc = self.encode.c_in();
        grow(&mut ws.cat, c_enc * f);
        concat(&mut ws.cat, &[asr, &ws.f0[..f], &ws.n[..f]]);
        let mut c = self.encode.c_out();
        grow(&mut ws.x, c * f);
        self.encode.forward(
            pool,
            &ws.cat[..c_enc * f],
            f,
            style,
            &mut ws.x[..c * f],
            &mut ws.block,
        )?;
        let mut t = f;
        let last = self.decode.len() - 1;
        for (i, d) in self.decode.iter().enumerate() {
            let ci = d.c_in();
            grow(&mut ws.cat, ci * t);
            concat(
                &mut ws.cat,
                &[
                    &ws.x[..c * t],
                    &ws.res[..res_c * f],
                    &ws.f0[..f],
                    &ws.n[..f],
                ],
            );
            let to = d.out_len(t);
            let co = d.c_out();
            if i == last {
                d.forward(pool, &ws.cat[..ci * t], t, style, out, &mut ws.block)?;
            } else {
                grow(&mut ws.x, co * to);
                d.forward(
                    pool,
                    &ws.cat[..ci * t],
                    t,
                    style,
                    &mut ws.x[..co * to],
                    &mut ws.block,
                )?;
            }
            c = co;
            t = to;
        }
        Ok(())
    }
}
