//! Effects of the lane dispatcher's edges. Actions that can fail raise an
//! outcome event (`pool_*`, `lanes_*`) in the sink instead of choosing a
//! state themselves; the machine's next edge turns it into the reply.

use super::errors::LaneDispatchError;
use super::events::{Configure, Dispatch, FollowUp, Reply, Route, Sink};
use super::guards::effective_lanes;
use super::machine::LaneDispatchMachine;
use std::panic::{catch_unwind, AssertUnwindSafe};
use voxlane_runtime::{Fork, LaneError, LanePool, PoolError, PoolOptions};

fn reject(m: &mut LaneDispatchMachine, sink: &mut Sink, err: LaneDispatchError) {
    m.book.reject(err.reason());
    sink.reply = Some(Reply::Error(err));
}

/// Spawn the pool's workers; raise `pool_done` or `pool_error`.
pub fn effect_start_pool(m: &mut LaneDispatchMachine, c: &Configure, sink: &mut Sink) {
    sink.follow_up = Some(
        match LanePool::with_options(PoolOptions {
            threads: c.threads,
            pin: c.pin,
        }) {
            Ok(pool) => {
                m.pool = Some(pool);
                FollowUp::PoolDone
            }
            Err(e) => FollowUp::PoolError(e),
        },
    );
}

/// Reply `configure_done`.
pub fn effect_reply_configured(m: &mut LaneDispatchMachine, sink: &mut Sink) {
    if let Some(pool) = &m.pool {
        sink.reply = Some(Reply::ConfigureDone {
            threads: pool.threads(),
            pinned: pool.pinned(),
        });
    }
}

/// Reply `configure_error` for a pool that could not start.
pub fn effect_reply_pool_error(m: &mut LaneDispatchMachine, e: &PoolError, sink: &mut Sink) {
    reject(m, sink, LaneDispatchError::Pool(e.clone()));
}

/// Reject a zero or oversized budget.
pub fn effect_reject_budget(m: &mut LaneDispatchMachine, c: &Configure, sink: &mut Sink) {
    let err = if c.threads == 0 {
        LaneDispatchError::ZeroThreads
    } else {
        LaneDispatchError::BudgetTooLarge {
            requested: c.threads,
            max: super::guards::MAX_THREADS,
        }
    };
    reject(m, sink, err);
}

/// Reject work before `configure`.
pub fn effect_reject_not_configured(m: &mut LaneDispatchMachine, sink: &mut Sink) {
    reject(m, sink, LaneDispatchError::NotConfigured);
}

/// Reject a second `configure`.
pub fn effect_reject_already_configured(m: &mut LaneDispatchMachine, sink: &mut Sink) {
    reject(m, sink, LaneDispatchError::AlreadyConfigured);
}

/// Reject a dispatch asking for more lanes than the pool owns.
pub fn effect_reject_lanes_budget(m: &mut LaneDispatchMachine, d: &Dispatch<'_>, sink: &mut Sink) {
    let available = m.pool.as_ref().map_or(0, |p| p.threads());
    reject(
        m,
        sink,
        LaneDispatchError::LanesExceedBudget {
            requested: d.lanes,
            available,
        },
    );
}

/// Reply `dispatch_done` for an empty batch.
pub fn effect_complete_empty(_m: &mut LaneDispatchMachine, sink: &mut Sink) {
    sink.reply = Some(Reply::DispatchDone {
        tasks: 0,
        route: Route::Empty,
    });
}

fn lanes_outcome(result: Result<(), LaneError>) -> FollowUp {
    match result {
        Ok(()) => FollowUp::LanesDone,
        Err(e) => FollowUp::LanesError(e),
    }
}

/// Run every task on the calling thread; raise `lanes_done` or `lanes_error`.
pub fn effect_run_serial(_m: &mut LaneDispatchMachine, d: &Dispatch<'_>, sink: &mut Sink) {
    let job = d.job;
    let result = catch_unwind(AssertUnwindSafe(|| (0..d.tasks).for_each(job)))
        .map_err(|p| LaneError::Panicked(panic_text(&*p)));
    sink.in_flight = Some((d.tasks, Route::Serial));
    sink.follow_up = Some(lanes_outcome(result));
}

/// Fork the tasks across the pool's lanes; raise `lanes_done` or `lanes_error`.
pub fn effect_dispatch_lanes(m: &mut LaneDispatchMachine, d: &Dispatch<'_>, sink: &mut Sink) {
    let lanes = effective_lanes(m, d);
    let result = match m.pool.as_ref().map(|p| p.sub(lanes)) {
        Some(Ok(sub)) => sub.fork(d.tasks, d.job),
        // Unreachable behind guard_route_parallel; report rather than panic.
        _ => Err(LaneError::Panicked("lane budget vanished".into())),
    };
    sink.in_flight = Some((d.tasks, Route::Parallel));
    sink.follow_up = Some(lanes_outcome(result));
}

/// Reply `dispatch_done`.
pub fn effect_reply_dispatch_done(_m: &mut LaneDispatchMachine, sink: &mut Sink) {
    let (tasks, route) = sink.in_flight.take().unwrap_or((0, Route::Empty));
    sink.reply = Some(Reply::DispatchDone { tasks, route });
}

/// Reply `dispatch_error` for a panicked lane.
pub fn effect_reply_lanes_error(m: &mut LaneDispatchMachine, e: &LaneError, sink: &mut Sink) {
    sink.in_flight = None;
    reject(m, sink, LaneDispatchError::Lane(e.clone()));
}

/// Reply with the diagnostics counters.
pub fn effect_capture_diagnostics(m: &mut LaneDispatchMachine, sink: &mut Sink) {
    sink.reply = Some(Reply::Diagnostics(m.book.snapshot()));
}

/// Join the workers and reply `shutdown_done`.
pub fn effect_release_pool(m: &mut LaneDispatchMachine, sink: &mut Sink) {
    m.pool = None;
    sink.reply = Some(Reply::ShutdownDone);
}

/// Reject any request after shutdown.
pub fn effect_reject_shut_down(m: &mut LaneDispatchMachine, sink: &mut Sink) {
    reject(m, sink, LaneDispatchError::ShutDown);
}

/// Reject an event no edge of the current state takes.
pub fn effect_reject_unexpected(m: &mut LaneDispatchMachine, event: &'static str, sink: &mut Sink) {
    let state = m.book.state();
    reject(m, sink, LaneDispatchError::Unexpected { event, state });
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic payload".into())
}
