//! Token sampling from logits: greedy, temperature, top-k, top-p (nucleus)
//! and their combinations, from a seeded generator owned by the session.
//!
//! Semantics follow PyTorch `moshi`'s `sample_token`: `softmax(logits / T)`,
//! then the candidates are cut to the `k` most likely (top-k, when set), then
//! to the shortest prefix of those whose probability mass before each kept
//! token is ≤ `p` (top-p, when set: moshi's `probs_sum − probs_sort > p`
//! mask), renormalised, and one is drawn. Temperature 0 is greedy (argmax,
//! first index on ties, as `torch.argmax`).
//!
//! The generator is xoshiro256** seeded through SplitMix64 (Blackman and
//! Vigna's reference algorithms); each draw consumes one 64-bit output as a
//! uniform `u = (x >> 11) · 2⁻⁵³ ∈ [0, 1)` and walks the candidates in order
//! (most likely first, ties by index) until their cumulative weight exceeds
//! `u · total`. The same seed therefore gives the same tokens on every machine
//! and every thread budget (sampling runs on the caller, after the logits,
//! which are themselves bit-identical across budgets).
//!
//! Scratch for the candidate list is sized once ([`Sampler::new`]): a draw
//! allocates nothing.

/// Why a sampling request was refused; each variant names the parameter.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SamplerError {
    /// Temperature negative or not finite.
    #[error("temperature {0} must be a finite number ≥ 0")]
    Temperature(f32),
    /// top-k of 0, or larger than the vocabulary, while sampling.
    #[error("top-k {k} must be in 1..={vocab} when sampling")]
    TopK {
        /// The requested k.
        k: usize,
        /// Vocabulary size.
        vocab: usize,
    },
    /// top-p outside (0, 1].
    #[error("top-p {0} must be in (0, 1]")]
    TopP(f32),
    /// The logits contain NaN.
    #[error("logits contain NaN at index {0}")]
    NanLogits(usize),
    /// Logits of the wrong length.
    #[error("{got} logits for a vocabulary of {vocab}")]
    Vocab {
        /// Logits given.
        got: usize,
        /// Vocabulary the sampler was built for.
        vocab: usize,
    },
}

impl SamplerError {
    /// A short stable key for diagnostics.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Temperature(_) => "temperature",
            Self::TopK { .. } => "top_k",
            Self::TopP(_) => "top_p",
            Self::NanLogits(_) => "nan_logits",
            Self::Vocab { .. } => "vocab",
        }
    }
}

/// How one stream (text or audio) picks its tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SamplingParams {
    /// Softmax temperature; 0 means greedy.
    pub temperature: f32,
    /// Keep the `k` most likely tokens (`None`: all).
    pub top_k: Option<usize>,
    /// Keep the smallest set of tokens with mass ≥ `p` (`None`: all).
    pub top_p: Option<f32>,
}

impl SamplingParams {
    /// Argmax.
    pub const GREEDY: Self = Self {
        temperature: 0.0,
        top_k: None,
        top_p: None,
    };

    /// Moshi's text default: temperature 0.7, top-k 25.
    pub const TEXT_DEFAULT: Self = Self {
        temperature: 0.7,
        top_k: Some(25),
        top_p: None,
    };

    /// Moshi's audio default: temperature 0.8, top-k 250.
    pub const AUDIO_DEFAULT: Self = Self {
        temperature: 0.8,
        top_k: Some(250),
        top_p: None,
    };

    /// True when these parameters draw at random (temperature > 0).
    pub fn is_sampling(&self) -> bool {
        self.temperature > 0.0
    }

    /// Check the parameters for a vocabulary of `vocab` tokens.
    pub fn validate(&self, vocab: usize) -> Result<(), SamplerError> {
        let t = self.temperature;
        if !t.is_finite() || t < 0.0 {
            return Err(SamplerError::Temperature(t));
        }
        if !self.is_sampling() {
            return Ok(());
        }
        if let Some(k) = self.top_k {
            if k == 0 || k > vocab {
                return Err(SamplerError::TopK { k, vocab });
            }
        }
        if let Some(p) = self.top_p {
            if !(p > 0.0 && p <= 1.0) {
                return Err(SamplerError::TopP(p));
            }
        }
        Ok(())
    }
}

