//! `cargo xtask bench moshi`: Moshi LM frames on the official 7B shape (random
//! weights generated directly in q8_0 and q4_0, seed 1) and on a scaled
//! config with the real vocabularies (dim 1024, 8 layers, depformer 512 × 4,
//! f32), at every thread budget: ms per frame p50/p99, the temporal
//! transformer, the depformer and the sampler apart, peak RSS, the weight
//! bytes a frame reads and the floor they set at the read bandwidth measured
//! in the same run.
//!
//! Each configuration runs in a child process (`bench moshi-child …`) so its
//! peak RSS is its own. Sampling is Moshi's default (text temperature 0.7
//! top-k 25, audio 0.8 top-k 250), so the sampler's cost is real.

use super::rss::peak_rss_mb;
use super::BenchOptions;
use serde_json::{json, Value};
use std::time::Instant;
use voxlane_actors::speech::moshi::config::DepformerConfig;
use voxlane_actors::speech::moshi::weights::expected_tensors;
use voxlane_actors::speech::moshi::{LmGen, LmWeights, MoshiConfig, MoshiLm};
use voxlane_actors::speech::sampler::{Rng, Sampler, SamplingParams};
use voxlane_runtime::LanePool;

/// Frames run before measuring (KV rings and caches warm).
const WARMUP: usize = 3;
/// PyTorch `moshi` `LMGen` greedy on the scaled config, ms per frame, measured
/// on this machine when the issue was filed (torch is not installed by CI).
const PYTORCH_SCALED_MS: [(usize, f64); 2] = [(1, 160.0), (2, 126.0)];

