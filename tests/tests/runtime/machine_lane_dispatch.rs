//! The lane dispatcher obeys its table: exhaustive state × event driving
//! reaches every declared edge and takes no undeclared one; random event
//! sequences never panic, never leave a declared state, and every
//! rejection carries a reason.

use proptest::prelude::*;
use voxlane_machines::pool::lane_dispatch::{
    Configure, Dispatch, Event, LaneDispatchError, LaneDispatcher, Reply, Route, SPEC,
};
use voxlane_runtime::{LaneError, PoolError};
use voxlane_tests::{assert_all_reached, assert_declared};

/// A recipe for one event, valid or not.
#[derive(Debug, Clone)]
enum Recipe {
    Configure(usize),
    Dispatch {
        tasks: usize,
        lanes: usize,
        panic_at: Option<usize>,
    },
    PoolDone,
    PoolError,
    LanesDone,
    LanesError,
    Diagnostics,
    Shutdown,
}

fn run(m: &mut LaneDispatcher, r: &Recipe, step_only: bool) -> Option<Reply> {
    let job = |i: usize| {
        if let Recipe::Dispatch {
            panic_at: Some(p), ..
        } = r
        {
            if i == *p {
                panic!("injected panic at {i}");
            }
        }
    };
    let event = match r {
        Recipe::Configure(t) => Event::Configure(Configure {
            threads: *t,
            pin: false,
        }),
        Recipe::Dispatch { tasks, lanes, .. } => Event::Dispatch(Dispatch {
            tasks: *tasks,
            lanes: *lanes,
            job: &job,
        }),
        Recipe::PoolDone => Event::PoolDone,
        Recipe::PoolError => Event::PoolError(PoolError::Spawn("injected".into())),
        Recipe::LanesDone => Event::LanesDone,
        Recipe::LanesError => Event::LanesError(LaneError::Panicked("injected".into())),
        Recipe::Diagnostics => Event::CaptureDiagnostics,
        Recipe::Shutdown => Event::Shutdown,
    };
    if step_only {
        m.step(&event).reply
    } else {
        Some(m.handle(&event))
    }
}

fn all_recipes() -> Vec<Recipe> {
    vec![
        Recipe::Configure(0),
        Recipe::Configure(1),
        Recipe::Configure(2),
        Recipe::Configure(100_000),
        Recipe::Dispatch {
            tasks: 0,
            lanes: 0,
            panic_at: None,
        },
        Recipe::Dispatch {
            tasks: 1,
            lanes: 0,
            panic_at: None,
        },
        Recipe::Dispatch {
            tasks: 7,
            lanes: 0,
            panic_at: None,
        },
        Recipe::Dispatch {
            tasks: 7,
            lanes: 1,
            panic_at: None,
        },
        Recipe::Dispatch {
            tasks: 7,
            lanes: 64,
            panic_at: None,
        },
        Recipe::Dispatch {
            tasks: 7,
            lanes: 0,
            panic_at: Some(3),
        },
        Recipe::PoolDone,
        Recipe::PoolError,
        Recipe::LanesDone,
        Recipe::LanesError,
        Recipe::Diagnostics,
        Recipe::Shutdown,
    ]
}

/// Prefixes (single-stepped) that leave a fresh machine in each leaf state.
fn prefixes() -> Vec<(&'static str, Vec<Recipe>)> {
    vec![
        ("unconfigured", vec![]),
        ("starting", vec![Recipe::Configure(2)]),
        ("ready", vec![Recipe::Configure(2), Recipe::PoolDone]),
        (
            "dispatching",
            vec![
                Recipe::Configure(2),
                Recipe::PoolDone,
                Recipe::Dispatch {
                    tasks: 4,
                    lanes: 0,
                    panic_at: None,
                },
            ],
        ),
        ("shut_down", vec![Recipe::Shutdown]),
    ]
}

#[test]
fn every_state_times_every_event_matches_the_table() {
    let mut log = Vec::new();
    for (state, prefix) in prefixes() {
        for recipe in all_recipes() {
            for step_only in [true, false] {
                let mut m = LaneDispatcher::traced();
                for p in &prefix {
                    run(&mut m, p, true);
                }
                assert_eq!(m.state(), state, "prefix did not reach {state}");
                let reply = run(&mut m, &recipe, step_only);
                assert!(!m.dangling(), "{recipe:?} in {state} took no edge");
                if let Some(Reply::Error(e)) = &reply {
                    assert!(!e.reason().is_empty());
                }
                let fired = m.take_trace();
                assert_declared(&SPEC, &fired);
                log.extend(fired);
            }
        }
    }
    assert_all_reached(&SPEC, &log);
}

#[test]
fn table_is_well_formed() {
    SPEC.validate().unwrap();
}

