//! `lstm` as a machine: table conformance, guard fuzzing, and real results
//! (every prepare route against the scalar reference, identical for every
//! lane budget; ONNX-layout weights give exactly the PyTorch-layout result).

use voxlane_actors::kernels::lstm::{lstm_reference, LstmWeights};
use voxlane_machines::kernels::lstm::guards::route;
use voxlane_machines::kernels::lstm::{
    LstmContract, LstmDirection, LstmKernel, LstmLayout, LstmLimits, LstmParams, LstmRequest,
    OnnxLstm,
};
use voxlane_machines::kernels::{KernelContract, KernelMachineError, KernelReply};
use voxlane_runtime::{LanePool, SubPool};
use voxlane_tests::bits;
use voxlane_tests::kernel_conformance::{
    check_every_state_and_event, fuzz_random_sequences, send_execute, KernelDriver, RequestKind,
};

const INPUT: usize = 5;
const HIDDEN: usize = 7;
const MAX_T: usize = 160;
const LARGE_T: usize = 150;
const SMALL_T: usize = 12;
const LIMITS: LstmLimits = LstmLimits { max_t: MAX_T };

fn data(len: usize, seed: u32) -> Vec<f32> {
    (0..len)
        .map(|i| (((i as u32).wrapping_mul(2654435761) ^ seed) % 2000) as f32 / 1000.0 - 1.0)
        .collect()
}

fn direction(seed: u32) -> LstmDirection {
    let g = 4 * HIDDEN;
    LstmDirection {
        w_ih: data(g * INPUT, seed),
        w_hh: data(g * HIDDEN, seed + 1),
        b_ih: Some(data(g, seed + 2)),
        b_hh: Some(data(g, seed + 3)),
    }
}

/// PyTorch blocks (i, f, g, o) of `[4H, cols]` in ONNX order (i, o, f, c).
fn to_onnx(w: &[f32]) -> Vec<f32> {
    let block = w.len() / 4;
    [0, 3, 1, 2]
        .iter()
        .flat_map(|&b| w[b * block..(b + 1) * block].to_vec())
        .collect()
}

/// The ONNX initializers of PyTorch-layout `dirs`.
fn onnx_of(dirs: &[LstmDirection]) -> OnnxLstm {
    let cat = |f: &dyn Fn(&LstmDirection) -> Vec<f32>| dirs.iter().flat_map(f).collect();
    OnnxLstm {
        directions: dirs.len(),
        w: cat(&|d| to_onnx(&d.w_ih)),
        r: cat(&|d| to_onnx(&d.w_hh)),
        b: Some(cat(&|d| {
            let mut b = to_onnx(d.b_ih.as_deref().unwrap_or_default());
            b.extend(to_onnx(d.b_hh.as_deref().unwrap_or_default()));
            b
        })),
    }
}

fn pytorch_dirs(r: usize) -> Vec<LstmDirection> {
    match r {
        route::UNIDIRECTIONAL => vec![direction(10)],
        _ => vec![direction(10), direction(20)],
    }
}

/// Params taking prepare route `r` (the ONNX route holds the bidirectional weights).
fn params(r: usize) -> LstmParams {
    let dirs = pytorch_dirs(r);
    LstmParams {
        input: INPUT,
        hidden: HIDDEN,
        weights: if r == route::ONNX {
            LstmLayout::Onnx(onnx_of(&dirs))
        } else {
            LstmLayout::PyTorch(dirs)
        },
    }
}

struct Driver;

