//! `kernel_matmul` as a machine: table conformance, guard fuzzing, real
//! results for every weight format (against the actors' scalar references,
//! identical for every lane budget), and typed rejections.

use voxlane_actors::kernels::matmul::{
    bf16, f16, quantize_q4_0, quantize_q8_0, reference, IntWeights, CHUNK_N, Q8_0_BLOCK,
};
use voxlane_machines::kernels::matmul::{
    IntQuants, Matmul, MatmulKernel, MatmulLimits, MatmulParams, MatmulRequest, MatmulWeights,
};
use voxlane_machines::kernels::{KernelEvent, KernelMachineError, KernelReply};
use voxlane_runtime::{LanePool, SubPool};
use voxlane_tests::bits;
use voxlane_tests::kernel_conformance::{
    check_every_state_and_event, fuzz_random_sequences, send_execute, KernelDriver, RequestKind,
};

const K: usize = 2 * Q8_0_BLOCK;
const N: usize = 2 * CHUNK_N + 22;
const MAX_M: usize = 9;

const ROUTES: [&str; 8] = [
    "effect_pack_f32",
    "effect_pack_f16",
    "effect_pack_bf16",
    "effect_pack_q8_0",
    "effect_pack_int8",
    "effect_pack_q4_0",
    "effect_pack_q8_0_act16",
    "effect_pack_q4_0_act16",
];
/// The float-valued formats' routes (int8 is exact, tested on its own).
const FLOAT_ROUTES: [usize; 7] = [0, 1, 2, 3, 5, 6, 7];
/// The routes whose activations are rounded (per 32-value block, to i16).
const ACT16: [usize; 2] = [6, 7];

fn data(len: usize, seed: u32) -> Vec<f32> {
    (0..len)
        .map(|i| (((i as u32).wrapping_mul(2654435761) ^ seed) % 2000) as f32 / 1000.0 - 1.0)
        .collect()
}

fn bytes(len: usize, seed: u32) -> Vec<u8> {
    data(len, seed)
        .iter()
        .map(|v| ((v + 1.0) * 127.9) as u8)
        .collect()
}

/// Weights for prepare route `route` (per-channel uint8 for int8).
fn weights(route: usize) -> MatmulWeights {
    let src = data(N * K, 1);
    match route {
        0 => MatmulWeights::F32(src),
        1 => MatmulWeights::F16(src.iter().map(|&v| f16::from_f32(v)).collect()),
        2 => MatmulWeights::Bf16(src.iter().map(|&v| bf16::from_f32(v)).collect()),
        3 => MatmulWeights::Q8_0(quantize_q8_0(&src, K).unwrap()),
        5 => MatmulWeights::Q4_0(quantize_q4_0(&src, K).unwrap()),
        6 => MatmulWeights::Q8_0Act16(quantize_q8_0(&src, K).unwrap()),
        7 => MatmulWeights::Q4_0Act16(quantize_q4_0(&src, K).unwrap()),
        _ => MatmulWeights::Int8 {
            quants: IntQuants::U8(bytes(N * K, 4)),
            scales: data(N, 5).iter().map(|v| v.abs() * 0.01 + 1e-4).collect(),
            zero_points: bytes(N, 6).iter().map(|&z| z as i32).collect(),
        },
    }
}

fn params(route: usize) -> MatmulParams {
    MatmulParams {
        n: N,
        k: K,
        weights: weights(route),
        bias: Some(data(N, 2)),
    }
}

/// The f32 values a float weight format stands for.
fn dense(w: &MatmulWeights) -> Vec<f32> {
    match w {
        MatmulWeights::F32(v) => v.clone(),
        MatmulWeights::F16(v) => v.iter().map(|h| h.to_f32()).collect(),
        MatmulWeights::Bf16(v) => v.iter().map(|h| h.to_f32()).collect(),
        MatmulWeights::Q8_0(b) | MatmulWeights::Q8_0Act16(b) => {
            reference::dequantize_q8_0(b).unwrap()
        }
        MatmulWeights::Q4_0(b) | MatmulWeights::Q4_0Act16(b) => {
            reference::dequantize_q4_0(b).unwrap()
        }
        MatmulWeights::Int8 { .. } => unreachable!("not a float format"),
    }
}

struct Driver;

