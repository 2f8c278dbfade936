//! `kernel_attention` as a machine: table conformance, guard fuzzing, real
//! results streamed through the machine (against `attention_reference`,
//! identical for every lane budget), and typed rejections.

use voxlane_actors::kernels::attention::attention_reference;
use voxlane_machines::kernels::attention::{
    Attention, AttentionConfig, AttentionKernel, AttentionLimits, AttentionRequest, Rope,
    RopeLayout,
};
use voxlane_machines::kernels::events::LaneRoute;
use voxlane_machines::kernels::{KernelEvent, KernelMachineError, KernelReply};
use voxlane_runtime::{LanePool, SubPool};
use voxlane_tests::bits;
use voxlane_tests::kernel_conformance::{
    check_every_state_and_event, fuzz_random_sequences, send_execute, KernelDriver, RequestKind,
};

const HEADS: usize = 4;
const HEAD_DIM: usize = 8;
const WIDTH: usize = HEADS * HEAD_DIM;
const MAX_STEP: usize = 3;

const ROUTES: [&str; 3] = [
    "effect_plan_rope_interleaved",
    "effect_plan_rope_halves",
    "effect_plan_no_rope",
];

fn data(len: usize, seed: u32) -> Vec<f32> {
    (0..len)
        .map(|i| (((i as u32).wrapping_mul(2654435761) ^ seed) % 2000) as f32 / 1000.0 - 1.0)
        .collect()
}

/// A layer taking prepare route `route`, split over two head ranges.
fn config(route: usize) -> AttentionConfig {
    let mut cfg = AttentionConfig::new(HEADS, HEAD_DIM, 6);
    cfg.max_step = MAX_STEP;
    cfg.head_ranges = 2;
    cfg.rope = match route {
        0 => Some(Rope::kyutai()),
        1 => Some(Rope {
            layout: RopeLayout::Halves,
            max_period: 100.0,
        }),
        _ => None,
    };
    cfg
}

struct Driver;

impl KernelDriver for Driver {
    type K = Attention;
    fn params(route: usize) -> AttentionConfig {
        config(route)
    }
    fn bad_params() -> AttentionConfig {
        AttentionConfig {
            head_ranges: HEADS + 1,
            ..config(0)
        }
    }
    fn limits() -> AttentionLimits {
        AttentionLimits { max_t: 2 }
    }
    fn bad_limits() -> Option<AttentionLimits> {
        Some(AttentionLimits {
            max_t: MAX_STEP + 1,
        })
    }
    fn execute(
        k: &mut AttentionKernel,
        kind: RequestKind,
        lanes: SubPool<'_>,
        step_only: bool,
    ) -> Option<KernelReply> {
        // A small request is one position on a one-lane share; the machine routes by share and size.
        let (lanes, t) = match kind {
            RequestKind::Small => (lanes.sub(1).unwrap(), 1),
            _ => (lanes, 2),
        };
        let q_len = if kind == RequestKind::BadShape {
            t * WIDTH - 1
        } else {
            t * WIDTH
        };
        let (q, kv) = (data(q_len, 1), data(t * WIDTH, 2));
        let mut out = vec![0.0; t * WIDTH];
        send_execute(
            k,
            AttentionRequest {
                q: &q,
                k: &kv,
                v: &kv,
                t,
            },
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
    fuzz_random_sequences::<Driver>(64);
}

struct Stream {
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    total: usize,
}

fn stream_data(total: usize, seed: u32) -> Stream {
    let n = total * WIDTH;
    Stream {
        q: data(n, seed),
        k: data(n, seed ^ 0x55),
        v: data(n, seed ^ 0xaa),
        total,
    }
}

/// Feed `s` through `k` in steps cycling over `steps`, on `lanes`.
fn feed(k: &mut AttentionKernel, s: &Stream, steps: &[usize], lanes: &SubPool<'_>) -> Vec<f32> {
    let mut out = vec![f32::NAN; s.total * WIDTH];
    let (mut p, mut i) = (0, 0);
    while p < s.total {
        let t = steps[i % steps.len()].min(s.total - p);
        i += 1;
        let r = p * WIDTH..(p + t) * WIDTH;
        let reply = k.execute(
            AttentionRequest {
                q: &s.q[r.clone()],
                k: &s.k[r.clone()],
                v: &s.v[r.clone()],
                t,
            },
            &mut out[r],
            lanes.sub(lanes_threads(lanes)).unwrap(),
        );
        assert!(
            matches!(reply, KernelReply::ExecuteDone { .. }),
            "{reply:?}"
        );
        p += t;
    }
    out
}

fn lanes_threads(l: &SubPool<'_>) -> usize {
    voxlane_runtime::Fork::threads(l)
}

fn prepared(cfg: &AttentionConfig, max_t: usize, lanes: usize) -> AttentionKernel {
    let mut k = AttentionKernel::new();
    let route = ROUTES[voxlane_machines::kernels::attention::guards::prepare_route(cfg).unwrap()];
    assert_eq!(k.prepare(cfg), KernelReply::PrepareDone { route });
    assert_eq!(
        k.bind(AttentionLimits { max_t }, lanes),
        KernelReply::BindDone
    );
    k
}

fn close(got: &[f32], want: &[f32], what: &str) {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= 2e-5, "{what} [{i}]: {g} vs {w}");
    }
}

