//! ITU-R BS.1770-4 integrated loudness and loudness normalisation, computed
//! exactly as `pyloudnorm` does (PersonaPlex normalises its voice prompts to
//! −24 LUFS with `pyln.Meter(rate).integrated_loudness` and
//! `pyln.normalize.loudness`), so a prompt gets the reference's gain.
//!
//! What "exactly" covers: the K-weighting biquads from the same RBJ formulas
//! and parameters (high shelf +4 dB, Q 1/√2, 1500 Hz; high pass Q 0.5,
//! 38 Hz), applied as `scipy.signal.lfilter` does (transposed direct form
//! II); 400 ms blocks at 75 % overlap with pyloudnorm's block count
//! (`round` half to even) and sample bounds; NumPy's pairwise summation for
//! block energies and gated means; gates at −70 LUFS and −10 LU. All in
//! f64 (pyloudnorm fed f64). Mono only: callers mix channels first.

/// The absolute gate, LUFS.
const ABSOLUTE_GATE: f64 = -70.0;
/// Gating block length, seconds.
const BLOCK_SECONDS: f64 = 0.4;
/// Block overlap.
const OVERLAP: f64 = 0.75;

/// Why loudness could not be measured or normalised.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LoudnessError {
    /// A sample rate of zero.
    #[error("loudness: sample rate must be positive")]
    ZeroRate,
    /// Shorter than one 400 ms gating block.
    #[error("loudness: {samples} samples at {rate} Hz are shorter than one 400 ms block ({needed} samples)")]
    TooShort {
        /// Samples given.
        samples: usize,
        /// Their rate.
        rate: u32,
        /// Samples one block needs.
        needed: usize,
    },
    /// A NaN or infinite sample.
    #[error("loudness: sample {index} is not finite")]
    NonFinite {
        /// Its index.
        index: usize,
    },
    /// Every block is below the −70 LUFS gate: the loudness is −∞ and no
    /// finite gain reaches the target (pyloudnorm would return inf/NaN audio).
    #[error("loudness: the audio is silent (every 400 ms block is below -70 LUFS)")]
    Silent,
}

/// A biquad as `pyloudnorm.IIRfilter` designs it: `b` and `a` divided by `a0`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Biquad {
    /// Numerator `b0, b1, b2`.
    pub b: [f64; 3],
    /// Denominator `1, a1, a2`.
    pub a: [f64; 3],
}

impl Biquad {
    /// The RBJ high shelf (`'high_shelf'`): `gain_db` above `fc` Hz.
    pub fn high_shelf(gain_db: f64, q: f64, fc: f64, rate: f64) -> Self {
        let a = 10f64.powf(gain_db / 40.0);
        let w0 = 2.0 * std::f64::consts::PI * (fc / rate);
        let alpha = w0.sin() / (2.0 * q);
        let (cos, sqrt_a) = (w0.cos(), a.sqrt());
        let b0 = a * ((a + 1.0) + (a - 1.0) * cos + 2.0 * sqrt_a * alpha);
        let b1 = -2.0 * a * ((a - 1.0) + (a + 1.0) * cos);
        let b2 = a * ((a + 1.0) + (a - 1.0) * cos - 2.0 * sqrt_a * alpha);
        let a0 = (a + 1.0) - (a - 1.0) * cos + 2.0 * sqrt_a * alpha;
        let a1 = 2.0 * ((a - 1.0) - (a + 1.0) * cos);
        let a2 = (a + 1.0) - (a - 1.0) * cos - 2.0 * sqrt_a * alpha;
        Self::normalized([b0, b1, b2], [a0, a1, a2])
    }

    /// The RBJ high pass (`'high_pass'`) at `fc` Hz.
    pub fn high_pass(q: f64, fc: f64, rate: f64) -> Self {
        let w0 = 2.0 * std::f64::consts::PI * (fc / rate);
        let alpha = w0.sin() / (2.0 * q);
        let cos = w0.cos();
        let b0 = (1.0 + cos) / 2.0;
        let b1 = -(1.0 + cos);
        let b2 = (1.0 + cos) / 2.0;
        let a0 = 1.0 + alpha;
        let a1 = -2.0 * cos;
        let a2 = 1.0 - alpha;
        Self::normalized([b0, b1, b2], [a0, a1, a2])
    }

    fn normalized(b: [f64; 3], a: [f64; 3]) -> Self {
        Self {
            b: b.map(|x| x / a[0]),
            a: a.map(|x| x / a[0]),
        }
    }

