//! The shell's own routes over plain HTTP: `/health`, `/metrics`, JSON 4xx
//! errors (an unknown path, `/api/chat` without a websocket upgrade).

use super::support::*;
use std::sync::Arc;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_metrics_and_json_errors() {
    let server = start(Arc::new(EchoEngineTestDouble::default()), None).await;
    let (status, body) = http_get(server.addr, "/health").await;
    assert_eq!(status, 200);
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["status"], "ok");
    assert_eq!(v["max_streams"], 1);

    let (status, body) = http_get(server.addr, "/metrics").await;
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

    let (status, body) = http_get(server.addr, "/nope").await;
    assert_eq!(status, 404);
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["error"]["code"], "not_found");

    let (status, body) = http_get(server.addr, "/api/chat?text_topk=zero").await;
    assert_eq!(status, 400, "a bad query over plain HTTP is a 4xx");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["error"]["code"], "bad_query");
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .contains("text_topk"));

    let (status, body) = http_get(server.addr, "/api/chat").await;
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
