//! LSTM with PyTorch semantics (gate order i, f, g, o; `bias_ih + bias_hh`),
//! uni- or bidirectional, batch 1, input `[T, I]` time-major.
//!
//! The input projection of all `T` steps and both directions is one batched
//! product `[dirs·4H, I] · xᵀ[I, T]`, run as a kernel-1 [`Conv1d`] (the
//! direct AVX-512/AVX2 microkernel, split over fixed time chunks); the
//! recurrence is a SIMD matvec `W_hh · h` per step with the gate
//! nonlinearities and cell update fused after it, on the [`SimdLevel`]
//! route. The two directions of a bidirectional LSTM run as two lanes.

use voxlane_runtime::Fork;

use super::conv1d::{Conv1d, Conv1dParams, Conv1dWorkspace};
use super::cpu::SimdLevel;
use super::elementwise::fast_math::{sigmoid_v, tanh_v};
use super::elementwise::simd::{dispatch, map_inplace, SimdFn, Vf32};
use super::error::{check_len, KernelError};
use voxlane_runtime::memory::grow;

/// Borrowed PyTorch-layout weights of one direction.
#[derive(Debug, Clone, Copy)]
pub struct LstmWeights<'a> {
    /// `weight_ih`: `[4H, I]`, gate blocks i, f, g, o.
    pub w_ih: &'a [f32],
    /// `weight_hh`: `[4H, H]`.
    pub w_hh: &'a [f32],
    /// `bias_ih`: `[4H]`, if present.
    pub b_ih: Option<&'a [f32]>,
    /// `bias_hh`: `[4H]`, if present.
    pub b_hh: Option<&'a [f32]>,
}

/// A bound LSTM layer.
#[derive(Debug, Clone)]
pub struct Lstm {
    input: usize,
    hidden: usize,
    /// `weight_hh` per direction.
    w_hh: Vec<Vec<f32>>,
    /// Input projection of every direction: `[dirs·4H, I, 1]`, bias `b_ih + b_hh`.
    proj: Conv1d,
    level: SimdLevel,
}

/// Hidden and cell state `[directions, H]`, carried between calls for streaming.
#[derive(Debug, Clone, PartialEq)]
pub struct LstmState {
    /// Hidden state per direction.
    pub h: Vec<f32>,
    /// Cell state per direction.
    pub c: Vec<f32>,
}

#[derive(Debug, Clone, Default)]
struct DirScratch {
    /// One step's `[4H]` gates.
    gstep: Vec<f32>,
    /// `[T, H]` hidden outputs.
    hseq: Vec<f32>,
    h: Vec<f32>,
    c: Vec<f32>,
}

/// Reusable scratch for [`Lstm::forward`], sized once for the max sequence length.
#[derive(Debug, Clone, Default)]
pub struct LstmWorkspace {
    /// `xᵀ: [I, T]`.
    xt: Vec<f32>,
    /// Projected gates `[dirs·4H, T]`.
    gates: Vec<f32>,
    conv: Conv1dWorkspace,
    dirs: Vec<DirScratch>,
}

impl LstmWorkspace {
    /// Grow so `lstm` runs sequences of up to `max_t` steps without allocating.
    pub fn reserve(&mut self, lstm: &Lstm, max_t: usize) -> Result<(), KernelError> {
        let (h, nd) = (lstm.hidden, lstm.w_hh.len());
        grow(&mut self.xt, lstm.input * max_t);
        grow(&mut self.gates, nd * 4 * h * max_t);
        self.conv.reserve(&lstm.proj, max_t.max(1))?;
        if self.dirs.len() < nd {
            self.dirs.resize(nd, DirScratch::default());
        }
        for d in &mut self.dirs {
            grow(&mut d.gstep, 4 * h);
            grow(&mut d.hseq, max_t * h);
            grow(&mut d.h, h);
            grow(&mut d.c, h);
        }
        Ok(())
    }
}

