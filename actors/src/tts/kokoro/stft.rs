//! The generator's two spectral transforms, as the int8 export computes them.
//!
//! - [`SourceStft`]: the harmonic source → reflect pad 10 → ONNX `STFT`
//!   (frame 20, hop 5, the model's window, onesided: 11 bins) → `[22, T]` =
//!   magnitude `sqrt(re² + im²)` (rows 0..11) ‖ phase (rows 11..22). The phase
//!   is the graph's `atan(im/re)` with `Where` fix-ups, which differs from
//!   `atan2` on the negative real axis: `im == 0, re < 0` gives −π, not π.
//! - [`Istft`]: `conv_post` `[22, T]` → `mag = exp(x[0..11])`,
//!   `φ = sin(x[11..22])` → `re = mag·cos φ`, `im = mag·sin φ` →
//!   `ConvTranspose` with `inverse_basis [22, 1, 20]`, stride 5 → the first 20
//!   samples divided by `window_sum` where it exceeds `FLT_MIN` (the export
//!   traced a 20-sample `window_sum`, so only those are normalised) → ×4 →
//!   trim 10 samples at each end: `5·(T − 1)` samples.

use voxlane_runtime::Fork;

use crate::kernels::cpu::simd_level;
use crate::kernels::elementwise::fast_math::{exp_inplace, sin_inplace};
use crate::kernels::error::{check_len, KernelError};

/// FFT size (= window length).
pub const N_FFT: usize = 20;
/// Hop between frames.
pub const HOP: usize = 5;
/// Onesided frequency bins.
pub const BINS: usize = N_FFT / 2 + 1;
/// Channels of the spectral tensors: magnitude ‖ phase.
pub const CHANNELS: usize = 2 * BINS;
/// Reflect padding (and trim) at each end.
const PAD: usize = N_FFT / 2;
/// Frames per parallel chunk (fixed: determinism).
const FRAME_CHUNK: usize = 256;
/// Spectral elements per parallel chunk of the polar → cartesian step.
const PART_CHUNK: usize = 2048;

/// A raw pointer lanes write through at disjoint offsets.
#[derive(Clone, Copy)]
struct Shared(*mut f32);
// SAFETY: every lane writes a disjoint set of indices (see each use).
unsafe impl Send for Shared {}
// SAFETY: as above.
unsafe impl Sync for Shared {}
impl Shared {
    fn ptr(&self) -> *mut f32 {
        self.0
    }
}

/// The forward STFT of the harmonic source.
///
/// onnxruntime (≥ 1.16) computes a DFT whose length is not a power of two
/// with Bluestein's chirp-z algorithm on radix-2 FFTs of `M = 64` points, in
/// `std::complex<float>` arithmetic with glibc `cosf`/`sinf` twiddles. The
/// near-zero bins' phases (Nyquist and DC, where ±π hinges on the sign of
/// rounding noise) only match the reference if the rounding matches too, so
/// this replays that exact sequence of f32 operations (no FMA), vectorised
/// across [`LANES`] frames at a time.
#[derive(Debug, Clone)]
pub struct SourceStft {
    /// The analysis window.
    window: [f32; N_FFT],
    /// Chirp `exp(−iπn²/N)` for `n < N`, `(re, im)`.
    chirp: [(f32, f32); N_FFT],
    /// Forward twiddles in bit-reversed order (also used, as ORT does, for the inverse).
    twiddle: [(f32, f32); M],
    /// FFT of the conjugate chirp sequence `b`.
    b_fft: [(f32, f32); M],
}

/// Bluestein FFT size: the power of two ≥ 2N − 1.
const M: usize = 64;
/// log2(M).
const M_BITS: u32 = 6;
/// Frames transformed together (one SIMD-friendly structure of arrays).
pub const LANES: usize = 16;

/// `bits`-bit reversal of `i`.
fn bit_reverse(i: usize, bits: u32) -> usize {
    if bits == 0 {
        0
    } else {
        i.reverse_bits() >> (usize::BITS - bits)
    }
}

/// `std::complex<float>` product without FMA: `(ac − bd, ad + bc)`.
#[inline(always)]
fn cmul(a: (f32, f32), b: (f32, f32)) -> (f32, f32) {
    (a.0 * b.0 - a.1 * b.1, a.0 * b.1 + a.1 * b.0)
}

