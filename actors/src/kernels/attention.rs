//! Streaming causal multi-head attention with RoPE and a windowed KV cache.
//!
//! * [`KvCache`] is sized once at construction (keys, values, rotated queries,
//!   softmax scratch): a step never allocates.
//! * Keys and values live in a ring of `context + max_step - 1` slots per
//!   head, enough for every query of a step to see its whole window; keys
//!   older than the window are simply overwritten.
//! * A query at absolute position `p` attends to keys `p - context + 1 ..= p`
//!   (Kyutai's `delta < context` mask): 250 frames for Mimi, 3000 for Moshi.
//! * Heads are split into `head_ranges` fixed ranges (1/2/4/8…), one lane
//!   route each. Every head is computed by one lane in a fixed order, so the
//!   output is identical for every thread budget, split and SIMD route (the
//!   q·k dot products follow `f32_matvec`'s 16-lane contract).
//! * Bench shape (the xtask bench): [`AttentionConfig::mimi`] (8×64, 250
//!   frames) stepping one frame at a time after the window has filled.
//! * Softmax subtracts the row maximum before `exp` (stable for any logits).

use super::cpu::{self, SimdLevel};
use super::error::{check_len, KernelError};
use super::f32_matvec;
use super::matmul::DisjointOut;
use voxlane_runtime::Fork;

/// How RoPE pairs the channels of a head.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RopeLayout {
    /// Pairs `(x[2i], x[2i+1])`: Kyutai moshi/mimi `apply_rope` (complex view).
    Interleaved,
    /// Pairs `(x[i], x[i + D/2])`: "rotate half" (GPT-NeoX / Llama in HF).
    Halves,
}

/// Rotary position embedding: pair `i` rotates by `pos · max_period^(-2i/D)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rope {
    /// Channel pairing.
    pub layout: RopeLayout,
    /// Longest period (10 000 in moshi).
    pub max_period: f32,
}

impl Rope {
    /// Kyutai's convention: interleaved pairs, period 10 000.
    pub fn kyutai() -> Self {
        Self {
            layout: RopeLayout::Interleaved,
            max_period: 10_000.0,
        }
    }
}

/// Shape and behaviour of one attention layer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AttentionConfig {
    /// Number of heads H.
    pub heads: usize,
    /// Channels per head D (even when RoPE is used).
    pub head_dim: usize,
    /// Window: how many positions (the query's own included) a query sees.
    pub context: usize,
    /// Most new positions one [`attention_step`] may add.
    pub max_step: usize,
    /// RoPE applied to q and k, if any.
    pub rope: Option<Rope>,
    /// Logit scale (default `1/√D`).
    pub scale: f32,
    /// Number of fixed head ranges the lanes split over.
    pub head_ranges: usize,
}

impl AttentionConfig {
    /// `heads × head_dim` attention over a `context` window, one position per step, Kyutai RoPE.
    pub fn new(heads: usize, head_dim: usize, context: usize) -> Self {
        Self {
            heads,
            head_dim,
            context,
            max_step: 1,
            rope: Some(Rope::kyutai()),
            scale: 1.0 / (head_dim.max(1) as f32).sqrt(),
            head_ranges: 1,
        }
    }

    /// Mimi's transformer: 512 channels as 8 heads of 64, 250-frame window.
    pub fn mimi() -> Self {
        Self {
            head_ranges: 8,
            ..Self::new(8, 64, 250)
        }
    }

    /// Moshi's temporal transformer: 4096 channels as 32 heads of 128, 3000-step window.
    pub fn moshi() -> Self {
        Self {
            head_ranges: 8,
            ..Self::new(32, 128, 3000)
        }
    }

    /// Channels of one position (`heads · head_dim`).
    pub fn width(&self) -> usize {
        self.heads * self.head_dim
    }

