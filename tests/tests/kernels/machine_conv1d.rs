//! `conv1d` as a machine: table conformance, guard fuzzing, and real
//! results (every prepare route against the scalar reference, identical for
//! every lane budget; chunked streaming equals the batch conv).

use voxlane_actors::kernels::conv1d::{conv1d_reference, Conv1dParams, PadMode};
use voxlane_actors::kernels::conv1d_bf16::round_bf16;
use voxlane_machines::kernels::conv1d::guards::route;
use voxlane_machines::kernels::conv1d::{
    CausalHistory, Conv1dContract, Conv1dKernel, Conv1dKernelParams, Conv1dLimits, Conv1dRequest,
};
use voxlane_machines::kernels::{KernelContract, KernelMachineError, KernelReply};
use voxlane_runtime::{LanePool, SubPool};
use voxlane_tests::bits;
use voxlane_tests::kernel_conformance::{
    check_every_state_and_event, fuzz_random_sequences, send_execute, KernelDriver, RequestKind,
};

const MAX_T: usize = 320;
const LARGE_T: usize = 300;
const SMALL_T: usize = 20;
const LIMITS: Conv1dLimits = Conv1dLimits { max_t_in: MAX_T };

fn data(len: usize, seed: u32) -> Vec<f32> {
    (0..len)
        .map(|i| (((i as u32).wrapping_mul(2654435761) ^ seed) % 2000) as f32 / 1000.0 - 1.0)
        .collect()
}

/// Params taking prepare route `r`.
fn params(r: usize) -> Conv1dKernelParams {
    let (c, stream, gemm) = match r {
        route::STREAMING => (
            Conv1dParams::new(6, 8, 4).stride(2),
            Some(CausalHistory::Zeros),
            false,
        ),
        route::DEPTHWISE => (
            Conv1dParams::new(12, 24, 5).groups(12).padding(2, 2),
            None,
            false,
        ),
        route::DENSE_DIRECT => (
            Conv1dParams::new(6, 10, 3)
                .dilation(2)
                .padding(2, 2)
                .pad_mode(PadMode::Reflect),
            None,
            false,
        ),
        route::DENSE_PHASES => (
            Conv1dParams::new(6, 10, 4).stride(2).padding(1, 1),
            None,
            false,
        ),
        route::DENSE_BF16 => (
            // Partial 32-channel blocks on both sides, strided (phases).
            Conv1dParams::new(40, 36, 4).stride(2).padding(1, 1),
            None,
            false,
        ),
        _ => (
            Conv1dParams::new(6, 10, 3).groups(2).padding(1, 1),
            None,
            true,
        ),
    };
    let mut p = Conv1dKernelParams::new(
        c,
        data(c.weight_len(), 1 + r as u32),
        Some(data(c.c_out, 7)),
    );
    if gemm {
        p = p.gemm();
    }
    if r == route::DENSE_BF16 {
        p = p.bf16();
    }
    if let Some(h) = stream {
        p = p.streaming(h);
    }
    p
}

struct Driver;

impl KernelDriver for Driver {
    type K = Conv1dContract;
    fn params(r: usize) -> Conv1dKernelParams {
        params(r)
    }
    fn bad_params() -> Conv1dKernelParams {
        let mut p = params(route::DENSE_DIRECT);
        p.weight.pop();
        p
    }
    fn limits() -> Conv1dLimits {
        LIMITS
    }
    fn bad_limits() -> Option<Conv1dLimits> {
        Some(Conv1dLimits { max_t_in: 0 })
    }
    fn execute(
        k: &mut Conv1dKernel,
        kind: RequestKind,
        lanes: SubPool<'_>,
        step_only: bool,
    ) -> Option<KernelReply> {
        let lanes = if kind == RequestKind::Small {
            lanes.sub(1).unwrap()
        } else {
            lanes
        };
        let t = if kind == RequestKind::Small {
            SMALL_T
        } else {
            LARGE_T
        };
        let (c_in, c_out, t_out) = match k.prepared() {
            Some(pk) => (
                pk.params().c_in,
                pk.params().c_out,
                pk.out_len(t).unwrap_or(0),
            ),
            None => (6, 10, t),
        };
        let x = data(c_in * t + usize::from(kind == RequestKind::BadShape), 3);
        let mut out = vec![0.0; c_out * t_out];
        send_execute(
            k,
            Conv1dRequest { x: &x, t_in: t },
            &mut out,
            lanes,
            step_only,
        )
    }
}

