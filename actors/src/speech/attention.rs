//! Causal attention with moshi's exact windows, batch and streaming, with
//! interleaved RoPE (Mimi's and Moshi's temporal transformers) or without
//! positions (Moshi's depformer).
//!
//! moshi masks `0 ≤ p_q − p_k < context`. Without a streaming state (batch)
//! that is the whole window. In streaming, keys live in a `RingKVCache` of
//! exactly `context` slots filled with the step's new keys *before* the
//! queries attend, so once the ring has wrapped, query `i` of a `t`-frame
//! step also loses the keys older than `end − context` (`end` = position
//! after the step): the first query of Mimi's 2-frame steps sees 249 keys,
//! not 250. [`Window`] selects which rule a state follows; the kernel's
//! [`KvCache`](crate::kernels::attention::KvCache) implements the batch one
//! only, hence this speech-model copy shared by Mimi and Moshi.
//!
//! Heads are computed one per lane chunk in a fixed order: the result is
//! identical for every thread budget.

use crate::kernels::cpu::{simd_level, SimdLevel};
use crate::kernels::elementwise::fast_math::exp_inplace;
use crate::kernels::elementwise::simd::{dispatch, SimdFn, Vf32};
use crate::kernels::f32_matvec;
use crate::kernels::KernelError;
use voxlane_runtime::Fork;

/// Which keys a query sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    /// Batch: `p − context < p_k ≤ p`.
    Full,
    /// moshi streaming: additionally `p_k ≥ end − context` (a `context`-slot ring).
    MoshiRing,
    /// NVIDIA's PersonaPlex fork of moshi streaming: its older ring gives the
    /// oldest slot of a full ring a future position, so the mask drops it:
    /// `p_k ≥ end + 1 − context`.
    NvidiaRing,
}

/// Per-layer keys, values and scratch of one attention (sized once).
#[derive(Debug, Clone)]
pub struct RingAttention {
    heads: usize,
    head_dim: usize,
    context: usize,
    max_t: usize,
    window: Window,
    /// Slots per head (`context + max_t − 1`).
    cap: usize,
    /// `[H][cap][D]` rotated keys.
    keys: Vec<f32>,
    /// `[H][cap][D]` values.
    values: Vec<f32>,
    /// Next absolute position.
    pos: usize,
    /// RoPE inverse frequencies `max_period^(−2i/D)` (moshi's f32 formula);
    /// empty without positional embedding.
    freqs: Vec<f32>,
    /// `(cos, sin)` per pair for the current position.
    cs: Vec<(f32, f32)>,
    /// `[t][H][D]` rotated queries.
    q_rot: Vec<f32>,
    /// Per head: `[cap]` scores then `[max_t][D]` outputs.
    work: Vec<f32>,
    scale: f32,
    level: SimdLevel,
}

impl RingAttention {
    /// Floats held (cache and scratch).
    pub fn floats(&self) -> usize {
        self.keys.len()
            + self.values.len()
            + self.freqs.len()
            + 2 * self.cs.len()
            + self.q_rot.len()
            + self.work.len()
    }

    /// Floats [`RingAttention::new`] will hold for these sizes (no allocation).
    pub fn planned_floats(
        heads: usize,
        head_dim: usize,
        context: usize,
        rope: bool,
        max_t: usize,
    ) -> usize {
        let cap = context + max_t - 1;
        let pairs = if rope { head_dim / 2 } else { 0 };
        2 * heads * cap * head_dim
            + pairs
            + 2 * pairs
            + max_t * heads * head_dim
            + heads * (cap + max_t * head_dim)
    }

    /// An empty cache for `heads × head_dim` with a `context` window and steps
    /// of up to `max_t`; `rope_max_period` `None` attends without positions.
    pub fn new(
        heads: usize,
        head_dim: usize,
        context: usize,
        rope_max_period: Option<f32>,
        max_t: usize,
        window: Window,
    ) -> Result<Self, KernelError> {
        if heads == 0 || head_dim == 0 || !head_dim.is_multiple_of(2) || context == 0 || max_t == 0
        {
            return Err(KernelError::Param {
                what: "attention shape",
                detail: format!(
                    "{heads} heads × {head_dim} (even), context {context}, step {max_t}"
                ),
            });
        }
        let cap = context + max_t - 1;
        let freqs: Vec<f32> = match rope_max_period {
            Some(max_period) => {
                let c = (-(max_period as f64).ln() * 2.0 / head_dim as f64) as f32;
                (0..head_dim / 2).map(|i| (i as f32 * c).exp()).collect()
            }
            None => Vec::new(),
        };
        Ok(Self {
            heads,
            head_dim,
            context,
            max_t,
            window,
            cap,
            keys: vec![0.0; heads * cap * head_dim],
            values: vec![0.0; heads * cap * head_dim],
            pos: 0,
            cs: vec![(0.0, 0.0); freqs.len()],
            freqs,
            q_rot: vec![0.0; max_t * heads * head_dim],
            work: vec![0.0; heads * (cap + max_t * head_dim)],
            scale: 1.0 / (head_dim as f32).sqrt(),
            level: simd_level(),
        })
    }

