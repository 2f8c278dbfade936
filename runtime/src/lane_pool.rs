//! Fork/join lane pool with a strict thread budget.
//!
//! `threads` is the whole compute budget, the calling thread included: a pool
//! of `threads = N` spawns exactly `N - 1` workers at creation and never more,
//! so nested forks, sub-budgets and batch submissions can only ever share those
//! threads. Work is always split into index ranges whose boundaries depend on
//! the problem size alone (never on the thread count), so a reduction that
//! combines chunk results in chunk order is bit-identical for every budget.
//!
//! Protocol (the only `unsafe` in voxlane's threading): a fork publishes a
//! stack-allocated job on the shared board. Idle workers join it *under the
//! board lock* (incrementing `helpers`), claim chunk indices from an atomic
//! counter, and leave under the lock again. The forking thread claims chunks
//! too, then removes the job under the lock and waits until `helpers == 0`;
//! only then does the job (and the borrowed closure) go out of scope. A waiter
//! only ever waits for threads that are running its chunks, so nesting cannot
//! deadlock.

use std::any::Any;
use std::ops::Range;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

/// Errors building a pool or a sub-budget.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PoolError {
    /// A budget of zero threads can compute nothing.
    #[error("thread budget must be at least 1 (got 0)")]
    ZeroThreads,
    /// A sub-budget may not exceed the budget it is carved from.
    #[error("sub-budget of {requested} threads exceeds the available {available}")]
    BudgetExceeded {
        /// Threads asked for.
        requested: usize,
        /// Threads the parent owns.
        available: usize,
    },
    /// The OS refused to start a worker thread.
    #[error("could not spawn lane worker: {0}")]
    Spawn(String),
}

/// Errors from one fork/join dispatch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LaneError {
    /// A task panicked; the remaining chunks were skipped and the pool is still usable.
    #[error("a lane task panicked: {0}")]
    Panicked(String),
}

/// How to build a [`LanePool`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolOptions {
    /// The whole compute budget, caller included.
    pub threads: usize,
    /// Pin lane `i` to core `i` (mod the number of cores) with core_affinity.
    pub pin: bool,
}

impl PoolOptions {
    /// Options for `threads` lanes without pinning.
    pub fn threads(threads: usize) -> Self {
        Self {
            threads,
            pin: false,
        }
    }
}

/// The `i`-th of `n` chunks in claim order: consecutive claims half the
/// range apart (0, h, 1, h + 1, …, h = ⌈n/2⌉). Lanes claim in order, and two
/// lanes writing neighbouring chunks at once bounce the cache line at their
/// boundary between cores, in every row a chunk spans (measured: a 0.14 ms
/// conv at 2 lanes took 0.11 ms with its chunks apart; Kokoro's first audio
/// at 2 lanes 67 → 61 ms). A bijection on `0..n`: every chunk runs once.
pub fn apart(i: usize, n: usize) -> usize {
    if i.is_multiple_of(2) {
        i / 2
    } else {
        n.div_ceil(2) + i / 2
    }
}

/// The lanes of one fork: run `f(i)` for every `i < n`.
///
/// `Fork` is implemented by [`LanePool`] (the full budget) and [`SubPool`]
/// (a capped share of it); every helper below is built on [`Fork::fork`].
pub trait Fork: Sync {
    /// The most threads (caller included) this fork may occupy.
    fn threads(&self) -> usize;

    /// Run `f(i)` for `i in 0..n` across at most `threads()` threads; returns once all ran.
    fn fork(&self, n: usize, f: &(dyn Fn(usize) + Sync)) -> Result<(), LaneError>;

    /// Run `f` over `0..len` split into fixed `chunk`-sized ranges (the last
    /// may be shorter), claimed [`apart`].
    fn for_each_chunk<F>(&self, len: usize, chunk: usize, f: F) -> Result<(), LaneError>
    where
        F: Fn(Range<usize>) + Sync,
        Self: Sized,
    {
        let chunk = chunk.max(1);
        let n = len.div_ceil(chunk);
        self.fork(n, &|i| {
            let start = apart(i, n) * chunk;
            f(start..(start + chunk).min(len))
        })
    }