#[test]
fn every_state_times_every_event_matches_the_table() {
    check_every_state_and_event::<Driver>();
}

#[test]
fn random_event_sequences_stay_declared() {
    fuzz_random_sequences::<Driver>(48);
}

/// Per element: |got − want| ≤ 1e-5·Σ|w·x| + 1e-6 (Σ from the reference on |w|, |x|).
fn assert_close(c: &Conv1dParams, w: &[f32], x: &[f32], t: usize, got: &[f32], want: &[f32]) {
    let aw: Vec<f32> = w.iter().map(|v| v.abs()).collect();
    let ax: Vec<f32> = x.iter().map(|v| v.abs()).collect();
    let mag = conv1d_reference(c, &aw, None, &ax, t).unwrap();
    assert_eq!(got.len(), want.len(), "{c:?}");
    for (i, (g, r)) in got.iter().zip(want).enumerate() {
        let bound = 1e-5 * mag[i] + 1e-6;
        assert!((g - r).abs() <= bound, "{c:?} element {i}: {g} vs {r}");
    }
}

fn ready(p: &Conv1dKernelParams, r: usize, lanes: usize) -> Conv1dKernel {
    let mut k = Conv1dKernel::new();
    assert_eq!(
        k.prepare(p),
        KernelReply::PrepareDone {
            route: Conv1dContract::PREPARE_ROUTES[r].1
        }
    );
    assert_eq!(k.bind(LIMITS, lanes), KernelReply::BindDone);
    k
}

/// Channel-major `x[:, f0..f0 + n]` of `x: [c, t]`.
fn frames(x: &[f32], c: usize, t: usize, f0: usize, n: usize) -> Vec<f32> {
    (0..c)
        .flat_map(|ci| x[ci * t + f0..ci * t + f0 + n].to_vec())
        .collect()
}

/// Execute `chunks` (input frames each) one after the other, stitching the outputs.
fn run_chunks(
    k: &mut Conv1dKernel,
    pool: &LanePool,
    lanes: usize,
    x: &[f32],
    t: usize,
    chunks: &[usize],
) -> Vec<f32> {
    let pk = k.prepared().unwrap().clone();
    let (c_in, c_out) = (pk.params().c_in, pk.params().c_out);
    let total: usize = chunks.iter().map(|&n| pk.out_len(n).unwrap()).sum();
    let mut y = vec![0.0; c_out * total];
    let (mut f0, mut o0) = (0, 0);
    for &n in chunks {
        let xc = frames(x, c_in, t, f0, n);
        let m = pk.out_len(n).unwrap();
        let mut oc = vec![f32::NAN; c_out * m];
        let reply = k.execute(
            Conv1dRequest { x: &xc, t_in: n },
            &mut oc,
            pool.sub(lanes).unwrap(),
        );
        assert!(
            matches!(reply, KernelReply::ExecuteDone { .. }),
            "{reply:?}"
        );
        for co in 0..c_out {
            y[co * total + o0..co * total + o0 + m].copy_from_slice(&oc[co * m..(co + 1) * m]);
        }
        f0 += n;
        o0 += m;
    }
    y
}

