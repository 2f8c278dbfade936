//! `cargo xtask bench serve`: `voxlane serve` (its own process, the real
//! Kokoro model) under OpenAI-style requests from a separate client process
//! (`tests/python/speech_load.py`): first-chunk latency of a streamed 10-word
//! sentence at concurrency 1 and 4, throughput (audio seconds per wall
//! second) at concurrency 1, 2 and 4, beside Kokoro-FastAPI's published CPU
//! first chunk and onnxruntime's whole-sentence time measured in the same run.
//! `--long-words N` adds one streamed request of N words (first chunk, total,
//! the server's peak RSS).

use super::kokoro::{have_onnxruntime, prepare, run_json, ORT_SCRIPT, SHORT, VOICE};
use super::BenchOptions;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use voxlane_actors::tts::frontend::vocab::Vocab;
use voxlane_actors::tts::frontend::Frontend;
use voxlane_actors::tts::voices::Voices;
use voxlane_machines::cli::fetch::fetch_models;
use voxlane_runtime::fetch::Fetcher;

/// The load client (one script with the load test).
const LOAD_SCRIPT: &str = include_str!("../../../tests/python/speech_load.py");
/// Kokoro-FastAPI's published CPU time to the first chunk (its README), seconds.
const FASTAPI_FIRST_S: f64 = 3.5;
/// Concurrency levels of the first-chunk and throughput rows.
const FIRST_LEVELS: [usize; 2] = [1, 4];
const THROUGHPUT_LEVELS: [usize; 3] = [1, 2, 4];

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// Child: `voxlane serve ARGS` in this process.
pub fn child(args: &[String]) -> Result<(), String> {
    let argv = ["voxlane".to_string(), "serve".to_string()]
        .into_iter()
        .chain(args.iter().cloned());
    voxlane_machines::cli::run_args(argv, &mut std::io::stdout()).map_err(err)
}

/// `voxlane serve` in a child process, killed on drop.
struct Server {
    child: Child,
    addr: String,
}

impl Server {
    fn start(args: &[String]) -> Result<Self, String> {
        let exe = std::env::current_exe().map_err(err)?;
        let mut child = Command::new(exe)
            .args(["bench", "serve-child", "--port", "0"])
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("server process: {e}"))?;
        let stdout = child.stdout.take().ok_or("no server stdout")?;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(rest) = line.strip_prefix("serving http://") {
                    let _ = tx.send(rest.split('/').next().unwrap_or_default().to_string());
                }
            }
        });
        let addr = rx
            .recv_timeout(Duration::from_secs(600))
            .map_err(|_| "the server did not start")?;
        Ok(Server { child, addr })
    }

    /// Peak RSS of the server process, MB.
    fn peak_rss_mb(&self) -> f64 {
        std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("VmHWM:"))
                    .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
            })
            .map_or(f64::NAN, |kb| kb / 1024.0)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One load run: `requests` of `input`, `concurrency` at a time.
fn load(
    script: &Path,
    addr: &str,
    input: &str,
    requests: usize,
    concurrency: usize,
    stream: bool,
) -> Result<Value, String> {
    let mut cmd = Command::new("python3");
    cmd.arg(script)
        .args(["--url", &format!("http://{addr}"), "--input", input])
        .args(["--voice", VOICE, "--format", "pcm"])
        .args(["--requests", &requests.to_string()])
        .args(["--concurrency", &concurrency.to_string()]);
    if stream {
        cmd.arg("--stream");
    }
    let v = run_json(&mut cmd, "load client")?;
    let statuses = v["statuses"].as_object().cloned().unwrap_or_default();
    if statuses.keys().any(|k| k != "200") {
        return Err(format!("the server refused or failed requests: {v}"));
    }
    Ok(v)
}