    /// Run `f(chunk_index, chunk)` over disjoint `chunk`-sized pieces of
    /// `data`, claimed [`apart`].
    fn for_each_chunk_mut<T, F>(&self, data: &mut [T], chunk: usize, f: F) -> Result<(), LaneError>
    where
        T: Send,
        F: Fn(usize, &mut [T]) + Sync,
        Self: Sized,
    {
        let chunk = chunk.max(1);
        let len = data.len();
        let n = len.div_ceil(chunk);
        let base = SendPtr(data.as_mut_ptr());
        self.fork(n, &|i| {
            let i = apart(i, n);
            let start = i * chunk;
            let end = (start + chunk).min(len);
            // SAFETY: chunk index `i` is claimed exactly once, so the ranges are
            // disjoint, in bounds, and `data` outlives the fork.
            let piece =
                unsafe { std::slice::from_raw_parts_mut(base.get().add(start), end - start) };
            f(i, piece)
        })
    }

    /// Run two closures, possibly in parallel, and return both results.
    fn join<A, B, RA, RB>(&self, a: A, b: B) -> Result<(RA, RB), LaneError>
    where
        A: FnOnce() -> RA + Send,
        B: FnOnce() -> RB + Send,
        RA: Send,
        RB: Send,
        Self: Sized,
    {
        let a = Mutex::new(Some(a));
        let b = Mutex::new(Some(b));
        let ra = Mutex::new(None);
        let rb = Mutex::new(None);
        self.fork(2, &|i| {
            if i == 0 {
                if let Some(a) = lock(&a).take() {
                    *lock(&ra) = Some(a());
                }
            } else if let Some(b) = lock(&b).take() {
                *lock(&rb) = Some(b());
            }
        })?;
        let results = (lock(&ra).take(), lock(&rb).take());
        match results {
            (Some(x), Some(y)) => Ok((x, y)),
            _ => Err(LaneError::Panicked("join branch produced no result".into())),
        }
    }

    /// Batch submission: run several independent stage jobs at once.
    fn run_batch(&self, jobs: &[&(dyn Fn() + Sync)]) -> Result<(), LaneError>
    where
        Self: Sized,
    {
        self.fork(jobs.len(), &|i| jobs[i]())
    }
}

struct SendPtr<T>(*mut T);
// SAFETY: used only to hand disjoint sub-slices to lanes (see for_each_chunk_mut).
unsafe impl<T: Send> Send for SendPtr<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for SendPtr<T> {}
impl<T> SendPtr<T> {
    fn get(&self) -> *mut T {
        self.0
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicking lane never holds these locks across user code, so poison is benign.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One published fork, living on the forking thread's stack.
struct Job {
    f: *const (dyn Fn(usize) + Sync + 'static),
    n: usize,
    next: AtomicUsize,
    /// Helpers currently inside this job; changed only under the board lock.
    helpers: AtomicUsize,
    max_helpers: usize,
    panic: Mutex<Option<String>>,
}

impl Job {
    /// Claim and run chunks until none are left; a panic stops further claims.
    fn work(&self) {
        // SAFETY: the forking thread keeps `f` alive until every helper has left.
        let f = unsafe { &*self.f };
        loop {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            if i >= self.n {
                return;
            }
            if let Err(payload) = catch_unwind(AssertUnwindSafe(|| f(i))) {
                self.next.store(self.n, Ordering::Relaxed);
                let mut slot = lock(&self.panic);
                if slot.is_none() {
                    *slot = Some(panic_message(&*payload));
                }
                return;
            }
        }
    }

    fn wants_help(&self) -> bool {
        self.helpers.load(Ordering::Relaxed) < self.max_helpers
            && self.next.load(Ordering::Relaxed) < self.n
    }
}

fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_string()
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
struct JobPtr(*const Job);
// SAFETY: a JobPtr is only dereferenced under the protocol in the module docs.
unsafe impl Send for JobPtr {}

struct Board {
    jobs: Vec<JobPtr>,
    shutdown: bool,
}

struct Shared {
    board: Mutex<Board>,
    /// Workers sleep here waiting for jobs.
    work_cv: Condvar,
    /// Forking threads sleep here waiting for helpers to leave.
    done_cv: Condvar,
    /// Bumped on every publish so spinning workers notice new work without the lock.
    epoch: AtomicU64,
    stopping: AtomicBool,
    /// Workers parked on `work_cv` (changed under the board lock): a publish
    /// with nobody parked skips the wake-up syscall.
    sleepers: AtomicUsize,
    /// Forkers parked on `done_cv` (changed under the board lock).
    joiners: AtomicUsize,
}

/// Idle spins before a worker parks: keeps frame-rate dispatch latency low.
const SPIN_ROUNDS: u32 = 2_000;

/// A fork/join pool whose thread budget is fixed at creation.
pub struct LanePool {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    threads: usize,
    pinned: bool,
}

impl std::fmt::Debug for LanePool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LanePool")
            .field("threads", &self.threads)
            .field("pinned", &self.pinned)
            .finish()
    }
}

impl LanePool {
    /// A pool of `threads` lanes (the caller is lane 0; `threads - 1` workers are spawned).
    pub fn new(threads: usize) -> Result<Self, PoolError> {
        Self::with_options(PoolOptions::threads(threads))
    }

