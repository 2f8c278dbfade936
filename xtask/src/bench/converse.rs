//! `cargo xtask bench converse`: a PersonaPlex conversation through the
//! `speech_wavefront` machine (Mimi encode of frame t, the LM on t − 1, Mimi
//! decode of t − 2 as stage jobs on one pool) beside the plain serial loop
//! (encode, LM, decode one after another on the same pool), per frame, on
//! the scaled config (f32) and the official 7B shape (q4_0, q8_0), with
//! official-shape Mimi; and the time from a new conversation to its first
//! frame (what a server's handshake waits for): the prompt phase of a 10 s
//! voice prompt and a 40-token text prompt run (batched prefill), or
//! resumed from the persona cache file.
//!
//! Each configuration runs in a child process (`bench converse-child …`).
//! Weights are random (seed 1); speed does not depend on their values.

use super::rss::peak_rss_mb;
use super::BenchOptions;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Instant;
use voxlane_actors::speech::mimi::{MimiConfig, MimiOptions, MimiWeights};
use voxlane_actors::speech::moshi::config::DepformerConfig;
use voxlane_actors::speech::moshi::{LmWeights, MoshiConfig, StreamSampling};
use voxlane_actors::speech::voice::prompt::VoicePrompt;
use voxlane_machines::speech::converse::{run_prompt, PersonaCache, PersonaPrompt};
use voxlane_machines::speech::mimi_init::{InitReply, MimiInit};
use voxlane_machines::speech::mimi_session::decode::DecodeSessionMachine;
use voxlane_machines::speech::mimi_session::encode::EncodeSessionMachine;
use voxlane_machines::speech::mimi_session::SessionReply;
use voxlane_machines::speech::moshi_executor::{
    BindSession, Initialize, MoshiExecutor, Step, WeightsSource,
};
use voxlane_machines::speech::wavefront::{Stages, Wavefront};
use voxlane_runtime::LanePool;

const WARMUP: usize = 3;
/// One frame: 80 ms.
const FRAME_S: f64 = 0.08;