#[test]
fn every_route_computes_the_reference_identically_for_every_budget() {
    for r in 0..Conv1dContract::PREPARE_ROUTES.len() {
        let p = params(r);
        let x = data(p.conv.c_in * LARGE_T, 9 + r as u32);
        let mut first: Option<Vec<f32>> = None;
        for threads in 1..=4 {
            let pool = LanePool::new(threads).unwrap();
            let mut k = ready(&p, r, threads);
            let y = if r == route::STREAMING {
                // Uneven steps, each a multiple of the stride.
                run_chunks(&mut k, &pool, threads, &x, LARGE_T, &[2, 10, 48, 100, 140])
            } else {
                run_chunks(&mut k, &pool, threads, &x, LARGE_T, &[LARGE_T])
            };
            let reference = k.prepared().unwrap().batch_params();
            // The bf16 route's reference: the same conv on bf16-rounded values.
            let (w, xr) = if r == route::DENSE_BF16 {
                (round_bf16(&p.weight), round_bf16(&x))
            } else {
                (p.weight.clone(), x.clone())
            };
            let want = conv1d_reference(&reference, &w, p.bias.as_deref(), &xr, LARGE_T).unwrap();
            assert_close(&reference, &p.weight, &x, LARGE_T, &y, &want);
            match &first {
                None => first = Some(y),
                Some(f) => assert_eq!(bits(f), bits(&y), "route {r}, budget {threads}"),
            }
        }
    }
}

#[test]
fn streaming_chunks_equal_the_batch_conv() {
    // Dense strided (Mimi-style downsample) with zero history, and a
    // depthwise stride-1 conv with replicated history.
    let cases = [
        params(route::STREAMING),
        Conv1dKernelParams::new(
            Conv1dParams::new(4, 4, 3).groups(4),
            data(12, 5),
            Some(data(4, 6)),
        )
        .streaming(CausalHistory::Replicate),
    ];
    let pool = LanePool::new(2).unwrap();
    for p in cases {
        let x = data(p.conv.c_in * LARGE_T, 11);
        let mut k = ready(&p, route::STREAMING, 2);
        let s = p.conv.stride;
        let chunked = run_chunks(
            &mut k,
            &pool,
            2,
            &x,
            LARGE_T,
            &[s, 3 * s, 50 * s, LARGE_T - 54 * s],
        );
        // The same stream in one step (binding again starts a new stream).
        assert_eq!(k.bind(LIMITS, 2), KernelReply::BindDone);
        let whole = run_chunks(&mut k, &pool, 2, &x, LARGE_T, &[LARGE_T]);
        // The batch conv with causal left padding, through its own machine.
        let bp = k.prepared().unwrap().batch_params();
        let mut batch_p = Conv1dKernelParams::new(bp, p.weight.clone(), p.bias.clone());
        batch_p.dense_route = p.dense_route;
        let mut b = Conv1dKernel::new();
        assert!(matches!(
            b.prepare(&batch_p),
            KernelReply::PrepareDone { .. }
        ));
        assert_eq!(b.bind(LIMITS, 2), KernelReply::BindDone);
        let batch = run_chunks(&mut b, &pool, 2, &x, LARGE_T, &[LARGE_T]);
        assert_close(&bp, &p.weight, &x, LARGE_T, &chunked, &batch);
        assert_close(&bp, &p.weight, &x, LARGE_T, &whole, &batch);
    }
}

fn reason(r: &KernelReply) -> (&'static str, String) {
    match r {
        KernelReply::Error(e) => (e.reason(), e.to_string()),
        other => panic!("expected a rejection, got {other:?}"),
    }
}

