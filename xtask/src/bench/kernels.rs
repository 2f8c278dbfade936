//! `cargo xtask bench kernels`: each kernel at shapes from the real models,
//! at every requested thread budget, beside a reference from the same run.

use super::report::Row;
use super::timing::{median_secs, window};
use super::BenchOptions;
use half::{bf16, f16};
use std::sync::Mutex;
use voxlane_actors::kernels::attention::{attention_step, AttentionConfig, KvCache};
use voxlane_actors::kernels::conv1d::{Conv1d, Conv1dParams, Conv1dRoute};
use voxlane_actors::kernels::conv1d_int8::Conv1dInt8;
use voxlane_actors::kernels::conv_transpose1d::{ConvTranspose1d, ConvTranspose1dParams};
use voxlane_actors::kernels::f32_matvec;
use voxlane_actors::kernels::lstm::{Lstm, LstmWeights};
use voxlane_actors::kernels::matmul::{matmul_ws, IntWeights, MatmulWorkspace, Weights};
use voxlane_actors::kernels::sgemm::{sgemm, MatRef};
use voxlane_actors::tts::kokoro::qgemm::{self, PackedInt8, QGemmScratch};
use voxlane_runtime::{Fork, LanePool};

/// Deterministic pseudo-random values in [-1, 1).
pub fn data(len: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

fn pool(threads: usize) -> Result<LanePool, String> {
    LanePool::new(threads).map_err(|e| e.to_string())
}

/// Memory-bound matvecs: GB/s of weights streamed vs the measured read bandwidth.
fn matvec_rows(opts: &BenchOptions, rows: &mut Vec<Row>) -> Result<(), String> {
    let w = window(opts.quick);
    for &t in &opts.threads {
        let bw = super::bandwidth::read_gbps(t, w)?;
        let reference = "read bandwidth GB/s".to_string();
        let p = pool(t)?;
        // f32 matvec, exact order.
        let (n, k) = (4096, 4096);
        let wts = data(n * k, 1);
        let x = data(k, 2);
        let mut y = vec![0.0; n];
        let secs = median_secs(
            || f32_matvec::matvec(&x, &wts, n, None, &mut y, &p).expect("matvec"),
            w,
            5,
        );
        rows.push(Row {
            kernel: "kernel_f32_matvec",
            dtype: "f32",
            shape: format!("{n}x{k}"),
            threads: t,
            ours: (n * k * 4) as f64 / secs / 1e9,
            unit: "GB/s",
            reference: reference.clone(),
            reference_value: bw,
            target: 0.6,
        });
        drop(wts);
        // Moshi's linears as matvecs (token decode): bf16, q8_0 and q4_0,
        // each with f32 activations and with i16 block-quantized ones.
        for (n, k) in [(4096usize, 4096usize), (11264, 4096), (4096, 11264)] {
            let src = data(n * k, 3);
            let bf: Vec<bf16> = src.iter().map(|v| bf16::from_f32(*v)).collect();
            let formats = [
                ("bf16", Weights::bf16(&bf, n, k).map_err(|e| e.to_string())?),
                (
                    "q8_0",
                    Weights::q8_0_from_f32(&src, n, k).map_err(|e| e.to_string())?,
                ),
                (
                    "q8_0 × i16",
                    Weights::q8_0_act16_from_f32(&src, n, k).map_err(|e| e.to_string())?,
                ),
                (
                    "q4_0",
                    Weights::q4_0_from_f32(&src, n, k).map_err(|e| e.to_string())?,
                ),
                (
                    "q4_0 × i16",
                    Weights::q4_0_act16_from_f32(&src, n, k).map_err(|e| e.to_string())?,
                ),
            ];
            drop((src, bf));
            let x = data(k, 4);
            let mut y = vec![0.0; n];
            let mut ws = MatmulWorkspace::new(1, k);
            for (dtype, weights) in formats {
                let secs = median_secs(
                    || matmul_ws(&x, 1, k, &weights, None, &mut y, &mut ws, &p).expect("matvec"),
                    w,
                    5,
                );
                rows.push(Row {
                    kernel: "kernel_matmul",
                    dtype,
                    shape: format!("M=1 N={n} K={k}"),
                    threads: t,
                    ours: weights.bytes() as f64 / secs / 1e9,
                    unit: "GB/s",
                    reference: reference.clone(),
                    reference_value: bw,
                    target: 0.6,
                });
            }
        }
    }
    Ok(())
}

/// The library route for a GEMM: the `gemm` crate, single-threaded per lane,
/// N split into one contiguous part per lane.
fn gemm_reference(p: &LanePool, a: &[f32], m: usize, k: usize, w: &[f32], n: usize, c: &mut [f32]) {
    let parts = p.threads();
    let cols = n.div_ceil(parts);
    let base = c.as_mut_ptr() as usize;
    p.fork(parts, &|i| {
        let j0 = i * cols;
        let j1 = ((i + 1) * cols).min(n);
        if j0 >= j1 {
            return;
        }
        // SAFETY: lanes write disjoint column ranges of `c`; `c` outlives the fork.
        let c = unsafe {
            std::slice::from_raw_parts_mut((base as *mut f32).add(j0), (m - 1) * n + (j1 - j0))
        };
        sgemm(
            m,
            j1 - j0,
            k,
            MatRef::row_major(a, k),
            MatRef::transposed(&w[j0 * k..], k),
            c,
            n,
            false,
        )
        .expect("reference gemm");
    })
    .expect("reference lanes");
}

fn gemm_f16_reference(
    p: &LanePool,
    a: &[f16],
    m: usize,
    k: usize,
    w: &[f16],
    n: usize,
    c: &mut [f16],
) {
    let parts = p.threads();
    let cols = n.div_ceil(parts);
    let base = c.as_mut_ptr() as usize;
    p.fork(parts, &|i| {
        let j0 = i * cols;
        let j1 = ((i + 1) * cols).min(n);
        if j0 >= j1 {
            return;
        }
        // SAFETY: disjoint column ranges; every index is in bounds for these strides.
        unsafe {
            gemm::gemm(
                m,
                j1 - j0,
                k,
                (base as *mut f16).add(j0),
                1,
                n as isize,
                false,
                a.as_ptr(),
                1,
                k as isize,
                w.as_ptr().add(j0 * k),
                k as isize,
                1,
                f16::ZERO,
                f16::ONE,
                false,
                false,
                false,
                gemm::Parallelism::None,
            );
        }
    })
    .expect("reference lanes");
}

/// Compute-bound GEMMs (prefill, ALBERT, projections): GFLOP/s vs the gemm crate.
fn gemm_rows(opts: &BenchOptions, rows: &mut Vec<Row>) -> Result<(), String> {
    let w = window(opts.quick);
    for &t in &opts.threads {
        let p = pool(t)?;
        for (m, k, n) in [(128usize, 768usize, 3072usize), (800, 512, 512)] {
            let a = data(m * k, 5);
            let src = data(n * k, 6);
            let flops = 2.0 * (m * n * k) as f64;
            let mut c = vec![0.0; m * n];
            let mut ws = MatmulWorkspace::new(m, k);
            let f32w = Weights::f32(src.clone(), n, k).map_err(|e| e.to_string())?;
            let ours = median_secs(
                || matmul_ws(&a, m, k, &f32w, None, &mut c, &mut ws, &p).expect("gemm"),
                w,
                3,
            );
            let reference = median_secs(|| gemm_reference(&p, &a, m, k, &src, n, &mut c), w, 3);
            rows.push(Row {
                kernel: "kernel_matmul",
                dtype: "f32",
                shape: format!("M={m} N={n} K={k}"),
                threads: t,
                ours: flops / ours / 1e9,
                unit: "GFLOP/s",
                reference: "gemm crate GFLOP/s".into(),
                reference_value: flops / reference / 1e9,
                target: 0.8,
            });
            let hw: Vec<f16> = src.iter().map(|v| f16::from_f32(*v)).collect();
            let ha: Vec<f16> = a.iter().map(|v| f16::from_f32(*v)).collect();
            let mut hc = vec![f16::ZERO; m * n];
            let f16w = Weights::f16(&hw, n, k).map_err(|e| e.to_string())?;
            let ours = median_secs(
                || matmul_ws(&a, m, k, &f16w, None, &mut c, &mut ws, &p).expect("gemm"),
                w,
                3,
            );
            let reference =
                median_secs(|| gemm_f16_reference(&p, &ha, m, k, &hw, n, &mut hc), w, 3);
            rows.push(Row {
                kernel: "kernel_matmul",
                dtype: "f16",
                shape: format!("M={m} N={n} K={k}"),
                threads: t,
                ours: flops / ours / 1e9,
                unit: "GFLOP/s",
                reference: "gemm crate f16 GFLOP/s".into(),
                reference_value: flops / reference / 1e9,
                target: 0.8,
            });
        }
    }
    Ok(())
}

/// Kokoro's int8 GEMMs (`MatMulInteger`: ALBERT's feed-forward pair at a
/// sentence's 64 tokens, an LSTM step's one row) on the packed route this
/// CPU takes, activations quantized per call as onnxruntime does, vs our
/// f32 GEMM on the same shape.
fn qgemm_rows(opts: &BenchOptions, rows: &mut Vec<Row>) -> Result<(), String> {
    let w = window(opts.quick);
    if !qgemm::available() {
        return Ok(());
    }
    let err = |e: voxlane_actors::kernels::KernelError| e.to_string();
    for &t in &opts.threads {
        let p = pool(t)?;
        for (m, k, n) in [
            (64usize, 768usize, 2048usize),
            (64, 2048, 768),
            (1, 512, 1024),
        ] {
            let x = data(m * k, 21);
            // Weights spread as trained ones are (a mean of twelve uniforms:
            // σ ≈ 21 of 127; Kokoro's never saturate an AVX2 pair), and for
            // the first shape also evenly spread over the i8 range (a
            // quarter of the AVX2 pairs saturate: its second plane).
            let parts: Vec<Vec<f32>> = (0..12).map(|j| data(k * n, 22 + j)).collect();
            let bell: Vec<f32> = (0..k * n)
                .map(|i| parts.iter().map(|p| p[i]).sum::<f32>() / 12.0)
                .collect();
            let spreads: &[(&str, &[f32])] = if m == 64 && k == 768 {
                &[("bell", &bell), ("even", &parts[0])]
            } else {
                &[("bell", &bell)]
            };
            for &(spread, wf) in spreads {
                // Symmetric int8 weights `[k, n]`, as the export stores them.
                let wq: Vec<i8> = wf.iter().map(|v| (v * 127.0) as i8).collect();
                let scale = vec![1.0 / 127.0; n];
                let packed = PackedInt8::new(k, n, &wq, &scale, &[0]).map_err(err)?;
                let mut out = vec![0.0; m * n];
                let mut scratch = QGemmScratch::default();
                let ours = if m == 1 {
                    // The LSTM's step: one row, serial (`gemv`).
                    median_secs(
                        || packed.gemv(&x, &mut out, &mut scratch).expect("gemv"),
                        w,
                        3,
                    )
                } else {
                    median_secs(
                        || {
                            packed
                                .gemm(&p, &x, m, None, &mut out, &mut scratch)
                                .expect("qgemm")
                        },
                        w,
                        3,
                    )
                };
                let f32w = Weights::f32(transpose_kn(wf, k, n), n, k).map_err(err)?;
                let mut ws = MatmulWorkspace::new(m, k);
                let reference = median_secs(
                    || matmul_ws(&x, m, k, &f32w, None, &mut out, &mut ws, &p).expect("gemm"),
                    w,
                    3,
                );
                let flops = 2.0 * (m * n * k) as f64;
                rows.push(Row {
                    kernel: "kernel_matmul",
                    dtype: if m == 1 {
                        "int8 (qgemv)"
                    } else {
                        "int8 (qgemm)"
                    },
                    shape: format!("M={m} N={n} K={k}, {spread} weights ({:?})", packed.route()),
                    threads: t,
                    ours: flops / ours / 1e9,
                    unit: "GOP/s",
                    reference: "our f32 GFLOP/s".into(),
                    reference_value: flops / reference / 1e9,
                    // Int8 at twice f32's products per instruction, less
                    // the quantization; the second plane's row has none.
                    target: if spread == "bell" { 1.5 } else { 0.0 },
                });
            }
        }
    }
    Ok(())
}

/// `w [k, n]` as `[n, k]` (the f32 route's row-major weights).
fn transpose_kn(w: &[f32], k: usize, n: usize) -> Vec<f32> {
    (0..n * k).map(|i| w[(i % k) * n + i / k]).collect()
}

/// The library route for one streaming attention step: per head, scores and
/// outputs as gemm-crate products over contiguous K/V, softmax in between.
fn attention_reference(
    p: &LanePool,
    cfg: &AttentionConfig,
    q: &[f32],
    keys: &[f32],
    vals: &[f32],
    out: &mut [f32],
) {
    let (h, d, t) = (cfg.heads, cfg.head_dim, cfg.context);
    let base = out.as_mut_ptr() as usize;
    p.fork(h, &|head| {
        let mut scores = vec![0.0f32; t];
        let kh = &keys[head * t * d..(head + 1) * t * d];
        let vh = &vals[head * t * d..(head + 1) * t * d];
        sgemm(
            1,
            t,
            d,
            MatRef::row_major(&q[head * d..(head + 1) * d], d),
            MatRef::transposed(kh, d),
            &mut scores,
            t,
            false,
        )
        .expect("scores");
        let mx = scores.iter().fold(f32::NEG_INFINITY, |a, b| a.max(*b));
        let mut z = 0.0;
        for s in &mut scores {
            *s = ((*s - mx) * cfg.scale).exp();
            z += *s;
        }
        scores.iter_mut().for_each(|s| *s /= z);
        // SAFETY: each head writes its own `d` outputs.
        let o = unsafe { std::slice::from_raw_parts_mut((base as *mut f32).add(head * d), d) };
        sgemm(
            1,
            d,
            t,
            MatRef::row_major(&scores, t),
            MatRef::row_major(vh, d),
            o,
            d,
            false,
        )
        .expect("values");
    })
    .expect("reference lanes");
}

/// Mimi's attention: one streaming step against a full 250-frame window.
fn attention_rows(opts: &BenchOptions, rows: &mut Vec<Row>) -> Result<(), String> {
    let w = window(opts.quick);
    let cfg = AttentionConfig::mimi();
    let width = cfg.width();
    for &t in &opts.threads {
        let p = pool(t)?;
        let mut cache = KvCache::new(cfg).map_err(|e| e.to_string())?;
        let x = data(width, 7);
        let mut out = vec![0.0; width];
        for _ in 0..cfg.context {
            attention_step(&x, &x, &x, 1, &mut cache, &mut out, &p).map_err(|e| e.to_string())?;
        }
        let ours = median_secs(
            || attention_step(&x, &x, &x, 1, &mut cache, &mut out, &p).expect("attention"),
            w,
            20,
        );
        let keys = data(cfg.heads * cfg.context * cfg.head_dim, 8);
        let vals = data(cfg.heads * cfg.context * cfg.head_dim, 9);
        let reference = median_secs(
            || attention_reference(&p, &cfg, &x, &keys, &vals, &mut out),
            w,
            20,
        );
        rows.push(Row {
            kernel: "kernel_attention",
            dtype: "f32",
            shape: format!(
                "H={} D={} window={} step=1",
                cfg.heads, cfg.head_dim, cfg.context
            ),
            threads: t,
            ours: 1.0 / ours,
            unit: "steps/s",
            reference: "gemm-crate route steps/s".into(),
            reference_value: 1.0 / reference,
            target: 0.8,
        });
    }
    Ok(())
}

/// Kokoro generator convolutions: `(c, kernel, dilation, frames)`, same padding.
const CONV_SHAPES: [(usize, usize, usize, usize); 6] = [
    (256, 3, 1, 800),
    (256, 7, 3, 800),
    (256, 11, 5, 800),
    (128, 3, 1, 4800),
    (128, 7, 3, 4800),
    (128, 11, 5, 4800),
];

/// Conv1d f32 (direct route vs its im2col-free GEMM route on the gemm crate)
/// and int8 (`DynamicQuantizeLinear` + `ConvInteger` + dequantize, vs our f32
/// direct route) at Kokoro's generator shapes.
fn conv_rows(opts: &BenchOptions, rows: &mut Vec<Row>) -> Result<(), String> {
    let w = window(opts.quick);
    let err = |e: voxlane_actors::kernels::KernelError| e.to_string();
    for &t in &opts.threads {
        let p = pool(t)?;
        for (c, k, d, frames) in CONV_SHAPES {
            let pad = (k - 1) * d / 2;
            let params = Conv1dParams::new(c, c, k).dilation(d).padding(pad, pad);
            let wf = data(params.weight_len(), 11);
            let bias = data(c, 12);
            let x = data(c * frames, 13);
            let t_out = params.out_len(frames).map_err(err)?;
            let mut out = vec![0.0; c * t_out];
            let flops = 2.0 * params.weight_len() as f64 * t_out as f64;
            let shape = format!("{c}→{c} k{k} d{d} T={frames}");
            let direct =
                Conv1d::with_route(params, &wf, Some(&bias), Conv1dRoute::Direct).map_err(err)?;
            let gemm =
                Conv1d::with_route(params, &wf, Some(&bias), Conv1dRoute::Gemm).map_err(err)?;
            let mut ws = direct.workspace(frames).map_err(err)?;
            let ours = median_secs(
                || {
                    direct
                        .forward(&p, &x, frames, &mut out, &mut ws)
                        .expect("conv")
                },
                w,
                3,
            );
            let mut gws = gemm.workspace(frames).map_err(err)?;
            let reference = median_secs(
                || {
                    gemm.forward(&p, &x, frames, &mut out, &mut gws)
                        .expect("conv")
                },
                w,
                3,
            );
            rows.push(Row {
                kernel: "conv1d",
                dtype: "f32",
                shape: shape.clone(),
                threads: t,
                ours: flops / ours / 1e9,
                unit: "GFLOP/s",
                reference: "gemm route GFLOP/s".into(),
                reference_value: flops / reference / 1e9,
                target: 0.8,
            });
            // Symmetric per-channel int8 weights, as onnxruntime exports them.
            let wq: Vec<i8> = wf.iter().map(|v| (v * 127.0) as i8).collect();
            let scales = vec![1.0 / 127.0; c];
            let mut int8 = Conv1dInt8::new(params, IntWeights::I8(&wq), &scales, &[0], Some(&bias))
                .map_err(err)?;
            // The tiles this route takes, then (where those are Winograd's)
            // the direct tiles beside them for comparison.
            let winograd = int8.tiles().is_some_and(|t| t.starts_with("wino"));
            for direct_tiles in [false, true] {
                if direct_tiles && !winograd {
                    break;
                }
                int8.set_winograd(!direct_tiles);
                let mut qws = int8.workspace(frames).map_err(err)?;
                let quant = median_secs(
                    || {
                        int8.forward(&p, &x, frames, &mut out, &mut qws)
                            .expect("conv int8")
                    },
                    w,
                    3,
                );
                rows.push(Row {
                    kernel: "conv1d",
                    dtype: match (winograd, direct_tiles) {
                        (true, false) => "int8 (Winograd)",
                        (true, true) => "int8 (direct tiles)",
                        _ => "int8",
                    },
                    shape: shape.clone(),
                    threads: t,
                    ours: flops / quant / 1e9,
                    unit: "GOP/s",
                    reference: "our f32 direct GFLOP/s".into(),
                    reference_value: flops / ours / 1e9,
                    // The target is the route's own: the comparison row has none.
                    target: if direct_tiles { 0.0 } else { 1.8 },
                });
            }
            // bf16 values, f32 sums: AMX-BF16 tiles where the CPU has them.
            let bf =
                Conv1d::with_route(params, &wf, Some(&bias), Conv1dRoute::Bf16).map_err(err)?;
            let mut bws = bf.workspace(frames).map_err(err)?;
            let bsecs = median_secs(
                || {
                    bf.forward(&p, &x, frames, &mut out, &mut bws)
                        .expect("conv bf16")
                },
                w,
                3,
            );
            rows.push(Row {
                kernel: "conv1d",
                dtype: if bf.uses_bf16_tiles() {
                    "bf16 (AMX)"
                } else {
                    "bf16 (no tiles)"
                },
                shape,
                threads: t,
                ours: flops / bsecs / 1e9,
                unit: "GFLOP/s",
                reference: "our f32 direct GFLOP/s".into(),
                reference_value: flops / ours / 1e9,
                // Without tiles the route trades speed for nothing: no target.
                target: if bf.uses_bf16_tiles() { 2.0 } else { 0.0 },
            });
        }
    }
    Ok(())
}

/// Kokoro's upsamplers: polyphase route vs the GEMM + col2im route.
fn conv_transpose_rows(opts: &BenchOptions, rows: &mut Vec<Row>) -> Result<(), String> {
    let w = window(opts.quick);
    let err = |e: voxlane_actors::kernels::KernelError| e.to_string();
    let shapes = [
        (
            ConvTranspose1dParams::new(512, 256, 20)
                .stride(10)
                .padding(5, 0),
            80usize,
        ),
        (
            ConvTranspose1dParams::new(256, 128, 12)
                .stride(6)
                .padding(3, 0),
            800,
        ),
    ];
    for &t in &opts.threads {
        let p = pool(t)?;
        for (params, frames) in shapes {
            let wf = data(params.weight_len(), 21);
            let bias = data(params.c_out, 22);
            let x = data(params.c_in * frames, 23);
            let t_out = params.out_len(frames).map_err(err)?;
            let mut out = vec![0.0; params.c_out * t_out];
            let flops = 2.0 * params.weight_len() as f64 * frames as f64;
            let ours_conv = ConvTranspose1d::new(params, &wf, Some(&bias)).map_err(err)?;
            let gemm = ConvTranspose1d::with_route(params, &wf, Some(&bias), Conv1dRoute::Gemm)
                .map_err(err)?;
            let mut ws = ours_conv.workspace(frames).map_err(err)?;
            let ours = median_secs(
                || {
                    ours_conv
                        .forward(&p, &x, frames, &mut out, &mut ws)
                        .expect("convT")
                },
                w,
                3,
            );
            let mut gws = gemm.workspace(frames).map_err(err)?;
            let reference = median_secs(
                || {
                    gemm.forward(&p, &x, frames, &mut out, &mut gws)
                        .expect("convT")
                },
                w,
                3,
            );
            rows.push(Row {
                kernel: "conv_transpose1d",
                dtype: "f32",
                shape: format!(
                    "{}→{} k{} s{} p{} T={frames}",
                    params.c_in, params.c_out, params.kernel, params.stride, params.padding
                ),
                threads: t,
                ours: flops / ours / 1e9,
                unit: "GFLOP/s",
                reference: "gemm route GFLOP/s".into(),
                reference_value: flops / reference / 1e9,
                target: 0.8,
            });
        }
    }
    Ok(())
}

/// One direction's weights and the reference's preallocated scratch.
struct LstmDir {
    w_ih: Vec<f32>,
    w_hh: Vec<f32>,
    bias: Vec<f32>,
    scratch: Mutex<RefScratch>,
}

/// The LSTM reference's buffers, allocated once outside the timed calls.
struct RefScratch {
    /// `[T, 4H]` input projection.
    gx: Vec<f32>,
    /// One step's `[4H]` gates.
    gs: Vec<f32>,
    h: Vec<f32>,
    c: Vec<f32>,
}

fn sigmoid(v: f32) -> f32 {
    1.0 / (1.0 + (-v).exp())
}

/// The library route for an LSTM: per direction (one lane each), the input
/// projection as one gemm-crate product, then per step a gemm-crate M=1
/// product `W_hh · h` and scalar gate math.
fn lstm_reference(
    p: &LanePool,
    input: usize,
    hidden: usize,
    dirs: &[LstmDir],
    x: &[f32],
    t: usize,
    out: &mut [f32],
) {
    let (g, nd) = (4 * hidden, dirs.len());
    let base = out.as_mut_ptr() as usize;
    p.fork(nd, &|d| {
        let dir = &dirs[d];
        let mut guard = dir.scratch.lock().unwrap_or_else(|e| e.into_inner());
        let RefScratch { gx, gs, h, c } = &mut *guard;
        sgemm(
            t,
            g,
            input,
            MatRef::row_major(x, input),
            MatRef::transposed(&dir.w_ih, input),
            gx,
            g,
            false,
        )
        .expect("lstm projection");
        h.fill(0.0);
        c.fill(0.0);
        for step in 0..t {
            let ti = if d == 1 { t - 1 - step } else { step };
            for ((s, a), b) in gs.iter_mut().zip(&gx[ti * g..(ti + 1) * g]).zip(&dir.bias) {
                *s = a + b;
            }
            sgemm(
                1,
                g,
                hidden,
                MatRef::row_major(h, hidden),
                MatRef::transposed(&dir.w_hh, hidden),
                gs,
                g,
                true,
            )
            .expect("lstm recurrence");
            // SAFETY: direction d alone writes columns d·H..(d+1)·H of row ti.
            let o = unsafe {
                std::slice::from_raw_parts_mut(
                    (base as *mut f32).add((ti * nd + d) * hidden),
                    hidden,
                )
            };
            for j in 0..hidden {
                let (i, f) = (sigmoid(gs[j]), sigmoid(gs[hidden + j]));
                let (gg, og) = (gs[2 * hidden + j].tanh(), sigmoid(gs[3 * hidden + j]));
                c[j] = f * c[j] + i * gg;
                h[j] = og * c[j].tanh();
                o[j] = h[j];
            }
        }
    })
    .expect("reference lanes");
}

/// Kokoro's bidirectional LSTMs (prosody 640→256, text encoder 512→256) vs the
/// gemm-crate route with the directions as two lanes.
fn lstm_rows(opts: &BenchOptions, rows: &mut Vec<Row>) -> Result<(), String> {
    let w = window(opts.quick);
    let err = |e: voxlane_actors::kernels::KernelError| e.to_string();
    for &threads in &opts.threads {
        let p = pool(threads)?;
        for (input, hidden, t) in [(640usize, 256usize, 200usize), (512, 256, 100)] {
            let g = 4 * hidden;
            let dirs: Vec<LstmDir> = (0..2u64)
                .map(|d| LstmDir {
                    w_ih: data(g * input, 31 + d).iter().map(|v| v * 0.05).collect(),
                    w_hh: data(g * hidden, 33 + d).iter().map(|v| v * 0.05).collect(),
                    bias: data(g, 35 + d),
                    scratch: Mutex::new(RefScratch {
                        gx: vec![0.0; t * g],
                        gs: vec![0.0; g],
                        h: vec![0.0; hidden],
                        c: vec![0.0; hidden],
                    }),
                })
                .collect();
            let weights: Vec<LstmWeights<'_>> = dirs
                .iter()
                .map(|d| LstmWeights {
                    w_ih: &d.w_ih,
                    w_hh: &d.w_hh,
                    b_ih: Some(&d.bias),
                    b_hh: None,
                })
                .collect();
            let lstm = Lstm::new(input, hidden, &weights).map_err(err)?;
            let mut ws = lstm.workspace(t).map_err(err)?;
            let x = data(t * input, 37);
            let mut out = vec![0.0; t * 2 * hidden];
            let ours = median_secs(
                || lstm.forward(&p, &x, t, &mut out, &mut ws).expect("lstm"),
                w,
                3,
            );
            let reference = median_secs(
                || lstm_reference(&p, input, hidden, &dirs, &x, t, &mut out),
                w,
                3,
            );
            let flops = 2.0 * 2.0 * (t * g * (input + hidden)) as f64;
            rows.push(Row {
                kernel: "lstm",
                dtype: "f32",
                shape: format!("bidir I={input} H={hidden} T={t}"),
                threads,
                ours: flops / ours / 1e9,
                unit: "GFLOP/s",
                reference: "gemm-crate route GFLOP/s".into(),
                reference_value: flops / reference / 1e9,
                target: 0.8,
            });
        }
    }
    Ok(())
}

/// Every kernel row.
pub fn run(opts: &BenchOptions) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    matvec_rows(opts, &mut rows)?;
    gemm_rows(opts, &mut rows)?;
    qgemm_rows(opts, &mut rows)?;
    attention_rows(opts, &mut rows)?;
    conv_rows(opts, &mut rows)?;
    conv_transpose_rows(opts, &mut rows)?;
    lstm_rows(opts, &mut rows)?;
    Ok(rows)
}