fn persona_config(shape: &str) -> Result<MoshiConfig, String> {
    let d = MoshiConfig::default();
    let base = match shape {
        "7b" => d,
        "scaled" => MoshiConfig {
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
        },
        other => return Err(format!("converse-child: unknown shape `{other}`")),
    };
    // PersonaPlex: the depformer predicts both speakers.
    Ok(MoshiConfig {
        dep_q: base.n_q,
        ..base
    })
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn ok(r: SessionReply) -> Result<(), String> {
    match r {
        SessionReply::Opened { .. } | SessionReply::Done { .. } | SessionReply::ResetDone => Ok(()),
        other => Err(format!("mimi session: {other:?}")),
    }
}

fn stages(cfg: &MoshiConfig, weights: LmWeights, threads: usize) -> Result<Stages, String> {
    let pool = Arc::new(LanePool::new(threads).map_err(|e| e.to_string())?);
    let mcfg = MimiConfig::default();
    let mut init = MimiInit::new();
    let w = MimiWeights::synthetic(&mcfg, 1);
    let opts = MimiOptions {
        nvidia_ring: true,
        ..MimiOptions::default()
    };
    match init.initialize_memory(mcfg, w, opts) {
        InitReply::Initialized { .. } => {}
        other => return Err(format!("mimi_init: {other:?}")),
    }
    let mut encoder = EncodeSessionMachine::new();
    ok(encoder.open(init.bind_encoder(1, 1 << 30).map_err(|e| e.to_string())?))?;
    let mut decoder = DecodeSessionMachine::new();
    ok(decoder.open(init.bind_decoder(1, 1 << 30).map_err(|e| e.to_string())?))?;
    let mut lm = MoshiExecutor::new();
    lm.initialize(Initialize {
        config: cfg.clone(),
        weights: WeightsSource::Random(1),
        route: weights,
        pool: pool.clone(),
        cache_dir: None,
    })
    .map_err(|e| e.to_string())?;
    Ok(Stages {
        encoder,
        lm,
        decoder,
        pool,
    })
}

fn bind(st: &mut Stages) -> Result<(), String> {
    st.lm
        .bind_session(BindSession {
            sampling: StreamSampling::default(),
            seed: 1,
            capacity_bytes: None,
        })
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// A 10 s voice prompt (a gliding tone with a little noise) and a 40-token text prompt.
fn persona() -> PersonaPrompt {
    let n = 240_000;
    let mut state = 7u64;
    let audio: Vec<f32> = (0..n)
        .map(|i| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let t = i as f32 / 24_000.0;
            let noise = (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
            0.2 * (2.0 * std::f32::consts::PI * (180.0 + 40.0 * t) * t).sin() + 0.01 * noise
        })
        .collect();
    PersonaPrompt {
        voice: Some(VoicePrompt::Audio(audio)),
        text_ids: (0..40).map(|i| 5 + (i * 37) % 140).collect(),
        voice_digest: Some([7; 32]),
    }
}

fn user_frame(i: usize) -> Vec<f32> {
    (0..1920)
        .map(|j| 0.1 * ((i * 1920 + j) as f32 * 0.031).sin())
        .collect()
}

/// Child: one configuration, every measurement of it.
pub fn child(args: &[String]) -> Result<(), String> {
    let (mut shape, mut weights, mut threads, mut frames) =
        ("scaled".to_string(), LmWeights::F32, 1usize, 20usize);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || it.next().cloned().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--shape" => shape = val()?,
            "--weights" => {
                weights = LmWeights::parse(&val()?).ok_or("--weights: f32, q8_0 or q4_0")?
            }
            "--threads" => threads = val()?.parse().map_err(|e| format!("--threads: {e}"))?,
            "--frames" => frames = val()?.parse().map_err(|e| format!("--frames: {e}"))?,
            other => return Err(format!("converse-child: unknown argument `{other}`")),
        }
    }
    let cfg = persona_config(&shape)?;
    let t = Instant::now();
    let mut st = stages(&cfg, weights, threads)?;
    let build_s = t.elapsed().as_secs_f64();
    let p = persona();
    // The prompt phase, run.
    bind(&mut st)?;
    let t = Instant::now();
    let report = run_prompt(&mut st, &p, cfg.text_padding_id as u32).map_err(|e| e.to_string())?;
    let prompt_s = t.elapsed().as_secs_f64();
    // Saved, then resumed from the file as a new conversation would.
    let dir = std::env::temp_dir().join(format!("voxlane-bench-personas-{}", std::process::id()));
    let cache = PersonaCache::new(&dir);
    let snap = st.lm.snapshot().map_err(|e| e.to_string())?;
    let t = Instant::now();
    let file = cache.store("bench", &snap).map_err(|e| e.to_string())?;
    let store_s = t.elapsed().as_secs_f64();
    let file_bytes = std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
    drop(snap);
    bind(&mut st)?;
    let t = Instant::now();
    let snap = cache.load("bench").ok_or("the persona file did not load")?;
    st.lm.restore(snap).map_err(|e| e.to_string())?;
    ok(st.encoder.reset())?;
    let cached_s = t.elapsed().as_secs_f64();
    std::fs::remove_dir_all(&dir).ok();
    // The wavefront.
    let mut w = Wavefront::new();
    w.bind(st).map_err(|e| e.to_string())?;
    let mut wave = Vec::new();
    for i in 0..WARMUP + frames {
        let f = user_frame(i);
        let t = Instant::now();
        w.push(&f).map_err(|e| e.to_string())?;
        if i >= WARMUP {
            wave.push(t.elapsed().as_secs_f64());
        }
    }
    let mut st = w.release().ok_or("the wavefront kept its stages")?;
    // The plain serial loop on the same stages.
    let pool = st.pool.clone();
    let k = st
        .encoder
        .session()
        .map(|s| s.model().num_codebooks())
        .ok_or("no encoder session")?;
    let (mut codes, mut pcm) = (vec![0u32; k], vec![0.0f32; 1920]);
    let user = cfg.n_q / 2;
    let mut serial = Vec::new();
    for i in 0..WARMUP + frames {
        let f = user_frame(i);
        let t = Instant::now();
        ok(st.encoder.push(&pool, &f, &mut codes))?;
        let out = st
            .lm
            .frame(Step {
                other_codes: &codes[..user],
                forced_text: None,
                forced_audio: None,
            })
            .map_err(|e| e.to_string())?;
        if let Some(tok) = out {
            ok(st
                .decoder
                .push(&pool, &tok.as_slice()[1..1 + user], &mut pcm))?;
        }
        if i >= WARMUP {
            serial.push(t.elapsed().as_secs_f64());
        }
    }
    wave.sort_by(f64::total_cmp);
    serial.sort_by(f64::total_cmp);
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    println!(
        "{}",
        json!({
            "shape": shape, "weights": weights.name(), "threads": threads, "frames": frames,
            "wavefront_p50_ms": percentile(&wave, 0.5) * 1e3,
            "wavefront_p99_ms": percentile(&wave, 0.99) * 1e3,
            "wavefront_mean_ms": mean(&wave) * 1e3,
            "serial_p50_ms": percentile(&serial, 0.5) * 1e3,
            "serial_mean_ms": mean(&serial) * 1e3,
            "prompt_steps": report.steps, "prompt_s": prompt_s,
            "persona_store_s": store_s, "persona_file_mb": file_bytes as f64 / 1e6,
            "persona_cached_s": cached_s,
            "build_s": build_s, "peak_rss_mb": peak_rss_mb(),
            "route": voxlane_actors::kernels::cpu::route_name(),
        })
    );
    Ok(())
}