#[test]
fn streams_match_the_reference_identically_for_every_budget() {
    let s = stream_data(23, 7);
    for (route, name) in ROUTES.iter().enumerate() {
        for ranges in [1, 2, 4] {
            let cfg = AttentionConfig {
                head_ranges: ranges,
                ..config(route)
            };
            let want = attention_reference(&cfg, &s.q, &s.k, &s.v, s.total).unwrap();
            let mut first: Option<Vec<f32>> = None;
            for threads in 1..=4 {
                let pool = LanePool::new(threads).unwrap();
                let mut k = prepared(&cfg, MAX_STEP, threads);
                let got = feed(&mut k, &s, &[3, 1, 2], &pool.sub(threads).unwrap());
                close(&got, &want, name);
                match &first {
                    None => first = Some(got),
                    Some(f) => assert_eq!(
                        bits(f),
                        bits(&got),
                        "{name} ranges {ranges} budget {threads}"
                    ),
                }
            }
        }
    }
}

#[test]
fn cache_is_sized_by_the_bound_step_and_rebind_starts_a_new_stream() {
    let cfg = config(0);
    let s = stream_data(12, 3);
    let want = attention_reference(&cfg, &s.q, &s.k, &s.v, s.total).unwrap();
    let pool = LanePool::new(2).unwrap();
    // A cache bound for single steps gives the same bits as one for max_step.
    let mut k1 = prepared(&cfg, 1, 2);
    let one = feed(&mut k1, &s, &[1], &pool.sub(2).unwrap());
    let mut k3 = prepared(&cfg, MAX_STEP, 2);
    let three = feed(&mut k3, &s, &[1], &pool.sub(2).unwrap());
    assert_eq!(bits(&one), bits(&three));
    close(&one, &want, "max_t 1");
    // Rebinding starts over at position 0 without re-preparing.
    assert_eq!(
        k1.bind(AttentionLimits { max_t: 2 }, 2),
        KernelReply::BindDone
    );
    let again = feed(&mut k1, &s, &[2], &pool.sub(2).unwrap());
    close(&again, &want, "after rebind");
}

#[test]
fn lane_route_is_chosen_by_share_and_head_ranges() {
    let pool = LanePool::new(2).unwrap();
    let x = data(WIDTH, 1);
    let mut out = vec![0.0; WIDTH];
    let req = AttentionRequest {
        q: &x,
        k: &x,
        v: &x,
        t: 1,
    };
    let mut k = prepared(&config(2), 1, 2);
    let r = k.execute(req, &mut out, pool.sub(2).unwrap());
    assert_eq!(
        r,
        KernelReply::ExecuteDone {
            route: LaneRoute::Lanes
        }
    );
    let r = k.execute(req, &mut out, pool.sub(1).unwrap());
    assert_eq!(
        r,
        KernelReply::ExecuteDone {
            route: LaneRoute::Serial
        }
    );
    let one_range = AttentionConfig {
        head_ranges: 1,
        ..config(2)
    };
    let mut k = prepared(&one_range, 1, 2);
    let r = k.execute(req, &mut out, pool.sub(2).unwrap());
    assert_eq!(
        r,
        KernelReply::ExecuteDone {
            route: LaneRoute::Serial
        }
    );
}

fn shape_error(r: &KernelReply, needle: &str) -> bool {
    matches!(r, KernelReply::Error(KernelMachineError::Shape(m)) if m.contains(needle))
}

