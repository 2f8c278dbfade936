//! Early first audio: one utterance's generator run as overlapping windows,
//! the first short so its audio is ready early, each later one longer (it
//! is computed while the audio before it plays), crossfaded at the seams.
//!
//! Every AdaIN normalises over its window's time axis and every activation
//! is quantized with its window's range, so an early window approximates
//! the whole-utterance run; the last window is the whole run itself, so the
//! audio after its seam is exact, and the crossfade hides the seam. Every
//! window is a pure function of the utterance, so the output stays
//! bit-identical for every thread budget.

use std::ops::Range;

/// Audio samples per decoder frame (24 kHz / 40 Hz).
pub const SAMPLES_PER_FRAME: usize = 600;

/// Crossfade length at the seam, in samples (half a frame each side).
pub const CROSSFADE: usize = SAMPLES_PER_FRAME;

/// Most seams one utterance is cut at.
pub const MAX_SEAMS: usize = 8;

/// How early audio is cut: the first window's frames before its seam, how
/// fast later windows grow, and the context each window sees across a seam.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamShape {
    /// Decoder frames before the first seam (40 per second of audio).
    pub first: usize,
    /// Each seam sits this many times further in than the one before (a
    /// window computed while the audio before it plays); below 2, one seam.
    pub growth: usize,
    /// Frames of context across a seam, each side.
    pub context: usize,
}

impl StreamShape {
    /// First window 0.4 s, then the rest, 0.15 s of context (measured on the
    /// fixtures: 6 frames sound as 8 do, 4 lose ~1 dB over the first
    /// window; each frame less is ~4% less work before first audio, but a
    /// first window of 12 frames is 11–16 dB from the whole run over its
    /// audio, 10 frames ~35 dB: AdaIN over mostly leading silence blows up).
    /// One seam: a window that stops short of the utterance's end misses the
    /// trailing silence in its AdaIN statistics and drifts (measured:
    /// correlation with the whole run 0.5–0.6 for 1–3 s middle windows); the
    /// rest is the whole run (see [`WindowPlan::span`]).
    pub const EARLY: Self = Self {
        first: 16,
        growth: 0,
        context: 6,
    };

    /// The plan for an utterance of `frames`, or `None` when it is too short
    /// to cut (run it whole). Every window after a seam keeps at least
    /// `first` frames of its own.
    pub fn plan(&self, frames: usize) -> Option<WindowPlan> {
        let context = self.context.clamp(1, self.first.max(1));
        let mut plan = WindowPlan {
            frames,
            seams: [0; MAX_SEAMS],
            count: 0,
            context,
        };
        let mut s = self.first;
        while s > 0 && plan.count < MAX_SEAMS && s + self.first <= frames {
            plan.seams[plan.count] = s;
            plan.count += 1;
            if self.growth < 2 {
                break;
            }
            s *= self.growth;
        }
        (plan.count > 0).then_some(plan)
    }
}

/// Where a streamed utterance of `frames` decoder frames is cut: window `k`
/// gives the audio between seams `k - 1` and `k`, the seams crossfaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowPlan {
    /// Decoder frames in the utterance.
    pub frames: usize,
    seams: [usize; MAX_SEAMS],
    count: usize,
    /// Frames each window sees beyond its seams.
    pub context: usize,
}

impl WindowPlan {
    /// The seams, in decoder frames.
    pub fn seams(&self) -> &[usize] {
        &self.seams[..self.count]
    }

    /// Windows in the plan (one more than seams).
    pub fn windows(&self) -> usize {
        self.count + 1
    }

    /// Decoder frames window `k` owns, from seam to seam.
    fn owned(&self, k: usize) -> Range<usize> {
        let start = if k == 0 { 0 } else { self.seams[k - 1] };
        let end = if k >= self.count {
            self.frames
        } else {
            self.seams[k]
        };
        start..end
    }

    /// Decoder frames window `k` runs over (its own plus context). The last
    /// window runs over the whole utterance: its AdaIN statistics and
    /// quantization ranges are the whole run's, so everything after the
    /// last seam's crossfade is the whole run's audio, bit for bit (a window
    /// that starts mid-utterance drifts: correlation 0.977 with the whole
    /// run for the rest after a 0.4 s first window), for a few frames more.
    pub fn span(&self, k: usize) -> Range<usize> {
        if k >= self.count {
            return 0..self.frames;
        }
        let own = self.owned(k);
        own.start.saturating_sub(self.context)..(own.end + self.context).min(self.frames)
    }