impl KernelDriver for Driver {
    type K = Matmul;
    fn params(route: usize) -> MatmulParams {
        params(route)
    }
    fn bad_params() -> MatmulParams {
        MatmulParams {
            n: N,
            k: K,
            weights: MatmulWeights::F32(vec![0.0; 5]),
            bias: None,
        }
    }
    fn limits() -> MatmulLimits {
        MatmulLimits { max_m: MAX_M }
    }
    fn bad_limits() -> Option<MatmulLimits> {
        Some(MatmulLimits { max_m: 0 })
    }
    fn execute(
        k: &mut MatmulKernel,
        kind: RequestKind,
        lanes: SubPool<'_>,
        step_only: bool,
    ) -> Option<KernelReply> {
        // A small request is one row on a one-lane share; the machine routes by share and size.
        let (lanes, m) = match kind {
            RequestKind::Small => (lanes.sub(1).unwrap(), 1),
            _ => (lanes, 3),
        };
        let a_len = if kind == RequestKind::BadShape {
            m * K + 1
        } else {
            m * K
        };
        let a = data(a_len, 3);
        let mut c = vec![0.0; m * N];
        send_execute(k, MatmulRequest { a: &a, m }, &mut c, lanes, step_only)
    }
}

#[test]
fn every_state_times_every_event_matches_the_table() {
    check_every_state_and_event::<Driver>();
}

#[test]
fn random_event_sequences_stay_declared() {
    fuzz_random_sequences::<Driver>(64);
}

/// Run `p` through a fresh machine on a `threads`-lane pool for `m` rows.
fn run_machine(p: &MatmulParams, a: &[f32], m: usize, threads: usize) -> Vec<f32> {
    let pool = LanePool::new(threads).unwrap();
    let mut k = MatmulKernel::new();
    let route = ROUTES[voxlane_machines::kernels::matmul::guards::format_route(&p.weights)];
    assert_eq!(k.prepare(p), KernelReply::PrepareDone { route });
    assert_eq!(
        k.bind(MatmulLimits { max_m: MAX_M }, threads),
        KernelReply::BindDone
    );
    let mut c = vec![f32::NAN; m * p.n];
    let reply = k.execute(MatmulRequest { a, m }, &mut c, pool.sub(threads).unwrap());
    assert!(
        matches!(reply, KernelReply::ExecuteDone { .. }),
        "{reply:?}"
    );
    assert_eq!(k.state(), "ready");
    c
}

/// Every budget gives the same bits; returns them.
fn run_every_budget(p: &MatmulParams, a: &[f32], m: usize) -> Vec<f32> {
    let first = run_machine(p, a, m, 1);
    for threads in 2..=4 {
        let got = run_machine(p, a, m, threads);
        assert_eq!(
            bits(&first),
            bits(&got),
            "{:?} m={m} budget {threads}",
            voxlane_machines::kernels::matmul::guards::format_route(&p.weights)
        );
    }
    first
}

#[test]
fn float_formats_match_the_reference_identically_for_every_budget() {
    // m = 1 (matvec), 3 (repeated matvec rows), 9 (tiled GEMM).
    for m in [1, 3, MAX_M] {
        let a = data(m * K, 7 + m as u32);
        for route in FLOAT_ROUTES {
            let (p, name) = (params(route), ROUTES[route]);
            let w = dense(&p.weights);
            let want = reference::matmul_f32(&a, m, K, &w, N, p.bias.as_deref()).unwrap();
            let mag = reference::magnitudes(&a, m, K, &w, N);
            let got = run_every_budget(&p, &a, m);
            // i16 activations: each value within 1/65534 of its block's
            // largest (|a| ≤ 1 here), so ≤ Σ|w|/65534 per output more.
            let act = |i: usize| {
                let row = &w[(i % N) * K..(i % N + 1) * K];
                if ACT16.contains(&route) {
                    row.iter().map(|v| v.abs()).sum::<f32>() / 65534.0 * 1.01
                } else {
                    0.0
                }
            };
            for i in 0..m * N {
                assert!(
                    (got[i] - want[i]).abs() <= 1e-5 * mag[i] + act(i) + 1e-6,
                    "{name} m={m} [{i}]: {} vs {}",
                    got[i],
                    want[i]
                );
            }
        }
    }
}

#[test]
fn int8_is_exact_for_every_budget() {
    let signed: Vec<i8> = bytes(N * K, 8).iter().map(|&v| v as i8).collect();
    let per_tensor = MatmulParams {
        n: N,
        k: K,
        weights: MatmulWeights::Int8 {
            quants: IntQuants::I8(signed.clone()),
            scales: vec![0.02],
            zero_points: vec![-3],
        },
        bias: None,
    };
    for m in [1, 3, MAX_M] {
        let a: Vec<f32> = data(m * K, 9).iter().map(|v| v * 3.0 + 0.5).collect();
        for p in [params(4), per_tensor.clone()] {
            let MatmulWeights::Int8 {
                quants,
                scales,
                zero_points,
            } = &p.weights
            else {
                unreachable!()
            };
            let w = match quants {
                IntQuants::I8(q) => IntWeights::I8(q),
                IntQuants::U8(q) => IntWeights::U8(q),
            };
            let want =
                reference::matmul_int8(&a, m, K, w, N, scales, zero_points, p.bias.as_deref())
                    .unwrap();
            let got = run_every_budget(&p, &a, m);
            assert_eq!(bits(&want), bits(&got), "m={m}");
        }
    }
}

