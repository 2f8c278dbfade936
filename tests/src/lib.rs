//! Shared helpers for voxlane's integration tests.

pub mod kernel_conformance;

use voxlane_machines::core::{Fired, MachineSpec};

/// Fail unless every fired edge is declared in the machine's table.
pub fn assert_declared(spec: &MachineSpec, fired: &[Fired]) {
    for f in fired {
        assert!(
            spec.declares(f),
            "{}: edge {f:?} is taken by the statig machine but missing from TRANSITIONS",
            spec.name
        );
        assert!(
            spec.leaf_states().any(|s| s == f.to),
            "{}: machine ended in undeclared state {}",
            spec.name,
            f.to
        );
    }
}

/// Fail if a declared edge was never taken in `log`.
pub fn assert_all_reached(spec: &MachineSpec, log: &[Fired]) {
    let missing = spec.unreached(log);
    assert!(
        missing.is_empty(),
        "{}: table edges never reached by the driver: {missing:#?}",
        spec.name
    );
}

/// Count the OS threads of this process (Linux `/proc/self/task`).
pub fn os_threads() -> usize {
    std::fs::read_dir("/proc/self/task").map_or(0, |d| d.count())
}

/// The bit patterns of `v`, for bit-exact comparisons with readable diffs.
pub fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|f| f.to_bits()).collect()
}

/// Pearson correlation of two equally long signals (0 when either is flat).
pub fn pearson(a: &[f32], b: &[f32]) -> f64 {
    assert_eq!(a.len(), b.len(), "pearson needs equal lengths");
    let n = a.len().max(1) as f64;
    let ma = a.iter().map(|&x| f64::from(x)).sum::<f64>() / n;
    let mb = b.iter().map(|&x| f64::from(x)).sum::<f64>() / n;
    let (mut ab, mut aa, mut bb) = (0.0, 0.0, 0.0);
    for (&x, &y) in a.iter().zip(b) {
        let (dx, dy) = (f64::from(x) - ma, f64::from(y) - mb);
        ab += dx * dy;
        aa += dx * dx;
        bb += dy * dy;
    }
    if aa == 0.0 || bb == 0.0 {
        return 0.0;
    }
    ab / (aa * bb).sqrt()
}