impl Lstm {
    /// Bind one ([`LstmWeights`] per direction) or two (forward, reverse) directions.
    pub fn new(input: usize, hidden: usize, dirs: &[LstmWeights<'_>]) -> Result<Self, KernelError> {
        if input == 0 || hidden == 0 || dirs.is_empty() || dirs.len() > 2 {
            return Err(KernelError::Param {
                what: "lstm shape",
                detail: format!("input {input}, hidden {hidden}, {} directions", dirs.len()),
            });
        }
        let g = 4 * hidden;
        let (mut w_ih, mut bias, mut w_hh) = (Vec::new(), Vec::new(), Vec::new());
        for w in dirs {
            check_len("lstm weight_ih", g * input, w.w_ih.len())?;
            check_len("lstm weight_hh", g * hidden, w.w_hh.len())?;
            let mut b = vec![0.0; g];
            for src in [w.b_ih, w.b_hh].into_iter().flatten() {
                check_len("lstm bias", g, src.len())?;
                b.iter_mut().zip(src).for_each(|(a, s)| *a += s);
            }
            w_ih.extend_from_slice(w.w_ih);
            bias.extend_from_slice(&b);
            w_hh.push(w.w_hh.to_vec());
        }
        let proj = Conv1d::new(
            Conv1dParams::new(input, dirs.len() * g, 1),
            &w_ih,
            Some(&bias),
        )?;
        Ok(Self {
            input,
            hidden,
            w_hh,
            level: super::cpu::simd_level(),
            proj,
        })
    }

    /// Hidden size `H`.
    pub fn hidden(&self) -> usize {
        self.hidden
    }

    /// Number of directions (1 or 2); the output has `directions · H` columns.
    pub fn directions(&self) -> usize {
        self.w_hh.len()
    }

    /// Choose the SIMD route (capped at what the CPU supports; default: the best).
    pub fn set_level(&mut self, level: SimdLevel) {
        self.level = level;
        self.proj.set_level(level);
    }

    /// A zero state.
    pub fn zero_state(&self) -> LstmState {
        let n = self.w_hh.len() * self.hidden;
        LstmState {
            h: vec![0.0; n],
            c: vec![0.0; n],
        }
    }

    /// A workspace sized for up to `max_t` steps.
    pub fn workspace(&self, max_t: usize) -> Result<LstmWorkspace, KernelError> {
        let mut ws = LstmWorkspace::default();
        ws.reserve(self, max_t)?;
        Ok(ws)
    }

    /// `out: [T, directions · H]` from `x: [T, I]`, starting from a zero state.
    pub fn forward(
        &self,
        pool: &impl Fork,
        x: &[f32],
        t: usize,
        out: &mut [f32],
        ws: &mut LstmWorkspace,
    ) -> Result<(), KernelError> {
        self.run(pool, x, t, out, ws, None)
    }

    /// As [`Lstm::forward`], starting from `state` and leaving the final state in it.
    ///
    /// For a unidirectional LSTM this streams: consecutive calls equal one
    /// call on the concatenated input.
    pub fn forward_with_state(
        &self,
        pool: &impl Fork,
        x: &[f32],
        t: usize,
        out: &mut [f32],
        ws: &mut LstmWorkspace,
        state: &mut LstmState,
    ) -> Result<(), KernelError> {
        self.run(pool, x, t, out, ws, Some(state))
    }

    fn run(
        &self,
        pool: &impl Fork,
        x: &[f32],
        t: usize,
        out: &mut [f32],
        ws: &mut LstmWorkspace,
        mut state: Option<&mut LstmState>,
    ) -> Result<(), KernelError> {
        let (h, nd) = (self.hidden, self.w_hh.len());
        check_len("lstm input", t * self.input, x.len())?;
        check_len("lstm output", t * nd * h, out.len())?;
        if let Some(s) = state.as_deref() {
            check_len("lstm state h", nd * h, s.h.len())?;
            check_len("lstm state c", nd * h, s.c.len())?;
        }
        ws.reserve(self, t)?;
        for (d, sc) in ws.dirs.iter_mut().take(nd).enumerate() {
            match state.as_deref() {
                Some(s) => {
                    sc.h[..h].copy_from_slice(&s.h[d * h..(d + 1) * h]);
                    sc.c[..h].copy_from_slice(&s.c[d * h..(d + 1) * h]);
                }
                None => {
                    sc.h[..h].fill(0.0);
                    sc.c[..h].fill(0.0);
                }
            }
        }
        if t == 0 {
            return Ok(());
        }
        // Input projection of every step and direction: gates = bias + W_ih · xᵀ.
        let (g, inp) = (4 * h, self.input);
        let xt = &mut ws.xt[..inp * t];
        for (ti, xrow) in x.chunks_exact(inp).enumerate() {
            for (i, v) in xrow.iter().enumerate() {
                xt[i * t + ti] = *v;
            }
        }
        let gates = &mut ws.gates[..nd * g * t];
        self.proj
            .forward(pool, &ws.xt[..inp * t], t, gates, &mut ws.conv)?;
        let gates = &ws.gates[..nd * g * t];
        // Recurrences: one lane per direction.
        pool.for_each_chunk_mut(&mut ws.dirs[..nd], 1, |d, sc| {
            let sc = &mut sc[0];
            dispatch(
                self.level,
                Recur {
                    w_hh: &self.w_hh[d],
                    hidden: h,
                    t,
                    reverse: d == 1,
                    gates: &gates[d * g * t..(d + 1) * g * t],
                    gstep: &mut sc.gstep[..g],
                    hseq: &mut sc.hseq[..t * h],
                    h: &mut sc.h[..h],
                    c: &mut sc.c[..h],
                },
            );
        })?;
        for (d, sc) in ws.dirs.iter().take(nd).enumerate() {
            for (orow, hrow) in out.chunks_exact_mut(nd * h).zip(sc.hseq.chunks_exact(h)) {
                orow[d * h..(d + 1) * h].copy_from_slice(hrow);
            }
            if let Some(s) = state.as_deref_mut() {
                s.h[d * h..(d + 1) * h].copy_from_slice(&sc.h[..h]);
                s.c[d * h..(d + 1) * h].copy_from_slice(&sc.c[..h]);
            }
        }
        Ok(())
    }
}

/// The recurrence of one direction over all steps.
struct Recur<'a> {
    w_hh: &'a [f32],
    hidden: usize,
    t: usize,
    reverse: bool,
    /// `[4H, T]` projected gates of this direction.
    gates: &'a [f32],
    gstep: &'a mut [f32],
    hseq: &'a mut [f32],
    h: &'a mut [f32],
    c: &'a mut [f32],
}