#[test]
fn guards_reject_requests_with_reasons_and_leave_the_cache_alone() {
    let cfg = config(1);
    let s = stream_data(8, 11);
    let want = attention_reference(&cfg, &s.q, &s.k, &s.v, s.total).unwrap();
    let pool = LanePool::new(2).unwrap();
    let mut k = AttentionKernel::new();
    let x = data(2 * WIDTH, 1);
    let mut out = vec![0.0; 2 * WIDTH];
    let req = |t: usize, q: usize, kl: usize, v: usize| AttentionRequest {
        q: &x[..q],
        k: &x[..kl],
        v: &x[..v],
        t,
    };
    let w2 = 2 * WIDTH;
    // Execute before prepare: unexpected, typed.
    let r = k.execute(req(2, w2, w2, w2), &mut out, pool.sub(1).unwrap());
    assert_eq!(
        r,
        KernelReply::Error(KernelMachineError::Unexpected {
            event: "execute",
            state: "uninitialized"
        })
    );
    assert_eq!(
        k.prepare(&cfg),
        KernelReply::PrepareDone {
            route: "effect_plan_rope_halves"
        }
    );
    assert_eq!(
        k.bind(AttentionLimits { max_t: 2 }, 1),
        KernelReply::BindDone
    );
    let bad = [
        k.execute(req(2, w2 - 1, w2, w2), &mut out, pool.sub(1).unwrap()),
        k.execute(req(2, w2, w2 - 1, w2), &mut out, pool.sub(1).unwrap()),
        k.execute(req(2, w2, w2, 0), &mut out, pool.sub(1).unwrap()),
        k.execute(req(2, w2, w2, w2), &mut out[1..], pool.sub(1).unwrap()),
        k.execute(req(0, 0, 0, 0), &mut out[..0], pool.sub(1).unwrap()),
        k.execute(req(3, w2, w2, w2), &mut out, pool.sub(1).unwrap()),
        k.execute(req(usize::MAX, w2, w2, w2), &mut out, pool.sub(1).unwrap()),
    ];
    for (r, needle) in bad.iter().zip([
        "q has",
        "k has",
        "v has",
        "out has",
        "outside 1..=2",
        "outside 1..=2",
        "outside 1..=2",
    ]) {
        assert!(shape_error(r, needle), "{needle}: {r:?}");
    }
    let r = k.execute(req(2, w2, w2, w2), &mut out, pool.sub(2).unwrap());
    assert_eq!(
        r,
        KernelReply::Error(KernelMachineError::LanesExceedBudget {
            requested: 2,
            bound: 1
        })
    );
    assert_eq!(k.state(), "ready");
    // A bad rebind keeps the bound cache.
    assert!(matches!(
        k.bind(AttentionLimits { max_t: 0 }, 1),
        KernelReply::Error(KernelMachineError::Limits(_))
    ));
    // None of the rejections touched the stream: it still starts at position 0.
    let got = feed(&mut k, &s, &[2, 1], &pool.sub(1).unwrap());
    close(&got, &want, "after rejections");
    match k.diagnostics() {
        KernelReply::Diagnostics(d) => {
            assert_eq!(d.rejections_for("shape_mismatch"), 7);
            assert_eq!(d.rejections_for("lanes_exceed_budget"), 1);
            assert_eq!(d.rejections_for("unexpected_event"), 1);
            assert_eq!(d.rejections_for("invalid_limits"), 1);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn invalid_configs_and_limits_lead_to_errored() {
    let base = config(0);
    let cases = [
        (AttentionConfig { heads: 0, ..base }, "heads and head_dim"),
        (
            AttentionConfig {
                head_dim: 0,
                ..base
            },
            "heads and head_dim",
        ),
        (AttentionConfig { context: 0, ..base }, "context"),
        (
            AttentionConfig {
                max_step: 0,
                ..base
            },
            "max_step",
        ),
        (
            AttentionConfig {
                head_ranges: 0,
                ..base
            },
            "head_ranges",
        ),
        (
            AttentionConfig {
                head_ranges: HEADS + 1,
                ..base
            },
            "head_ranges",
        ),
        (
            AttentionConfig {
                head_dim: 7,
                ..base
            },
            "rope",
        ),
        (
            AttentionConfig {
                rope: Some(Rope {
                    layout: RopeLayout::Halves,
                    max_period: f32::NAN,
                }),
                ..base
            },
            "rope",
        ),
        (
            AttentionConfig {
                rope: Some(Rope {
                    layout: RopeLayout::Interleaved,
                    max_period: 0.0,
                }),
                ..base
            },
            "rope",
        ),
    ];
    for (cfg, needle) in cases {
        let mut k = AttentionKernel::new();
        let r = k.prepare(&cfg);
        assert!(
            matches!(&r, KernelReply::Error(KernelMachineError::Params(m)) if m.contains(needle)),
            "{needle}: {r:?}"
        );
        assert_eq!(k.state(), "errored", "{needle}");
        assert_eq!(k.handle(&KernelEvent::Reset, None), KernelReply::ResetDone);
        assert_eq!(k.state(), "uninitialized");
    }
    // Odd head_dim is fine without RoPE.
    let mut k = AttentionKernel::new();
    let no_rope = AttentionConfig {
        head_dim: 7,
        ..config(2)
    };
    assert_eq!(
        k.prepare(&no_rope),
        KernelReply::PrepareDone {
            route: "effect_plan_no_rope"
        }
    );
    assert!(matches!(
        k.bind(AttentionLimits { max_t: MAX_STEP + 1 }, 1),
        KernelReply::Error(KernelMachineError::Limits(m)) if m.contains("max_t")
    ));
    assert_eq!(k.state(), "errored");
}