    /// Utterance samples window `k` emits: from its leading seam's crossfade
    /// to the start of its trailing one.
    pub fn emitted(&self, k: usize) -> Range<usize> {
        let own = self.owned(k);
        let half = CROSSFADE / 2;
        let start = if k == 0 {
            0
        } else {
            own.start * SAMPLES_PER_FRAME - half
        };
        let end = if k >= self.count {
            self.frames * SAMPLES_PER_FRAME
        } else {
            own.end * SAMPLES_PER_FRAME - half
        };
        start..end
    }
}

/// Copy columns `range` of the row-major `[rows, cols]` matrix `src` into
/// `dst` (`[rows, range.len()]`), reusing its allocation.
pub fn columns(src: &[f32], cols: usize, range: Range<usize>, dst: &mut Vec<f32>) {
    dst.clear();
    if cols == 0 {
        return;
    }
    for row in src.chunks_exact(cols) {
        dst.extend_from_slice(&row[range.clone()]);
    }
}

/// Raised-cosine crossfade of `from` into `to` (equal lengths), written to `out`.
pub fn crossfade(from: &[f32], to: &[f32], out: &mut [f32]) {
    let n = out.len().min(from.len()).min(to.len());
    for (i, o) in out[..n].iter_mut().enumerate() {
        let x = (i as f32 + 0.5) / n as f32;
        let w = 0.5 - 0.5 * (std::f32::consts::PI * x).cos();
        *o = from[i] * (1.0 - w) + to[i] * w;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_utterances_run_whole() {
        assert_eq!(StreamShape::EARLY.plan(31), None);
        let p = StreamShape::EARLY.plan(32).expect("plan");
        assert_eq!(p.seams(), &[16]);
        assert_eq!((p.span(0), p.span(1)), (0..22, 0..32));
        assert_eq!(p.emitted(0), 0..16 * 600 - 300);
        assert_eq!(p.emitted(1), 16 * 600 - 300..32 * 600);
    }

    #[test]
    fn seams_grow_and_windows_tile_the_utterance() {
        let growing = StreamShape {
            growth: 3,
            ..StreamShape::EARLY
        };
        for frames in [32, 63, 64, 120, 400, 511 * 4] {
            let p = growing.plan(frames).expect("plan");
            let mut at = 0;
            for k in 0..p.windows() {
                let (span, emit) = (p.span(k), p.emitted(k));
                assert_eq!(
                    emit.start,
                    at,
                    "{frames}: window {k} starts where {} ended",
                    k.max(1) - 1
                );
                assert!(span.start * 600 <= emit.start.saturating_sub(300));
                assert!(emit.end + 300 <= span.end * 600 || k + 1 == p.windows());
                at = emit.end;
            }
            assert_eq!(at, frames * 600);
            let s = p.seams();
            assert!(s.windows(2).all(|w| w[1] == 3 * w[0]), "{s:?}");
            assert!(frames - s[s.len() - 1] >= 16);
        }
        assert_eq!(growing.plan(120).expect("plan").seams(), &[16, 48]);
        assert_eq!(StreamShape::EARLY.plan(2044).expect("plan").seams(), &[16]);
    }

    #[test]
    fn columns_cut_every_row() {
        let m: Vec<f32> = (0..12).map(|v| v as f32).collect(); // [3, 4]
        let mut out = Vec::new();
        columns(&m, 4, 1..3, &mut out);
        assert_eq!(out, vec![1.0, 2.0, 5.0, 6.0, 9.0, 10.0]);
    }

    #[test]
    fn crossfade_moves_from_one_to_the_other() {
        let (a, b) = (vec![1.0f32; 8], vec![3.0f32; 8]);
        let mut o = vec![0.0f32; 8];
        crossfade(&a, &b, &mut o);
        assert!(o[0] > 1.0 && o[0] < 1.1, "{o:?}");
        assert!(o[7] > 2.9 && o[7] < 3.0, "{o:?}");
        assert!(o.windows(2).all(|w| w[1] > w[0]));
        // Symmetric: the midpoint pair averages to the middle value.
        assert!(((o[3] + o[4]) / 2.0 - 2.0).abs() < 1e-6);
    }
}