/// A batch of [`LANES`] complex signals of length [`M`], split re/im.
struct Batch {
    re: [[f32; LANES]; M],
    im: [[f32; LANES]; M],
}

impl Batch {
    fn zero() -> Self {
        Self {
            re: [[0.0; LANES]; M],
            im: [[0.0; LANES]; M],
        }
    }
}

/// ORT's `fft_radix2` on every lane of `x` (in place): bit-reversed load,
/// then per stage `even' = even + V[bitrev(k)]·odd`, `odd' = even + V[bitrev(mid+k)]·odd`;
/// `/ M` at the end when `inverse` (the twiddles stay the forward ones).
fn fft_radix2(tw: &[(f32, f32); M], x: &mut Batch, inverse: bool) {
    let mut y = Batch::zero();
    for i in 0..M {
        let b = bit_reverse(i, M_BITS);
        y.re[i] = x.re[b];
        y.im[i] = x.im[b];
    }
    let mut bits = 0;
    let mut size = 2;
    while size <= M {
        let mid = size >> 1;
        bits += 1;
        for k in 0..mid {
            let v1 = tw[bit_reverse(k, bits)];
            let v2 = tw[bit_reverse(mid + k, bits)];
            let mut j = 0;
            while j < M {
                let (e, o) = (k + j, k + j + mid);
                for l in 0..LANES {
                    let (er, ei, or, oi) = (y.re[e][l], y.im[e][l], y.re[o][l], y.im[o][l]);
                    let p1 = cmul(v1, (or, oi));
                    let p2 = cmul(v2, (or, oi));
                    y.re[e][l] = er + p1.0;
                    y.im[e][l] = ei + p1.1;
                    y.re[o][l] = er + p2.0;
                    y.im[o][l] = ei + p2.1;
                }
                j += size;
            }
        }
        size <<= 1;
    }
    if inverse {
        let n = M as f32;
        for i in 0..M {
            for l in 0..LANES {
                y.re[i][l] /= n;
                y.im[i][l] /= n;
            }
        }
    }
    *x = y;
}

impl SourceStft {
    /// Bind the analysis window `[20]` (the `STFT` node's input 2).
    pub fn new(window: &[f32]) -> Result<Self, KernelError> {
        check_len("stft window", N_FFT, window.len())?;
        let mut w = [0.0; N_FFT];
        w.copy_from_slice(window);
        let pi = std::f32::consts::PI;
        // f32 `cos`/`sin` are glibc's `cosf`/`sinf`, as in onnxruntime.
        // `−1 · τ` and `−1 · π` are exact negations.
        let av = -(2.0 * pi) / M as f32;
        let mut twiddle = [(0.0, 0.0); M];
        for i in 0..M {
            let a = i as f32 * av;
            twiddle[bit_reverse(i, M_BITS)] = (a.cos(), a.sin());
        }
        let mut chirp = [(0.0, 0.0); N_FFT];
        for (n, c) in chirp.iter_mut().enumerate() {
            let e = -pi * n as f32 * n as f32 / N_FFT as f32;
            *c = (e.cos(), e.sin());
        }
        // b = conj(chirp) for n < N, mirrored into the tail; only lane 0 used.
        let mut b = Batch::zero();
        for (n, c) in chirp.iter().enumerate() {
            b.re[n][0] = c.0;
            b.im[n][0] = -c.1;
        }
        for n in M - N_FFT + 1..M {
            b.re[n][0] = b.re[M - n][0];
            b.im[n][0] = b.im[M - n][0];
        }
        fft_radix2(&twiddle, &mut b, false);
        let mut b_fft = [(0.0, 0.0); M];
        for (i, v) in b_fft.iter_mut().enumerate() {
            *v = (b.re[i][0], b.im[i][0]);
        }
        Ok(Self {
            window: w,
            chirp,
            twiddle,
            b_fft,
        })
    }

    /// Frames of a `len`-sample signal.
    pub fn frames(len: usize) -> usize {
        if len == 0 {
            0
        } else {
            (len + 2 * PAD - N_FFT) / HOP + 1
        }
    }