    /// A pool built from [`PoolOptions`].
    pub fn with_options(opts: PoolOptions) -> Result<Self, PoolError> {
        if opts.threads == 0 {
            return Err(PoolError::ZeroThreads);
        }
        let shared = Arc::new(Shared {
            board: Mutex::new(Board {
                jobs: Vec::with_capacity(64),
                shutdown: false,
            }),
            work_cv: Condvar::new(),
            done_cv: Condvar::new(),
            epoch: AtomicU64::new(0),
            stopping: AtomicBool::new(false),
            sleepers: AtomicUsize::new(0),
            joiners: AtomicUsize::new(0),
        });
        let cores = if opts.pin {
            core_affinity::get_core_ids().unwrap_or_default()
        } else {
            Vec::new()
        };
        if let Some(core) = cores.first() {
            core_affinity::set_for_current(*core);
        }
        let mut workers = Vec::with_capacity(opts.threads - 1);
        for lane in 1..opts.threads {
            let shared = Arc::clone(&shared);
            let core = (!cores.is_empty()).then(|| cores[lane % cores.len()]);
            let handle = std::thread::Builder::new()
                .name(format!("voxlane-lane-{lane}"))
                .spawn(move || {
                    if let Some(core) = core {
                        core_affinity::set_for_current(core);
                    }
                    worker_loop(&shared)
                })
                .map_err(|e| PoolError::Spawn(e.to_string()))?;
            workers.push(handle);
        }
        Ok(Self {
            shared,
            workers,
            threads: opts.threads,
            pinned: opts.pin && !cores.is_empty(),
        })
    }

    /// Whether lanes were pinned to cores.
    pub fn pinned(&self) -> bool {
        self.pinned
    }

    /// A share of this pool capped at `threads` lanes (caller included).
    pub fn sub(&self, threads: usize) -> Result<SubPool<'_>, PoolError> {
        sub_budget(self, self.threads, threads)
    }

