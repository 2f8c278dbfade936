//! `cargo xtask bench mimi`: streaming encode and decode of 20 s (250 code
//! frames) at the official shapes, one 80 ms frame per step, at every thread
//! budget: f32 (default), q8_0 transformer linears, and q8_0 linears plus
//! the matmul-route convs.
//!
//! Each configuration runs in a child process (`bench mimi-child …`) so its
//! peak RSS is its own. Without `--model`, weights are random with a fixed
//! seed (`MimiWeights::synthetic`); speed does not depend on their values.

use super::rss::peak_rss_mb;
use super::BenchOptions;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;
use voxlane_actors::speech::mimi::{
    BindContract, MimiConfig, MimiDecoder, MimiEncoder, MimiModel, MimiOptions, MimiWeights,
};
use voxlane_runtime::weights::WeightFile;
use voxlane_runtime::LanePool;

/// Frames per measured stream (20 s at 12.5 Hz).
const FRAMES: usize = 250;
/// Frames run (then reset) before measuring.
const WARMUP: usize = 5;
/// The target: RTF at 2 threads.
const TARGET_RTF: f64 = 0.05;
/// Anchors measured on this machine (2 threads, random official-shape weights),
/// quoted from the issue: PyTorch `moshi` and candle (`rustymimi`) streaming decode RTF.
const ANCHORS: [(&str, f64); 2] = [("PyTorch moshi", 0.33), ("candle rustymimi", 0.58)];

/// One configuration's result.
#[derive(Debug, Clone)]
struct Measured {
    mode: String,
    weights: String,
    threads: usize,
    rtf: f64,
    p50_ms: f64,
    p99_ms: f64,
    peak_rss_mb: f64,
    /// Weight bytes one frame of this mode reads.
    frame_bytes: f64,
    /// Floor of a frame: `frame_bytes` over the measured read bandwidth (filled by the parent).
    floor_ms: f64,
}

/// Model source shared by parent and child.
#[derive(Debug, Clone, Default)]
struct Source {
    model: Option<PathBuf>,
    config: Option<PathBuf>,
}

impl Source {
    fn args(&self) -> Vec<String> {
        let mut v = Vec::new();
        if let Some(m) = &self.model {
            v.extend(["--model".into(), m.display().to_string()]);
        }
        if let Some(c) = &self.config {
            v.extend(["--config".into(), c.display().to_string()]);
        }
        v
    }

    fn load(&self, opts: MimiOptions) -> Result<MimiModel, String> {
        let cfg = match &self.config {
            Some(c) => MimiConfig::from_file(c).map_err(|e| e.to_string())?,
            None => MimiConfig::default(),
        };
        let w = match &self.model {
            Some(m) => {
                let f = WeightFile::open(m).map_err(|e| e.to_string())?;
                MimiWeights::from_file(&cfg, &f).map_err(|e| e.to_string())?
            }
            None => MimiWeights::synthetic(&cfg, 1),
        };
        let contract = BindContract::plan(&cfg, &w, opts).map_err(|e| e.to_string())?;
        MimiModel::bind(cfg, w, contract).map_err(|e| e.to_string())
    }
}

