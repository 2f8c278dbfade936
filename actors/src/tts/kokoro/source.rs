//! Kokoro's harmonic source (`m_source`: SineGen + `l_linear` + tanh) exactly
//! as the int8 ONNX export computes it: deterministic, no noise, no random
//! initial phase.
//!
//! Op sequence (GRAPH.md, stage 6), for `f0: [N]` (N = 2F) and `L = 300·N`:
//! 1. `f0_upsamp`: nearest ×300 → `f0u[j] = f0[j / 300]`;
//! 2. per harmonic `h ∈ 1..=9`: `v = f0u·h / 24000`, `frac = v − floor(v)`;
//! 3. linear `Resize` ×1/300 (half_pixel) → `[9, N]`;
//! 4. `CumSum` over frames, then `×2`, `×π`, `×300` (three f32 products);
//! 5. linear `Resize` ×300 (half_pixel) → `[9, L]`;
//! 6. `sin(·)·0.1·[f0u > 10]`; 7. `tanh(Σ_h w_h·s_h + b)`.
//!
//! The resize coordinates follow onnxruntime's f32 arithmetic
//! (`(x + 0.5) / scale − 0.5`, clamped, `dx` from the floor, the 2-D bilinear
//! weights of the last harmonic row), so the phase
//! tracks the reference bit for bit, and the sine is onnxruntime's own
//! ([`super::ort_sin`], exact also for the ~10⁶ rad phases of long
//! utterances).

use voxlane_runtime::Fork;

use super::ort_sin;
use crate::kernels::cpu::simd_level;
use crate::kernels::elementwise::fast_math::tanh_inplace;
use crate::kernels::error::{check_len, KernelError};

/// Audio samples per f0 frame (the generator's total upsampling, 10·6·5).
pub const UPSAMPLE: usize = 300;
/// Harmonics of the sine source (fundamental + 8 overtones).
pub const HARMONICS: usize = 9;
/// Output sample rate.
pub const SAMPLE_RATE: f32 = 24000.0;
/// f0 above this (Hz) counts as voiced.
const VOICED_THRESHOLD: f32 = 10.0;
/// Sine amplitude.
const SINE_AMP: f32 = 0.1;
/// The export's downsampling scale, `1/300` as the f32 the graph stores.
const DOWN_SCALE: f32 = 0.003_333_333_4;
/// Samples per parallel chunk (fixed: determinism; stack scratch of 9×chunk).
const CHUNK: usize = 512;

/// Per-harmonic cumulative phase sums (in cycles, before `×2π×300`).
pub type PhaseState = [f32; HARMONICS];

/// The bound source module: `l_linear` (9 → 1) weights and bias.
#[derive(Debug, Clone)]
pub struct HarmonicSource {
    weight: [f32; HARMONICS],
    bias: f32,
}

/// Linear-resize taps of output position `i`: `(x1, x2, dx1, dx2)`, value
/// `v[x1]·dx2 + v[x2]·dx1` (onnxruntime's half_pixel bilinear, one axis).
fn linear_tap(i: usize, scale: f32, first: usize, end: usize) -> (usize, usize, f32, f32) {
    // Output position `i` and the input range `first..end` are absolute (a
    // window computes its taps exactly as the whole utterance would); the
    // returned indices are relative to `first`.
    let last = end.saturating_sub(1).max(first);
    let x = ((i as f32 + 0.5) / scale - 0.5).clamp(first as f32, last as f32);
    let x1 = (x as usize).clamp(first, last);
    let x2 = (x1 + 1).min(last);
    if x1 == x2 {
        return (x1 - first, x2 - first, 0.5, 0.5);
    }
    (x1 - first, x2 - first, x - x1 as f32, x2 as f32 - x)
}

/// One linearly resized value of harmonic row `h`. onnxruntime resizes the
/// `[1, 9, L]` tensor as a 2-D image whose height (the harmonics) has scale 1:
/// rows below the last get vertical weights (1, 0), the last row — clamped —
/// gets (½, ½), so its sum has four terms whose partial sums round differently.
#[inline]
fn interp(h: usize, a: f32, b: f32, dx1: f32, dx2: f32) -> f32 {
    if h + 1 < HARMONICS {
        a * dx2 + b * dx1
    } else {
        let (w1, w2) = (dx2 * 0.5, dx1 * 0.5);
        a * w1 + b * w2 + a * w1 + b * w2
    }
}

/// `v − floor(v)` of `f0·h / 24000` (the per-sample phase increment mod 1).
#[inline]
fn increment(f0: f32, h: usize) -> f32 {
    let v = f0 * (h as f32) / SAMPLE_RATE;
    v - v.floor()
}

impl HarmonicSource {
    /// Bind `l_linear`: weight `[9]` (the `[9, 1]` MatMul constant) and bias.
    pub fn new(weight: &[f32], bias: f32) -> Result<Self, KernelError> {
        check_len("source l_linear weight", HARMONICS, weight.len())?;
        let mut w = [0.0; HARMONICS];
        w.copy_from_slice(weight);
        Ok(Self { weight: w, bias })
    }