    fn fork_capped(
        &self,
        n: usize,
        cap: usize,
        f: &(dyn Fn(usize) + Sync),
    ) -> Result<(), LaneError> {
        let _span = tracing::trace_span!("lane_fork", n, cap).entered();
        // SAFETY: erase the closure's lifetime; we do not return before every
        // helper has left the job (see the module docs).
        let f: *const (dyn Fn(usize) + Sync + 'static) = unsafe { std::mem::transmute(f) };
        let job = Job {
            f,
            n,
            next: AtomicUsize::new(0),
            helpers: AtomicUsize::new(0),
            max_helpers: cap
                .saturating_sub(1)
                .min(self.workers.len())
                .min(n.saturating_sub(1)),
            panic: Mutex::new(None),
        };
        let ptr = JobPtr(&job as *const Job);
        if job.max_helpers > 0 {
            let mut board = lock(&self.shared.board);
            board.jobs.push(ptr);
            self.shared.epoch.fetch_add(1, Ordering::Release);
            // Read under the lock: a worker counts itself before it waits.
            let parked = self.shared.sleepers.load(Ordering::Relaxed) > 0;
            drop(board);
            if parked {
                self.shared.work_cv.notify_all();
            }
        }
        job.work();
        if job.max_helpers > 0 {
            // Helpers finish their last chunk within microseconds: spin for
            // them before parking, since a futex sleep and wake-up costs as
            // much as a small kernel call (measured: a 0.18 ms conv ran no
            // faster on 2 lanes than on 1). Correctness still comes from the
            // wait under the lock below.
            let mut spins = 0;
            while job.helpers.load(Ordering::Acquire) > 0 && spins < SPIN_ROUNDS {
                std::hint::spin_loop();
                spins += 1;
            }
            let mut board = lock(&self.shared.board);
            board.jobs.retain(|p| *p != ptr);
            while job.helpers.load(Ordering::Relaxed) > 0 {
                self.shared.joiners.fetch_add(1, Ordering::Relaxed);
                board = self
                    .shared
                    .done_cv
                    .wait(board)
                    .unwrap_or_else(|e| e.into_inner());
                self.shared.joiners.fetch_sub(1, Ordering::Relaxed);
            }
        }
        let panicked = lock(&job.panic).take();
        match panicked {
            Some(msg) => Err(LaneError::Panicked(msg)),
            None => Ok(()),
        }
    }
}

impl Fork for LanePool {
    fn threads(&self) -> usize {
        self.threads
    }

    fn fork(&self, n: usize, f: &(dyn Fn(usize) + Sync)) -> Result<(), LaneError> {
        self.fork_capped(n, self.threads, f)
    }
}

impl Drop for LanePool {
    fn drop(&mut self) {
        self.shared.stopping.store(true, Ordering::Release);
        lock(&self.shared.board).shutdown = true;
        self.shared.work_cv.notify_all();
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

/// A capped share of a [`LanePool`]: forks through it use at most `threads` lanes.
#[derive(Debug, Clone, Copy)]
pub struct SubPool<'p> {
    pool: &'p LanePool,
    threads: usize,
}

impl SubPool<'_> {
    /// A smaller share of this share.
    pub fn sub(&self, threads: usize) -> Result<SubPool<'_>, PoolError> {
        sub_budget(self.pool, self.threads, threads)
    }
}

fn sub_budget(
    pool: &LanePool,
    available: usize,
    requested: usize,
) -> Result<SubPool<'_>, PoolError> {
    if requested == 0 {
        return Err(PoolError::ZeroThreads);
    }
    if requested > available {
        return Err(PoolError::BudgetExceeded {
            requested,
            available,
        });
    }
    Ok(SubPool {
        pool,
        threads: requested,
    })
}

impl Fork for SubPool<'_> {
    fn threads(&self) -> usize {
        self.threads
    }

    fn fork(&self, n: usize, f: &(dyn Fn(usize) + Sync)) -> Result<(), LaneError> {
        self.pool.fork_capped(n, self.threads, f)
    }
}

