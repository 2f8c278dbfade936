// Its own test target, never a module of a family target: it counts the threads of the whole process (`/proc/self/task`), so no other test may run beside it.
//! At most N OS threads compute under a budget of N, the caller included.
//! This file holds exactly one test so no other test's threads are counted.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use voxlane_actors::speech::moshi::StreamSampling;
use voxlane_runtime::{Fork, LanePool};
use voxlane_tests::os_threads;

#[test]
fn os_threads_never_exceed_budget() {
    let before = os_threads();
    for threads in 1..=4 {
        settle_to(before);
        let pool = LanePool::new(threads).unwrap();
        let peak = AtomicUsize::new(0);
        // Nested forks and batch jobs all share the same threads - 1 workers.
        pool.fork(64, &|_| {
            pool.fork(8, &|_| {
                peak.fetch_max(os_threads(), Ordering::Relaxed);
                std::hint::black_box((0..2000).sum::<u64>());
            })
            .unwrap();
        })
        .unwrap();
        let a = || {
            peak.fetch_max(os_threads(), Ordering::Relaxed);
        };
        pool.run_batch(&[&a, &a, &a, &a, &a]).unwrap();
        let extra = peak.load(Ordering::Relaxed) - before;
        // The caller is lane 0: exactly threads - 1 workers exist, never more.
        assert_eq!(
            extra,
            threads - 1,
            "budget {threads}: {extra} extra OS threads"
        );
        drop(pool);
    }
    settle_to(before);
    // A whole conversation (Mimi encode, the LM, Mimi decode as stage jobs
    // on one pool): no stage starts a thread of its own.
    for threads in 1..=4 {
        let mut c = converser(threads);
        let persona = c.persona(None, Some("Be brief.")).unwrap();
        c.start(&persona, StreamSampling::GREEDY, 0).unwrap();
        let frame: Vec<f32> = (0..c.frame_size())
            .map(|i| (i as f32 * 0.03).sin() * 0.2)
            .collect();
        for _ in 0..4 {
            c.push(&frame).unwrap();
            assert_eq!(
                os_threads() - before,
                threads - 1,
                "conversation at budget {threads}"
            );
        }
        drop(c);
        settle_to(before);
    }
}

fn converser(threads: usize) -> voxlane_machines::speech::converse::Converser {
    use voxlane_machines::speech::converse::{ConverseOptions, ConversePaths, Converser};
    use voxlane_machines::speech::moshi_executor::WeightsSource;
    let f = |n: &str| {
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../shared/fixtures/personaplex-tiny")
            .join(n)
    };
    let paths = ConversePaths {
        lm: WeightsSource::File(f("lm.safetensors")),
        mimi: f("mimi.safetensors"),
        tokenizer: f("tokenizer.model"),
        config: Some(f("config.json")),
        mimi_config: None,
    };
    let opts = ConverseOptions {
        threads,
        ..ConverseOptions::default()
    };
    Converser::load(&paths, &opts).unwrap()
}

/// Waits until the process is back to `baseline` threads. A joined thread can
/// linger in `/proc/self/task` for a moment after `join` returns (the kernel
/// wakes the joiner before it reaps the task), so counting right away races.
fn settle_to(baseline: usize) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while os_threads() > baseline {
        assert!(
            Instant::now() < deadline,
            "{} threads outlive their pool (baseline {baseline})",
            os_threads() - baseline
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}
