//! Pure predicates choosing the lane dispatcher's edges.

use super::events::{Configure, Dispatch};
use super::machine::LaneDispatchMachine;

/// The most threads one pool may own.
pub const MAX_THREADS: usize = 256;

/// The requested budget is usable.
pub fn guard_budget_valid(c: &Configure) -> bool {
    (1..=MAX_THREADS).contains(&c.threads)
}

/// The requested budget is zero or above [`MAX_THREADS`].
pub fn guard_budget_invalid(c: &Configure) -> bool {
    !guard_budget_valid(c)
}

fn pool_threads(m: &LaneDispatchMachine) -> usize {
    m.pool.as_ref().map_or(0, voxlane_runtime::Fork::threads)
}

/// The dispatch asks for more lanes than the pool owns.
pub fn guard_lanes_exceed_budget(m: &LaneDispatchMachine, d: &Dispatch<'_>) -> bool {
    d.lanes > pool_threads(m)
}

/// Nothing to run.
pub fn guard_job_empty(m: &LaneDispatchMachine, d: &Dispatch<'_>) -> bool {
    !guard_lanes_exceed_budget(m, d) && d.tasks == 0
}

/// The lanes this dispatch would use.
pub fn effective_lanes(m: &LaneDispatchMachine, d: &Dispatch<'_>) -> usize {
    match d.lanes {
        0 => pool_threads(m),
        n => n,
    }
}

/// One lane, or one task: run on the caller without forking.
pub fn guard_route_serial(m: &LaneDispatchMachine, d: &Dispatch<'_>) -> bool {
    !guard_lanes_exceed_budget(m, d) && d.tasks >= 1 && (d.tasks == 1 || effective_lanes(m, d) == 1)
}

/// Several tasks and several lanes: fork.
pub fn guard_route_parallel(m: &LaneDispatchMachine, d: &Dispatch<'_>) -> bool {
    !guard_lanes_exceed_budget(m, d) && d.tasks > 1 && effective_lanes(m, d) > 1
}