/// Speech-like test signal: a gliding harmonic tone with a syllable envelope and a little noise.
fn signal(samples: usize) -> Vec<f32> {
    let mut s = 0x2545_F491_4F6C_DD1Du64;
    (0..samples)
        .map(|i| {
            let t = i as f32 / 24_000.0;
            let f0 = 140.0 + 40.0 * (t * 0.7).sin();
            let env = 0.5 + 0.5 * (t * 2.0 * std::f32::consts::PI * 3.0).sin().abs();
            let tone: f32 = (1..6)
                .map(|h| (2.0 * std::f32::consts::PI * f0 * h as f32 * t).sin() / h as f32)
                .sum();
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let noise = (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
            0.2 * env * tone + 0.01 * noise
        })
        .collect()
}

/// The weights column: which tensors are q8_0 or bf16.
fn weights_label(o: MimiOptions) -> String {
    let mut parts = Vec::new();
    match (o.q8_transformer, o.q8_convs) {
        (true, true) => parts.push("q8_0 linears + deep convs"),
        (true, false) => parts.push("q8_0 linears"),
        (false, true) => parts.push("q8_0 deep convs"),
        (false, false) => {}
    }
    if o.bf16_convs {
        parts.push("bf16 long convs");
    }
    if parts.is_empty() {
        "f32".into()
    } else {
        parts.join(", ")
    }
}

/// The weight configurations the bench runs, with their child flags.
const CONFIGS: [(MimiOptions, &[&str]); 4] = [
    (
        MimiOptions {
            q8_transformer: false,
            q8_convs: false,
            bf16_convs: false,
            nvidia_ring: false,
        },
        &[],
    ),
    (
        MimiOptions {
            q8_transformer: true,
            q8_convs: false,
            bf16_convs: false,
            nvidia_ring: false,
        },
        &["--q8"],
    ),
    (
        MimiOptions {
            q8_transformer: true,
            q8_convs: true,
            bf16_convs: false,
            nvidia_ring: false,
        },
        &["--q8", "--q8-convs"],
    ),
    (
        MimiOptions {
            q8_transformer: true,
            q8_convs: true,
            bf16_convs: true,
            nvidia_ring: false,
        },
        &["--q8", "--q8-convs", "--bf16-convs"],
    ),
];

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// The child: one mode × weights × threads, printed as one JSON line.
pub fn child(args: &[String]) -> Result<(), String> {
    let mut src = Source::default();
    let (mut mode, mut opts, mut threads) =
        (String::from("encode"), MimiOptions::default(), 1usize);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || it.next().cloned().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--mode" => mode = val()?,
            "--q8" => opts.q8_transformer = true,
            "--q8-convs" => opts.q8_convs = true,
            "--bf16-convs" => opts.bf16_convs = true,
            "--threads" => threads = val()?.parse().map_err(|e| format!("--threads: {e}"))?,
            "--model" => src.model = Some(val()?.into()),
            "--config" => src.config = Some(val()?.into()),
            other => return Err(format!("mimi-child: unknown argument `{other}`")),
        }
    }
    let model = Arc::new(src.load(opts)?);
    let pool = LanePool::new(threads).map_err(|e| e.to_string())?;
    let (fs, k) = (model.frame_size(), model.num_codebooks());
    let bins = model.config().quantizer.bins as u32;
    let mut times = Vec::with_capacity(FRAMES);
    match mode.as_str() {
        "encode" => {
            let pcm = signal(fs * FRAMES);
            let mut enc = MimiEncoder::new(model.clone()).map_err(|e| e.to_string())?;
            let mut codes = vec![0u32; k];
            for f in pcm.chunks_exact(fs).take(WARMUP) {
                enc.step(&pool, f, &mut codes).map_err(|e| e.to_string())?;
            }
            enc.reset();
            for f in pcm.chunks_exact(fs) {
                let t = Instant::now();
                enc.step(&pool, f, &mut codes).map_err(|e| e.to_string())?;
                times.push(t.elapsed().as_secs_f64());
            }
        }
        "decode" => {
            // Decode cost does not depend on the code values: a fixed pseudo-random stream.
            let mut s = 0x9E37_79B9u64;
            let codes: Vec<u32> = (0..k * FRAMES)
                .map(|_| {
                    s = s
                        .wrapping_mul(6_364_136_223_846_793_005)
                        .wrapping_add(1_442_695_040_888_963_407);
                    ((s >> 33) as u32) % bins
                })
                .collect();
            let mut dec = MimiDecoder::new(model.clone()).map_err(|e| e.to_string())?;
            let mut out = vec![0.0f32; fs];
            for c in codes.chunks_exact(k).take(WARMUP) {
                dec.step(&pool, c, &mut out).map_err(|e| e.to_string())?;
            }
            dec.reset();
            for c in codes.chunks_exact(k) {
                let t = Instant::now();
                dec.step(&pool, c, &mut out).map_err(|e| e.to_string())?;
                times.push(t.elapsed().as_secs_f64());
            }
        }
        other => return Err(format!("mimi-child: unknown mode `{other}`")),
    }
    let (enc_bytes, dec_bytes) = model.contract().streamed_bytes();
    let frame_bytes = if mode == "encode" {
        enc_bytes
    } else {
        dec_bytes
    };
    let total: f64 = times.iter().sum();
    times.sort_by(|a, b| a.total_cmp(b));
    let audio = (FRAMES * fs) as f64 / 24_000.0;
    println!(
        "{}",
        json!({
            "mode": mode, "weights": weights_label(opts), "threads": threads,
            "rtf": total / audio, "p50_ms": percentile(&times, 0.5) * 1e3,
            "p99_ms": percentile(&times, 0.99) * 1e3, "peak_rss_mb": peak_rss_mb(),
            "frame_bytes": frame_bytes,
        })
    );
    Ok(())
}

fn parse_measured(line: &str) -> Result<Measured, String> {
    let v: Value = serde_json::from_str(line).map_err(|e| format!("child output `{line}`: {e}"))?;
    let f = |k: &str| v[k].as_f64().ok_or(format!("child output lacks `{k}`"));
    let s = |k: &str| {
        v[k].as_str()
            .map(str::to_string)
            .ok_or(format!("child output lacks `{k}`"))
    };
    Ok(Measured {
        mode: s("mode")?,
        weights: s("weights")?,
        threads: f("threads")? as usize,
        rtf: f("rtf")?,
        p50_ms: f("p50_ms")?,
        p99_ms: f("p99_ms")?,
        peak_rss_mb: f("peak_rss_mb")?,
        frame_bytes: f("frame_bytes")?,
        floor_ms: f64::NAN,
    })
}

