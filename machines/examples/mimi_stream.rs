//! Mimi as a stream, through voxlane's session machines: 80 ms frames of
//! 24 kHz PCM in, codes out (`mimi_encode_session`), codes in, PCM out
//! (`mimi_decode_session`), both opened by `mimi_init` within a capacity.
//!
//! Run: `cargo run --release -p voxlane-machines --example mimi_stream -- MODEL.safetensors [CONFIG.json]`
//! (without arguments: the `mimi-tiny` test fixture beside the repository).

use std::path::PathBuf;
use voxlane_actors::speech::mimi::{MimiConfig, MimiOptions};
use voxlane_machines::speech::mimi_init::{InitReply, MimiInit};
use voxlane_machines::speech::mimi_session::decode::DecodeSessionMachine;
use voxlane_machines::speech::mimi_session::encode::EncodeSessionMachine;
use voxlane_machines::speech::mimi_session::SessionReply;
use voxlane_runtime::LanePool;

/// Streaming state a session may hold.
const CAPACITY: usize = 1 << 30;

/// Encode `seconds` of a test tone frame by frame, decode the codes back;
/// returns (codes per frame, the decoded PCM).
pub fn run(
    model: PathBuf,
    config: Option<PathBuf>,
    threads: usize,
    seconds: f32,
) -> Result<(Vec<Vec<u32>>, Vec<f32>), String> {
    let cfg = match config {
        Some(c) => MimiConfig::from_file(&c).map_err(|e| e.to_string())?,
        None => MimiConfig::default(),
    };
    let pool = LanePool::new(threads).map_err(|e| e.to_string())?;
    let mut init = MimiInit::new();
    match init.initialize_file(cfg, model, MimiOptions::default()) {
        InitReply::Initialized { .. } => {}
        other => return Err(format!("mimi_init: {other:?}")),
    }
    let m = init.model().cloned().ok_or("no model bound")?;
    let (fs, k) = (m.frame_size(), m.num_codebooks());
    let mut enc = EncodeSessionMachine::new();
    let mut dec = DecodeSessionMachine::new();
    for reply in [
        enc.open(init.bind_encoder(1, CAPACITY).map_err(|e| e.to_string())?),
        dec.open(init.bind_decoder(1, CAPACITY).map_err(|e| e.to_string())?),
    ] {
        if let SessionReply::Error(e) = reply {
            return Err(e.to_string());
        }
    }
    let frames = ((seconds * m.config().sample_rate as f32) as usize).div_ceil(fs);
    let (mut codes, mut pcm) = (vec![0u32; k], vec![0.0f32; fs]);
    let (mut all_codes, mut out) = (Vec::new(), Vec::new());
    for f in 0..frames {
        let frame: Vec<f32> = (0..fs)
            .map(|i| {
                0.3 * ((f * fs + i) as f32 * 2.0 * std::f32::consts::PI * 220.0 / 24_000.0).sin()
            })
            .collect();
        match enc.push(&pool, &frame, &mut codes) {
            SessionReply::Done { .. } => all_codes.push(codes.clone()),
            other => return Err(format!("encode: {other:?}")),
        }
        match dec.push(&pool, &codes, &mut pcm) {
            SessionReply::Done { .. } => out.extend_from_slice(&pcm),
            other => return Err(format!("decode: {other:?}")),
        }
    }
    // A frame of the wrong size is a typed error; the session stays usable.
    if let SessionReply::Error(e) = enc.push(&pool, &[0.0; 7], &mut codes) {
        println!("rejected as expected: {e}");
    }
    Ok((all_codes, out))
}

fn main() {
    let mut args = std::env::args().skip(1).map(PathBuf::from);
    let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/mimi-tiny");
    let model = args
        .next()
        .unwrap_or_else(|| fixture.join("model.safetensors"));
    let config = args
        .next()
        .or_else(|| Some(fixture.join("config.json")).filter(|c| c.is_file()));
    match run(model, config, 2, 1.0) {
        Ok((codes, pcm)) => {
            println!(
                "{} frames in, {} codes each; first frame's codes {:?}",
                codes.len(),
                codes[0].len(),
                codes[0]
            );
            println!("{} samples out", pcm.len());
        }
        Err(e) => {
            eprintln!("mimi_stream: {e}");
            std::process::exit(1);
        }
    }
}