    /// `Ok` if a [`KvCache`] can be built for this configuration (the reason otherwise).
    pub fn validate(&self) -> Result<(), KernelError> {
        let bad = |what, detail: String| Err(KernelError::Param { what, detail });
        if self.heads == 0 || self.head_dim == 0 {
            return bad(
                "attention shape",
                "heads and head_dim must be positive".into(),
            );
        }
        if self.context == 0 || self.max_step == 0 {
            return bad(
                "attention window",
                "context and max_step must be positive".into(),
            );
        }
        if self.head_ranges == 0 || self.head_ranges > self.heads {
            return bad(
                "head_ranges",
                format!("{} ranges for {} heads", self.head_ranges, self.heads),
            );
        }
        if let Some(r) = self.rope {
            if !self.head_dim.is_multiple_of(2) || r.max_period.is_nan() || r.max_period <= 0.0 {
                return bad(
                    "rope",
                    format!(
                        "needs an even head_dim and positive period (D={})",
                        self.head_dim
                    ),
                );
            }
        }
        Ok(())
    }
}

/// Rotation angles' frequencies `max_period^(-2i/D)` for `i < D/2`, as moshi computes them in f32.
fn inv_freqs(rope: &Rope, head_dim: usize) -> Vec<f32> {
    let c = (-(rope.max_period as f64).ln() * 2.0 / head_dim as f64) as f32;
    (0..head_dim / 2).map(|i| (i as f32 * c).exp()).collect()
}

/// Fill `cs` with `(cos, sin)` of every pair's angle at position `pos`.
fn rope_table(freqs: &[f32], pos: usize, cs: &mut [(f32, f32)]) {
    let t = pos as f32;
    for (o, f) in cs.iter_mut().zip(freqs) {
        let ang = t * f;
        *o = (ang.cos(), ang.sin());
    }
}

/// Rotate one head's channels in place with a precomputed table.
fn rotate(layout: RopeLayout, cs: &[(f32, f32)], x: &mut [f32]) {
    let half = cs.len();
    for (i, &(c, s)) in cs.iter().enumerate() {
        let (a, b) = match layout {
            RopeLayout::Interleaved => (2 * i, 2 * i + 1),
            RopeLayout::Halves => (i, i + half),
        };
        let (xr, xi) = (x[a], x[b]);
        x[a] = xr * c - xi * s;
        x[b] = xr * s + xi * c;
    }
}

/// Apply RoPE in place to `x[T, heads, head_dim]` whose first row is at position `pos0`.
pub fn apply_rope(
    rope: &Rope,
    x: &mut [f32],
    heads: usize,
    head_dim: usize,
    pos0: usize,
) -> Result<(), KernelError> {
    let width = heads * head_dim;
    if width == 0 || !head_dim.is_multiple_of(2) || !x.len().is_multiple_of(width) {
        return Err(KernelError::Param {
            what: "rope input",
            detail: format!(
                "{} values are not rows of {heads}×{head_dim} (even)",
                x.len()
            ),
        });
    }
    let freqs = inv_freqs(rope, head_dim);
    let mut cs = vec![(0.0, 0.0); head_dim / 2];
    for (i, row) in x.chunks_exact_mut(width).enumerate() {
        rope_table(&freqs, pos0 + i, &mut cs);
        for h in row.chunks_exact_mut(head_dim) {
            rotate(rope.layout, &cs, h);
        }
    }
    Ok(())
}

/// Per-layer streaming state: the key/value ring and every scratch buffer a step needs.
#[derive(Debug, Clone)]
pub struct KvCache {
    cfg: AttentionConfig,
    level: SimdLevel,
    /// Ring slots per head.
    cap: usize,
    /// `[H][cap][D]` rotated keys.
    keys: Vec<f32>,
    /// `[H][cap][D]` values.
    values: Vec<f32>,
    /// Positions seen so far (the next one's absolute index).
    pos: usize,
    /// `[max_step][H][D]` rotated queries of the current step.
    q_rot: Vec<f32>,
    /// `[head_ranges][context]` softmax weights, one row per lane route.
    scores: Vec<f32>,
    freqs: Vec<f32>,
    cs: Vec<(f32, f32)>,
}

impl KvCache {
    /// An empty cache for `cfg` on the best SIMD route.
    pub fn new(cfg: AttentionConfig) -> Result<Self, KernelError> {
        Self::with_level(cfg, cpu::simd_level())
    }