#[test]
fn guards_reject_with_reasons() {
    let pool = LanePool::new(3).unwrap();
    let mut k = Conv1dKernel::new();
    let x = data(6 * SMALL_T, 1);
    let mut y = vec![0.0; 10 * SMALL_T];
    // Execute before prepare: unexpected, typed.
    let r = k.execute(
        Conv1dRequest {
            x: &x,
            t_in: SMALL_T,
        },
        &mut y,
        pool.sub(1).unwrap(),
    );
    assert_eq!(
        r,
        KernelReply::Error(KernelMachineError::Unexpected {
            event: "execute",
            state: "uninitialized"
        })
    );
    let mut k = ready(&params(route::DENSE_DIRECT), route::DENSE_DIRECT, 2);
    let mut exec = |x: &[f32], t_in: usize, out_len: usize, lanes: usize| {
        let mut out = vec![0.0; out_len];
        k.execute(
            Conv1dRequest { x, t_in },
            &mut out,
            pool.sub(lanes).unwrap(),
        )
    };
    // Direct route: out_len(t) = t (padding 2+2, span 5).
    let cases = [
        (exec(&x[1..], SMALL_T, 10 * SMALL_T, 1), "x holds"),
        (exec(&x, SMALL_T, 10 * SMALL_T - 1, 1), "out holds"),
        (exec(&[], 0, 0, 1), "empty input"),
        (
            exec(&data(6 * (MAX_T + 1), 2), MAX_T + 1, 10 * (MAX_T + 1), 1),
            "exceeds the bound",
        ),
        (exec(&x[..12], 2, 20, 1), "reflect padding"),
    ];
    for (reply, want) in &cases {
        let (why, msg) = reason(reply);
        assert_eq!(why, "shape_mismatch");
        assert!(msg.contains(want), "{msg}");
    }
    assert_eq!(
        exec(&x, SMALL_T, 10 * SMALL_T, 3),
        KernelReply::Error(KernelMachineError::LanesExceedBudget {
            requested: 3,
            bound: 2
        })
    );
    assert!(matches!(
        exec(&x, SMALL_T, 10 * SMALL_T, 2),
        KernelReply::ExecuteDone { .. }
    ));
    assert_eq!(k.state(), "ready");
    match k.diagnostics() {
        KernelReply::Diagnostics(d) => {
            assert_eq!(d.rejections_for("shape_mismatch"), 5);
            assert_eq!(d.rejections_for("lanes_exceed_budget"), 1);
        }
        other => panic!("{other:?}"),
    }
    // Streaming steps must be whole strides.
    let mut s = ready(&params(route::STREAMING), route::STREAMING, 1);
    let mut out = vec![0.0; 8];
    let (why, msg) = reason(&s.execute(
        Conv1dRequest {
            x: &x[..18],
            t_in: 3,
        },
        &mut out,
        pool.sub(1).unwrap(),
    ));
    assert_eq!(why, "shape_mismatch");
    assert!(msg.contains("multiple of stride 2"), "{msg}");
    // Invalid params lead to `errored`.
    let mut padded_stream = params(route::STREAMING);
    padded_stream.conv = padded_stream.conv.padding(3, 0);
    let mut bad_groups = params(route::DENSE_DIRECT);
    bad_groups.conv.groups = 4;
    let mut bad_bias = params(route::DENSE_GEMM);
    bad_bias.bias = Some(vec![0.0; 3]);
    for (p, want) in [
        (padded_stream, "unpadded"),
        (bad_groups, "groups"),
        (bad_bias, "bias holds 3"),
    ] {
        let mut k = Conv1dKernel::new();
        let (why, msg) = reason(&k.prepare(&p));
        assert_eq!(why, "invalid_params");
        assert!(msg.contains(want), "{msg}");
        assert_eq!(k.state(), "errored");
    }
    // Limits no request could use lead to `errored` too.
    let unpadded = Conv1dKernelParams::new(Conv1dParams::new(2, 3, 4), data(24, 1), None);
    for (limits, want) in [
        (Conv1dLimits { max_t_in: 0 }, "at least 1"),
        (Conv1dLimits { max_t_in: 3 }, "kernel span"),
    ] {
        let mut k = Conv1dKernel::new();
        k.prepare(&unpadded);
        let (why, msg) = reason(&k.bind(limits, 1));
        assert_eq!(why, "invalid_limits");
        assert!(msg.contains(want), "{msg}");
        assert_eq!(k.state(), "errored");
    }
}
