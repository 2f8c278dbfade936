//! Wall-clock measurement: warm up, repeat, take the median.

use std::time::{Duration, Instant};

/// Median seconds of one call of `f`, over at least `min_reps` calls and
/// about `window` of total time (capped at 500 calls).
pub fn median_secs(mut f: impl FnMut(), window: Duration, min_reps: usize) -> f64 {
    f();
    f();
    let start = Instant::now();
    let mut samples = Vec::new();
    while samples.len() < min_reps || (start.elapsed() < window && samples.len() < 500) {
        let t = Instant::now();
        f();
        samples.push(t.elapsed().as_secs_f64());
    }
    samples.sort_by(|a, b| a.total_cmp(b));
    samples[samples.len() / 2]
}

/// The timing window for a bench run.
pub fn window(quick: bool) -> Duration {
    if quick {
        Duration::from_millis(60)
    } else {
        Duration::from_millis(400)
    }
}
