//! `kernel_f32_matvec` as a machine: table conformance, guard fuzzing, and
//! real results (against the scalar reference, identical for every budget).

use voxlane_actors::kernels::f32_matvec::matvec_reference;
use voxlane_machines::kernels::f32_matvec::{
    F32Matvec, F32MatvecKernel, MatvecParams, MatvecRequest,
};
use voxlane_machines::kernels::{KernelMachineError, KernelReply};
use voxlane_runtime::{Fork, LanePool, SubPool};
use voxlane_tests::bits;
use voxlane_tests::kernel_conformance::{
    check_every_state_and_event, fuzz_random_sequences, send_execute, KernelDriver, RequestKind,
};

const K: usize = 37;
const N: usize = 301;

fn data(len: usize, seed: u32) -> Vec<f32> {
    (0..len)
        .map(|i| (((i as u32).wrapping_mul(2654435761) ^ seed) % 2000) as f32 / 1000.0 - 1.0)
        .collect()
}

fn params() -> MatvecParams {
    MatvecParams {
        n: N,
        k: K,
        weights: data(N * K, 1),
        bias: Some(data(N, 2)),
    }
}

struct Driver;

impl KernelDriver for Driver {
    type K = F32Matvec;
    fn params(_route: usize) -> MatvecParams {
        params()
    }
    fn bad_params() -> MatvecParams {
        MatvecParams {
            n: N,
            k: K,
            weights: vec![0.0; 5],
            bias: None,
        }
    }
    fn limits() {}
    fn bad_limits() -> Option<()> {
        None
    }
    fn execute(
        k: &mut F32MatvecKernel,
        kind: RequestKind,
        lanes: SubPool<'_>,
        step_only: bool,
    ) -> Option<KernelReply> {
        // A small request is run on a one-lane share; the machine routes by share and size.
        let lanes = if kind == RequestKind::Small {
            lanes.sub(1).unwrap()
        } else {
            lanes
        };
        let x = data(
            if kind == RequestKind::BadShape {
                K + 1
            } else {
                K
            },
            3,
        );
        let mut y = vec![0.0; N];
        send_execute(k, MatvecRequest { x: &x }, &mut y, lanes, step_only)
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

#[test]
fn computes_the_reference_bit_exactly_for_every_budget() {
    let p = params();
    let x = data(K, 9);
    let mut want = vec![0.0; N];
    matvec_reference(&x, &p.weights, N, p.bias.as_deref(), &mut want).unwrap();
    for threads in 1..=4 {
        let pool = LanePool::new(threads).unwrap();
        let mut k = F32MatvecKernel::new();
        assert!(matches!(
            k.prepare(&p),
            KernelReply::PrepareDone {
                route: "effect_pack_f32"
            }
        ));
        assert_eq!(k.bind((), threads), KernelReply::BindDone);
        let mut y = vec![0.0; N];
        let reply = k.execute(MatvecRequest { x: &x }, &mut y, pool.sub(threads).unwrap());
        assert!(
            matches!(reply, KernelReply::ExecuteDone { .. }),
            "{reply:?}"
        );
        assert_eq!(bits(&y), bits(&want), "budget {threads}");
        assert_eq!(pool.threads(), threads);
    }
}

#[test]
fn guards_reject_with_reasons() {
    let pool = LanePool::new(2).unwrap();
    let mut k = F32MatvecKernel::new();
    let x = data(K, 1);
    let mut y = vec![0.0; N];
    // Execute before prepare: unexpected, typed.
    let r = k.execute(MatvecRequest { x: &x }, &mut y, pool.sub(1).unwrap());
    assert!(matches!(
        r,
        KernelReply::Error(KernelMachineError::Unexpected {
            event: "execute",
            state: "uninitialized"
        })
    ));
    k.prepare(&params());
    k.bind((), 1);
    let r = k.execute(
        MatvecRequest { x: &x[..K - 1] },
        &mut y,
        pool.sub(1).unwrap(),
    );
    assert!(
        matches!(&r, KernelReply::Error(e) if e.reason() == "shape_mismatch"),
        "{r:?}"
    );
    let r = k.execute(MatvecRequest { x: &x }, &mut y, pool.sub(2).unwrap());
    assert_eq!(
        r,
        KernelReply::Error(KernelMachineError::LanesExceedBudget {
            requested: 2,
            bound: 1
        })
    );
    assert_eq!(k.state(), "ready");
    match k.diagnostics() {
        KernelReply::Diagnostics(d) => {
            assert_eq!(d.rejections_for("shape_mismatch"), 1);
            assert_eq!(d.rejections_for("lanes_exceed_budget"), 1);
            assert_eq!(d.rejections_for("unexpected_event"), 1);
        }
        other => panic!("{other:?}"),
    }
    let mut bad = params();
    bad.bias = Some(vec![0.0; 3]);
    let mut k = F32MatvecKernel::new();
    assert!(
        matches!(k.prepare(&bad), KernelReply::Error(KernelMachineError::Params(m)) if m.contains("bias"))
    );
    assert_eq!(k.state(), "errored");
}
