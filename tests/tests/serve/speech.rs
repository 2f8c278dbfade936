//! The OpenAI-compatible speech routes on the real Kokoro model (fetched as
//! `voxlane speak` fetches it): OpenAI's Python client for every format
//! (decoded by ffmpeg), the busy answer beyond workers + queue, a client
//! that leaves cancelling its synthesis, and the CLI's flag checks.

use super::support::{eventually, http_get, Running};
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use voxlane_machines::cli::fetch::fetch_models;
use voxlane_machines::serve::debug::{self, LiveMachines};
use voxlane_machines::serve::shell::{Shell, ShellConfig};
use voxlane_machines::serve::speech::{self, AudioFormat, SpeechEngine, SpeechEngineConfig};
use voxlane_machines::tts::TtsPaths;
use voxlane_runtime::fetch::Fetcher;

/// Many sentences: far longer to synthesize than any test waits.
fn long_text() -> String {
    "The quick brown fox jumps over the lazy dog near the river bank today. ".repeat(40)
}

fn paths() -> &'static TtsPaths {
    static PATHS: OnceLock<TtsPaths> = OnceLock::new();
    PATHS.get_or_init(|| {
        let fetcher = Fetcher::new().expect("voxlane home");
        let files = fetch_models(&fetcher, &mut Vec::new())
            .unwrap_or_else(|e| panic!("Kokoro files: {e} (run `cargo xtask fetch-models`)"));
        TtsPaths {
            model: files[0].clone(),
            vocab: files[1].clone(),
            voices: files[2].clone(),
        }
    })
}

async fn start(workers: usize, queue: usize) -> (Running, Arc<SpeechEngine>) {
    let engine = Arc::new(
        SpeechEngine::load(
            paths(),
            SpeechEngineConfig {
                workers,
                threads: workers,
                pin: false,
                max_input_chars: 4_000,
            },
        )
        .expect("Kokoro loads"),
    );
    let mut cfg = ShellConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.max_streams = workers + queue;
    let shell = Shell::bind(cfg).await.unwrap();
    let addr = shell.local_addr().unwrap();
    let state = shell.state().clone();
    let live: Arc<dyn LiveMachines> = engine.clone();
    let routes = speech::routes(engine.clone(), shell.state()).merge(debug::routes(vec![live]));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(shell.serve(routes, async move {
        let _ = stopped.await;
    }));
    let running = Running {
        addr,
        state,
        stop: Some(stop),
        task,
    };
    (running, engine)
}

/// Sends a POST of `body` and returns the open connection after the head.
async fn post(addr: SocketAddr, body: &str) -> (tokio::net::TcpStream, String, Vec<u8>) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!(
        "POST /v1/audio/speech HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
         Connection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = tokio::time::timeout(Duration::from_secs(120), s.read(&mut chunk))
            .await
            .expect("an answer")
            .unwrap();
        assert!(n > 0, "the server closed before answering");
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_string();
            let rest = buf[end + 4..].to_vec();
            return (s, head, rest);
        }
    }
}

