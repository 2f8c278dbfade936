//! The fuzz targets' inputs replayed on stable: every file in
//! `tests/fuzz/regressions/<target>/` (crashers the fuzzers or the size
//! audit found, each once a panic, an overflow or a huge allocation) must
//! give a typed error, and every seed in `tests/fuzz/corpus/<target>/` must
//! parse; neither may panic. The harness is the fuzz crate's own
//! (`tests/fuzz/src/lib.rs`), so a replay runs exactly what the fuzzer ran.

#[path = "../fuzz/src/lib.rs"]
mod harness;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz")
}

/// Each target's files under `dir/<target>/`, sorted.
fn inputs(dir: &str) -> Vec<(&'static str, harness::Target, PathBuf)> {
    let mut out = Vec::new();
    for &(target, run) in harness::TARGETS {
        let Ok(entries) = std::fs::read_dir(fuzz_dir().join(dir).join(target)) else {
            continue;
        };
        let mut files: Vec<PathBuf> = entries
            .map(|e| e.expect("readable directory entry").path())
            .filter(|p| p.is_file())
            .collect();
        files.sort();
        out.extend(files.into_iter().map(|p| (target, run, p)));
    }
    out
}

/// Replays `dir`'s inputs; returns the failures (a panic, or an outcome `ok` rejects).
fn replay(dir: &str, ok: impl Fn(&harness::Outcome) -> bool) -> (usize, Vec<String>) {
    let all = inputs(dir);
    let mut failures = Vec::new();
    for (target, run, path) in &all {
        let bytes = std::fs::read(path).expect("readable input");
        match catch_unwind(AssertUnwindSafe(|| run(&bytes))) {
            Ok(outcome) if ok(&outcome) => {}
            Ok(outcome) => failures.push(format!("{target}: {}: {outcome:?}", path.display())),
            Err(_) => failures.push(format!("{target}: {}: panicked", path.display())),
        }
    }
    (all.len(), failures)
}

#[test]
fn every_crasher_is_a_typed_error() {
    let (n, failures) = replay("regressions", |o| o.is_err());
    assert!(
        n > 0,
        "no regression inputs found under tests/fuzz/regressions"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_seed_parses() {
    let (n, failures) = replay("corpus", |o| o.is_ok());
    assert!(
        n >= harness::TARGETS.len(),
        "seed corpora missing: {n} files"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_target_has_seeds() {
    for &(target, _) in harness::TARGETS {
        let dir = fuzz_dir().join("corpus").join(target);
        let files = std::fs::read_dir(&dir).map_or(0, |d| d.count());
        assert!(files > 0, "{} has no seeds", dir.display());
    }
}
