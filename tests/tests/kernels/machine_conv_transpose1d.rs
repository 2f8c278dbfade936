//! `conv_transpose1d` as a machine: table conformance, guard fuzzing, and
//! real results (every prepare route against the scalar reference, identical
//! for every lane budget; chunked streaming equals the batch result).

use voxlane_actors::kernels::conv1d_bf16::round_bf16;
use voxlane_actors::kernels::conv_transpose1d::{
    conv_transpose1d_reference, ConvTranspose1dParams,
};
use voxlane_machines::kernels::conv_transpose1d::guards::route;
use voxlane_machines::kernels::conv_transpose1d::{
    ConvTranspose1dContract, ConvTranspose1dKernel, ConvTranspose1dKernelParams,
    ConvTranspose1dLimits, ConvTranspose1dRequest,
};
use voxlane_machines::kernels::{KernelContract, KernelMachineError, KernelReply};
use voxlane_runtime::{LanePool, SubPool};
use voxlane_tests::bits;
use voxlane_tests::kernel_conformance::{
    check_every_state_and_event, fuzz_random_sequences, send_execute, KernelDriver, RequestKind,
};

const MAX_T: usize = 160;
const LARGE_T: usize = 150;
const SMALL_T: usize = 12;
const LIMITS: ConvTranspose1dLimits = ConvTranspose1dLimits { max_t_in: MAX_T };

fn data(len: usize, seed: u32) -> Vec<f32> {
    (0..len)
        .map(|i| (((i as u32).wrapping_mul(2654435761) ^ seed) % 2000) as f32 / 1000.0 - 1.0)
        .collect()
}

/// Params taking prepare route `r`.
fn params(r: usize) -> ConvTranspose1dKernelParams {
    let c = match r {
        route::STREAMING => ConvTranspose1dParams::new(6, 8, 4).stride(2),
        route::POLYPHASE => ConvTranspose1dParams::new(6, 10, 5).stride(3).padding(1, 1),
        route::POLYPHASE_BF16 => ConvTranspose1dParams::new(40, 20, 8).stride(4),
        route::COL2IM => ConvTranspose1dParams::new(6, 10, 3)
            .stride(2)
            .dilation(2)
            .padding(1, 1)
            .groups(2),
        _ => ConvTranspose1dParams::new(4, 8, 4).stride(2).groups(4),
    };
    let p = ConvTranspose1dKernelParams::new(
        c,
        data(c.weight_len(), 1 + r as u32),
        Some(data(c.c_out, 7)),
    );
    match r {
        route::STREAMING => p.streaming(),
        route::SCATTER => p.gemm(),
        route::POLYPHASE_BF16 => p.bf16(),
        _ => p,
    }
}

struct Driver;