impl KernelDriver for Driver {
    type K = LstmContract;
    fn params(r: usize) -> LstmParams {
        params(r)
    }
    fn bad_params() -> LstmParams {
        let mut p = params(route::UNIDIRECTIONAL);
        p.hidden += 1;
        p
    }
    fn limits() -> LstmLimits {
        LIMITS
    }
    fn bad_limits() -> Option<LstmLimits> {
        Some(LstmLimits { max_t: 0 })
    }
    fn execute(
        k: &mut LstmKernel,
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
        let width = k
            .prepared()
            .map_or(HIDDEN, |pk| pk.directions() * pk.hidden());
        let x = data(t * INPUT + usize::from(kind == RequestKind::BadShape), 3);
        let mut out = vec![0.0; t * width];
        send_execute(k, LstmRequest { x: &x, t }, &mut out, lanes, step_only)
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

fn ready(p: &LstmParams, r: usize, lanes: usize) -> LstmKernel {
    let mut k = LstmKernel::new();
    assert_eq!(
        k.prepare(p),
        KernelReply::PrepareDone {
            route: LstmContract::PREPARE_ROUTES[r].1
        }
    );
    assert_eq!(k.bind(LIMITS, lanes), KernelReply::BindDone);
    k
}

fn run(k: &mut LstmKernel, pool: &LanePool, lanes: usize, x: &[f32], t: usize) -> Vec<f32> {
    let width = k.prepared().map_or(0, |pk| pk.directions() * pk.hidden());
    let mut out = vec![f32::NAN; t * width];
    let reply = k.execute(LstmRequest { x, t }, &mut out, pool.sub(lanes).unwrap());
    assert!(
        matches!(reply, KernelReply::ExecuteDone { .. }),
        "{reply:?}"
    );
    out
}

#[test]
fn every_route_computes_the_reference_identically_for_every_budget() {
    let x = data(LARGE_T * INPUT, 9);
    let mut by_route = Vec::new();
    for r in 0..LstmContract::PREPARE_ROUTES.len() {
        let dirs = pytorch_dirs(r);
        let views: Vec<LstmWeights<'_>> = dirs
            .iter()
            .map(|d| LstmWeights {
                w_ih: &d.w_ih,
                w_hh: &d.w_hh,
                b_ih: d.b_ih.as_deref(),
                b_hh: d.b_hh.as_deref(),
            })
            .collect();
        let want = lstm_reference(INPUT, HIDDEN, &views, &x, LARGE_T);
        let mut first: Option<Vec<f32>> = None;
        for threads in 1..=4 {
            let pool = LanePool::new(threads).unwrap();
            let mut k = ready(&params(r), r, threads);
            let y = run(&mut k, &pool, threads, &x, LARGE_T);
            assert_eq!(y.len(), want.len());
            for (i, (g, w)) in y.iter().zip(&want).enumerate() {
                assert!((g - w).abs() <= 2e-5, "route {r} element {i}: {g} vs {w}");
            }
            match &first {
                None => first = Some(y),
                Some(f) => assert_eq!(bits(f), bits(&y), "route {r}, budget {threads}"),
            }
        }
        by_route.push(first.unwrap_or_default());
    }
    // Reordered ONNX weights are the PyTorch weights, bit for bit.
    assert_eq!(
        bits(&by_route[route::ONNX]),
        bits(&by_route[route::BIDIRECTIONAL])
    );
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
    let x = data(SMALL_T * INPUT, 1);
    let mut k = LstmKernel::new();
    let mut y = vec![0.0; SMALL_T * 2 * HIDDEN];
    let r = k.execute(
        LstmRequest { x: &x, t: SMALL_T },
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
    let mut k = ready(&params(route::BIDIRECTIONAL), route::BIDIRECTIONAL, 2);
    let width = 2 * HIDDEN;
    let mut exec = |x: &[f32], t: usize, n: usize, lanes: usize| {
        let mut out = vec![0.0; n];
        k.execute(LstmRequest { x, t }, &mut out, pool.sub(lanes).unwrap())
    };
    let big = data((MAX_T + 1) * INPUT, 2);
    let cases = [
        (exec(&x[1..], SMALL_T, SMALL_T * width, 1), "x holds"),
        (exec(&x, SMALL_T, SMALL_T * HIDDEN, 1), "out holds"),
        (exec(&[], 0, 0, 1), "empty input"),
        (
            exec(&big, MAX_T + 1, (MAX_T + 1) * width, 1),
            "exceeds the bound",
        ),
    ];
    for (reply, want) in &cases {
        let (why, msg) = reason(reply);
        assert_eq!(why, "shape_mismatch");
        assert!(msg.contains(want), "{msg}");
    }
    assert_eq!(
        exec(&x, SMALL_T, SMALL_T * width, 3),
        KernelReply::Error(KernelMachineError::LanesExceedBudget {
            requested: 3,
            bound: 2
        })
    );
    assert!(matches!(
        exec(&x, SMALL_T, SMALL_T * width, 2),
        KernelReply::ExecuteDone { .. }
    ));
    match k.diagnostics() {
        KernelReply::Diagnostics(d) => {
            assert_eq!(d.rejections_for("shape_mismatch"), 4);
            assert_eq!(d.rejections_for("lanes_exceed_budget"), 1);
        }
        other => panic!("{other:?}"),
    }
    // Invalid params lead to `errored`.
    let three = LstmParams {
        weights: LstmLayout::PyTorch(vec![direction(1), direction(2), direction(3)]),
        ..params(route::UNIDIRECTIONAL)
    };
    let mut short_hh = params(route::UNIDIRECTIONAL);
    if let LstmLayout::PyTorch(d) = &mut short_hh.weights {
        d[0].w_hh.pop();
    }
    let mut onnx_three = params(route::ONNX);
    let mut onnx_short_b = params(route::ONNX);
    if let LstmLayout::Onnx(o) = &mut onnx_three.weights {
        o.directions = 3;
    }
    if let LstmLayout::Onnx(o) = &mut onnx_short_b.weights {
        o.b.as_mut().map(Vec::pop);
    }
    let zero_hidden = LstmParams {
        hidden: 0,
        ..params(route::UNIDIRECTIONAL)
    };
    for (p, want) in [
        (three, "1 or 2 directions"),
        (short_hh, "direction 0: weight_hh holds"),
        (onnx_three, "must be 1 (forward) or 2"),
        (onnx_short_b, "ONNX B holds"),
        (zero_hidden, "must be positive"),
    ] {
        let mut k = LstmKernel::new();
        let (why, msg) = reason(&k.prepare(&p));
        assert_eq!(why, "invalid_params");
        assert!(msg.contains(want), "{msg}");
        assert_eq!(k.state(), "errored");
    }
    let mut k = LstmKernel::new();
    k.prepare(&params(route::UNIDIRECTIONAL));
    let (why, msg) = reason(&k.bind(LstmLimits { max_t: 0 }, 1));
    assert_eq!(why, "invalid_limits");
    assert!(msg.contains("at least 1"), "{msg}");
    assert_eq!(k.state(), "errored");
}
