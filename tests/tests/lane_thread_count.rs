//! At most N OS threads compute under a budget of N, the caller included.
//! This file holds exactly one test so no other test's threads are counted.

use std::sync::atomic::{AtomicUsize, Ordering};
use voxlane_runtime::{Fork, LanePool};
use voxlane_tests::os_threads;

#[test]
fn os_threads_never_exceed_budget() {
    for threads in 1..=4 {
        let before = os_threads();
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
}