    /// Onesided spectra `(re, im)` of up to [`LANES`] frames starting at `f0`.
    fn spectra(&self, x: &[f32], f0: usize, frames: usize) -> Batch {
        let len = x.len();
        let mut a = Batch::zero();
        for l in 0..frames {
            for n in 0..N_FFT {
                let i = ((f0 + l) * HOP + n) as isize - PAD as isize;
                // a_n = x; a_n *= window[n]; a_n *= chirp[n].
                let xw = (x[reflect(i, len)] * self.window[n], 0.0 * self.window[n]);
                let v = cmul(xw, self.chirp[n]);
                a.re[n][l] = v.0;
                a.im[n][l] = v.1;
            }
        }
        fft_radix2(&self.twiddle, &mut a, false);
        for i in 0..M {
            let bf = self.b_fft[i];
            for l in 0..LANES {
                let v = cmul((a.re[i][l], a.im[i][l]), bf);
                a.re[i][l] = v.0;
                a.im[i][l] = v.1;
            }
        }
        fft_radix2(&self.twiddle, &mut a, true);
        // The inverse ran on forward twiddles, so its output is reversed.
        let mut out = Batch::zero();
        for k in 0..BINS {
            let src = if k == 0 { 0 } else { M - k };
            for l in 0..LANES {
                let v = cmul((a.re[src][l], a.im[src][l]), self.chirp[k]);
                out.re[k][l] = v.0;
                out.im[k][l] = v.1;
            }
        }
        out
    }

    /// `out: [22, frames(len)]` magnitude ‖ phase of `x: [len]` (`len > 10`).
    pub fn forward(&self, pool: &impl Fork, x: &[f32], out: &mut [f32]) -> Result<(), KernelError> {
        let len = x.len();
        if len <= PAD {
            return Err(KernelError::Param {
                what: "stft input",
                detail: format!(
                    "reflect padding of {PAD} needs more than {PAD} samples, got {len}"
                ),
            });
        }
        let t = Self::frames(len);
        check_len("stft output", CHANNELS * t, out.len())?;
        let dst = Shared(out.as_mut_ptr());
        pool.for_each_chunk(t, FRAME_CHUNK, |frames| {
            let mut f = frames.start;
            while f < frames.end {
                let n = LANES.min(frames.end - f);
                let s = self.spectra(x, f, n);
                for k in 0..BINS {
                    for l in 0..n {
                        let (re, im) = (s.re[k][l], s.im[k][l]);
                        let mag = (re * re + im * im).sqrt();
                        // SAFETY: frame `f + l` (a column) belongs to this chunk only.
                        unsafe {
                            *dst.ptr().add(k * t + f + l) = mag;
                            *dst.ptr().add((BINS + k) * t + f + l) = graph_phase(re, im);
                        }
                    }
                }
                f += n;
            }
        })?;
        Ok(())
    }
}

/// Reflect index `i` of the padded signal back into `0..len` (PyTorch `reflect`).
fn reflect(i: isize, len: usize) -> usize {
    let l = len as isize;
    let mut j = i;
    if j < 0 {
        j = -j;
    }
    if j >= l {
        j = 2 * (l - 1) - j;
    }
    j.clamp(0, l - 1) as usize
}

/// The graph's phase: `atan(im/re)`, shifted by ±π where `re < 0`.
fn graph_phase(re: f32, im: f32) -> f32 {
    let a = (im / re).atan();
    let pi = std::f32::consts::PI;
    if re < 0.0 {
        if im > 0.0 {
            a + pi
        } else {
            a - pi
        }
    } else {
        a
    }
}

/// The inverse STFT that turns `conv_post` into audio.
#[derive(Debug, Clone)]
pub struct Istft {
    /// `inverse_basis` as `[20][22]` (tap-major, so one tap is a 22-dot).
    basis: Vec<f32>,
    /// `window_sum [20]`.
    window_sum: Vec<f32>,
}

/// Scratch for [`Istft::forward`]: two `[22, T]` buffers.
#[derive(Debug, Default, Clone)]
pub struct IstftWorkspace {
    /// Magnitude ‖ phase.
    spec: Vec<f32>,
    /// Real ‖ imaginary parts.
    reim: Vec<f32>,
}