fn metric(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("{name} in /metrics"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_python_client_gets_every_format() {
    let ready = std::process::Command::new("python3")
        .args(["-c", "import openai, numpy"])
        .status()
        .is_ok_and(|s| s.success())
        && std::process::Command::new("ffmpeg")
            .arg("-version")
            .output()
            .is_ok_and(|o| o.status.success());
    if !ready {
        assert!(
            std::env::var_os("VOXLANE_REQUIRE_SPEECH_CLIENT").is_none(),
            "VOXLANE_REQUIRE_SPEECH_CLIENT is set but python3 lacks openai/numpy or ffmpeg is missing"
        );
        eprintln!("skipped: needs `pip install openai numpy` and ffmpeg");
        return;
    }
    let (server, _engine) = start(1, 2).await;
    let script =
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("python/openai_speech_client.py");
    let out = tokio::process::Command::new("python3")
        .arg(&script)
        .args(["--base-url", &format!("http://{}/v1", server.addr)])
        .output()
        .await
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "client failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    let f = &r["formats"];
    let wav_s = f["wav"]["seconds"].as_f64().unwrap();
    assert!(
        wav_s > 1.5 && wav_s < 8.0,
        "a sentence pair of speech: {wav_s} s"
    );
    let types = [
        ("mp3", "audio/mpeg"),
        ("opus", "audio/ogg; codecs=opus"),
        ("flac", "audio/flac"),
        ("wav", "audio/wav"),
        ("pcm", "audio/pcm"),
    ];
    for (fmt, ct) in types {
        assert_eq!(f[fmt]["content_type"], ct, "{fmt}");
        let s = f[fmt]["seconds"].as_f64().unwrap();
        // Lossy codecs pad to whole frames: within 0.1 s of the PCM.
        assert!((s - wav_s).abs() < 0.1, "{fmt}: {s} s vs {wav_s} s");
        let rms = f[fmt]["rms"].as_f64().unwrap();
        assert!(rms > 0.01, "{fmt} is not silence: rms {rms}");
    }
    assert_eq!(
        f["pcm"]["bytes"].as_u64().unwrap(),
        (wav_s * 24000.0).round() as u64 * 2
    );
    assert_eq!(r["wav_equals_pcm"], true);
    assert_eq!(r["flac_equals_wav"], true, "FLAC is lossless");
    // FLAC compresses speech well below 16-bit PCM.
    assert!(f["flac"]["bytes"].as_u64() < f["wav"]["bytes"].as_u64().map(|b| b * 3 / 4));
    for codec in ["mp3_correlation", "opus_correlation"] {
        let c = r[codec].as_f64().unwrap();
        assert!(c > 0.9, "{codec} {c}: the lossy audio is the same speech");
    }
    assert_eq!(r["stream_transfer_encoding"], "chunked");
    assert_eq!(r["stream_riff_size"], 0xFFFF_FFFFu64);
    assert_eq!(r["stream_data_size"], 0xFFFF_FFFFu64);
    let streamed = r["stream_seconds"].as_f64().unwrap();
    assert!((streamed - wav_s).abs() < 0.5, "streamed {streamed} s");
    let errors = &r["errors"];
    for (case, code) in [
        ("voice", "invalid_voice"),
        ("format", "invalid_response_format"),
        ("speed", "invalid_speed"),
        ("model", "model_not_found"),
        ("empty", "empty_input"),
    ] {
        assert_eq!(errors[case]["status"], 400, "{case}: {errors}");
        assert_eq!(errors[case]["code"], code, "{case}");
    }
    assert_eq!(
        r["models"],
        serde_json::json!(["kokoro", "tts-1", "tts-1-hd"])
    );
    server.shutdown().await;
}

/// Word timestamps over HTTP (Python's urllib): whole as JSON, streamed as
/// JSON lines on Kokoro-FastAPI's route, each answer's audio decoded with
/// ffmpeg and the words checked against it (`tests/python/timestamps_client.py`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn word_timestamps_whole_and_streamed_match_the_audio() {
    let ready = std::process::Command::new("python3")
        .args(["-c", "import numpy"])
        .status()
        .is_ok_and(|s| s.success())
        && std::process::Command::new("ffmpeg")
            .arg("-version")
            .output()
            .is_ok_and(|o| o.status.success());
    if !ready {
        assert!(
            std::env::var_os("VOXLANE_REQUIRE_SPEECH_CLIENT").is_none(),
            "VOXLANE_REQUIRE_SPEECH_CLIENT is set but python3 lacks numpy or ffmpeg is missing"
        );
        eprintln!("skipped: needs python3 with numpy, and ffmpeg");
        return;
    }
    let (server, _engine) = start(1, 2).await;
    let script =
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("python/timestamps_client.py");
    let out = tokio::process::Command::new("python3")
        .arg(&script)
        .args(["--base-url", &format!("http://{}", server.addr)])
        .output()
        .await
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "client failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    for answer in ["whole", "stream"] {
        let a = &r[answer];
        assert_eq!(
            a["words"], 18,
            "{answer}: every word of the normalised text"
        );
        let (last, seconds) = (
            a["last_end"].as_f64().unwrap(),
            a["duration"].as_f64().unwrap(),
        );
        assert!(
            last > seconds - 0.6 && last <= seconds + 0.05,
            "{answer}: {a}"
        );
        // Every timed word is speech, not silence.
        assert!(
            a["quietest_word_rms"].as_f64().unwrap() > 0.01,
            "{answer}: {a}"
        );
        let pause = a["pause"].as_array().unwrap();
        let len = pause[1].as_f64().unwrap() - pause[0].as_f64().unwrap();
        assert!(len >= 0.15, "{answer}: a sentence pause in the audio: {a}");
    }
    assert_eq!(r["stream_content_type"], "application/x-ndjson");
    assert!(r["stream"]["lines"].as_u64().unwrap() >= 2, "{r}");
    assert_eq!(r["same_times"], true, "whole and streamed times agree");
    assert_eq!(r["empty_status"], 400);
    assert_eq!(r["empty_code"], "empty_input");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn busy_beyond_the_queue_and_a_client_that_leaves_cancels() {
    // One worker, no queue: the second request is refused at once.
    let (server, engine) = start(1, 0).await;
    let long = serde_json::json!({
        "model": "kokoro", "input": long_text(), "voice": "jf_alpha",
        "response_format": "pcm", "stream": true,
    })
    .to_string();
    let (mut first, head, _) = post(server.addr, &long).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("transfer-encoding: chunked"),
        "{head}"
    );
    let mut some = vec![0u8; 8192];
    let n = tokio::time::timeout(Duration::from_secs(60), first.read(&mut some))
        .await
        .expect("more audio")
        .unwrap();
    assert!(n > 0, "audio bytes flow before the text is done");
    assert_eq!(engine.busy(), 1);

    let short = r#"{"model":"kokoro","input":"Hello.","response_format":"wav"}"#;
    let (_, head, body) = post(server.addr, short).await;
    assert!(head.starts_with("HTTP/1.1 503"), "{head}");
    assert!(
        head.to_ascii_lowercase().contains("retry-after: 1"),
        "{head}"
    );
    let body = String::from_utf8_lossy(&body);
    assert!(body.contains("\"code\":\"busy\""), "{body}");

    // The first client leaves: its synthesis stops long before its text ends.
    drop(first);
    assert!(
        eventually(Duration::from_secs(30), || engine.busy() == 0
            && server.state.streams.in_flight() == 0)
        .await,
        "the synthesis was cancelled and its slot freed"
    );
    let (_, metrics) = http_get(server.addr, "/metrics").await;
    let audio_ms = metric(&metrics, "voxlane_speech_audio_ms_total");
    // 40 sentences are over two minutes of speech; far less was made.
    assert!(
        audio_ms < 60_000,
        "synthesis went on after the client left: {audio_ms} ms"
    );
    // One request got audio (the refused one did not): one first-chunk wait.
    assert_eq!(
        metric(&metrics, "voxlane_speech_first_chunk_seconds_count"),
        1
    );
    assert_eq!(
        metric(
            &metrics,
            "voxlane_speech_first_chunk_seconds_bucket{le=\"+Inf\"}"
        ),
        1
    );
    assert_eq!(metric(&metrics, "voxlane_speech_refused_total"), 1);
    assert_eq!(metric(&metrics, "voxlane_speech_queue_depth"), 0);
    // Responses by status: the streamed answer's 200 and the refusal's 503.
    assert_eq!(
        metric(&metrics, "voxlane_speech_responses_total{status=\"200\"}"),
        1,
        "{metrics}"
    );
    assert_eq!(
        metric(&metrics, "voxlane_speech_responses_total{status=\"503\"}"),
        1
    );

    // The freed slot serves the next request whole.
    let (mut s, head, mut body) = post(server.addr, short).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    tokio::time::timeout(Duration::from_secs(60), s.read_to_end(&mut body))
        .await
        .expect("the answer ends")
        .unwrap();
    assert_eq!(&body[..4], b"RIFF");
    let data = u32::from_le_bytes(body[40..44].try_into().unwrap()) as usize;
    assert_eq!(data + 44, body.len(), "a whole WAV carries its real size");
    assert!(data > 24_000, "at least half a second of audio");

    // `/debug/machines`: the worker's Kokoro machines as of its last chunk.
    let (status, body) = http_get(server.addr, "/debug/machines").await;
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let by_name = |name: &str| {
        v["machines"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["machine"] == name)
            .unwrap_or_else(|| panic!("{name} in {body}"))
            .clone()
    };
    let tts = by_name("kokoro_tts");
    let count = |m: &serde_json::Value, e: &str| m["events"][e].as_u64().unwrap_or(0);
    // The long request and the last one reached the machine; the refused one did not.
    assert_eq!(count(&tts, "synthesize"), 2, "{tts}");
    assert!(
        count(&tts, "cancel") >= 1,
        "the client that left cancelled: {tts}"
    );
    assert_ne!(tts["state"], "unloaded");
    for stage in ["kokoro_text", "kokoro_acoustic", "kokoro_vocoder"] {
        let m = by_name(stage);
        assert!(m["events_total"].as_u64().unwrap() > 2, "{stage}: {m}");
        assert!(
            m["diagram"].as_str().unwrap().contains("stateDiagram"),
            "{stage}"
        );
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_bodies_get_json_400s() {
    let (server, _engine) = start(1, 1).await;
    // Over the server's --max-input-chars (4000 here): a 413 naming `input`.
    let long = format!(r#"{{"model":"kokoro","input":"{}"}}"#, "a".repeat(4_001));
    let (mut s, head, mut rest) = post(server.addr, &long).await;
    assert!(head.starts_with("HTTP/1.1 413"), "{head}");
    let _ = tokio::time::timeout(Duration::from_secs(2), s.read_to_end(&mut rest)).await;
    let err: serde_json::Value = serde_json::from_slice(&rest).unwrap();
    assert_eq!(err["error"]["code"], "input_too_long");
    assert_eq!(err["error"]["param"], "input");
    assert!(err["error"]["message"].as_str().unwrap().contains("4000"));
    for (body, code) in [
        ("{not json", "invalid_json"),
        (r#"{"model":"kokoro"}"#, "missing_field"),
        (
            r#"{"model":"kokoro","input":"x","stream":"yes"}"#,
            "invalid_type",
        ),
        (
            r#"{"model":"kokoro","input":"x","voice":"jf_alpha(2+jm_kumo"}"#,
            "invalid_voice",
        ),
    ] {
        let (mut s, head, mut rest) = post(server.addr, body).await;
        assert!(head.starts_with("HTTP/1.1 400"), "{body}: {head}");
        assert!(head.contains("application/json"), "{head}");
        let _ = tokio::time::timeout(Duration::from_secs(2), s.read_to_end(&mut rest)).await;
        let text = String::from_utf8_lossy(&rest);
        assert!(
            text.contains(&format!("\"code\":\"{code}\"")),
            "{body}: {text}"
        );
    }
    let (status, voices) = http_get(server.addr, "/v1/audio/voices").await;
    assert_eq!(status, 200);
    let v: serde_json::Value = serde_json::from_str(&voices).unwrap();
    let ids: Vec<&str> = v["voices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["id"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&"jf_alpha") && ids.contains(&"alloy"),
        "{ids:?}"
    );

    // The OpenAPI document names every route and the formats the server takes.
    let (status, doc) = http_get(server.addr, "/openapi.json").await;
    assert_eq!(status, 200);
    let doc: serde_json::Value = serde_json::from_str(&doc).unwrap();
    assert_eq!(doc["openapi"], "3.1.0");
    for path in [
        "/v1/audio/speech",
        "/v1/audio/speech/timestamps",
        "/dev/captioned_speech",
        "/v1/audio/voices",
        "/v1/models",
        "/health",
        "/metrics",
    ] {
        assert!(doc["paths"].get(path).is_some(), "{path} documented");
        let (status, _) = http_get(server.addr, path).await;
        // GET on the POST route is a 405; every other documented path answers.
        assert!(
            status == 200 || (doc["paths"][path].get("post").is_some() && status == 405),
            "{path}: {status}"
        );
    }
    let formats: Vec<&str> = AudioFormat::ALL.iter().map(|f| f.name()).collect();
    assert_eq!(
        doc["components"]["schemas"]["SpeechRequest"]["properties"]["response_format"]["enum"],
        serde_json::json!(formats)
    );
    server.shutdown().await;
}

#[test]
fn the_cli_checks_speech_flags_before_loading() {
    let err = |args: &[&str]| {
        let mut a = vec!["voxlane", "serve"];
        a.extend_from_slice(args);
        voxlane_machines::cli::run_args(a, &mut Vec::new())
            .unwrap_err()
            .to_string()
    };
    assert!(err(&["--threads", "0"]).contains("--threads"));
    assert!(err(&["--max-concurrency", "0"]).contains("--max-concurrency"));
    assert!(err(&["--threads", "2", "--max-concurrency", "3"]).contains("at least 3 threads"));
    assert!(err(&["--lm", "x.safetensors"]).contains("--duplex"));
    assert!(err(&["--model", "/nonexistent.onnx"]).contains("does not exist"));
    assert!(err(&["--duplex", "--model", "m.onnx"]).contains("speech routes"));
    assert!(err(&["--host", "no such host!"]).contains("--host"));
    assert!(err(&["--max-input-chars", "0"]).contains("--max-input-chars"));
    assert!(err(&["--max-input-chars", "100001"]).contains("1 to 100000"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_finishes_the_answer_in_flight() {
    let (mut server, engine) = start(1, 1).await;
    let text = "One sentence here. Then a second one follows it. And a third closes the text.";
    let body = serde_json::json!({
        "model": "kokoro", "input": text, "response_format": "pcm", "stream": true,
    })
    .to_string();
    let (mut s, head, mut rest) = post(server.addr, &body).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    // Shut down while the answer streams: it still ends whole.
    let _ = server.stop.take().unwrap().send(());
    tokio::time::timeout(Duration::from_secs(120), s.read_to_end(&mut rest))
        .await
        .expect("the answer ends")
        .unwrap();
    assert!(
        rest.ends_with(b"0\r\n\r\n"),
        "the chunked answer ends with its last-chunk marker"
    );
    // Chunked framing: sizes in hex, then the bytes; the audio is whole.
    let mut pcm_bytes = 0;
    let mut at = 0;
    loop {
        let line_end = at + rest[at..].windows(2).position(|w| w == b"\r\n").unwrap();
        let size =
            usize::from_str_radix(std::str::from_utf8(&rest[at..line_end]).unwrap(), 16).unwrap();
        if size == 0 {
            break;
        }
        pcm_bytes += size;
        at = line_end + 2 + size + 2;
    }
    let seconds = pcm_bytes as f64 / 2.0 / 24_000.0;
    assert!(
        seconds > 3.0,
        "all three sentences were answered: {seconds} s"
    );
    assert_eq!(engine.busy(), 0);
    tokio::time::timeout(Duration::from_secs(20), server.task)
        .await
        .expect("the server stops after the answer")
        .unwrap()
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_web_page_plays_streamed_speech_in_headless_chromium() {
    let ready = std::path::Path::new("/usr/bin/chromedriver").exists()
        && std::process::Command::new("python3")
            .args(["-c", "import selenium"])
            .status()
            .is_ok_and(|s| s.success());
    if !ready {
        assert!(
            std::env::var_os("VOXLANE_REQUIRE_BROWSER").is_none(),
            "VOXLANE_REQUIRE_BROWSER is set but chromium-driver or selenium is missing"
        );
        eprintln!("skipped: needs `apt install chromium-driver` and `pip install selenium`");
        return;
    }
    let (server, _engine) = start(1, 1).await;
    let (status, page) = http_get(server.addr, "/").await;
    assert_eq!(status, 200);
    assert!(
        page.contains("id=\"play\"") && !page.contains("https://"),
        "self-contained page"
    );
    let script =
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("python/speech_page_browser.py");
    let text = "Good morning. The page streams this answer as it is spoken.";
    let out = tokio::process::Command::new("python3")
        .arg(&script)
        .args(["--url", &format!("http://{}/", server.addr)])
        .args(["--text", text, "--voice", "jm_kumo"])
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(240), out)
        .await
        .expect("the browser session ends")
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "browser session failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    let voices = r["voices"].as_array().unwrap();
    assert!(voices.iter().any(|v| v == "jf_alpha") && voices.iter().any(|v| v == "alloy"));
    assert!(
        r["received"].as_u64().unwrap() > 10_000,
        "mp3 bytes arrived: {r}"
    );
    assert!(
        r["advanced_s"].as_f64().unwrap() > 0.3,
        "the audio element plays: {r}"
    );
    let duration = r["duration_s"].as_f64().unwrap_or(0.0);
    assert_eq!(r["ended"], true, "it plays to the end: {r}");
    let played = r["final_time_s"].as_f64().unwrap();
    assert!((played - duration).abs() < 0.05, "played all of it: {r}");
    assert!(
        duration > 2.0 && duration < 10.0,
        "two sentences of audio: {r}"
    );
    assert!(r["status"].as_str().unwrap().starts_with("done"), "{r}");
    assert_eq!(r["buffered"][0][0], 0.0, "{r}");
    // Every word is on the page, and the one being heard is highlighted:
    // several in turn, each while the audio clock is inside its times.
    let words: Vec<&str> = r["words"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    assert_eq!(
        words,
        [
            "Good", "morning", "The", "page", "streams", "this", "answer", "as", "it", "is",
            "spoken"
        ]
    );
    assert!(
        r["highlighted"].as_u64().unwrap() >= 3,
        "words highlighted in turn: {r}"
    );
    let seen = r["seen"].as_array().unwrap();
    assert!(
        seen.len() >= 5,
        "a word was highlighted while it played: {r}"
    );
    for s in seen {
        let (start, end) = (s[1].as_f64().unwrap(), s[2].as_f64().unwrap());
        // The audio starts at 0 in the element here (buffered from 0, above).
        let clock = s[3].as_f64().unwrap();
        assert!(
            end > start && clock > start - 0.1 && clock < end + 0.1,
            "the word highlighted is the one heard: {s}"
        );
    }
    // The page's request reached the speech route with the voice picked.
    let (_, metrics) = http_get(server.addr, "/metrics").await;
    assert_eq!(metric(&metrics, "voxlane_speech_requests_total"), 1);
    server.shutdown().await;
}
