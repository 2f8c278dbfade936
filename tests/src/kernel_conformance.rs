//! One conformance harness for every kernel machine: exhaustive state ×
//! event driving (must reach every table edge and take no undeclared one)
//! and proptest-driven random event sequences (never panic, never leave a
//! declared state, every rejection has a reason).

use crate::{assert_all_reached, assert_declared};
use proptest::prelude::*;
use voxlane_machines::kernels::{
    Kernel, KernelContract, KernelEvent, KernelMachineError, KernelReply,
};
use voxlane_runtime::{LanePool, SubPool};

/// Which request a driver should build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestKind {
    /// Valid and too small to fork.
    Small,
    /// Valid and worth forking.
    Large,
    /// Inputs or outputs of the wrong shape.
    BadShape,
}

/// How a test drives one kernel machine.
pub trait KernelDriver {
    /// The kernel.
    type K: KernelContract;
    /// Valid params taking prepare route `route`.
    fn params(route: usize) -> <Self::K as KernelContract>::Params;
    /// Params no route accepts.
    fn bad_params() -> <Self::K as KernelContract>::Params;
    /// Limits that serve both Small and Large requests.
    fn limits() -> <Self::K as KernelContract>::Limits;
    /// Limits the kernel refuses, if it has any.
    fn bad_limits() -> Option<<Self::K as KernelContract>::Limits>;
    /// Send an `execute` of `kind` on `lanes`; with `step_only`, do not feed
    /// back the outcome event. Returns the reply, if one was made.
    fn execute(
        k: &mut Kernel<Self::K>,
        kind: RequestKind,
        lanes: SubPool<'_>,
        step_only: bool,
    ) -> Option<KernelReply>;
}

/// One event recipe.
#[derive(Debug, Clone, Copy)]
pub enum Recipe {
    /// `prepare` with valid params for route `usize`.
    Prepare(usize),
    /// `prepare` with invalid params.
    PrepareBad,
    /// `bind` with good limits and `usize` lanes.
    Bind(usize),
    /// `bind` with bad limits.
    BindBad,
    /// `execute` on a share of `usize` lanes.
    Execute(RequestKind, usize),
    /// Injected `execute_done`.
    ExecuteDone,
    /// Injected `execute_error`.
    ExecuteError,
    /// Injected `setup_error`.
    SetupError,
    /// `capture_diagnostics`.
    Diagnostics,
    /// `reset`.
    Reset,
}

fn injected() -> KernelMachineError {
    KernelMachineError::Shape("injected".into())
}

fn apply<D: KernelDriver>(
    m: &mut Kernel<D::K>,
    pool: &LanePool,
    r: Recipe,
    step_only: bool,
) -> Option<KernelReply> {
    let send = |m: &mut Kernel<D::K>, ev: KernelEvent<'_, D::K>| {
        if step_only {
            m.step(&ev, None).reply
        } else {
            Some(m.handle(&ev, None))
        }
    };
    match r {
        Recipe::Prepare(route) => {
            let p = D::params(route);
            send(m, KernelEvent::Prepare(&p))
        }
        Recipe::PrepareBad => {
            let p = D::bad_params();
            send(m, KernelEvent::Prepare(&p))
        }
        Recipe::Bind(lanes) => send(
            m,
            KernelEvent::Bind(voxlane_machines::kernels::Bind {
                limits: D::limits(),
                lanes,
            }),
        ),
        Recipe::BindBad => match D::bad_limits() {
            Some(limits) => send(
                m,
                KernelEvent::Bind(voxlane_machines::kernels::Bind { limits, lanes: 1 }),
            ),
            None => send(
                m,
                KernelEvent::Bind(voxlane_machines::kernels::Bind {
                    limits: D::limits(),
                    lanes: 0,
                }),
            ),
        },
        Recipe::Execute(kind, lanes) => {
            let share = pool
                .sub(lanes.min(pool_threads(pool)))
                .expect("share within pool");
            D::execute(m, kind, share, step_only)
        }
        Recipe::ExecuteDone => send(m, KernelEvent::ExecuteDone),
        Recipe::ExecuteError => send(m, KernelEvent::ExecuteError(injected())),
        Recipe::SetupError => send(m, KernelEvent::SetupError(injected())),
        Recipe::Diagnostics => send(m, KernelEvent::CaptureDiagnostics),
        Recipe::Reset => send(m, KernelEvent::Reset),
    }
}

fn pool_threads(pool: &LanePool) -> usize {
    voxlane_runtime::Fork::threads(pool)
}