fn worker_loop(shared: &Shared) {
    loop {
        // Spin briefly for the next publish before parking on the condvar.
        let seen = shared.epoch.load(Ordering::Acquire);
        let mut spins = 0;
        while spins < SPIN_ROUNDS
            && shared.epoch.load(Ordering::Acquire) == seen
            && !shared.stopping.load(Ordering::Acquire)
        {
            std::hint::spin_loop();
            spins += 1;
        }
        let mut board = lock(&shared.board);
        let job = loop {
            if board.shutdown {
                return;
            }
            // SAFETY: jobs on the board are alive (their forker waits for us).
            let found = board
                .jobs
                .iter()
                .copied()
                .find(|p| unsafe { (*p.0).wants_help() });
            if let Some(p) = found {
                // SAFETY: as above; we join under the lock, so the forker waits for us.
                let job = unsafe { &*p.0 };
                job.helpers.fetch_add(1, Ordering::Relaxed);
                break job;
            }
            shared.sleepers.fetch_add(1, Ordering::Relaxed);
            board = shared
                .work_cv
                .wait(board)
                .unwrap_or_else(|e| e.into_inner());
            shared.sleepers.fetch_sub(1, Ordering::Relaxed);
        };
        drop(board);
        job.work();
        let board = lock(&shared.board);
        job.helpers.fetch_sub(1, Ordering::Release);
        let waiting = shared.joiners.load(Ordering::Relaxed) > 0;
        drop(board);
        if waiting {
            shared.done_cv.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn apart_is_a_bijection() {
        for n in 1..40 {
            let mut seen = vec![false; n];
            for i in 0..n {
                let j = apart(i, n);
                assert!(j < n && !seen[j], "n={n} i={i} -> {j}");
                seen[j] = true;
            }
        }
    }

    #[test]
    fn zero_threads_is_an_error() {
        assert_eq!(LanePool::new(0).unwrap_err(), PoolError::ZeroThreads);
    }

    #[test]
    fn every_index_runs_once() {
        for threads in 1..=4 {
            let pool = LanePool::new(threads).unwrap();
            let hits: Vec<AtomicUsize> = (0..1000).map(|_| AtomicUsize::new(0)).collect();
            pool.fork(1000, &|i| {
                hits[i].fetch_add(1, Ordering::Relaxed);
            })
            .unwrap();
            assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
        }
    }

    #[test]
    fn panic_is_reported_and_pool_survives() {
        let pool = LanePool::new(3).unwrap();
        let err = pool
            .fork(64, &|i| {
                if i == 17 {
                    panic!("boom at {i}");
                }
            })
            .unwrap_err();
        assert_eq!(err, LaneError::Panicked("boom at 17".into()));
        let count = AtomicUsize::new(0);
        pool.fork(64, &|_| {
            count.fetch_add(1, Ordering::Relaxed);
        })
        .unwrap();
        assert_eq!(count.load(Ordering::Relaxed), 64);
    }

    #[test]
    fn nested_forks_complete() {
        let pool = LanePool::new(3).unwrap();
        let total = AtomicUsize::new(0);
        pool.fork(8, &|_| {
            pool.fork(8, &|_| {
                total.fetch_add(1, Ordering::Relaxed);
            })
            .unwrap();
        })
        .unwrap();
        assert_eq!(total.load(Ordering::Relaxed), 64);
    }

    #[test]
    fn sub_budget_cannot_exceed_parent() {
        let pool = LanePool::new(2).unwrap();
        assert_eq!(
            pool.sub(3).unwrap_err(),
            PoolError::BudgetExceeded {
                requested: 3,
                available: 2
            }
        );
        let sub = pool.sub(1).unwrap();
        assert_eq!(
            sub.sub(2).unwrap_err(),
            PoolError::BudgetExceeded {
                requested: 2,
                available: 1
            }
        );
    }

    #[test]
    fn join_returns_both() {
        let pool = LanePool::new(2).unwrap();
        let (a, b) = pool.join(|| 2 + 2, || "four").unwrap();
        assert_eq!((a, b), (4, "four"));
    }

    #[test]
    fn chunked_mut_covers_slice() {
        let pool = LanePool::new(3).unwrap();
        let mut v = vec![0usize; 1003];
        pool.for_each_chunk_mut(&mut v, 64, |ci, piece| {
            for (j, x) in piece.iter_mut().enumerate() {
                *x = ci * 64 + j;
            }
        })
        .unwrap();
        assert!(v.iter().enumerate().all(|(i, &x)| i == x));
    }
}