/// Parent: every configuration in a child, then the table and the JSON.
pub fn run(opts: &BenchOptions, extra: &[String]) -> Result<(), String> {
    let mut src = Source::default();
    let mut it = extra.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--model" => src.model = Some(it.next().ok_or("--model needs a file")?.into()),
            "--config" => src.config = Some(it.next().ok_or("--config needs a file")?.into()),
            other => return Err(format!("bench mimi: unknown argument `{other}`")),
        }
    }
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut bandwidth = Vec::new();
    for &t in &opts.threads {
        bandwidth.push((
            t,
            super::bandwidth::read_gbps(t, super::timing::window(opts.quick))?,
        ));
    }
    let mut results = Vec::new();
    for mode in ["encode", "decode"] {
        for (_, flags) in CONFIGS {
            for &threads in &opts.threads {
                let mut cmd = std::process::Command::new(&exe);
                cmd.args(["bench", "mimi-child", "--mode", mode, "--threads"])
                    .arg(threads.to_string())
                    .args(src.args());
                cmd.args(flags);
                let out = cmd.output().map_err(|e| format!("mimi child: {e}"))?;
                if !out.status.success() {
                    return Err(format!(
                        "mimi child ({mode}, threads {threads}) failed: {}",
                        String::from_utf8_lossy(&out.stderr)
                    ));
                }
                let text = String::from_utf8_lossy(&out.stdout);
                let line = text.lines().last().unwrap_or_default();
                let mut m = parse_measured(line)?;
                let bw = bandwidth
                    .iter()
                    .find(|(t, _)| *t == threads)
                    .map_or(f64::NAN, |b| b.1);
                m.floor_ms = m.frame_bytes / (bw * 1e9) * 1e3;
                eprintln!(
                    "mimi {} {} threads {}: RTF {:.4}, p50 {:.2} ms, p99 {:.2} ms, peak RSS {:.0} MB",
                    m.mode, m.weights, m.threads, m.rtf, m.p50_ms, m.p99_ms, m.peak_rss_mb
                );
                results.push(m);
            }
        }
    }
    let shape = match &src.model {
        Some(m) => format!("checkpoint {}", m.display()),
        None => "official shapes, synthetic weights (seed 1)".to_string(),
    };
    let mut md = format!(
        "## voxlane bench: mimi\n\nStreaming, one 80 ms frame (1920 samples) per step, {FRAMES} frames (20 s); {shape}.\n\
         Targets: RTF ≤ {TARGET_RTF} at 2 threads (≤ 4 ms/frame), p99 ≤ 2 × p50. Reference anchors \
         (streaming decode, 2 threads, from the issue, not measured in this run): {}.\n\n\
         Floor: the weight bytes one frame reads over the read bandwidth measured in this run \
         (a streaming frame must read every weight once); bandwidth {}.\n\n\
         | mode | weights | threads | RTF | p50 ms | p99 ms | p99/p50 | peak RSS MB | weights MB/frame | floor ms | p50/floor | vs PyTorch | RTF target |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
        ANCHORS
            .iter()
            .map(|(n, v)| format!("{n} RTF {v}"))
            .collect::<Vec<_>>()
            .join(", "),
        bandwidth
            .iter()
            .map(|(t, b)| format!("{b:.1} GB/s at {t} thread(s)"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    for m in &results {
        let target = if m.threads == 2 {
            format!(
                "≤ {TARGET_RTF} {}",
                if m.rtf <= TARGET_RTF { "✓" } else { "✗" }
            )
        } else {
            "—".to_string()
        };
        md += &format!(
            "| {} | {} | {} | {:.4} | {:.2} | {:.2} | {:.2} {} | {:.0} | {:.0} | {:.2} | {:.2} | {:.1}× faster | {} |\n",
            m.mode,
            m.weights,
            m.threads,
            m.rtf,
            m.p50_ms,
            m.p99_ms,
            m.p99_ms / m.p50_ms,
            if m.p99_ms <= 2.0 * m.p50_ms { "✓" } else { "✗" },
            m.peak_rss_mb,
            m.frame_bytes / 1e6,
            m.floor_ms,
            m.p50_ms / m.floor_ms,
            ANCHORS[0].1 / m.rtf,
            target
        );
    }
    println!("{md}");
    if let Some(path) = &opts.md {
        std::fs::write(path, &md).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    if let Some(path) = &opts.json {
        let list: Vec<Value> = results
            .iter()
            .map(|m| {
                json!({
                    "mode": m.mode, "weights": m.weights, "threads": m.threads, "rtf": m.rtf,
                    "p50_ms": m.p50_ms, "p99_ms": m.p99_ms, "peak_rss_mb": m.peak_rss_mb,
                    "frame_weight_bytes": m.frame_bytes, "bandwidth_floor_ms": m.floor_ms,
                    "target_rtf_at_2_threads": TARGET_RTF,
                    "pytorch_anchor_rtf": ANCHORS[0].1, "candle_anchor_rtf": ANCHORS[1].1,
                })
            })
            .collect();
        let text = serde_json::to_string_pretty(&list).map_err(|e| e.to_string())?;
        std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}
