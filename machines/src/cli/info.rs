//! `voxlane info`: the SIMD route and CPU features the kernels will use, and
//! the thread budget, proven by starting the lane pool through its machine.

use super::{check_threads, CliError};
use crate::pool::lane_dispatch::{LaneDispatcher, Reply};
use std::io::Write;

/// Start a pool of `threads` lanes (each pinned to a core with `pin`) and
/// report what the kernels will run on.
pub fn run(threads: usize, pin: bool, out: &mut dyn Write) -> Result<(), CliError> {
    let threads = check_threads(threads)?;
    // Read before pinning: pinning narrows this thread's affinity.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    // Start the pool through its machine: proves the budget and pinning work here.
    let mut lanes = LaneDispatcher::new();
    let pinned = match lanes.configure(threads, pin) {
        Reply::ConfigureDone { pinned, .. } => pinned,
        Reply::Error(e) => return Err(CliError::Threads(e.to_string())),
        other => return Err(CliError::Threads(format!("unexpected reply {other:?}"))),
    };
    let f = voxlane_actors::kernels::cpu::features();
    writeln!(
        out,
        "simd level: {:?}",
        voxlane_actors::kernels::cpu::simd_level()
    )?;
    writeln!(
        out,
        "route:      {} (int8 GEMM: {:?})",
        voxlane_actors::kernels::cpu::route_name(),
        voxlane_actors::tts::kokoro::qgemm::QRoute::best()
    )?;
    writeln!(out, "features:   {f:?}")?;
    writeln!(out, "cores:      {cores}")?;
    writeln!(
        out,
        "threads:    {threads} (the caller plus {} lane workers)",
        threads - 1
    )?;
    writeln!(out, "pinned:     {pinned}")?;
    Ok(())
}