fn all_recipes(routes: usize) -> Vec<Recipe> {
    let mut v: Vec<Recipe> = (0..routes).map(Recipe::Prepare).collect();
    v.extend([
        Recipe::PrepareBad,
        Recipe::Bind(1),
        Recipe::Bind(2),
        Recipe::BindBad,
        Recipe::Execute(RequestKind::Small, 1),
        Recipe::Execute(RequestKind::Large, 1),
        Recipe::Execute(RequestKind::Large, 2),
        Recipe::Execute(RequestKind::BadShape, 2),
        Recipe::Execute(RequestKind::Large, 3),
        Recipe::ExecuteDone,
        Recipe::ExecuteError,
        Recipe::SetupError,
        Recipe::Diagnostics,
        Recipe::Reset,
    ]);
    v
}

fn prefixes() -> Vec<(&'static str, Vec<Recipe>)> {
    vec![
        ("uninitialized", vec![]),
        ("prepared", vec![Recipe::Prepare(0)]),
        ("ready", vec![Recipe::Prepare(0), Recipe::Bind(2)]),
        (
            "running",
            vec![
                Recipe::Prepare(0),
                Recipe::Bind(2),
                Recipe::Execute(RequestKind::Small, 1),
            ],
        ),
        ("errored", vec![Recipe::PrepareBad]),
    ]
}

fn check_reply(reply: &Option<KernelReply>) {
    if let Some(KernelReply::Error(e)) = reply {
        assert!(!e.reason().is_empty());
        assert!(!e.to_string().is_empty());
    }
}

/// Drive every state with every event recipe; assert the table matches exactly.
pub fn check_every_state_and_event<D: KernelDriver>() {
    let spec = D::K::SPEC;
    spec.validate().unwrap();
    let pool = LanePool::new(3).unwrap();
    let mut log = Vec::new();
    for (state, prefix) in prefixes() {
        for recipe in all_recipes(D::K::PREPARE_ROUTES.len()) {
            for step_only in [true, false] {
                let mut m = Kernel::<D::K>::traced();
                for p in &prefix {
                    apply::<D>(&mut m, &pool, *p, true);
                }
                assert_eq!(
                    m.state(),
                    state,
                    "{}: prefix did not reach {state}",
                    spec.name
                );
                let reply = apply::<D>(&mut m, &pool, recipe, step_only);
                assert!(
                    !m.dangling(),
                    "{}: {recipe:?} in {state} took no edge",
                    spec.name
                );
                check_reply(&reply);
                let fired = m.take_trace();
                assert_declared(&spec, &fired);
                log.extend(fired);
            }
        }
    }
    assert_all_reached(&spec, &log);
}

fn recipe(routes: usize) -> impl Strategy<Value = Recipe> {
    let kind = prop_oneof![
        Just(RequestKind::Small),
        Just(RequestKind::Large),
        Just(RequestKind::BadShape)
    ];
    prop_oneof![
        (0..routes).prop_map(Recipe::Prepare),
        Just(Recipe::PrepareBad),
        (0usize..4).prop_map(Recipe::Bind),
        Just(Recipe::BindBad),
        (kind, 1usize..4).prop_map(|(k, l)| Recipe::Execute(k, l)),
        Just(Recipe::ExecuteDone),
        Just(Recipe::ExecuteError),
        Just(Recipe::SetupError),
        Just(Recipe::Diagnostics),
        Just(Recipe::Reset),
    ]
}

/// Random event sequences stay within the table and never panic.
pub fn fuzz_random_sequences<D: KernelDriver>(cases: u32) {
    let spec = D::K::SPEC;
    let pool = LanePool::new(3).unwrap();
    let routes = D::K::PREPARE_ROUTES.len();
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(cases));
    runner
        .run(
            &proptest::collection::vec((recipe(routes), any::<bool>()), 1..20),
            |seq| {
                let mut m = Kernel::<D::K>::traced();
                for (r, step_only) in seq {
                    let reply = apply::<D>(&mut m, &pool, r, step_only);
                    prop_assert!(!m.dangling(), "{r:?} took no edge");
                    prop_assert!(spec.leaf_states().any(|s| s == m.state()));
                    check_reply(&reply);
                    assert_declared(&spec, &m.take_trace());
                }
                Ok(())
            },
        )
        .unwrap();
}

/// Send one `execute` of `request` writing `output` on `lanes`; with
/// `step_only` the outcome event is left unfed (the machine stays `running`).
pub fn send_execute<'a, K: KernelContract>(
    k: &mut Kernel<K>,
    request: K::Request<'a>,
    output: K::Output<'a>,
    lanes: SubPool<'a>,
    step_only: bool,
) -> Option<KernelReply> {
    let ev = KernelEvent::Execute(voxlane_machines::kernels::Execute { request, lanes });
    if step_only {
        k.step(&ev, Some(output)).reply
    } else {
        Some(k.handle(&ev, Some(output)))
    }
}