/// Parent: for each thread budget, a server, the load runs, onnxruntime.
pub fn run(opts: &BenchOptions, extra: &[String]) -> Result<(), String> {
    let mut long_words = 0usize;
    let mut it = extra.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--long-words" => {
                long_words = it
                    .next()
                    .ok_or("--long-words needs a count")?
                    .parse()
                    .map_err(err)?
            }
            other => return Err(format!("bench serve: unknown argument `{other}`")),
        }
    }
    let fetcher = Fetcher::new().map_err(err)?;
    let paths = fetch_models(&fetcher, &mut std::io::stderr()).map_err(err)?;
    let [model, vocab, voices] = paths.as_slice() else {
        return Err("fetch returned an unexpected file list".into());
    };
    let tmp = std::env::temp_dir().join(format!("voxlane-bench-serve-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).map_err(err)?;
    let script = tmp.join("speech_load.py");
    std::fs::write(&script, LOAD_SCRIPT).map_err(err)?;
    // onnxruntime's whole-sentence time: the same chunks and style row.
    let ort = have_onnxruntime();
    let job = tmp.join("job.json");
    if ort {
        let frontend = Frontend::new(Vocab::load(vocab).map_err(err)?);
        let pack = Voices::open(voices)
            .map_err(err)?
            .select(VOICE)
            .map_err(err)?;
        let short: Vec<Value> = prepare(&frontend, &pack, SHORT)?
            .into_iter()
            .map(|(c, s)| json!({"tokens": c.tokens, "style": s}))
            .collect();
        let reps = if opts.quick { 1 } else { 3 };
        let text = json!({"long": short, "short": short, "reps": reps}).to_string();
        std::fs::write(&job, text).map_err(err)?;
        std::fs::write(tmp.join("kokoro_ort.py"), ORT_SCRIPT).map_err(err)?;
    }
    let (n_first, per_client) = if opts.quick { (4, 2) } else { (12, 4) };
    let mut rows = Vec::new();
    // Each budget as one synthesis on every thread (the default) and, where
    // it differs, one synthesis per thread.
    let configs: Vec<(usize, usize)> = opts
        .threads
        .iter()
        .flat_map(|&t| [(t, t.div_ceil(2)), (t, t)])
        .fold(Vec::new(), |mut v, c| {
            if !v.contains(&c) {
                v.push(c);
            }
            v
        });
    for (t, workers) in configs {
        let server = Server::start(&[
            "--threads".into(),
            t.to_string(),
            "--max-concurrency".into(),
            workers.to_string(),
            "--queue".into(),
            "16".into(),
        ])?;
        eprintln!(
            "serve threads {t}, {workers} at once: listening on {}",
            server.addr
        );
        // Warm-up: the first request pays the phonemizer's dictionaries.
        load(&script, &server.addr, SHORT, 2, 1, true)?;
        let mut first = Vec::new();
        for c in FIRST_LEVELS {
            let v = load(&script, &server.addr, SHORT, n_first * c.min(2), c, true)?;
            eprintln!("  first chunk, concurrency {c}: {v}");
            first.push((c, v));
        }
        let mut throughput = Vec::new();
        for c in THROUGHPUT_LEVELS {
            let v = load(&script, &server.addr, SHORT, per_client * c, c, false)?;
            eprintln!("  throughput, concurrency {c}: {v}");
            throughput.push((c, v));
        }
        let long = if long_words > 0 {
            let sentence =
                "The quick brown fox jumps over the lazy dog near the river bank today. ";
            let text = sentence.repeat(long_words.div_ceil(14));
            let v = load(&script, &server.addr, &text, 1, 1, true)?;
            eprintln!("  {long_words} words streamed: {v}");
            Some(v)
        } else {
            None
        };
        let server_rss = server.peak_rss_mb();
        drop(server);
        let ort_secs = if ort {
            let v = run_json(
                Command::new("python3")
                    .arg(tmp.join("kokoro_ort.py"))
                    .arg(model)
                    .arg(&job)
                    .arg(t.to_string()),
                "onnxruntime reference",
            )?;
            v["short"]["secs"].as_f64()
        } else {
            None
        };
        rows.push(json!({"threads": t, "workers": workers, "first": first.iter().map(|(c, v)| json!({"concurrency": c, "load": v})).collect::<Vec<_>>(),
            "throughput": throughput.iter().map(|(c, v)| json!({"concurrency": c, "load": v})).collect::<Vec<_>>(),
            "long": long, "long_words": long_words, "server_peak_rss_mb": server_rss,
            "onnxruntime_sentence_s": ort_secs}));
    }
    std::fs::remove_dir_all(&tmp).ok();
    report(opts, &rows, ort)
}

fn report(opts: &BenchOptions, rows: &[Value], ort: bool) -> Result<(), String> {
    let route = voxlane_actors::kernels::cpu::route_name();
    let f = |v: &Value, k: &str| v[k].as_f64().unwrap_or(f64::NAN);
    let mut md = format!(
        "## voxlane bench: serve\n\n`voxlane serve --threads T --max-concurrency K --queue 16` (K = syntheses at once, each on T/K threads; \
         the default K is one per two threads) in its own process; requests from a separate Python process (`tests/python/speech_load.py`, \
         one connection per request), PCM, voice {VOICE}, the 10-word sentence \"{SHORT}\". First chunk = request \
         sent → first audio byte of a streamed answer (queueing included). SIMD route: {route}. \
         Kokoro-FastAPI's published CPU first chunk: ~{FASTAPI_FIRST_S} s. onnxruntime: {}.\n\n\
         | threads | K | concurrency | first chunk p50 ms | p99 ms | Kokoro-FastAPI's 3.5 s ÷ p50 | onnxruntime whole sentence ms |\n|---|---|---|---|---|---|---|\n",
        if ort { "the same model, chunks and style row, whole sentence (it has no streaming), measured in this run" } else { "not installed, not measured" }
    );
    for r in rows {
        let ort_ms = r["onnxruntime_sentence_s"].as_f64().map(|s| s * 1e3);
        for x in r["first"].as_array().into_iter().flatten() {
            let v = &x["load"];
            let p50 = f(v, "first_byte_p50_ms");
            md += &format!(
                "| {} | {} | {} | {:.0} | {:.0} | {:.1}× | {} |\n",
                r["threads"],
                r["workers"],
                x["concurrency"],
                p50,
                f(v, "first_byte_p99_ms"),
                FASTAPI_FIRST_S * 1e3 / p50,
                ort_ms.map_or("—".into(), |m| format!("{m:.0}")),
            );
        }
    }
    md += "\n| threads | K | concurrency | requests | audio s per wall s | latency p50 ms | p99 ms |\n|---|---|---|---|---|---|---|\n";
    for r in rows {
        for x in r["throughput"].as_array().into_iter().flatten() {
            let v = &x["load"];
            md += &format!(
                "| {} | {} | {} | {} | {:.2} | {:.0} | {:.0} |\n",
                r["threads"],
                r["workers"],
                x["concurrency"],
                v["requests"],
                f(v, "audio_per_wall"),
                f(v, "latency_p50_ms"),
                f(v, "latency_p99_ms"),
            );
        }
    }
    if rows.iter().any(|r| !r["long"].is_null()) {
        md += "\n| threads | K | words streamed | first chunk ms | total s | audio s | RTF | server peak RSS MB |\n|---|---|---|---|---|---|---|---|\n";
        for r in rows.iter().filter(|r| !r["long"].is_null()) {
            let v = &r["long"];
            let total = f(v, "latency_p50_ms") / 1e3;
            let audio = f(v, "audio_s");
            md += &format!(
                "| {} | {} | {} | {:.0} | {:.1} | {:.1} | {:.3} | {:.0} |\n",
                r["threads"],
                r["workers"],
                r["long_words"],
                f(v, "first_byte_p50_ms"),
                total,
                audio,
                total / audio,
                f(r, "server_peak_rss_mb"),
            );
        }
    }
    println!("{md}");
    if let Some(path) = &opts.md {
        std::fs::write(path, &md).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    if let Some(path) = &opts.json {
        let text = serde_json::to_string_pretty(rows).map_err(err)?;
        std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}