impl KernelDriver for Driver {
    type K = ConvTranspose1dContract;
    fn params(r: usize) -> ConvTranspose1dKernelParams {
        params(r)
    }
    fn bad_params() -> ConvTranspose1dKernelParams {
        let mut p = params(route::POLYPHASE);
        p.weight.pop();
        p
    }
    fn limits() -> ConvTranspose1dLimits {
        LIMITS
    }
    fn bad_limits() -> Option<ConvTranspose1dLimits> {
        Some(ConvTranspose1dLimits { max_t_in: 0 })
    }
    fn execute(
        k: &mut ConvTranspose1dKernel,
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
            ConvTranspose1dRequest { x: &x, t_in: t },
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
fn assert_close(
    c: &ConvTranspose1dParams,
    w: &[f32],
    x: &[f32],
    t: usize,
    got: &[f32],
    want: &[f32],
) {
    let aw: Vec<f32> = w.iter().map(|v| v.abs()).collect();
    let ax: Vec<f32> = x.iter().map(|v| v.abs()).collect();
    let mag = conv_transpose1d_reference(c, &aw, None, &ax, t).unwrap();
    let (c_out, n) = (c.c_out, got.len() / c.c_out);
    let m = mag.len() / c_out;
    assert_eq!(got.len(), want.len(), "{c:?}");
    for (i, (g, r)) in got.iter().zip(want).enumerate() {
        // `got` may be a prefix of the reference's frames (streaming).
        let bound = 1e-5 * mag[(i / n) * m + i % n] + 1e-6;
        assert!((g - r).abs() <= bound, "{c:?} element {i}: {g} vs {r}");
    }
}

/// The first `n` frames of each channel of `y: [c, t]`.
fn prefix(y: &[f32], c: usize, t: usize, n: usize) -> Vec<f32> {
    (0..c)
        .flat_map(|ci| y[ci * t..ci * t + n].to_vec())
        .collect()
}

fn ready(p: &ConvTranspose1dKernelParams, r: usize, lanes: usize) -> ConvTranspose1dKernel {
    let mut k = ConvTranspose1dKernel::new();
    assert_eq!(
        k.prepare(p),
        KernelReply::PrepareDone {
            route: ConvTranspose1dContract::PREPARE_ROUTES[r].1
        }
    );
    assert_eq!(k.bind(LIMITS, lanes), KernelReply::BindDone);
    k
}

/// Execute `chunks` (input frames each) one after the other, stitching the outputs.
fn run_chunks(
    k: &mut ConvTranspose1dKernel,
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
        let xc: Vec<f32> = (0..c_in)
            .flat_map(|ci| x[ci * t + f0..ci * t + f0 + n].to_vec())
            .collect();
        let m = pk.out_len(n).unwrap();
        let mut oc = vec![f32::NAN; c_out * m];
        let reply = k.execute(
            ConvTranspose1dRequest { x: &xc, t_in: n },
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
    for r in 0..ConvTranspose1dContract::PREPARE_ROUTES.len() {
        let p = params(r);
        let c = p.conv;
        let x = data(c.c_in * LARGE_T, 9 + r as u32);
        // The bf16 route's reference: the same conv on bf16-rounded values.
        let (w, xr) = if r == route::POLYPHASE_BF16 {
            (round_bf16(&p.weight), round_bf16(&x))
        } else {
            (p.weight.clone(), x.clone())
        };
        let want = conv_transpose1d_reference(&c, &w, p.bias.as_deref(), &xr, LARGE_T).unwrap();
        let chunks: &[usize] = if r == route::STREAMING {
            &[1, 7, 40, 102]
        } else {
            &[LARGE_T]
        };
        let mut first: Option<Vec<f32>> = None;
        for threads in 1..=4 {
            let pool = LanePool::new(threads).unwrap();
            let mut k = ready(&p, r, threads);
            let y = run_chunks(&mut k, &pool, threads, &x, LARGE_T, chunks);
            // A stream emits the first t·stride frames of the unpadded batch output.
            let n = y.len() / c.c_out;
            let want = prefix(&want, c.c_out, want.len() / c.c_out, n);
            assert_close(&c, &p.weight, &x, LARGE_T, &y, &want);
            match &first {
                None => first = Some(y),
                Some(f) => assert_eq!(bits(f), bits(&y), "route {r}, budget {threads}"),
            }
        }
    }
}

#[test]
fn streaming_chunks_equal_the_batch_result() {
    let pool = LanePool::new(2).unwrap();
    for dense_gemm in [false, true] {
        let mut p = params(route::STREAMING);
        if dense_gemm {
            p = p.gemm();
        }
        let c = p.conv;
        let x = data(c.c_in * LARGE_T, 11);
        let mut k = ready(&p, route::STREAMING, 2);
        let chunked = run_chunks(&mut k, &pool, 2, &x, LARGE_T, &[3, 1, 60, 86]);
        // Binding again starts a new stream: one step of everything.
        assert_eq!(k.bind(LIMITS, 2), KernelReply::BindDone);
        let whole = run_chunks(&mut k, &pool, 2, &x, LARGE_T, &[LARGE_T]);
        // The batch transposed conv through its own machine (polyphase route).
        let mut b = ready(
            &ConvTranspose1dKernelParams::new(c, p.weight.clone(), p.bias.clone()),
            route::POLYPHASE,
            2,
        );
        let batch = run_chunks(&mut b, &pool, 2, &x, LARGE_T, &[LARGE_T]);
        let n = LARGE_T * c.stride;
        let batch = prefix(&batch, c.c_out, batch.len() / c.c_out, n);
        assert_close(&c, &p.weight, &x, LARGE_T, &chunked, &batch);
        assert_close(&c, &p.weight, &x, LARGE_T, &whole, &batch);
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
    let mut k = ConvTranspose1dKernel::new();
    let x = data(6 * SMALL_T, 1);
    let mut y = vec![0.0; 10 * 40];
    let r = k.execute(
        ConvTranspose1dRequest {
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
    // Polyphase route: out_len(t) = (t − 1)·3 + 5 + 1 − 2 = 3t + 1.
    let mut k = ready(&params(route::POLYPHASE), route::POLYPHASE, 2);
    let out_len = |t: usize| 10 * (3 * t + 1);
    let mut exec = |x: &[f32], t_in: usize, n: usize, lanes: usize| {
        let mut out = vec![0.0; n];
        k.execute(
            ConvTranspose1dRequest { x, t_in },
            &mut out,
            pool.sub(lanes).unwrap(),
        )
    };
    let big = data(6 * (MAX_T + 1), 2);
    let cases = [
        (exec(&x[1..], SMALL_T, out_len(SMALL_T), 1), "x holds"),
        (exec(&x, SMALL_T, out_len(SMALL_T) + 1, 1), "out holds"),
        (exec(&[], 0, 0, 1), "empty input"),
        (
            exec(&big, MAX_T + 1, out_len(MAX_T + 1), 1),
            "exceeds the bound",
        ),
    ];
    for (reply, want) in &cases {
        let (why, msg) = reason(reply);
        assert_eq!(why, "shape_mismatch");
        assert!(msg.contains(want), "{msg}");
    }
    assert_eq!(
        exec(&x, SMALL_T, out_len(SMALL_T), 3),
        KernelReply::Error(KernelMachineError::LanesExceedBudget {
            requested: 3,
            bound: 2
        })
    );
    assert!(matches!(
        exec(&x, SMALL_T, out_len(SMALL_T), 2),
        KernelReply::ExecuteDone { .. }
    ));
    assert_eq!(k.state(), "ready");
    match k.diagnostics() {
        KernelReply::Diagnostics(d) => {
            assert_eq!(d.rejections_for("shape_mismatch"), 4);
            assert_eq!(d.rejections_for("lanes_exceed_budget"), 1);
        }
        other => panic!("{other:?}"),
    }
    // Padding that trims every frame of a short input.
    let trimmed = ConvTranspose1dKernelParams::new(
        ConvTranspose1dParams::new(2, 2, 3).padding(2, 0),
        data(12, 3),
        None,
    );
    let mut k = ready(&trimmed, route::POLYPHASE, 1);
    let mut out = vec![0.0; 0];
    let (why, msg) = reason(&k.execute(
        ConvTranspose1dRequest {
            x: &x[..2],
            t_in: 1,
        },
        &mut out,
        pool.sub(1).unwrap(),
    ));
    assert_eq!(why, "shape_mismatch");
    assert!(msg.contains("trims more"), "{msg}");
    // Invalid params lead to `errored`.
    let mut padded_stream = params(route::STREAMING);
    padded_stream.conv = padded_stream.conv.padding(1, 0);
    let mut bad_output_padding = params(route::POLYPHASE);
    bad_output_padding.conv.output_padding = 3;
    let mut bad_bias = params(route::COL2IM);
    bad_bias.bias = Some(vec![0.0; 3]);
    for (p, want) in [
        (padded_stream, "streaming transposed conv needs"),
        (bad_output_padding, "output_padding"),
        (bad_bias, "bias holds 3"),
    ] {
        let mut k = ConvTranspose1dKernel::new();
        let (why, msg) = reason(&k.prepare(&p));
        assert_eq!(why, "invalid_params");
        assert!(msg.contains(want), "{msg}");
        assert_eq!(k.state(), "errored");
    }
    // Limits no request could use lead to `errored` too.
    for (limits, want) in [
        (ConvTranspose1dLimits { max_t_in: 0 }, "at least 1"),
        (
            ConvTranspose1dLimits { max_t_in: 1 },
            "no request could run",
        ),
    ] {
        let mut k = ConvTranspose1dKernel::new();
        k.prepare(&trimmed);
        let (why, msg) = reason(&k.bind(limits, 1));
        assert_eq!(why, "invalid_limits");
        assert!(msg.contains(want), "{msg}");
        assert_eq!(k.state(), "errored");
    }
}