    /// Frame phases `[9, N]` after the cumulative sum and `×2π×300` (step 4),
    /// the sum starting from `start` (see [`HarmonicSource::phase_state`]).
    pub fn frame_phases(f0: &[f32], start: &PhaseState, frame0: usize) -> Vec<f32> {
        let n = f0.len();
        let (s0, s1) = (frame0 * UPSAMPLE, (frame0 + n) * UPSAMPLE);
        let pi = std::f32::consts::PI;
        let mut ph = vec![0.0f32; HARMONICS * n];
        for h in 0..HARMONICS {
            let mut acc = start[h];
            for i in 0..n {
                let (x1, x2, dx1, dx2) = linear_tap(frame0 + i, DOWN_SCALE, s0, s1);
                let a = increment(f0[x1 / UPSAMPLE], h + 1);
                let b = increment(f0[x2 / UPSAMPLE], h + 1);
                acc += interp(h, a, b, dx1, dx2);
                ph[h * n + i] = acc * 2.0 * pi * UPSAMPLE as f32;
            }
        }
        ph
    }

    /// The cumulative phase sums after the frames `f0` (the state a window
    /// starting right after them continues from). The downsampling taps of
    /// frame `i` lie inside its own 300 samples, so the sums do not depend on
    /// where windows are cut: a window's interior reproduces the whole-utterance
    /// source bit for bit (its first and last 150 samples interpolate against
    /// clamped edges and differ).
    pub fn phase_state(f0: &[f32]) -> PhaseState {
        let mut acc = [0.0f32; HARMONICS];
        let len = f0.len() * UPSAMPLE;
        for (h, a) in acc.iter_mut().enumerate() {
            for i in 0..f0.len() {
                let (x1, x2, dx1, dx2) = linear_tap(i, DOWN_SCALE, 0, len);
                let (p, q) = (
                    increment(f0[x1 / UPSAMPLE], h + 1),
                    increment(f0[x2 / UPSAMPLE], h + 1),
                );
                *a += interp(h, p, q, dx1, dx2);
            }
        }
        acc
    }

    /// `out: [300·N]` source excitation from `f0: [N]` (Hz, at 2× the decoder frame rate).
    pub fn forward(
        &self,
        pool: &impl Fork,
        f0: &[f32],
        out: &mut [f32],
    ) -> Result<(), KernelError> {
        self.forward_from(pool, f0, &[0.0; HARMONICS], 0, out)
    }

    /// As [`HarmonicSource::forward`] for a window of the utterance starting
    /// at frame `frame0`, whose cumulative phases start at `start` (the
    /// [`HarmonicSource::phase_state`] of the frames before it).
    pub fn forward_from(
        &self,
        pool: &impl Fork,
        f0: &[f32],
        start: &PhaseState,
        frame0: usize,
        out: &mut [f32],
    ) -> Result<(), KernelError> {
        let n = f0.len();
        check_len("source output", n * UPSAMPLE, out.len())?;
        if n == 0 {
            return Ok(());
        }
        let phases = Self::frame_phases(f0, start, frame0);
        let level = simd_level();
        pool.for_each_chunk_mut(out, CHUNK, |ci, dst| {
            let j0 = ci * CHUNK;
            let m = dst.len();
            let mut taps = [(0usize, 0usize, 0.0f32, 0.0f32); CHUNK];
            for (k, tap) in taps[..m].iter_mut().enumerate() {
                *tap = linear_tap(
                    frame0 * UPSAMPLE + j0 + k,
                    UPSAMPLE as f32,
                    frame0,
                    frame0 + n,
                );
            }
            let mut s = [0.0f32; HARMONICS * CHUNK];
            for h in 0..HARMONICS {
                let row = &phases[h * n..(h + 1) * n];
                let sh = &mut s[h * CHUNK..h * CHUNK + m];
                for (v, &(x1, x2, dx1, dx2)) in sh.iter_mut().zip(&taps[..m]) {
                    *v = interp(h, row[x1], row[x2], dx1, dx2);
                }
                // onnxruntime's own Sin on the unreduced phase, bit for bit.
                ort_sin::sin_inplace(sh);
            }
            for (k, d) in dst.iter_mut().enumerate() {
                let voiced = if f0[(j0 + k) / UPSAMPLE] > VOICED_THRESHOLD {
                    1.0
                } else {
                    0.0
                };
                let mut acc = 0.0f32;
                for h in 0..HARMONICS {
                    acc += s[h * CHUNK + k] * SINE_AMP * voiced * self.weight[h];
                }
                *d = self.bias + acc;
            }
            tanh_inplace(level, dst);
        })?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use voxlane_runtime::LanePool;

    #[test]
    fn windows_continue_the_whole_utterance_phase() {
        let src = HarmonicSource::new(&[0.3, -0.2, 0.1, 0.05, -0.04, 0.03, 0.2, -0.3, 0.25], -0.03)
            .expect("weights");
        let pool = LanePool::new(1).expect("pool");
        // A gliding, partly unvoiced f0 over 40 frames.
        let f0: Vec<f32> = (0..40)
            .map(|i| {
                if i % 13 == 5 {
                    0.0
                } else {
                    120.0 + 7.3 * i as f32
                }
            })
            .collect();
        let mut full = vec![0.0f32; f0.len() * UPSAMPLE];
        src.forward(&pool, &f0, &mut full).expect("full");
        let (a, b) = (11, 29);
        let start = HarmonicSource::phase_state(&f0[..a]);
        let mut win = vec![0.0f32; (b - a) * UPSAMPLE];
        src.forward_from(&pool, &f0[a..b], &start, a, &mut win)
            .expect("window");
        let edge = UPSAMPLE / 2;
        let inner = &win[edge..win.len() - edge];
        let whole = &full[a * UPSAMPLE + edge..b * UPSAMPLE - edge];
        assert!(inner
            .iter()
            .zip(whole)
            .all(|(x, y)| x.to_bits() == y.to_bits()));
    }
}