impl SimdFn for Recur<'_> {
    type Out = ();
    #[inline(always)]
    fn call<V: Vf32>(self) {
        let hd = self.hidden;
        for step in 0..self.t {
            let ti = if self.reverse {
                self.t - 1 - step
            } else {
                step
            };
            let g = &mut *self.gstep;
            for (r, gr) in g.iter_mut().enumerate() {
                *gr = self.gates[r * self.t + ti];
            }
            matvec_acc::<V>(self.w_hh, self.h, g);
            let (ifg, o) = g.split_at_mut(3 * hd);
            let (i_f, gg) = ifg.split_at_mut(2 * hd);
            map_inplace!(V, i_f, |v| sigmoid_v(v));
            map_inplace!(V, gg, |v| tanh_v(v));
            map_inplace!(V, o, |v| sigmoid_v(v));
            let (i, f) = i_f.split_at(hd);
            // c = f·c + i·g; h = o·tanh(c), tanh done in place on a copy in h.
            for j in 0..hd {
                self.c[j] = f[j] * self.c[j] + i[j] * gg[j];
                self.h[j] = self.c[j];
            }
            map_inplace!(V, self.h, |v| tanh_v(v));
            for (hj, oj) in self.h.iter_mut().zip(o.iter()) {
                *hj *= oj;
            }
            self.hseq[ti * hd..(ti + 1) * hd].copy_from_slice(self.h);
        }
    }
}