/// Parent: every configuration in a child, then the table and the JSON.
pub fn run(opts: &BenchOptions) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let frames = if opts.quick { 6 } else { 20 };
    let configs: &[(&str, &str)] = if opts.quick {
        &[("scaled", "f32")]
    } else {
        &[("scaled", "f32"), ("7b", "q4_0"), ("7b", "q8_0")]
    };
    let mut rows: Vec<Value> = Vec::new();
    for &(shape, weights) in configs {
        for &threads in &opts.threads {
            let out = std::process::Command::new(&exe)
                .args([
                    "bench",
                    "converse-child",
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
                .map_err(|e| format!("converse child: {e}"))?;
            if !out.status.success() {
                return Err(format!(
                    "converse child ({shape} {weights}, threads {threads}) failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
            let text = String::from_utf8_lossy(&out.stdout);
            let line = text.lines().last().unwrap_or_default();
            eprintln!("converse {shape} {weights} threads {threads}: {line}");
            rows.push(
                serde_json::from_str(line).map_err(|e| format!("child output `{line}`: {e}"))?,
            );
        }
    }
    let f = |v: &Value, k: &str| v[k].as_f64().unwrap_or(f64::NAN);
    let mut md = format!(
        "## voxlane bench: converse\n\nPersonaPlex (dep_q 16) through the `speech_wavefront` machine beside the plain serial loop \
         (Mimi encode → LM → Mimi decode one after another on the same pool), ms per 80 ms frame, {frames} frames after {WARMUP} warm-up; \
         official-shape Mimi (f32), random weights (seed 1), Moshi's default sampling. RTF = ms / 80. \
         Start: a 10 s voice prompt and a 40-token text prompt through the batched prompt phase, \
         or the saved session resumed from the persona cache file.\n\n\
         | shape | weights | route | threads | wavefront p50 ms | p99 ms | RTF | serial p50 ms | pipelining gain | prompt steps | start: prompt s | start: cached s | persona file MB | peak RSS MB |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    );
    for v in &rows {
        let (wp, sp) = (f(v, "wavefront_p50_ms"), f(v, "serial_p50_ms"));
        md += &format!(
            "| {} | {} | {} | {} | {:.1} | {:.1} | {:.2} | {:.1} | {:.2}× | {} | {:.2} | {:.3} | {:.0} | {:.0} |\n",
            v["shape"].as_str().unwrap_or("?"),
            v["weights"].as_str().unwrap_or("?"),
            v["route"].as_str().unwrap_or("?"),
            v["threads"],
            wp,
            f(v, "wavefront_p99_ms"),
            wp / (FRAME_S * 1e3),
            sp,
            sp / wp,
            v["prompt_steps"],
            f(v, "prompt_s"),
            f(v, "persona_cached_s"),
            f(v, "persona_file_mb"),
            f(v, "peak_rss_mb"),
        );
    }
    println!("{md}");
    if let Some(path) = &opts.md {
        std::fs::write(path, &md).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    if let Some(path) = &opts.json {
        let text =
            serde_json::to_string_pretty(&json!({ "rows": rows })).map_err(|e| e.to_string())?;
        std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}