/// xoshiro256** seeded through SplitMix64: small, fast, reproducible.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    /// A generator whose whole stream is fixed by `seed`.
    pub fn new(seed: u64) -> Self {
        let mut x = seed;
        let mut next = || {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        Self {
            s: [next(), next(), next(), next()],
        }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let out = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        out
    }

    /// A uniform draw in `[0, 1)` with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// A sampler for one vocabulary size, with its candidate scratch.
#[derive(Debug, Clone)]
pub struct Sampler {
    vocab: usize,
    /// `(weight, token)` candidates, reused by every draw.
    cand: Vec<(f64, u32)>,
}

/// Index of the largest value, first on ties (NaN-free input).
pub fn argmax(logits: &[f32]) -> usize {
    let mut best = 0;
    for (i, &v) in logits.iter().enumerate() {
        if v > logits[best] {
            best = i;
        }
    }
    best
}

impl Sampler {
    /// A sampler for `vocab`-sized logits (scratch allocated here, once).
    pub fn new(vocab: usize) -> Self {
        Self {
            vocab,
            cand: Vec::with_capacity(vocab),
        }
    }

    /// Vocabulary size.
    pub fn vocab(&self) -> usize {
        self.vocab
    }

    /// Pick a token from `logits` with `params`, drawing from `rng` when sampling.
    pub fn sample(
        &mut self,
        logits: &[f32],
        params: &SamplingParams,
        rng: &mut Rng,
    ) -> Result<u32, SamplerError> {
        if logits.len() != self.vocab {
            return Err(SamplerError::Vocab {
                got: logits.len(),
                vocab: self.vocab,
            });
        }
        if let Some(i) = logits.iter().position(|v| v.is_nan()) {
            return Err(SamplerError::NanLogits(i));
        }
        params.validate(self.vocab)?;
        if !params.is_sampling() {
            return Ok(argmax(logits) as u32);
        }
        // Weights exp((l − max) / T) in f64; the softmax's normalisation cancels.
        let inv_t = 1.0 / f64::from(params.temperature);
        let max = f64::from(logits[argmax(logits)]);
        self.cand.clear();
        self.cand.extend(
            logits
                .iter()
                .enumerate()
                .map(|(i, &l)| (((f64::from(l) - max) * inv_t).exp(), i as u32)),
        );
        // Most likely first, ties by token id: a total order, so the draw is reproducible.
        let by_weight = |a: &(f64, u32), b: &(f64, u32)| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1));
        let k = params.top_k.unwrap_or(self.vocab).min(self.vocab);
        if k < self.cand.len() {
            self.cand.select_nth_unstable_by(k - 1, by_weight);
            self.cand.truncate(k);
        }
        self.cand.sort_unstable_by(by_weight);
        let mut total: f64 = self.cand.iter().map(|c| c.0).sum();
        if let Some(p) = params.top_p {
            // Keep token i while the mass before it is ≤ p (moshi's mask), at least one.
            let p = f64::from(p) * total;
            let mut before = 0.0;
            let mut keep = 0;
            for c in &self.cand {
                if keep > 0 && before > p {
                    break;
                }
                before += c.0;
                keep += 1;
            }
            self.cand.truncate(keep);
            total = before;
        }
        let target = rng.next_f64() * total;
        let mut acc = 0.0;
        for c in &self.cand {
            acc += c.0;
            if acc > target {
                return Ok(c.1);
            }
        }
        // Rounding left `target` at the very top: the last candidate.
        Ok(self.cand.last().map_or(0, |c| c.1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    // Explicit, so it shadows the prelude's `Rng` trait.
    use super::Rng;
    use proptest::prelude::*;

    #[test]
    fn greedy_takes_first_max() {
        let mut s = Sampler::new(4);
        let mut rng = Rng::new(1);
        let t = s
            .sample(&[0.5, 2.0, 2.0, -1.0], &SamplingParams::GREEDY, &mut rng)
            .unwrap();
        assert_eq!(t, 1);
    }

    #[test]
    fn bad_parameters_are_typed() {
        let mut s = Sampler::new(3);
        let mut rng = Rng::new(1);
        let l = [0.0, 1.0, 2.0];
        let p = |temperature, top_k, top_p| SamplingParams {
            temperature,
            top_k,
            top_p,
        };
        for (params, reason) in [
            (p(-0.1, None, None), "temperature"),
            (p(f32::NAN, None, None), "temperature"),
            (p(f32::INFINITY, None, None), "temperature"),
            (p(1.0, Some(0), None), "top_k"),
            (p(1.0, Some(4), None), "top_k"),
            (p(1.0, None, Some(0.0)), "top_p"),
            (p(1.0, None, Some(1.5)), "top_p"),
            (p(1.0, None, Some(f32::NAN)), "top_p"),
        ] {
            let e = s.sample(&l, &params, &mut rng).unwrap_err();
            assert_eq!(e.reason(), reason, "{params:?}");
        }
        let e = s
            .sample(&[0.0, f32::NAN, 1.0], &SamplingParams::GREEDY, &mut rng)
            .unwrap_err();
        assert_eq!(e, SamplerError::NanLogits(1));
        assert_eq!(
            s.sample(&[0.0], &SamplingParams::GREEDY, &mut rng)
                .unwrap_err()
                .reason(),
            "vocab"
        );
    }

    #[test]
    fn rng_is_reproducible_and_uniform() {
        let (mut a, mut b) = (Rng::new(42), Rng::new(42));
        let xs: Vec<u64> = (0..8).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..8).map(|_| b.next_u64()).collect();
        assert_eq!(xs, ys);
        assert_ne!(Rng::new(43).next_u64(), xs[0]);
        let mut r = Rng::new(7);
        let mean = (0..100_000).map(|_| r.next_f64()).sum::<f64>() / 100_000.0;
        assert!((mean - 0.5).abs() < 0.005, "{mean}");
    }

    /// The distribution the parameters intend, computed independently in f64.
    fn intended(logits: &[f32], p: &SamplingParams) -> Vec<f64> {
        let t = f64::from(p.temperature);
        let mut idx: Vec<usize> = (0..logits.len()).collect();
        idx.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]).then(a.cmp(&b)));
        let w: Vec<f64> = idx
            .iter()
            .map(|&i| (f64::from(logits[i]) / t).exp())
            .collect();
        let k = p.top_k.unwrap_or(logits.len());
        let mut keep: Vec<usize> = (0..k).collect();
        if let Some(pp) = p.top_p {
            let total: f64 = keep.iter().map(|&j| w[j]).sum();
            let mut before = 0.0;
            keep.retain(|&j| {
                let ok = j == 0 || before <= f64::from(pp) * total;
                before += w[j];
                ok
            });
        }
        let z: f64 = keep.iter().map(|&j| w[j]).sum();
        let mut out = vec![0.0; logits.len()];
        for j in keep {
            out[idx[j]] = w[j] / z;
        }
        out
    }

    /// Pearson chi-square of `n` draws against `probs`; returns (statistic, degrees of freedom).
    fn chi_square(logits: &[f32], params: &SamplingParams, n: usize, seed: u64) -> (f64, usize) {
        let probs = intended(logits, params);
        let mut s = Sampler::new(logits.len());
        let mut rng = Rng::new(seed);
        let mut counts = vec![0usize; logits.len()];
        for _ in 0..n {
            counts[s.sample(logits, params, &mut rng).unwrap() as usize] += 1;
        }
        let mut stat = 0.0;
        let mut cells = 0;
        for (c, p) in counts.iter().zip(&probs) {
            if *p == 0.0 {
                assert_eq!(*c, 0, "a token outside the candidates was drawn");
                continue;
            }
            let e = p * n as f64;
            stat += (*c as f64 - e).powi(2) / e;
            cells += 1;
        }
        (stat, cells - 1)
    }

    #[test]
    fn draws_follow_the_intended_distribution() {
        let logits: Vec<f32> = (0..12).map(|i| ((i * 7) % 12) as f32 * 0.3 - 1.0).collect();
        let cases = [
            SamplingParams {
                temperature: 1.0,
                top_k: None,
                top_p: None,
            },
            SamplingParams {
                temperature: 0.7,
                top_k: Some(5),
                top_p: None,
            },
            SamplingParams {
                temperature: 1.3,
                top_k: None,
                top_p: Some(0.8),
            },
            SamplingParams {
                temperature: 0.9,
                top_k: Some(8),
                top_p: Some(0.6),
            },
        ];
        for params in cases {
            let (stat, dof) = chi_square(&logits, &params, 200_000, 11);
            // 99.9% quantile of chi-square is below dof + 3.3·sqrt(2·dof) + 10 for dof ≤ 11.
            let limit = dof as f64 + 3.3 * (2.0 * dof as f64).sqrt() + 10.0;
            assert!(
                stat < limit,
                "{params:?}: chi-square {stat:.1} with {dof} dof (limit {limit:.1})"
            );
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn draws_stay_within_candidates(
            logits in proptest::collection::vec(-20.0f32..20.0, 1..60),
            t in 0.05f32..3.0,
            k in 1usize..60,
            p in 0.01f32..=1.0,
            seed in any::<u64>(),
        ) {
            let params = SamplingParams { temperature: t, top_k: Some(k.min(logits.len())), top_p: Some(p) };
            let probs = intended(&logits, &params);
            let mut s = Sampler::new(logits.len());
            let mut rng = Rng::new(seed);
            for _ in 0..20 {
                let tok = s.sample(&logits, &params, &mut rng).unwrap() as usize;
                prop_assert!(probs[tok] > 0.0);
            }
        }
    }
}