    /// An empty cache whose steps use an explicit route (capped at what the CPU supports).
    pub fn with_level(cfg: AttentionConfig, level: SimdLevel) -> Result<Self, KernelError> {
        cfg.validate()?;
        let cap = cfg.context + cfg.max_step - 1;
        let ring = cfg.heads * cap * cfg.head_dim;
        let freqs = cfg
            .rope
            .map(|r| inv_freqs(&r, cfg.head_dim))
            .unwrap_or_default();
        Ok(Self {
            level: level.min(cpu::simd_level()),
            cap,
            keys: vec![0.0; ring],
            values: vec![0.0; ring],
            pos: 0,
            q_rot: vec![0.0; cfg.max_step * cfg.width()],
            scores: vec![0.0; cfg.head_ranges * cfg.context],
            cs: vec![(0.0, 0.0); freqs.len()],
            freqs,
            cfg,
        })
    }

    /// Forget every position (keeps the buffers).
    pub fn reset(&mut self) {
        self.pos = 0;
    }

    /// Absolute position the next step starts at.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// The layer shape this cache was built for.
    pub fn config(&self) -> &AttentionConfig {
        &self.cfg
    }

    /// Ring slots per head (`context + max_step - 1`).
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Rotate and store the step's keys/values; rotate its queries into `q_rot`.
    fn ingest(&mut self, q: &[f32], k: &[f32], v: &[f32], t: usize) {
        let (h_n, d) = (self.cfg.heads, self.cfg.head_dim);
        let width = h_n * d;
        for i in 0..t {
            let p = self.pos + i;
            let slot = p % self.cap;
            if self.cfg.rope.is_some() {
                rope_table(&self.freqs, p, &mut self.cs);
            }
            for h in 0..h_n {
                let src = (i * width + h * d)..(i * width + (h + 1) * d);
                let dst = (h * self.cap + slot) * d..(h * self.cap + slot + 1) * d;
                self.keys[dst.clone()].copy_from_slice(&k[src.clone()]);
                self.values[dst.clone()].copy_from_slice(&v[src.clone()]);
                self.q_rot[src.clone()].copy_from_slice(&q[src.clone()]);
                if let Some(r) = self.cfg.rope {
                    rotate(r.layout, &self.cs, &mut self.keys[dst]);
                    rotate(r.layout, &self.cs, &mut self.q_rot[src]);
                }
            }
        }
    }
}