    /// Filters `x` in place from rest, as `scipy.signal.lfilter(b, a, x)`.
    pub fn apply(&self, x: &mut [f64]) {
        let [b0, b1, b2] = self.b;
        let [_, a1, a2] = self.a;
        let (mut z0, mut z1) = (0.0, 0.0);
        for v in x.iter_mut() {
            let xn = *v;
            let y = z0 + b0 * xn;
            z0 = z1 + b1 * xn - a1 * y;
            z1 = b2 * xn - a2 * y;
            *v = y;
        }
    }
}

/// NumPy's pairwise summation (`np.sum` of a contiguous f64 array).
pub fn pairwise_sum(a: &[f64]) -> f64 {
    const BLOCK: usize = 128;
    let n = a.len();
    if n < 8 {
        a.iter().fold(0.0, |s, &x| s + x)
    } else if n <= BLOCK {
        let mut r = [0.0f64; 8];
        r.copy_from_slice(&a[..8]);
        let whole = n - n % 8;
        for c in a[8..whole].chunks_exact(8) {
            for (r, &x) in r.iter_mut().zip(c) {
                *r += x;
            }
        }
        let mut s = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for &x in &a[whole..] {
            s += x;
        }
        s
    } else {
        let half = n / 2;
        let half = half - half % 8;
        pairwise_sum(&a[..half]) + pairwise_sum(&a[half..])
    }
}

/// A BS.1770-4 meter with pyloudnorm's default K-weighting.
#[derive(Debug, Clone, PartialEq)]
pub struct Meter {
    rate: u32,
    shelf: Biquad,
    high_pass: Biquad,
}

impl Meter {
    /// A meter for audio at `rate` Hz (`pyln.Meter(rate)`).
    pub fn new(rate: u32) -> Result<Self, LoudnessError> {
        if rate == 0 {
            return Err(LoudnessError::ZeroRate);
        }
        let r = f64::from(rate);
        Ok(Self {
            rate,
            shelf: Biquad::high_shelf(4.0, 1.0 / 2f64.sqrt(), 1500.0, r),
            high_pass: Biquad::high_pass(0.5, 38.0, r),
        })
    }

    /// The K-weighting stages, in the order they run.
    pub fn filters(&self) -> [Biquad; 2] {
        [self.shelf, self.high_pass]
    }

    /// Integrated loudness of mono `audio` in LUFS; `-inf` when every block
    /// is below the absolute gate (as pyloudnorm returns).
    pub fn integrated_loudness(&self, audio: &[f32]) -> Result<f64, LoudnessError> {
        let rate = f64::from(self.rate);
        let n = audio.len();
        // pyloudnorm's check: `data.shape[0] < block_size * rate`.
        if (n as f64) < BLOCK_SECONDS * rate {
            return Err(LoudnessError::TooShort {
                samples: n,
                rate: self.rate,
                needed: (BLOCK_SECONDS * rate).ceil() as usize,
            });
        }
        if let Some(index) = audio.iter().position(|x| !x.is_finite()) {
            return Err(LoudnessError::NonFinite { index });
        }
        let mut y: Vec<f64> = audio.iter().map(|&x| f64::from(x)).collect();
        self.shelf.apply(&mut y);
        self.high_pass.apply(&mut y);

        let step = 1.0 - OVERLAP;
        let seconds = n as f64 / rate;
        let blocks =
            ((seconds - BLOCK_SECONDS) / (BLOCK_SECONDS * step)).round_ties_even() as i64 + 1;
        let blocks = usize::try_from(blocks).unwrap_or(0);
        let scale = 1.0 / (BLOCK_SECONDS * rate);
        let mut squares = Vec::new();
        let energies: Vec<f64> = (0..blocks)
            .map(|j| {
                let j = j as f64;
                let lo = ((BLOCK_SECONDS * (j * step) * rate) as usize).min(n);
                let hi = ((BLOCK_SECONDS * (j * step + 1.0) * rate) as usize).clamp(lo, n);
                squares.clear();
                squares.extend(y[lo..hi].iter().map(|v| v * v));
                scale * pairwise_sum(&squares)
            })
            .collect();
        let block_lufs = |z: f64| -0.691 + 10.0 * z.log10();
        let gated_mean = |keep: &dyn Fn(f64) -> bool| {
            let kept: Vec<f64> = energies
                .iter()
                .copied()
                .filter(|&z| keep(block_lufs(z)))
                .collect();
            (!kept.is_empty()).then(|| pairwise_sum(&kept) / kept.len() as f64)
        };
        let Some(absolute) = gated_mean(&|l| l >= ABSOLUTE_GATE) else {
            return Ok(f64::NEG_INFINITY);
        };
        let relative = block_lufs(absolute) - 10.0;
        let z = gated_mean(&|l| l > relative && l > ABSOLUTE_GATE).unwrap_or(0.0);
        Ok(block_lufs(z))
    }
}