    /// Forget every position.
    pub fn reset(&mut self) {
        self.pos = 0;
    }

    /// The next absolute position.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Positions still held: the last `min(pos, cap)`.
    pub fn held(&self) -> usize {
        self.pos.min(self.cap)
    }

    /// Append the held positions' keys then values, `[H][held][D]` each,
    /// oldest first (what [`Self::restore`] takes back).
    pub fn save_into(&self, out: &mut Vec<f32>) {
        let (d, cap, n) = (self.head_dim, self.cap, self.held());
        for ring in [&self.keys, &self.values] {
            for h in 0..self.heads {
                for p in self.pos - n..self.pos {
                    let slot = p % cap;
                    out.extend_from_slice(&ring[(h * cap + slot) * d..(h * cap + slot + 1) * d]);
                }
            }
        }
    }

    /// Floats [`Self::save_into`] writes for `held` positions.
    pub fn saved_floats(&self, held: usize) -> usize {
        2 * self.heads * held * self.head_dim
    }

    /// Floats [`Self::save_into`] writes at position `pos`.
    pub fn saved_floats_at(&self, pos: usize) -> usize {
        self.saved_floats(pos.min(self.cap))
    }

    /// Put back what [`Self::save_into`] saved at position `pos`.
    pub fn restore(&mut self, pos: usize, data: &[f32]) -> Result<(), KernelError> {
        let (d, cap) = (self.head_dim, self.cap);
        let n = pos.min(cap);
        if data.len() != self.saved_floats_at(pos) {
            return Err(KernelError::Param {
                what: "attention state",
                detail: format!(
                    "{} values for {n} positions of {} heads × {d}",
                    data.len(),
                    self.heads
                ),
            });
        }
        let mut it = data.chunks_exact(d);
        for ring in [&mut self.keys, &mut self.values] {
            for h in 0..self.heads {
                for p in pos - n..pos {
                    let slot = p % cap;
                    if let Some(row) = it.next() {
                        ring[(h * cap + slot) * d..(h * cap + slot + 1) * d].copy_from_slice(row);
                    }
                }
            }
        }
        self.pos = pos;
        Ok(())
    }