/// Attend `t` new positions: `q`, `k`, `v` and `out` are `[t, heads, head_dim]`.
///
/// RoPE (if configured) is applied here at the cache's running position; the
/// new keys/values join the cache before the queries attend, so each new
/// query also sees the new positions up to itself (causal).
pub fn attention_step(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    t: usize,
    cache: &mut KvCache,
    out: &mut [f32],
    lanes: &impl Fork,
) -> Result<(), KernelError> {
    let cfg = cache.cfg;
    if t > cfg.max_step {
        return Err(KernelError::Param {
            what: "attention step",
            detail: format!("{t} positions exceed max_step {}", cfg.max_step),
        });
    }
    let width = cfg.width();
    check_len("attention q", t * width, q.len())?;
    check_len("attention k", t * width, k.len())?;
    check_len("attention v", t * width, v.len())?;
    check_len("attention out", t * width, out.len())?;
    if t == 0 {
        return Ok(());
    }
    cache.ingest(q, k, v, t);
    let base = cache.pos;
    cache.pos += t;

    let KvCache {
        keys,
        values,
        q_rot,
        scores,
        cap,
        level,
        ..
    } = cache;
    let (keys, values, q_rot, cap, level) = (&keys[..], &values[..], &q_rot[..], *cap, *level);
    let d = cfg.head_dim;
    let per_range = cfg.heads.div_ceil(cfg.head_ranges);
    let dst = DisjointOut::new(out);
    lanes.for_each_chunk_mut(scores, cfg.context, |r, sc| {
        let heads = (r * per_range)..((r + 1) * per_range).min(cfg.heads);
        for h in heads {
            let hk = &keys[h * cap * d..(h + 1) * cap * d];
            let hv = &values[h * cap * d..(h + 1) * cap * d];
            for i in 0..t {
                let p = base + i;
                let lo = (p + 1).saturating_sub(cfg.context);
                let qh = &q_rot[i * width + h * d..i * width + (h + 1) * d];
                let n_keys = p - lo + 1;
                // The window is at most two contiguous runs of ring slots; each run
                // goes through the multi-row kernel (same contract order as `dot`).
                let first = lo % cap;
                let run1 = n_keys.min(cap - first);
                let (sc1, sc2) = sc[..n_keys].split_at_mut(run1);
                f32_matvec::rows(level, qh, &hk[first * d..(first + run1) * d], d, None, sc1);
                f32_matvec::rows(level, qh, &hk[..sc2.len() * d], d, None, sc2);
                let mut max = f32::NEG_INFINITY;
                for s in sc[..n_keys].iter_mut() {
                    *s *= cfg.scale;
                    max = max.max(*s);
                }
                let mut sum = 0.0f32;
                for s in sc[..n_keys].iter_mut() {
                    *s = (*s - max).exp();
                    sum += *s;
                }
                // SAFETY: head h of row i is written by this range alone.
                let o = unsafe { dst.range_mut(i * width + h * d, d) };
                o.fill(0.0);
                // The same two runs of ring slots (no division per key).
                let (w1, w2) = sc[..n_keys].split_at(run1);
                let runs = hv[first * d..].chunks_exact(d).zip(w1);
                for (row, &wgt) in runs.chain(hv.chunks_exact(d).zip(w2)) {
                    axpy(level, wgt, row, o);
                }
                let inv = 1.0 / sum;
                o.iter_mut().for_each(|x| *x *= inv);
            }
        }
    })?;
    Ok(())
}

/// `y += a·x` elementwise (mul then add, never fused: identical on every route).
#[inline]
fn axpy(level: SimdLevel, a: f32, x: &[f32], y: &mut [f32]) {
    match level {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the cache's level is capped at the detected features.
        SimdLevel::Avx512 => unsafe { axpy_avx512(a, x, y) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above.
        SimdLevel::Avx2 => unsafe { axpy_avx2(a, x, y) },
        _ => axpy_plain(a, x, y),
    }
}

#[inline(always)]
fn axpy_plain(a: f32, x: &[f32], y: &mut [f32]) {
    for (o, v) in y.iter_mut().zip(x) {
        *o += a * v;
    }
}

/// The same loop compiled for AVX-512 (the compiler vectorises it).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn axpy_avx512(a: f32, x: &[f32], y: &mut [f32]) {
    axpy_plain(a, x, y)
}

/// The same loop compiled for AVX2 (8 lanes; without it the AVX2 route ran
/// the baseline's SSE2 loop).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn axpy_avx2(a: f32, x: &[f32], y: &mut [f32]) {
    axpy_plain(a, x, y)
}