/// `y[r] += Σ_j w[r, j] · v[j]` for row-major `w: [y.len(), v.len()]`.
#[inline(always)]
fn matvec_acc<V: Vf32>(w: &[f32], v: &[f32], y: &mut [f32]) {
    let n = v.len();
    let main = n - n % V::LANES;
    let rows = y.len();
    assert!(w.len() >= rows * n);
    let mut r = 0;
    // Four rows per pass share each load of `v`.
    while r + 4 <= rows {
        let mut acc = [V::splat(0.0); 4];
        let mut j = 0;
        while j < main {
            // SAFETY: j + LANES ≤ main ≤ n; rows r..r+4 are < rows, asserted above.
            unsafe {
                let vv = V::load(v.as_ptr().add(j));
                for (q, a) in acc.iter_mut().enumerate() {
                    *a = V::load(w.as_ptr().add((r + q) * n + j)).mul_add(vv, *a);
                }
            }
            j += V::LANES;
        }
        for (q, a) in acc.iter().enumerate() {
            let row = &w[(r + q) * n..(r + q + 1) * n];
            let tail: f32 = row[main..].iter().zip(&v[main..]).map(|(a, b)| a * b).sum();
            y[r + q] += a.hsum() + tail;
        }
        r += 4;
    }
    for (q, yq) in y.iter_mut().enumerate().skip(r) {
        let row = &w[q * n..(q + 1) * n];
        *yq += row.iter().zip(v).map(|(a, b)| a * b).sum::<f32>();
    }
}

/// Reorder ONNX LSTM gate blocks (i, o, f, c) into PyTorch order (i, f, g, o).
///
/// `w` is `[num_dir, 4H, cols]` (ONNX `W`, `R`, or one half of `B` with
/// `cols = 1`); the result has the same shape.
pub fn onnx_to_pytorch_gates(
    w: &[f32],
    num_dir: usize,
    hidden: usize,
) -> Result<Vec<f32>, KernelError> {
    let block_rows = num_dir * 4 * hidden;
    if block_rows == 0 || !w.len().is_multiple_of(block_rows) {
        return Err(KernelError::Param {
            what: "onnx lstm weights",
            detail: format!("{} elements is not [{num_dir}, 4·{hidden}, cols]", w.len()),
        });
    }
    let block = hidden * (w.len() / block_rows);
    let mut out = Vec::with_capacity(w.len());
    for d in w.chunks_exact(4 * block) {
        // PyTorch i, f, g, o = ONNX blocks 0, 2, 3, 1.
        for src in [0, 2, 3, 1] {
            out.extend_from_slice(&d[src * block..(src + 1) * block]);
        }
    }
    Ok(out)
}

/// Split ONNX LSTM `B: [num_dir, 8H]` into PyTorch `(bias_ih, bias_hh)`, each `[num_dir, 4H]`.
pub fn onnx_lstm_bias(
    b: &[f32],
    num_dir: usize,
    hidden: usize,
) -> Result<(Vec<f32>, Vec<f32>), KernelError> {
    check_len("onnx lstm bias", num_dir * 8 * hidden, b.len())?;
    let (mut wb, mut rb) = (Vec::new(), Vec::new());
    for d in b.chunks_exact(8 * hidden) {
        wb.extend_from_slice(&d[..4 * hidden]);
        rb.extend_from_slice(&d[4 * hidden..]);
    }
    Ok((
        onnx_to_pytorch_gates(&wb, num_dir, hidden)?,
        onnx_to_pytorch_gates(&rb, num_dir, hidden)?,
    ))
}