#[test]
fn routes_and_replies() {
    let mut m = LaneDispatcher::new();
    assert_eq!(
        m.dispatch(3, 0, &|_| {}),
        Reply::Error(LaneDispatchError::NotConfigured)
    );
    assert_eq!(
        m.configure(0, false),
        Reply::Error(LaneDispatchError::ZeroThreads)
    );
    assert_eq!(
        m.configure(2, false),
        Reply::ConfigureDone {
            threads: 2,
            pinned: false
        }
    );
    let hits = std::sync::atomic::AtomicUsize::new(0);
    let job = |_| {
        hits.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    };
    assert_eq!(
        m.dispatch(10, 0, &job),
        Reply::DispatchDone {
            tasks: 10,
            route: Route::Parallel
        }
    );
    assert_eq!(
        m.dispatch(10, 1, &job),
        Reply::DispatchDone {
            tasks: 10,
            route: Route::Serial
        }
    );
    assert_eq!(
        m.dispatch(0, 0, &job),
        Reply::DispatchDone {
            tasks: 0,
            route: Route::Empty
        }
    );
    assert_eq!(hits.load(std::sync::atomic::Ordering::Relaxed), 20);
    assert_eq!(
        m.dispatch(4, 3, &job),
        Reply::Error(LaneDispatchError::LanesExceedBudget {
            requested: 3,
            available: 2
        })
    );
    let panicky = |i: usize| assert!(i != 2, "task two fails");
    match m.dispatch(4, 0, &panicky) {
        Reply::Error(LaneDispatchError::Lane(LaneError::Panicked(msg))) => {
            assert!(msg.contains("task two fails"))
        }
        other => panic!("expected a lane error, got {other:?}"),
    }
    assert_eq!(m.state(), "ready", "a panicked lane leaves the pool usable");
    assert_eq!(
        m.dispatch(2, 0, &job),
        Reply::DispatchDone {
            tasks: 2,
            route: Route::Parallel
        }
    );
    match m.handle(&Event::CaptureDiagnostics) {
        Reply::Diagnostics(d) => {
            assert_eq!(d.machine, "lane_dispatch");
            assert_eq!(d.rejections_for("lane_panicked"), 1);
            assert_eq!(d.rejections_for("lanes_exceed_budget"), 1);
            assert_eq!(d.rejections_for("not_configured"), 1);
            assert_eq!(d.rejections_for("zero_threads"), 1);
            assert_eq!(d.events_for("dispatch"), 7);
            // Handled by the superstate, still counted once.
            assert_eq!(d.events_for("capture_diagnostics"), 1);
            assert!(d.time_in_state.iter().any(|(s, _)| *s == "ready"));
        }
        other => panic!("expected diagnostics, got {other:?}"),
    }
    assert_eq!(m.handle(&Event::Shutdown), Reply::ShutdownDone);
    assert_eq!(
        m.dispatch(1, 0, &job),
        Reply::Error(LaneDispatchError::ShutDown)
    );
}

#[test]
fn actor_host_round_trip() {
    use voxlane_machines::pool::lane_dispatch::{OwnedEvent, Request};
    use voxlane_runtime::ActorHost;
    let (host, addr) = ActorHost::new(LaneDispatcher::new());
    let worker = std::thread::spawn(move || host.run());
    let (tx, rx) = crossbeam_channel::unbounded();
    let send = |event| {
        addr.send(Request {
            event,
            reply_to: tx.clone(),
        })
        .unwrap()
    };
    send(OwnedEvent::Configure(Configure {
        threads: 2,
        pin: false,
    }));
    send(OwnedEvent::Dispatch {
        tasks: 5,
        lanes: 0,
        job: std::sync::Arc::new(|_| {}),
    });
    send(OwnedEvent::CaptureDiagnostics);
    assert_eq!(
        rx.recv().unwrap(),
        Reply::ConfigureDone {
            threads: 2,
            pinned: false
        }
    );
    assert_eq!(
        rx.recv().unwrap(),
        Reply::DispatchDone {
            tasks: 5,
            route: Route::Parallel
        }
    );
    assert!(matches!(rx.recv().unwrap(), Reply::Diagnostics(d) if d.events_for("dispatch") == 1));
    drop(addr);
    worker.join().unwrap();
}

fn recipe() -> impl Strategy<Value = Recipe> {
    prop_oneof![
        (0usize..4).prop_map(Recipe::Configure),
        (0usize..9, 0usize..4, proptest::option::of(0usize..9)).prop_map(
            |(tasks, lanes, panic_at)| Recipe::Dispatch {
                tasks,
                lanes,
                panic_at
            }
        ),
        Just(Recipe::PoolDone),
        Just(Recipe::PoolError),
        Just(Recipe::LanesDone),
        Just(Recipe::LanesError),
        Just(Recipe::Diagnostics),
        Just(Recipe::Shutdown),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]
    #[test]
    fn random_sequences_stay_declared(seq in proptest::collection::vec((recipe(), any::<bool>()), 1..24)) {
        let mut m = LaneDispatcher::traced();
        for (r, step_only) in &seq {
            let reply = run(&mut m, r, *step_only);
            prop_assert!(!m.dangling());
            prop_assert!(SPEC.leaf_states().any(|s| s == m.state()));
            if let Some(Reply::Error(e)) = reply {
                prop_assert!(!e.reason().is_empty());
                prop_assert!(!e.to_string().is_empty());
            }
            let fired = m.take_trace();
            prop_assert_eq!(fired.len(), if *step_only { 1 } else { fired.len().max(1) });
            assert_declared(&SPEC, &fired);
        }
    }
}