    /// Attend `t` new positions: `q`, `k`, `v`, `out` are `[t, heads, head_dim]`.
    pub fn step(
        &mut self,
        pool: &impl Fork,
        q: &[f32],
        k: &[f32],
        v: &[f32],
        t: usize,
        out: &mut [f32],
    ) -> Result<(), KernelError> {
        let (h_n, d, cap) = (self.heads, self.head_dim, self.cap);
        let width = h_n * d;
        if t == 0
            || t > self.max_t
            || [q, k, v].iter().any(|a| a.len() != t * width)
            || out.len() != t * width
        {
            return Err(KernelError::Param {
                what: "attention step",
                detail: format!(
                    "{t} positions (max {}) with {} values per operand, {} out (want {})",
                    self.max_t,
                    q.len(),
                    out.len(),
                    t * width
                ),
            });
        }
        // Rotate and store the new keys/values, rotate the queries (moshi `apply_rope`).
        for i in 0..t {
            let p = self.pos + i;
            let tp = p as f32;
            for (o, f) in self.cs.iter_mut().zip(&self.freqs) {
                let ang = f * tp;
                *o = (ang.cos(), ang.sin());
            }
            let slot = p % cap;
            for h in 0..h_n {
                let src = i * width + h * d..i * width + (h + 1) * d;
                let dst = (h * cap + slot) * d..(h * cap + slot + 1) * d;
                self.keys[dst.clone()].copy_from_slice(&k[src.clone()]);
                self.values[dst.clone()].copy_from_slice(&v[src.clone()]);
                self.q_rot[src.clone()].copy_from_slice(&q[src.clone()]);
                rotate(&self.cs, &mut self.keys[dst]);
                rotate(&self.cs, &mut self.q_rot[src]);
            }
        }
        let base = self.pos;
        self.pos += t;
        let end = self.pos;
        let (keys, values, q_rot) = (&self.keys[..], &self.values[..], &self.q_rot[..]);
        let (context, window, scale, level) = (self.context, self.window, self.scale, self.level);
        let per_head = cap + self.max_t * d;
        pool.for_each_chunk_mut(&mut self.work, per_head, |h, w| {
            let (sc, ho) = w.split_at_mut(cap);
            let hk = &keys[h * cap * d..(h + 1) * cap * d];
            let hv = &values[h * cap * d..(h + 1) * cap * d];
            for i in 0..t {
                let p = base + i;
                let mut lo = (p + 1).saturating_sub(context);
                match window {
                    Window::Full => {}
                    Window::MoshiRing => lo = lo.max(end.saturating_sub(context)),
                    Window::NvidiaRing => lo = lo.max((end + 1).saturating_sub(context)),
                }
                let n = p + 1 - lo;
                let qh = &q_rot[i * width + h * d..i * width + (h + 1) * d];
                // The window is at most two runs of ring slots.
                let first = lo % cap;
                let run1 = n.min(cap - first);
                let (s1, s2) = sc[..n].split_at_mut(run1);
                f32_matvec::rows(level, qh, &hk[first * d..(first + run1) * d], d, None, s1);
                f32_matvec::rows(level, qh, &hk[..s2.len() * d], d, None, s2);
                let sum = softmax_weights(level, &mut sc[..n], scale);
                let o = &mut ho[i * d..(i + 1) * d];
                // The same two runs of ring slots as the scores.
                let (w1, w2) = sc[..n].split_at(run1);
                weighted_rows(
                    level,
                    w1,
                    &hv[first * d..(first + run1) * d],
                    w2,
                    &hv[..w2.len() * d],
                    o,
                );
                let inv = 1.0 / sum;
                o.iter_mut().for_each(|x| *x *= inv);
            }
        })?;
        for h in 0..h_n {
            let ho = &self.work[h * per_head + cap..];
            for i in 0..t {
                out[i * width + h * d..i * width + (h + 1) * d]
                    .copy_from_slice(&ho[i * d..(i + 1) * d]);
            }
        }
        Ok(())
    }
}

/// Scale the scores, subtract their maximum and exponentiate in place (the
/// kernels' SIMD `exp`, relative error ≤ 1e-6); returns the sum of the
/// weights, in order.
fn softmax_weights(level: SimdLevel, sc: &mut [f32], scale: f32) -> f32 {
    let mut max = f32::NEG_INFINITY;
    for s in sc.iter_mut() {
        *s *= scale;
        max = max.max(*s);
    }
    sc.iter_mut().for_each(|s| *s -= max);
    exp_inplace(level, sc);
    sc.iter().sum()
}

/// `o = Σ_j w1[j]·a[j] + Σ_j w2[j]·b[j]` over rows of `o.len()` values, each
/// lane summed from 0 in row order as `o += w·v` (a product, then a sum:
/// no fused multiply-add), so every SIMD width gives the scalar loop's bits.
fn weighted_rows(level: SimdLevel, w1: &[f32], a: &[f32], w2: &[f32], b: &[f32], o: &mut [f32]) {
    struct Sum<'a> {
        runs: [(&'a [f32], &'a [f32]); 2],
        o: &'a mut [f32],
    }
    impl SimdFn for Sum<'_> {
        type Out = ();
        #[inline(always)]
        fn call<V: Vf32>(self) {
            let d = self.o.len();
            let main = d - d % V::LANES;
            for c0 in (0..main).step_by(V::LANES) {
                let mut acc = V::splat(0.0);
                for (w, rows) in self.runs {
                    for (j, &wj) in w.iter().enumerate() {
                        // SAFETY: row j holds d values; c0 + LANES <= main <= d.
                        let v = unsafe { V::load(rows.as_ptr().add(j * d + c0)) };
                        acc = acc.add(V::splat(wj).mul(v));
                    }
                }
                // SAFETY: as above.
                unsafe { acc.store(self.o.as_mut_ptr().add(c0)) };
            }
            for c in main..d {
                let mut acc = 0.0f32;
                for (w, rows) in self.runs {
                    for (j, &wj) in w.iter().enumerate() {
                        acc += wj * rows[j * d + c];
                    }
                }
                self.o[c] = acc;
            }
        }
    }
    let d = o.len();
    assert!(a.len() >= w1.len() * d && b.len() >= w2.len() * d);
    dispatch(
        level,
        Sum {
            runs: [(w1, a), (w2, b)],
            o,
        },
    );
}