/// Readable f64 reference: `[T, directions · H]` from `x: [T, I]` and zero state.
pub fn lstm_reference(
    input: usize,
    hidden: usize,
    dirs: &[LstmWeights<'_>],
    x: &[f32],
    t: usize,
) -> Vec<f32> {
    let nd = dirs.len();
    let mut out = vec![0.0f32; t * nd * hidden];
    let sig = |v: f64| 1.0 / (1.0 + (-v).exp());
    for (d, w) in dirs.iter().enumerate() {
        let mut h = vec![0.0f64; hidden];
        let mut c = vec![0.0f64; hidden];
        for step in 0..t {
            let ti = if d == 1 { t - 1 - step } else { step };
            let mut g = vec![0.0f64; 4 * hidden];
            for (r, gr) in g.iter_mut().enumerate() {
                let mut acc =
                    w.b_ih.map_or(0.0, |b| b[r] as f64) + w.b_hh.map_or(0.0, |b| b[r] as f64);
                for i in 0..input {
                    acc += w.w_ih[r * input + i] as f64 * x[ti * input + i] as f64;
                }
                for (j, hj) in h.iter().enumerate() {
                    acc += w.w_hh[r * hidden + j] as f64 * hj;
                }
                *gr = acc;
            }
            for j in 0..hidden {
                let (i, f) = (sig(g[j]), sig(g[hidden + j]));
                let (gg, o) = (g[2 * hidden + j].tanh(), sig(g[3 * hidden + j]));
                c[j] = f * c[j] + i * gg;
                h[j] = o * c[j].tanh();
                out[ti * nd * hidden + d * hidden + j] = h[j] as f32;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::cpu::available_levels;
    use crate::kernels::test_rng::scaled as rnd_vec;
    use proptest::prelude::*;
    use voxlane_runtime::LanePool;

    struct Owned {
        w_ih: Vec<f32>,
        w_hh: Vec<f32>,
        b_ih: Vec<f32>,
        b_hh: Vec<f32>,
    }

    fn weights(seed: u64, input: usize, hidden: usize) -> Owned {
        Owned {
            w_ih: rnd_vec(seed, 4 * hidden * input, 1.0),
            w_hh: rnd_vec(seed ^ 1, 4 * hidden * hidden, 1.0),
            b_ih: rnd_vec(seed ^ 2, 4 * hidden, 1.0),
            b_hh: rnd_vec(seed ^ 3, 4 * hidden, 1.0),
        }
    }

    fn view(o: &Owned) -> LstmWeights<'_> {
        LstmWeights {
            w_ih: &o.w_ih,
            w_hh: &o.w_hh,
            b_ih: Some(&o.b_ih),
            b_hh: Some(&o.b_hh),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]

        #[test]
        fn matches_reference(input in 1usize..24, hidden in 1usize..40, t in 1usize..90, bidir in any::<bool>(), seed in any::<u64>()) {
            let owned: Vec<Owned> = (0..1 + bidir as u64).map(|d| weights(seed ^ (d << 8), input, hidden)).collect();
            let dirs: Vec<LstmWeights<'_>> = owned.iter().map(view).collect();
            let x = rnd_vec(seed ^ 99, t * input, 2.0);
            let want = lstm_reference(input, hidden, &dirs, &x, t);
            let mut lstm = Lstm::new(input, hidden, &dirs).unwrap();
            let pool = LanePool::new(2).unwrap();
            for level in available_levels() {
                lstm.set_level(level);
                let mut ws = LstmWorkspace::default();
                let mut got = vec![f32::NAN; want.len()];
                lstm.forward(&pool, &x, t, &mut got, &mut ws).unwrap();
                for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                    prop_assert!((g - w).abs() <= 2e-5, "{level:?} {i}: {g} vs {w}");
                }
            }
        }
    }

    #[test]
    fn bit_identical_across_budgets_and_streams() {
        let (input, hidden, t) = (48, 36, 150);
        let owned = [weights(1, input, hidden), weights(2, input, hidden)];
        let dirs: Vec<_> = owned.iter().map(view).collect();
        let x = rnd_vec(5, t * input, 2.0);
        let lstm = Lstm::new(input, hidden, &dirs).unwrap();
        let mut ws = lstm.workspace(t).unwrap();
        let mut first: Option<Vec<f32>> = None;
        for threads in 1..=4 {
            let pool = LanePool::new(threads).unwrap();
            let mut out = vec![0.0; t * 2 * hidden];
            lstm.forward(&pool, &x, t, &mut out, &mut ws).unwrap();
            match &first {
                None => first = Some(out),
                Some(f) => assert!(f.iter().zip(&out).all(|(a, b)| a.to_bits() == b.to_bits())),
            }
        }
        // Unidirectional streaming: two halves with carried state == one pass.
        let uni = Lstm::new(input, hidden, &dirs[..1]).unwrap();
        let pool = LanePool::new(2).unwrap();
        let mut full = vec![0.0; t * hidden];
        uni.forward(&pool, &x, t, &mut full, &mut ws).unwrap();
        let mut state = uni.zero_state();
        let split = 61;
        let mut a = vec![0.0; split * hidden];
        let mut b = vec![0.0; (t - split) * hidden];
        uni.forward_with_state(
            &pool,
            &x[..split * input],
            split,
            &mut a,
            &mut ws,
            &mut state,
        )
        .unwrap();
        uni.forward_with_state(
            &pool,
            &x[split * input..],
            t - split,
            &mut b,
            &mut ws,
            &mut state,
        )
        .unwrap();
        a.extend_from_slice(&b);
        for (p, q) in a.iter().zip(&full) {
            assert!((p - q).abs() <= 1e-6, "{p} vs {q}");
        }
    }

    #[test]
    fn onnx_reorder_round_trip() {
        let (nd, h, cols) = (2, 3, 5);
        // PyTorch layout: value encodes (dir, gate, row, col).
        let pt: Vec<f32> = (0..nd * 4 * h * cols).map(|i| i as f32).collect();
        // Build ONNX iofc from PyTorch ifgo: ONNX blocks = PyTorch blocks 0, 3, 1, 2.
        let block = h * cols;
        let mut onnx = Vec::new();
        for d in pt.chunks_exact(4 * block) {
            for src in [0, 3, 1, 2] {
                onnx.extend_from_slice(&d[src * block..(src + 1) * block]);
            }
        }
        assert_eq!(onnx_to_pytorch_gates(&onnx, nd, h).unwrap(), pt);
        let b: Vec<f32> = (0..nd * 8 * h).map(|i| i as f32).collect();
        let (bi, bh) = onnx_lstm_bias(&b, nd, h).unwrap();
        assert_eq!(bi.len(), nd * 4 * h);
        // Direction 0, PyTorch gate f (block 1) = ONNX block 2 of W-bias.
        assert_eq!(bi[h], b[2 * h]);
        assert_eq!(bh[0], b[4 * h]);
        assert!(onnx_to_pytorch_gates(&[0.0; 7], 1, 1).is_err());
    }

    #[test]
    fn shape_errors() {
        assert!(Lstm::new(2, 3, &[]).is_err());
        let o = weights(1, 2, 3);
        let mut bad = view(&o);
        bad.w_hh = &o.w_hh[1..];
        assert!(Lstm::new(2, 3, &[bad]).is_err());
        let lstm = Lstm::new(2, 3, &[view(&o)]).unwrap();
        let pool = LanePool::new(1).unwrap();
        let mut ws = LstmWorkspace::default();
        assert!(lstm
            .forward(&pool, &[0.0; 5], 3, &mut [0.0; 9], &mut ws)
            .is_err());
    }

    /// Ad-hoc timing of a Kokoro-sized bidirectional LSTM (run with `--ignored --nocapture`).
    #[test]
    #[ignore]
    fn time_kokoro_lstm() {
        let (input, hidden, t) = (640, 256, 200);
        let owned = [weights(1, input, hidden), weights(2, input, hidden)];
        let dirs: Vec<_> = owned.iter().map(view).collect();
        let x = rnd_vec(5, t * input, 2.0);
        let lstm = Lstm::new(input, hidden, &dirs).unwrap();
        let mut ws = lstm.workspace(t).unwrap();
        let mut out = vec![0.0; t * 2 * hidden];
        for threads in [1, 2] {
            let pool = LanePool::new(threads).unwrap();
            lstm.forward(&pool, &x, t, &mut out, &mut ws).unwrap();
            let n = 10;
            let st = std::time::Instant::now();
            for _ in 0..n {
                lstm.forward(&pool, &x, t, &mut out, &mut ws).unwrap();
            }
            println!(
                "T {t} I {input} H {hidden} bidir, threads {threads}: {:.2} ms",
                st.elapsed().as_secs_f64() / n as f64 * 1e3
            );
        }
    }
}
