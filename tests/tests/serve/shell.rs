//! The shell's own routes over plain HTTP: `/health`, `/metrics`, JSON 4xx
//! errors (an unknown path, `/api/chat` without a websocket upgrade).

use super::support::*;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A bare HTTP/1.1 GET; the status and body.
async fn get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await.unwrap();
    let text = String::from_utf8_lossy(&buf).to_string();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text.split("\r\n\r\n").nth(1).unwrap_or("").to_string();
    (status, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_metrics_and_json_errors() {
    let server = start(Arc::new(EchoEngineTestDouble::default()), None).await;
    let (status, body) = get(server.addr, "/health").await;
    assert_eq!(status, 200);
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["status"], "ok");
    assert_eq!(v["max_streams"], 1);

    let (status, body) = get(server.addr, "/metrics").await;
    assert_eq!(status, 200);
    for name in [
        "voxlane_streams_in_flight",
        "voxlane_streams_busy_total",
        "voxlane_duplex_frames_out_total",
    ] {
        assert!(
            body.contains(&format!("# TYPE {name} ")),
            "{name} in {body}"
        );
    }

    let (status, body) = get(server.addr, "/nope").await;
    assert_eq!(status, 404);
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["error"]["code"], "not_found");

    let (status, body) = get(server.addr, "/api/chat?text_topk=zero").await;
    assert_eq!(status, 400, "a bad query over plain HTTP is a 4xx");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["error"]["code"], "bad_query");
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .contains("text_topk"));

    let (status, body) = get(server.addr, "/api/chat").await;
    assert!((400..500).contains(&status), "no upgrade: {status}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["error"]["code"], "websocket_required");
    server.shutdown().await;
}

#[test]
fn the_cli_checks_serve_flags_before_loading() {
    let err = |args: &[&str]| {
        let mut a = vec!["voxlane", "serve"];
        a.extend_from_slice(args);
        voxlane_machines::cli::run_args(a, &mut Vec::new())
            .unwrap_err()
            .to_string()
    };
    assert!(err(&[]).contains("not built yet"), "without --duplex");
    assert!(err(&["--duplex"]).contains("--lm"));
    assert!(err(&["--duplex", "--lm", "/nonexistent.safetensors"]).contains("does not exist"));
    let fx = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/fixtures/personaplex-tiny");
    if fx.is_dir() {
        let (lm, mimi, spm) = (
            fx.join("lm.safetensors"),
            fx.join("mimi.safetensors"),
            fx.join("tokenizer.model"),
        );
        let base = [
            "--duplex",
            "--lm",
            lm.to_str().unwrap(),
            "--mimi",
            mimi.to_str().unwrap(),
            "--tokenizer",
            spm.to_str().unwrap(),
        ];
        let mut a = base.to_vec();
        a.extend(["--voices-dir", "/nonexistent-dir"]);
        assert!(err(&a).contains("not a directory"));
        let mut a = base.to_vec();
        a.extend(["--threads", "0"]);
        assert!(err(&a).contains("--threads"));
    }
}