/// Naive full attention over a whole sequence `[total, heads, head_dim]`
/// starting at position 0: RoPE, a causal mask limited to the window, f64 softmax.
pub fn attention_reference(
    cfg: &AttentionConfig,
    q: &[f32],
    k: &[f32],
    v: &[f32],
    total: usize,
) -> Result<Vec<f32>, KernelError> {
    cfg.validate()?;
    let (h_n, d) = (cfg.heads, cfg.head_dim);
    let width = cfg.width();
    check_len("reference q", total * width, q.len())?;
    check_len("reference k", total * width, k.len())?;
    check_len("reference v", total * width, v.len())?;
    let (mut q, mut k) = (q.to_vec(), k.to_vec());
    if let Some(r) = cfg.rope {
        apply_rope(&r, &mut q, h_n, d, 0)?;
        apply_rope(&r, &mut k, h_n, d, 0)?;
    }
    let mut out = vec![0.0f32; total * width];
    for h in 0..h_n {
        for p in 0..total {
            let at = |x: &[f32], t: usize, c: usize| x[t * width + h * d + c] as f64;
            // Key j is visible iff j <= p and p - j < context.
            let logits: Vec<(usize, f64)> = (0..total)
                .filter(|&j| j <= p && p - j < cfg.context)
                .map(|j| {
                    let s: f64 = (0..d).map(|c| at(&q, p, c) * at(&k, j, c)).sum();
                    (j, s * cfg.scale as f64)
                })
                .collect();
            let max = logits.iter().fold(f64::NEG_INFINITY, |m, l| m.max(l.1));
            let z: f64 = logits.iter().map(|l| (l.1 - max).exp()).sum();
            for c in 0..d {
                let acc: f64 = logits
                    .iter()
                    .map(|&(j, s)| (s - max).exp() * at(v, j, c))
                    .sum();
                out[p * width + h * d + c] = (acc / z) as f32;
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::test_rng::symmetric as rnd_vec;
    use proptest::prelude::*;
    use voxlane_runtime::LanePool;

    /// Stream `total` positions through a fresh cache in steps of `steps` (cycled).
    fn stream(
        cfg: AttentionConfig,
        level: SimdLevel,
        (q, k, v): (&[f32], &[f32], &[f32]),
        total: usize,
        steps: &[usize],
        lanes: &impl Fork,
    ) -> Vec<f32> {
        let w = cfg.width();
        let mut cache = KvCache::with_level(cfg, level).unwrap();
        let mut out = vec![f32::NAN; total * w];
        let mut p = 0;
        let mut s = 0;
        while p < total {
            let t = steps[s % steps.len()].clamp(1, cfg.max_step).min(total - p);
            s += 1;
            let r = p * w..(p + t) * w;
            attention_step(
                &q[r.clone()],
                &k[r.clone()],
                &v[r.clone()],
                t,
                &mut cache,
                &mut out[r],
                lanes,
            )
            .unwrap();
            p += t;
        }
        assert_eq!(cache.position(), total);
        out
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn streaming_matches_full_reference(
            heads in 1usize..5, half_d in 1usize..20, context in 1usize..24, max_step in 1usize..6,
            total in 1usize..60, rope in 0u8..3, steps in proptest::collection::vec(1usize..6, 1..4),
            seed in any::<u64>(),
        ) {
            let mut cfg = AttentionConfig::new(heads, half_d * 2, context);
            cfg.max_step = max_step;
            cfg.head_ranges = heads.min(2);
            cfg.rope = match rope {
                0 => None,
                1 => Some(Rope::kyutai()),
                _ => Some(Rope { layout: RopeLayout::Halves, max_period: 100.0 }),
            };
            let n = total * cfg.width();
            let (q, k, v) = (rnd_vec(seed, n), rnd_vec(seed ^ 1, n), rnd_vec(seed ^ 2, n));
            let want = attention_reference(&cfg, &q, &k, &v, total).unwrap();
            let pool = LanePool::new(1).unwrap();
            let mut first: Option<Vec<f32>> = None;
            for level in cpu::available_levels() {
                let got = stream(cfg, level, (&q, &k, &v), total, &steps, &pool);
                for i in 0..n {
                    prop_assert!((got[i] - want[i]).abs() <= 2e-5, "{:?} [{}]: {} vs {}", level, i, got[i], want[i]);
                }
                match &first {
                    None => first = Some(got),
                    Some(f) => prop_assert_eq!(bits(f), bits(&got), "route {:?}", level),
                }
            }
        }
    }

    #[test]
    fn identical_for_every_budget_and_head_split() {
        let mut cfg = AttentionConfig::new(8, 16, 10);
        cfg.max_step = 3;
        let total = 40;
        let n = total * cfg.width();
        let (q, k, v) = (rnd_vec(7, n), rnd_vec(8, n), rnd_vec(9, n));
        let mut first: Option<Vec<f32>> = None;
        for threads in 1..=4 {
            let pool = LanePool::new(threads).unwrap();
            for ranges in [1, 2, 4, 8] {
                cfg.head_ranges = ranges;
                let got = stream(
                    cfg,
                    cpu::simd_level(),
                    (&q, &k, &v),
                    total,
                    &[3, 1, 2],
                    &pool,
                );
                match &first {
                    None => first = Some(got),
                    Some(f) => assert_eq!(bits(f), bits(&got), "threads {threads} ranges {ranges}"),
                }
            }
        }
    }

    #[test]
    fn rope_layouts_rotate_the_documented_pairs() {
        let rope = Rope {
            layout: RopeLayout::Interleaved,
            max_period: 10_000.0,
        };
        // D = 4: pair 0 has frequency 1, pair 1 has 10000^(-1/2) = 0.01.
        let mut x = vec![1.0, 0.0, 1.0, 0.0];
        apply_rope(&rope, &mut x, 1, 4, 3).unwrap();
        let (a0, a1) = (3.0f32, 0.03f32);
        let want = [a0.cos(), a0.sin(), a1.cos(), a1.sin()];
        for (g, w) in x.iter().zip(want) {
            assert!((g - w).abs() < 1e-6, "{x:?}");
        }
        let rope = Rope {
            layout: RopeLayout::Halves,
            ..rope
        };
        let mut x = vec![1.0, 1.0, 0.0, 0.0];
        apply_rope(&rope, &mut x, 1, 4, 3).unwrap();
        let want = [a0.cos(), a1.cos(), a0.sin(), a1.sin()];
        for (g, w) in x.iter().zip(want) {
            assert!((g - w).abs() < 1e-6, "{x:?}");
        }
    }

    #[test]
    fn window_drops_old_keys() {
        // context 1: every query sees only itself, so out == v.
        let mut cfg = AttentionConfig::new(2, 4, 1);
        cfg.max_step = 2;
        let total = 9;
        let n = total * cfg.width();
        let (q, k, v) = (rnd_vec(1, n), rnd_vec(2, n), rnd_vec(3, n));
        let pool = LanePool::new(2).unwrap();
        let got = stream(cfg, cpu::simd_level(), (&q, &k, &v), total, &[2], &pool);
        for (g, w) in got.iter().zip(&v) {
            assert!((g - w).abs() < 1e-6);
        }
    }

    #[test]
    fn invalid_inputs_are_errors() {
        let cfg = AttentionConfig::new(2, 4, 8);
        let pool = LanePool::new(1).unwrap();
        let mut cache = KvCache::new(cfg).unwrap();
        let x = vec![0.0; 16];
        let mut out = vec![0.0; 16];
        assert!(attention_step(&x, &x, &x, 2, &mut cache, &mut out, &pool).is_err());
        assert!(attention_step(
            &x[..8],
            &x[..8],
            &x[..7],
            1,
            &mut cache,
            &mut out[..8],
            &pool
        )
        .is_err());
        assert!(KvCache::new(AttentionConfig::new(2, 3, 8)).is_err());
        assert!(KvCache::new(AttentionConfig {
            head_ranges: 3,
            ..cfg
        })
        .is_err());
        assert!(KvCache::new(AttentionConfig { context: 0, ..cfg }).is_err());
        assert_eq!(cache.position(), 0);
    }

    /// Mimi-sized step (8×64, 250-frame window, full cache); run with `--ignored --nocapture`.
    #[test]
    #[ignore]
    fn bench_mimi_step() {
        use std::time::Instant;
        let cfg = AttentionConfig::mimi();
        let w = cfg.width();
        let pool = LanePool::new(1).unwrap();
        let x = rnd_vec(5, w);
        let mut out = vec![0.0; w];
        for level in cpu::available_levels() {
            let mut cache = KvCache::with_level(cfg, level).unwrap();
            for _ in 0..300 {
                attention_step(&x, &x, &x, 1, &mut cache, &mut out, &pool).unwrap();
            }
            let iters = 200;
            let t = Instant::now();
            for _ in 0..iters {
                attention_step(&x, &x, &x, 1, &mut cache, &mut out, &pool).unwrap();
            }
            let us = t.elapsed().as_secs_f64() * 1e6 / iters as f64;
            println!("mimi attention step {level:?}: {us:.1} µs");
        }
    }
}
