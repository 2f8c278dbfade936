//! The thread budget is strict and results do not depend on it.
//!
//! The OS-thread count test lives alone in `lane_thread_count.rs`, so no
//! other test's threads can blur it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Barrier;
use voxlane_runtime::{Fork, LanePool, PoolError};

#[test]
fn all_lanes_really_run_concurrently() {
    // With a budget of 3, three tasks can meet at a barrier: proof that the
    // pool delivers the budget it promises (and no more, as tested above).
    let pool = LanePool::new(3).unwrap();
    let barrier = Barrier::new(3);
    pool.fork(3, &|_| {
        barrier.wait();
    })
    .unwrap();
}

#[test]
fn zero_budget_is_typed_error() {
    assert_eq!(LanePool::new(0).unwrap_err(), PoolError::ZeroThreads);
}

/// A reduction over fixed chunks, combined in chunk order.
fn chunked_sum(pool: &LanePool, data: &[f32]) -> f32 {
    const CHUNK: usize = 97;
    let partials: Vec<std::sync::Mutex<f32>> = (0..data.len().div_ceil(CHUNK))
        .map(|_| std::sync::Mutex::new(0.0))
        .collect();
    pool.for_each_chunk(data.len(), CHUNK, |r| {
        let i = r.start / CHUNK;
        *partials[i].lock().unwrap() = data[r].iter().sum();
    })
    .unwrap();
    partials.iter().map(|p| *p.lock().unwrap()).sum()
}

#[test]
fn reductions_are_bit_identical_for_every_budget() {
    let data: Vec<f32> = (0..100_003)
        .map(|i| ((i * 7919) % 1000) as f32 * 1e-3 - 0.37)
        .collect();
    let pools: Vec<LanePool> = (1..=4).map(|t| LanePool::new(t).unwrap()).collect();
    let reference = chunked_sum(&pools[0], &data).to_bits();
    for pool in &pools[1..] {
        for _ in 0..5 {
            assert_eq!(
                chunked_sum(pool, &data).to_bits(),
                reference,
                "budget {}",
                pool.threads()
            );
        }
    }
}

#[test]
fn pinned_pool_runs() {
    let pool = voxlane_runtime::LanePool::with_options(voxlane_runtime::PoolOptions {
        threads: 2,
        pin: true,
    })
    .unwrap();
    let n = AtomicUsize::new(0);
    pool.fork(10, &|_| {
        n.fetch_add(1, Ordering::Relaxed);
    })
    .unwrap();
    assert_eq!(n.load(Ordering::Relaxed), 10);
}