#[test]
fn lane_route_is_chosen_by_share_and_width() {
    let pool = LanePool::new(2).unwrap();
    let a = data(K, 1);
    let mut k = MatmulKernel::new();
    k.prepare(&params(0));
    k.bind(MatmulLimits { max_m: 1 }, 2);
    let mut c = vec![0.0; N];
    let r = k.execute(MatmulRequest { a: &a, m: 1 }, &mut c, pool.sub(2).unwrap());
    assert!(matches!(
        r,
        KernelReply::ExecuteDone {
            route: voxlane_machines::kernels::events::LaneRoute::Lanes
        }
    ));
    let r = k.execute(MatmulRequest { a: &a, m: 1 }, &mut c, pool.sub(1).unwrap());
    assert!(matches!(
        r,
        KernelReply::ExecuteDone {
            route: voxlane_machines::kernels::events::LaneRoute::Serial
        }
    ));
    // One chunk of columns: nothing to fork, serial even on two lanes.
    let narrow = MatmulParams {
        n: CHUNK_N,
        k: K,
        weights: MatmulWeights::F32(data(CHUNK_N * K, 1)),
        bias: None,
    };
    let mut k = MatmulKernel::new();
    k.prepare(&narrow);
    k.bind(MatmulLimits { max_m: 1 }, 2);
    let mut c = vec![0.0; CHUNK_N];
    let r = k.execute(MatmulRequest { a: &a, m: 1 }, &mut c, pool.sub(2).unwrap());
    assert!(matches!(
        r,
        KernelReply::ExecuteDone {
            route: voxlane_machines::kernels::events::LaneRoute::Serial
        }
    ));
}

fn shape_error(r: &KernelReply, needle: &str) -> bool {
    matches!(r, KernelReply::Error(KernelMachineError::Shape(m)) if m.contains(needle))
}