/// The gain `pyln.normalize.loudness` applies: `10^((target − loudness)/20)`.
pub fn loudness_gain(loudness: f64, target: f64) -> f64 {
    10f64.powf((target - loudness) / 20.0)
}

/// Audio brought to a target loudness, with what was measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Normalized {
    /// The scaled audio.
    pub audio: Vec<f32>,
    /// Its loudness before scaling, LUFS.
    pub loudness: f64,
    /// The gain applied.
    pub gain: f64,
}

/// Scales mono `audio` at `rate` Hz to `target` LUFS, as
/// `pyln.normalize.loudness(x, meter.integrated_loudness(x), target)`.
/// Silent audio (loudness −∞) is [`LoudnessError::Silent`]. Samples may
/// leave [-1, 1] (pyloudnorm only warns).
pub fn normalize(audio: &[f32], rate: u32, target: f64) -> Result<Normalized, LoudnessError> {
    let loudness = Meter::new(rate)?.integrated_loudness(audio)?;
    if loudness == f64::NEG_INFINITY {
        return Err(LoudnessError::Silent);
    }
    let gain = loudness_gain(loudness, target);
    let audio = audio
        .iter()
        .map(|&x| (gain * f64::from(x)) as f32)
        .collect();
    Ok(Normalized {
        audio,
        loudness,
        gain,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use voxlane_runtime::io::{read_npy, read_wav};

    const FIXTURE: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/fixtures/personaplex-tiny"
    );

    // The signals of `testdata/gen_loudness_cases.py`, bit for bit.
    fn sine(rate: u32, seconds: f64, freq: f64, amp: f64) -> Vec<f32> {
        let n = (f64::from(rate) * seconds).round_ties_even() as usize;
        (0..n)
            .map(|i| {
                (amp * (2.0 * std::f64::consts::PI * freq * i as f64 / f64::from(rate)).sin())
                    as f32
            })
            .collect()
    }

    fn noise(rate: u32, seconds: f64, amp: f64, seed: u64) -> Vec<f32> {
        let n = (f64::from(rate) * seconds).round_ties_even() as usize;
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let u = (s >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0;
                (amp * u) as f32
            })
            .collect()
    }

    fn case(name: &str) -> (u32, Vec<f32>) {
        match name {
            "sine_1k_48k" => (48000, sine(48000, 2.0, 1000.0, 0.5)),
            "sine_100_16k" => (16000, sine(16000, 1.3, 100.0, 0.1)),
            "sine_5k_44k1_one_block" => (44100, sine(44100, 0.4, 5000.0, 0.25)),
            "sine_440_8k_half_even" => (8000, sine(8000, 0.65, 440.0, 0.7)),
            "sine_60_22k05" => (22050, sine(22050, 1.77, 60.0, 0.9)),
            "noise_24k" => (24000, noise(24000, 3.0, 0.3, 7)),
            "relative_gate_24k" => {
                let mut x = sine(24000, 1.0, 1000.0, 0.5);
                x.extend(sine(24000, 2.0, 300.0, 0.005));
                x.extend(vec![0.0; 24000]);
                (24000, x)
            }
            "below_absolute_gate" => (24000, sine(24000, 1.0, 1000.0, 1e-4)),
            other => panic!("unknown case {other}"),
        }
    }

    /// pyloudnorm 0.2.0 on the same signals (as f64), from the generator.
    const EXPECTED: [(&str, f64); 8] = [
        ("sine_1k_48k", -9.065622402967717),
        ("sine_100_16k", -24.875365805269254),
        ("sine_5k_44k1_one_block", -11.771504304612698),
        ("sine_440_8k_half_even", -6.844005698443011),
        ("sine_60_22k05", -7.56951053446246),
        ("noise_24k", -12.347538293479856),
        ("relative_gate_24k", -9.783109064039452),
        ("below_absolute_gate", f64::NEG_INFINITY),
    ];

    #[test]
    fn loudness_equals_pyloudnorm_on_synthetic_signals() {
        for (name, want) in EXPECTED {
            let (rate, x) = case(name);
            let got = Meter::new(rate).unwrap().integrated_loudness(&x).unwrap();
            if want.is_finite() {
                assert!((got - want).abs() < 1e-9, "{name}: {got} vs {want}");
            } else {
                assert_eq!(got, want, "{name}");
            }
        }
    }

    #[test]
    fn voice_prompt_normalizes_like_the_reference() {
        let wav = read_wav(format!("{FIXTURE}/voice_prompt.wav")).unwrap();
        assert_eq!((wav.sample_rate, wav.channels), (24000, 1));
        let want = read_npy(format!("{FIXTURE}/voice_prompt_normalized.npy"))
            .unwrap()
            .to_f32();
        let got = normalize(&wav.samples, 24000, -24.0).unwrap();
        assert_eq!(got.audio.len(), want.len());
        let err = got
            .audio
            .iter()
            .zip(&want)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        eprintln!(
            "voice_prompt_normalized: max abs error {err:e}, loudness {}",
            got.loudness
        );
        assert!(err < 1e-6, "max abs error {err}");
        // The result measures at the target.
        let again = Meter::new(24000)
            .unwrap()
            .integrated_loudness(&got.audio)
            .unwrap();
        assert!((again + 24.0).abs() < 1e-5, "{again}");
    }

    #[test]
    fn k_weighting_coefficients_match_bs1770_at_48k() {
        // BS.1770-4 table 1/2 (pyloudnorm's RBJ design agrees to ~1e-4).
        let [shelf, hp] = Meter::new(48000).unwrap().filters();
        let itu_shelf = [1.53512485958697, -2.69169618940638, 1.19839281085285];
        let itu_shelf_a = [1.0, -1.69065929318241, 0.73248077421585];
        let itu_hp_a = [1.0, -1.99004745483398, 0.99007225036621];
        for (a, b) in shelf.b.iter().zip(itu_shelf) {
            assert!((a - b).abs() < 2e-3, "{a} vs {b}");
        }
        for (a, b) in shelf
            .a
            .iter()
            .zip(itu_shelf_a)
            .chain(hp.a.iter().zip(itu_hp_a))
        {
            assert!((a - b).abs() < 2e-3, "{a} vs {b}");
        }
    }

    #[test]
    fn filter_matches_direct_form_one() {
        let [f, _] = Meter::new(24000).unwrap().filters();
        let x: Vec<f64> = noise(24000, 0.01, 0.5, 3)
            .iter()
            .map(|&v| v.into())
            .collect();
        let mut y = x.clone();
        f.apply(&mut y);
        for n in 0..x.len() {
            let at = |v: &[f64], k: usize| if n >= k { v[n - k] } else { 0.0 };
            let want = f.b[0] * x[n] + f.b[1] * at(&x, 1) + f.b[2] * at(&x, 2)
                - f.a[1] * at(&y, 1)
                - f.a[2] * at(&y, 2);
            assert!((y[n] - want).abs() < 1e-12);
        }
    }

    #[test]
    fn pairwise_sum_matches_numpy_shape() {
        // Exact on integers; the split points follow NumPy's (multiples of 8).
        let v: Vec<f64> = (0..1000).map(f64::from).collect();
        for n in [0, 1, 7, 8, 9, 127, 128, 129, 1000] {
            assert_eq!(pairwise_sum(&v[..n]), (0..n).map(|i| i as f64).sum::<f64>());
        }
        // Rounding differs from a left fold the way NumPy's does.
        let v = vec![1.0, 1e100, 1.0, -1e100, 0.0, 0.0, 0.0, 0.0, 3.0];
        assert_eq!(pairwise_sum(&v), 3.0);
    }

    #[test]
    fn typed_errors() {
        assert_eq!(Meter::new(0), Err(LoudnessError::ZeroRate));
        let m = Meter::new(24000).unwrap();
        assert_eq!(
            m.integrated_loudness(&[0.1; 9599]),
            Err(LoudnessError::TooShort {
                samples: 9599,
                rate: 24000,
                needed: 9600
            })
        );
        assert!(m.integrated_loudness(&[0.1; 9600]).is_ok());
        let mut x = vec![0.1; 9600];
        x[17] = f32::NAN;
        assert_eq!(
            m.integrated_loudness(&x),
            Err(LoudnessError::NonFinite { index: 17 })
        );
        assert_eq!(
            normalize(&[0.0; 24000], 24000, -24.0),
            Err(LoudnessError::Silent)
        );
        let (rate, quiet) = case("below_absolute_gate");
        assert_eq!(normalize(&quiet, rate, -24.0), Err(LoudnessError::Silent));
    }

    #[test]
    fn gain_is_pyloudnorms() {
        assert_eq!(loudness_gain(-30.0, -24.0), 10f64.powf(0.3));
        let (rate, x) = case("noise_24k");
        let n = normalize(&x, rate, -24.0).unwrap();
        assert_eq!(n.gain, loudness_gain(n.loudness, -24.0));
        assert_eq!(n.audio[5], (n.gain * f64::from(x[5])) as f32);
    }
}