impl Istft {
    /// Bind `inverse_basis [22, 1, 20]` and `window_sum [20]`.
    pub fn new(inverse_basis: &[f32], window_sum: &[f32]) -> Result<Self, KernelError> {
        check_len("istft inverse_basis", CHANNELS * N_FFT, inverse_basis.len())?;
        check_len("istft window_sum", N_FFT, window_sum.len())?;
        let mut basis = vec![0.0; N_FFT * CHANNELS];
        for c in 0..CHANNELS {
            for j in 0..N_FFT {
                basis[j * CHANNELS + c] = inverse_basis[c * N_FFT + j];
            }
        }
        Ok(Self {
            basis,
            window_sum: window_sum.to_vec(),
        })
    }

    /// Audio samples from `t` spectral frames.
    pub fn out_len(t: usize) -> usize {
        HOP * t.saturating_sub(1)
    }

    /// `audio: [5·(t − 1)]` from `x: [22, t]` (`conv_post`).
    pub fn forward(
        &self,
        pool: &impl Fork,
        x: &[f32],
        t: usize,
        audio: &mut [f32],
        ws: &mut IstftWorkspace,
    ) -> Result<(), KernelError> {
        check_len("istft input", CHANNELS * t, x.len())?;
        let n_out = Self::out_len(t);
        check_len("istft output", n_out, audio.len())?;
        if n_out == 0 {
            return Ok(());
        }
        if ws.spec.len() < CHANNELS * t {
            ws.spec.resize(CHANNELS * t, 0.0);
        }
        if ws.reim.len() < CHANNELS * t {
            ws.reim.resize(CHANNELS * t, 0.0);
        }
        let level = simd_level();
        // spec rows 0..11: exp(x) = magnitude, rows 11..22: sin(x) = phase.
        let spec = &mut ws.spec[..CHANNELS * t];
        spec.copy_from_slice(x);
        let (mag, ph) = spec.split_at_mut(BINS * t);
        pool.join(|| exp_inplace(level, mag), || sin_inplace(level, ph))?;
        let (mag, ph) = (&*mag, &*ph);
        let reim = Shared(ws.reim.as_mut_ptr());
        let half_pi = std::f32::consts::FRAC_PI_2;
        pool.for_each_chunk(BINS * t, PART_CHUNK, |range| {
            let (i0, k) = (range.start, range.len());
            let mut cosv = [0.0f32; PART_CHUNK];
            let mut sinv = [0.0f32; PART_CHUNK];
            for i in 0..k {
                // |φ| ≤ 1, so cos φ = sin(π/2 − φ) loses nothing measurable.
                cosv[i] = half_pi - ph[i0 + i];
                sinv[i] = ph[i0 + i];
            }
            sin_inplace(level, &mut cosv[..k]);
            sin_inplace(level, &mut sinv[..k]);
            for i in 0..k {
                // SAFETY: indices i0..i0+k (and their imaginary twins) belong to this chunk only.
                unsafe {
                    *reim.ptr().add(i0 + i) = mag[i0 + i] * cosv[i];
                    *reim.ptr().add(BINS * t + i0 + i) = mag[i0 + i] * sinv[i];
                }
            }
        })?;
        let spec = &ws.reim[..CHANNELS * t];
        let dst = Shared(audio.as_mut_ptr());
        // Output sample i (before the trim) = Σ over frames f with
        // 0 ≤ i − 5f < 20 of the 22-dot of frame f with basis tap i − 5f.
        pool.for_each_chunk(n_out, FRAME_CHUNK * HOP, |range| {
            for o in range {
                let i = o + PAD;
                let f_hi = (i / HOP).min(t - 1);
                let f_lo = (i + 1).saturating_sub(N_FFT).div_ceil(HOP);
                let mut y = 0.0f32;
                for f in f_lo..=f_hi {
                    let j = i - f * HOP;
                    let b = &self.basis[j * CHANNELS..(j + 1) * CHANNELS];
                    let mut d = 0.0f32;
                    for (c, &w) in b.iter().enumerate() {
                        d += spec[c * t + f] * w;
                    }
                    y += d;
                }
                if i < N_FFT && self.window_sum[i] > f32::MIN_POSITIVE {
                    y /= self.window_sum[i];
                }
                // SAFETY: sample `o` belongs to this chunk only.
                unsafe { *dst.ptr().add(o) = y * 4.0 };
            }
        })?;
        Ok(())
    }
}