#[test]
fn guards_reject_requests_with_reasons() {
    let pool = LanePool::new(2).unwrap();
    let mut k = MatmulKernel::new();
    let a = data(3 * K, 1);
    let mut c = vec![0.0; 3 * N];
    // Execute before prepare: unexpected, typed.
    let r = k.execute(MatmulRequest { a: &a, m: 3 }, &mut c, pool.sub(1).unwrap());
    assert_eq!(
        r,
        KernelReply::Error(KernelMachineError::Unexpected {
            event: "execute",
            state: "uninitialized"
        })
    );
    assert_eq!(
        k.prepare(&params(3)),
        KernelReply::PrepareDone {
            route: "effect_pack_q8_0"
        }
    );
    // Execute before bind: unexpected too.
    let r = k.execute(MatmulRequest { a: &a, m: 3 }, &mut c, pool.sub(1).unwrap());
    assert!(matches!(
        r,
        KernelReply::Error(KernelMachineError::Unexpected {
            state: "prepared",
            ..
        })
    ));
    assert_eq!(k.bind(MatmulLimits { max_m: 3 }, 1), KernelReply::BindDone);
    let bad = [
        k.execute(
            MatmulRequest { a: &a[1..], m: 3 },
            &mut c,
            pool.sub(1).unwrap(),
        ),
        k.execute(
            MatmulRequest { a: &a, m: 3 },
            &mut c[1..],
            pool.sub(1).unwrap(),
        ),
        k.execute(MatmulRequest { a: &a, m: 0 }, &mut c, pool.sub(1).unwrap()),
        k.execute(MatmulRequest { a: &a, m: 4 }, &mut c, pool.sub(1).unwrap()),
        k.execute(
            MatmulRequest {
                a: &a,
                m: usize::MAX,
            },
            &mut c,
            pool.sub(1).unwrap(),
        ),
    ];
    assert!(shape_error(&bad[0], "a has"), "{:?}", bad[0]);
    assert!(shape_error(&bad[1], "c has"), "{:?}", bad[1]);
    assert!(shape_error(&bad[2], "outside 1..=3"), "{:?}", bad[2]);
    assert!(shape_error(&bad[3], "outside 1..=3"), "{:?}", bad[3]);
    assert!(shape_error(&bad[4], "outside 1..=3"), "{:?}", bad[4]);
    let r = k.execute(MatmulRequest { a: &a, m: 3 }, &mut c, pool.sub(2).unwrap());
    assert_eq!(
        r,
        KernelReply::Error(KernelMachineError::LanesExceedBudget {
            requested: 2,
            bound: 1
        })
    );
    assert_eq!(k.state(), "ready");
    // A bad rebind keeps the bound workspace.
    assert!(matches!(
        k.bind(MatmulLimits { max_m: 0 }, 1),
        KernelReply::Error(KernelMachineError::Limits(_))
    ));
    assert_eq!(k.state(), "ready");
    let r = k.execute(MatmulRequest { a: &a, m: 3 }, &mut c, pool.sub(1).unwrap());
    assert!(matches!(r, KernelReply::ExecuteDone { .. }), "{r:?}");
    match k.diagnostics() {
        KernelReply::Diagnostics(d) => {
            assert_eq!(d.rejections_for("shape_mismatch"), 5);
            assert_eq!(d.rejections_for("lanes_exceed_budget"), 1);
            assert_eq!(d.rejections_for("unexpected_event"), 2);
            assert_eq!(d.rejections_for("invalid_limits"), 1);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn invalid_params_and_limits_lead_to_errored() {
    let with = |f: &dyn Fn(&mut MatmulParams), route: usize| {
        let mut p = params(route);
        f(&mut p);
        p
    };
    let int8 = |scales: Vec<f32>, zero_points: Vec<i32>, quants: IntQuants| MatmulWeights::Int8 {
        quants,
        scales,
        zero_points,
    };
    let cases: Vec<(MatmulParams, &str)> = vec![
        (with(&|p| p.n = 0, 0), "must be positive"),
        (with(&|p| p.k = 0, 1), "must be positive"),
        (
            with(&|p| p.weights = MatmulWeights::F32(vec![0.0; 3]), 0),
            "f32 weights",
        ),
        (
            with(&|p| p.weights = MatmulWeights::F16(vec![]), 1),
            "f16 weights",
        ),
        (
            with(&|p| p.weights = MatmulWeights::Bf16(vec![bf16::ZERO; N]), 2),
            "bf16 weights",
        ),
        (
            with(&|p| p.weights = MatmulWeights::Q8_0(vec![0; 34 * N]), 3),
            "q8_0 bytes",
        ),
        (
            with(
                &|p| {
                    p.k = 48;
                    p.weights = MatmulWeights::Q8_0(vec![0; 51 * N]);
                },
                3,
            ),
            "divisible by 32",
        ),
        (
            with(
                &|p| p.weights = int8(vec![1.0; 3], vec![0], IntQuants::I8(vec![0; N * K])),
                4,
            ),
            "int8 scales",
        ),
        (
            with(
                &|p| p.weights = int8(vec![1.0], vec![0; 2], IntQuants::I8(vec![0; N * K])),
                4,
            ),
            "int8 zero points",
        ),
        (
            with(
                &|p| p.weights = int8(vec![1.0], vec![200], IntQuants::I8(vec![0; N * K])),
                4,
            ),
            "outside",
        ),
        (
            with(
                &|p| p.weights = int8(vec![1.0], vec![-1], IntQuants::U8(vec![0; N * K])),
                4,
            ),
            "outside",
        ),
        (
            with(
                &|p| p.weights = int8(vec![1.0], vec![0], IntQuants::U8(vec![0; 7])),
                4,
            ),
            "int8 weights",
        ),
        (with(&|p| p.bias = Some(vec![0.0; N - 1]), 0), "bias"),
        (
            with(
                &|p| {
                    p.n = usize::MAX;
                    p.k = 2;
                },
                0,
            ),
            "overflows",
        ),
    ];
    for (p, needle) in cases {
        let mut k = MatmulKernel::new();
        let r = k.prepare(&p);
        assert!(
            matches!(&r, KernelReply::Error(KernelMachineError::Params(m)) if m.contains(needle)),
            "{needle}: {r:?}"
        );
        assert_eq!(k.state(), "errored", "{needle}");
        assert!(k.prepared().is_none());
        // Only reset leaves errored.
        assert!(matches!(
            k.prepare(&params(0)),
            KernelReply::Error(KernelMachineError::Unexpected { .. })
        ));
        assert_eq!(k.handle(&KernelEvent::Reset, None), KernelReply::ResetDone);
        assert_eq!(k.state(), "uninitialized");
    }
    let mut k = MatmulKernel::new();
    k.prepare(&params(2));
    assert!(matches!(
        k.bind(MatmulLimits { max_m: 0 }, 1),
        KernelReply::Error(KernelMachineError::Limits(m)) if m.contains("max_m")
    ));
    assert_eq!(k.state(), "errored");
}