/// The scaled config: real vocabularies and stream layout, a smaller network.
fn scaled() -> MoshiConfig {
    let d = MoshiConfig::default();
    MoshiConfig {
        dim: 1024,
        num_heads: 16,
        num_layers: 8,
        dim_feedforward: (4.125 * 1024.0) as usize,
        depformer: DepformerConfig {
            dim: 512,
            num_heads: 8,
            num_layers: 4,
            dim_feedforward: (4.125 * 512.0) as usize,
            ..d.depformer
        },
        ..d
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Write a bf16 checkpoint of `cfg`'s official tensor names and shapes,
/// streamed tensor by tensor (a 7B file never sits in memory), random values
/// of about the trained scale.
fn write_synthetic_checkpoint(cfg: &MoshiConfig, path: &std::path::Path) -> Result<(), String> {
    use std::io::Write;
    let tensors = expected_tensors(cfg);
    let mut header = serde_json::Map::new();
    let mut offset = 0usize;
    for t in &tensors {
        let bytes = t.shape.iter().product::<usize>() * 2;
        header.insert(
            t.name.clone(),
            json!({"dtype": "BF16", "shape": t.shape, "data_offsets": [offset, offset + bytes]}),
        );
        offset += bytes;
    }
    let mut h = serde_json::to_vec(&Value::Object(header)).map_err(|e| e.to_string())?;
    while h.len() % 8 != 0 {
        h.push(b' ');
    }
    let tmp = path.with_extension("partial");
    let file = std::fs::File::create(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
    let mut w = std::io::BufWriter::with_capacity(1 << 22, file);
    let io = |e: std::io::Error| e.to_string();
    w.write_all(&(h.len() as u64).to_le_bytes()).map_err(io)?;
    w.write_all(&h).map_err(io)?;
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut buf = vec![0u8; 1 << 20];
    for t in &tensors {
        let n: usize = t.shape.iter().product();
        let fan_in = *t.shape.last().unwrap_or(&1) as f32;
        let scale = if t.name.ends_with(".alpha") {
            0.0
        } else {
            1.0 / fan_in.sqrt()
        };
        let mut left = n;
        while left > 0 {
            let m = left.min(buf.len() / 2);
            for c in buf[..2 * m].chunks_exact_mut(2) {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let u = (state >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0;
                let v = if scale == 0.0 { 1.0 } else { u * scale };
                c.copy_from_slice(&half::bf16::from_f32(v).to_le_bytes());
            }
            w.write_all(&buf[..2 * m]).map_err(io)?;
            left -= m;
        }
    }
    w.into_inner()
        .map_err(|e| e.to_string())?
        .sync_all()
        .map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}

/// The load child: a bf16 official-shape checkpoint converted to q8_0 at
/// load, tensor by tensor: seconds and peak RSS against the converted size.
fn load_child(path: &std::path::Path) -> Result<(), String> {
    let cfg = MoshiConfig::default();
    if !path.is_file() {
        let t = Instant::now();
        write_synthetic_checkpoint(&cfg, path)?;
        eprintln!(
            "wrote {} in {:.0} s",
            path.display(),
            t.elapsed().as_secs_f64()
        );
    }
    let file_bytes = std::fs::metadata(path).map_err(|e| e.to_string())?.len();
    let rss0 = super::rss::status_mb("VmRSS:");
    let t = Instant::now();
    let lm = MoshiLm::load(&cfg, path, LmWeights::Q8_0).map_err(|e| e.to_string())?;
    let load_s = t.elapsed().as_secs_f64();
    let converted = lm.weight_bytes();
    println!(
        "{}",
        json!({
            "checkpoint_bytes": file_bytes, "converted_bytes": converted, "load_s": load_s,
            "peak_rss_mb": peak_rss_mb(), "rss_before_mb": rss0,
        })
    );
    Ok(())
}

/// The child: one shape × weights × threads, printed as one JSON line.
pub fn child(args: &[String]) -> Result<(), String> {
    if let [flag, path] = args {
        if flag == "--load" {
            return load_child(std::path::Path::new(path));
        }
    }
    let (mut shape, mut weights, mut threads, mut frames) =
        ("7b".to_string(), LmWeights::Q8_0, 1usize, 20usize);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || it.next().cloned().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--shape" => shape = val()?,
            "--weights" => {
                weights = LmWeights::parse(&val()?).ok_or("--weights: f32, bf16, q8_0 or q4_0")?
            }
            "--threads" => threads = val()?.parse().map_err(|e| format!("--threads: {e}"))?,
            "--frames" => frames = val()?.parse().map_err(|e| format!("--frames: {e}"))?,
            other => return Err(format!("moshi-child: unknown argument `{other}`")),
        }
    }
    let cfg = match shape.as_str() {
        "7b" => MoshiConfig::default(),
        "scaled" => scaled(),
        other => return Err(format!("moshi-child: unknown shape `{other}`")),
    };
    let t = Instant::now();
    let lm = MoshiLm::random(&cfg, weights, 1).map_err(|e| e.to_string())?;
    let build_s = t.elapsed().as_secs_f64();
    let pool = LanePool::new(threads).map_err(|e| e.to_string())?;
    let mut st = lm.state(1).map_err(|e| e.to_string())?;
    let mut gen = LmGen::new(&cfg);
    let (mut text_s, mut audio_s) = (Sampler::new(cfg.text_card), Sampler::new(cfg.card));
    let (tp, ap) = (SamplingParams::TEXT_DEFAULT, SamplingParams::AUDIO_DEFAULT);
    let mut rng = Rng::new(1);
    let mut tokens = vec![0u32; cfg.num_codebooks()];
    let mut audio = vec![0u32; cfg.dep_q];
    let user: Vec<u32> = (0..cfg.user_codebooks() as u32)
        .map(|i| (i * 97) % cfg.card as u32)
        .collect();
    let (mut total, mut temporal, mut depformer, mut sampling) = (Vec::new(), 0.0, 0.0, 0.0);
    for f in 0..WARMUP + frames {
        let t0 = Instant::now();
        tokens.copy_from_slice(gen.prepare(&user).map_err(|e| e.to_string())?);
        lm.forward_text(&pool, &mut st, &tokens, 1, true)
            .map_err(|e| e.to_string())?;
        let t1 = Instant::now();
        let text = text_s
            .sample(st.text_logits(), &tp, &mut rng)
            .map_err(|e| e.to_string())?;
        let mut samp = t1.elapsed().as_secs_f64();
        let mut prev = text;
        let mut dep = 0.0;
        for (k, a) in audio.iter_mut().enumerate() {
            let d0 = Instant::now();
            lm.depformer_step(&pool, &mut st, k, prev)
                .map_err(|e| e.to_string())?;
            let s0 = Instant::now();
            *a = audio_s
                .sample(st.audio_logits(), &ap, &mut rng)
                .map_err(|e| e.to_string())?;
            samp += s0.elapsed().as_secs_f64();
            dep += (s0 - d0).as_secs_f64();
            prev = *a;
        }
        gen.commit(text, &audio).map_err(|e| e.to_string())?;
        if f >= WARMUP {
            total.push(t0.elapsed().as_secs_f64());
            temporal += (t1 - t0).as_secs_f64();
            depformer += dep;
            sampling += samp;
        }
    }
    let n = total.len() as f64;
    total.sort_by(|a, b| a.total_cmp(b));
    println!(
        "{}",
        json!({
            "shape": shape, "weights": weights.name(), "threads": threads, "frames": frames,
            "p50_ms": percentile(&total, 0.5) * 1e3, "p99_ms": percentile(&total, 0.99) * 1e3,
            "mean_ms": total.iter().sum::<f64>() / n * 1e3,
            "temporal_ms": temporal / n * 1e3, "depformer_ms": depformer / n * 1e3,
            "sampler_ms": sampling / n * 1e3,
            "frame_bytes": lm.bytes_per_frame(), "peak_rss_mb": peak_rss_mb(), "build_s": build_s,
            "route": voxlane_actors::kernels::cpu::route_name(),
        })
    );
    Ok(())
}

/// Parent: every configuration in a child, then the table and the JSON.
pub fn run(opts: &BenchOptions) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut bandwidth = Vec::new();
    for &t in &opts.threads {
        bandwidth.push((
            t,
            super::bandwidth::read_gbps(t, super::timing::window(opts.quick))?,
        ));
    }
    let frames = if opts.quick { 6 } else { 20 };
    let mut rows: Vec<Value> = Vec::new();
    for (shape, weights) in [("7b", "q8_0"), ("7b", "q4_0"), ("scaled", "f32")] {
        for &threads in &opts.threads {
            let out = std::process::Command::new(&exe)
                .args([
                    "bench",
                    "moshi-child",
                    "--shape",
                    shape,
                    "--weights",
                    weights,
                ])
                .args([
                    "--threads",
                    &threads.to_string(),
                    "--frames",
                    &frames.to_string(),
                ])
                .output()
                .map_err(|e| format!("moshi child: {e}"))?;
            if !out.status.success() {
                return Err(format!(
                    "moshi child ({shape} {weights}, threads {threads}) failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
            let text = String::from_utf8_lossy(&out.stdout);
            let line = text.lines().last().unwrap_or_default();
            let mut v: Value =
                serde_json::from_str(line).map_err(|e| format!("child output `{line}`: {e}"))?;
            let bw = bandwidth
                .iter()
                .find(|(t, _)| *t == threads)
                .map_or(f64::NAN, |b| b.1);
            let floor = v["frame_bytes"].as_f64().unwrap_or(f64::NAN) / (bw * 1e9) * 1e3;
            v["bandwidth_gbps"] = json!(bw);
            v["floor_ms"] = json!(floor);
            eprintln!("moshi {shape} {weights} threads {threads}: {line}");
            rows.push(v);
        }
    }
    let load = if opts.quick {
        None
    } else {
        // The 16.7 GB bf16 checkpoint is made once and kept (delete it to regenerate).
        let home = std::env::var_os("VOXLANE_HOME")
            .map(std::path::PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".cache/voxlane"))
            })
            .ok_or("no VOXLANE_HOME or HOME for the synthetic checkpoint")?;
        std::fs::create_dir_all(&home).map_err(|e| e.to_string())?;
        let ckpt = home.join("bench-moshi-7b-bf16.safetensors");
        let out = std::process::Command::new(&exe)
            .args(["bench", "moshi-child", "--load"])
            .arg(&ckpt)
            .output()
            .map_err(|e| format!("moshi load child: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "moshi load child failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text.lines().last().unwrap_or_default().to_string();
        eprintln!("moshi load: {line}");
        Some(
            serde_json::from_str::<Value>(&line)
                .map_err(|e| format!("load child output `{line}`: {e}"))?,
        )
    };
    let f = |v: &Value, k: &str| v[k].as_f64().unwrap_or(f64::NAN);
    let mut md = format!(
        "## voxlane bench: moshi\n\nOne 80 ms frame per step (temporal transformer, text sample, depformer × dep_q with a sample each), \
         {frames} frames after {WARMUP} warm-up; random weights (seed 1) generated in the route's format. \
         Floor: the weight bytes one frame reads over the read bandwidth measured in this run ({}). \
         PyTorch anchor (scaled config, `LMGen` greedy, from the issue; not measured in this run): {}.\n\n\
         | shape | weights | route | threads | p50 ms | p99 ms | temporal ms | depformer ms | sampler ms | weights MB/frame | floor ms | floor/p50 | peak RSS MB | vs PyTorch |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
        bandwidth.iter().map(|(t, b)| format!("{b:.1} GB/s at {t} thread(s)")).collect::<Vec<_>>().join(", "),
        PYTORCH_SCALED_MS.iter().map(|(t, ms)| format!("{ms} ms at {t} thread(s)")).collect::<Vec<_>>().join(", "),
    );
    for v in &rows {
        let threads = v["threads"].as_u64().unwrap_or(0) as usize;
        let vs = match (
            v["shape"].as_str(),
            PYTORCH_SCALED_MS.iter().find(|(t, _)| *t == threads),
        ) {
            (Some("scaled"), Some((_, ms))) => format!("{:.1}× faster", ms / f(v, "p50_ms")),
            _ => "—".into(),
        };
        let ratio = f(v, "floor_ms") / f(v, "p50_ms");
        md += &format!(
            "| {} | {} | {} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.2} | {:.0} | {:.1} | {:.2} {} | {:.0} | {} |\n",
            v["shape"].as_str().unwrap_or("?"),
            v["weights"].as_str().unwrap_or("?"),
            v["route"].as_str().unwrap_or("?"),
            threads,
            f(v, "p50_ms"),
            f(v, "p99_ms"),
            f(v, "temporal_ms"),
            f(v, "depformer_ms"),
            f(v, "sampler_ms"),
            f(v, "frame_bytes") / 1e6,
            f(v, "floor_ms"),
            ratio,
            if ratio >= 0.8 { "✓" } else { "✗" },
            f(v, "peak_rss_mb"),
            vs
        );
    }
    if let Some(l) = &load {
        let (conv, peak) = (f(l, "converted_bytes") / 1e6, f(l, "peak_rss_mb"));
        md += &format!(
            "\nLoad: the official 7B as a bf16 safetensors checkpoint ({:.1} GB, random values) converted to q8_0 tensor by tensor: \
             {:.1} s, peak RSS {:.0} MB for {:.0} MB of converted weights ({} the converted size + 1 GB).\n",
            f(l, "checkpoint_bytes") / 1e9,
            f(l, "load_s"),
            peak,
            conv,
            if peak <= conv + 1024.0 { "✓ within" } else { "✗ above" }
        );
    }
    println!("{md}");
    if let Some(path) = &opts.md {
        std::fs::write(path, &md).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    if let Some(path) = &opts.json {
        let text = serde_json::to_string_pretty(&json!({"frames": rows, "load": load}))
            .map_err(|e| e.to_string())?;
        std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}
