//! Kyutai's own client stack against the server: `tests/python/duplex_client.py`
//! (`websockets` + `sphn`'s Opus stream writer and reader) over loopback,
//! against the echo TEST DOUBLE and the tiny PersonaPlex. Skips with a
//! message when python3 lacks `websockets` or `sphn`, unless
//! `VOXLANE_REQUIRE_DUPLEX_CLIENT=1` (CI) makes that a failure.

use super::support::*;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;

fn client_ready() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import websockets, sphn"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(
            std::env::var("VOXLANE_REQUIRE_DUPLEX_CLIENT").as_deref() != Ok("1"),
            "VOXLANE_REQUIRE_DUPLEX_CLIENT=1 but python3 lacks websockets or sphn \
             (python3 -m pip install websockets sphn)"
        );
        eprintln!(
            "skipped: python3 lacks websockets/sphn (python3 -m pip install websockets sphn)"
        );
    }
    ok
}

/// Runs the client on `wav` against `addr` with `query`; its JSON report.
async fn run_client(
    addr: std::net::SocketAddr,
    wav: &std::path::Path,
    query: &str,
    min_text: usize,
) -> serde_json::Value {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("python/duplex_client.py");
    let url = format!("ws://{addr}/api/chat?{query}");
    let out = tokio::process::Command::new("python3")
        .arg(&script)
        .args(["--url", &url, "--wav"])
        .arg(wav)
        .args(["--min-text", &min_text.to_string(), "--timeout", "120"])
        .output()
        .await
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "client failed:\n{stdout}\n{stderr}");
    serde_json::from_str(stdout.lines().last().unwrap_or(""))
        .unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_client_converses_with_the_echo_double() {
    if !client_ready() {
        return;
    }
    let wav = std::env::temp_dir().join(format!("voxlane-duplex-sine-{}.wav", std::process::id()));
    voxlane_runtime::io::write_wav(&wav, RATE, &sine(330.0, 30)).unwrap();
    let server = start(Arc::new(EchoEngineTestDouble::default()), None).await;
    let report = run_client(server.addr, &wav, "text_prompt=hi&seed=1", 1).await;
    assert_eq!(report["handshake"], true);
    assert!(report["audio_messages"].as_u64().unwrap() >= 30, "{report}");
    // The echo comes back through two Opus passes: still the sine.
    assert!(report["correlation"].as_f64().unwrap() > 0.8, "{report}");
    server.shutdown().await;
    let _ = std::fs::remove_file(wav);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_client_converses_with_personaplex_tiny() {
    if !client_ready() {
        return;
    }
    let fx = super::duplex_e2e::fixture_dir();
    let server = start(super::duplex_e2e::engine(), Some(fx.clone())).await;
    let query = "text_prompt=You%20enjoy%20talking.&voice_prompt=voice_prompt.wav&text_temperature=0&audio_temperature=0";
    let report = run_client(server.addr, &fx.join("user.wav"), query, 1).await;
    assert_eq!(report["handshake"], true);
    server.shutdown().await;
}