/// Rotate interleaved pairs `(x[2i], x[2i+1])` by the table's angles.
fn rotate(cs: &[(f32, f32)], x: &mut [f32]) {
    for (pair, &(c, s)) in x.chunks_exact_mut(2).zip(cs) {
        let (r, i) = (pair[0], pair[1]);
        pair[0] = r * c - i * s;
        pair[1] = r * s + i * c;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use voxlane_runtime::LanePool;

    fn rnd(seed: &mut u64, n: usize) -> Vec<f32> {
        (0..n)
            .map(|_| {
                *seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((*seed >> 40) as f32 / (1u64 << 24) as f32) - 0.5
            })
            .collect()
    }

    /// moshi semantics in f64: RoPE, then keys `p_k ∈ [lo, p]` with
    /// `lo = p − context + 1`, raised to `end − context` for the ring.
    #[allow(clippy::too_many_arguments)]
    fn naive(
        q: &[f32],
        k: &[f32],
        v: &[f32],
        heads: usize,
        d: usize,
        context: usize,
        steps: &[usize],
        window: Window,
    ) -> Vec<f64> {
        let width = heads * d;
        let total: usize = steps.iter().sum();
        let rope = |x: &[f32], p: usize| -> Vec<f64> {
            let mut o = vec![0.0; d];
            for i in 0..d / 2 {
                let ang = p as f64 * 10_000f64.powf(-2.0 * i as f64 / d as f64);
                let (r, im) = (x[2 * i] as f64, x[2 * i + 1] as f64);
                o[2 * i] = r * ang.cos() - im * ang.sin();
                o[2 * i + 1] = r * ang.sin() + im * ang.cos();
            }
            o
        };
        let mut out = vec![0.0; total * width];
        let mut base = 0;
        for &t in steps {
            let end = base + t;
            for p in base..end {
                for h in 0..heads {
                    let at = |a: &[f32], pos: usize| {
                        a[pos * width + h * d..pos * width + (h + 1) * d].to_vec()
                    };
                    let qr = rope(&at(q, p), p);
                    let mut lo = (p + 1).saturating_sub(context);
                    match window {
                        Window::Full => {}
                        Window::MoshiRing => lo = lo.max(end.saturating_sub(context)),
                        Window::NvidiaRing => lo = lo.max((end + 1).saturating_sub(context)),
                    }
                    let logits: Vec<f64> = (lo..=p)
                        .map(|pk| {
                            let kr = rope(&at(k, pk), pk);
                            qr.iter().zip(&kr).map(|(a, b)| a * b).sum::<f64>() / (d as f64).sqrt()
                        })
                        .collect();
                    let m = logits.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                    let w: Vec<f64> = logits.iter().map(|l| (l - m).exp()).collect();
                    let s: f64 = w.iter().sum();
                    for (j, pk) in (lo..=p).enumerate() {
                        let vv = at(v, pk);
                        for c in 0..d {
                            out[p * width + h * d + c] += w[j] / s * vv[c] as f64;
                        }
                    }
                }
            }
            base = end;
        }
        out
    }

    #[test]
    fn windows_follow_moshi_batch_and_ring_semantics() {
        let (heads, d, context) = (2, 4, 5);
        let pool = LanePool::new(2).unwrap();
        for (steps, window) in [
            (vec![2; 8], Window::MoshiRing),
            (vec![3; 5], Window::MoshiRing),
            (vec![1; 12], Window::MoshiRing),
            (vec![2; 8], Window::NvidiaRing),
            (vec![1; 12], Window::NvidiaRing),
            (vec![16], Window::Full),
        ] {
            let total: usize = steps.iter().sum();
            let max_t = *steps.iter().max().unwrap();
            let mut seed = 5;
            let n = total * heads * d;
            let (q, k, v) = (rnd(&mut seed, n), rnd(&mut seed, n), rnd(&mut seed, n));
            let want = naive(&q, &k, &v, heads, d, context, &steps, window);
            let mut att =
                RingAttention::new(heads, d, context, Some(10_000.0), max_t, window).unwrap();
            let mut base = 0;
            let width = heads * d;
            for &t in &steps {
                let r = base * width..(base + t) * width;
                let mut out = vec![0.0; t * width];
                att.step(
                    &pool,
                    &q[r.clone()],
                    &k[r.clone()],
                    &v[r.clone()],
                    t,
                    &mut out,
                )
                .unwrap();
                for (i, (g, w)) in out.iter().zip(&want[r.clone()]).enumerate() {
                    assert!(
                        (*g as f64 - w).abs() < 1e-5,
                        "{window:?} steps {steps:?}: position {} got {g}, want {w}",
                        base + i / width
                    );
                }
                base += t;
            }
        }
    }
}
