// Its own test target, never a module of a family target: it counts the threads of the whole process (`/proc/self/task`), so no other test may run beside it.
//! At most N OS threads compute under a budget of N, the caller included.
//! This file holds exactly one test so no other test's threads are counted.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
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
