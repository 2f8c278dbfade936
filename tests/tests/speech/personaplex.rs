//! PersonaPlex's audio side against NVIDIA's reference on the
//! `personaplex-tiny` fixture: the voice prompt WAV normalised to −24 LUFS
//! and Mimi-encoded frame by frame gives the reference's prompt codes, the
//! user WAV its codes, and the reference's agent tokens decode to its audio.
//! (The LM's tokens are checked in `actors/src/speech/moshi/persona_tests.rs`.)

use std::path::PathBuf;
use std::sync::Arc;
use voxlane_actors::speech::mimi::{MimiConfig, MimiDecoder, MimiEncoder, MimiModel};
use voxlane_actors::speech::voice::prompt::{frames, VoicePrompt};
use voxlane_runtime::io::{read_npy, read_wav};
use voxlane_runtime::LanePool;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/fixtures/personaplex-tiny")
        .join(name)
}

fn mimi() -> Arc<MimiModel> {
    let cfg = MimiConfig::from_file(fixture("config.json")).unwrap();
    Arc::new(MimiModel::load(cfg, fixture("mimi.safetensors")).unwrap())
}

/// Streaming codes of `audio` (zero-padded to whole frames), `[K][frames]`.
fn encode(model: &Arc<MimiModel>, pool: &LanePool, audio: &[f32]) -> Vec<Vec<u32>> {
    let mut enc = MimiEncoder::new(model.clone()).unwrap();
    let k = model.num_codebooks();
    let mut out = vec![Vec::new(); k];
    let mut codes = vec![0u32; k];
    for f in frames(audio, model.frame_size()) {
        enc.step(pool, &f, &mut codes).unwrap();
        for (o, c) in out.iter_mut().zip(&codes) {
            o.push(*c);
        }
    }
    out
}

fn reference_codes(name: &str) -> Vec<Vec<u32>> {
    let a = read_npy(fixture(name)).unwrap();
    let (k, t) = (a.shape[1], a.shape[2]);
    let v = a.to_i64();
    (0..k)
        .map(|c| (0..t).map(|i| v[c * t + i] as u32).collect())
        .collect()
}

#[test]
fn voice_prompt_normalises_and_encodes_like_the_reference() {
    let pool = LanePool::new(2).unwrap();
    let model = mimi();
    let VoicePrompt::Audio(audio) = VoicePrompt::load(fixture("voice_prompt.wav"), 64, 8).unwrap()
    else {
        panic!("a WAV prompt is audio");
    };
    let want = read_npy(fixture("voice_prompt_normalized.npy"))
        .unwrap()
        .to_f32();
    let err = audio
        .iter()
        .zip(&want)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    assert!(
        audio.len() == want.len() && err <= 1e-4,
        "normalised audio: max error {err}"
    );
    assert_eq!(
        encode(&model, &pool, &audio),
        reference_codes("voice_prompt_codes.npy")
    );
}

#[test]
fn user_audio_encodes_like_the_reference() {
    let pool = LanePool::new(1).unwrap();
    let user = read_wav(fixture("user.wav")).unwrap().mono();
    assert_eq!(
        encode(&mimi(), &pool, &user),
        reference_codes("user_codes.npy")
    );
}

#[test]
fn reference_agent_tokens_decode_to_the_reference_audio() {
    let pool = LanePool::new(2).unwrap();
    let model = mimi();
    let tokens = read_npy(fixture("tokens.npy")).unwrap();
    let cols = tokens.shape[1];
    let t = tokens.to_i64();
    let mut dec = MimiDecoder::new(model.clone()).unwrap();
    let fs = model.frame_size();
    let mut audio = Vec::new();
    let mut pcm = vec![0.0f32; fs];
    for row in t.chunks(cols) {
        let agent: Vec<u32> = row[1..9].iter().map(|&v| v as u32).collect();
        dec.step(&pool, &agent, &mut pcm).unwrap();
        audio.extend_from_slice(&pcm);
    }
    let want = read_npy(fixture("output.npy")).unwrap().to_f32();
    audio.resize(want.len(), 0.0);
    let err = audio
        .iter()
        .zip(&want)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    assert!(err <= 1e-3, "decoded agent audio: max error {err}");
}

/// NVIDIA's Mimi (PersonaPlex's fork of moshi) on `user.wav` three times
/// over (11.6 s, past the transformer's 250-step ring), made by
/// `tests/data/personaplex_mimi_long/make_reference.py`.
fn long_reference(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("data/personaplex_mimi_long")
        .join(name)
}

#[test]
fn nvidia_ring_mimi_matches_persona_plex_past_its_window() {
    let pool = LanePool::new(2).unwrap();
    let cfg = MimiConfig::from_file(fixture("config.json")).unwrap();
    let opts = voxlane_actors::speech::mimi::MimiOptions {
        nvidia_ring: true,
        ..Default::default()
    };
    let model = Arc::new(MimiModel::load_with(cfg, fixture("mimi.safetensors"), opts).unwrap());
    let user = read_wav(fixture("user.wav")).unwrap().mono();
    let tiled: Vec<f32> = user.iter().chain(&user).chain(&user).copied().collect();
    let got = encode(&model, &pool, &tiled);
    let a = read_npy(long_reference("codes.npy")).unwrap();
    let (k, t) = (a.shape[1], a.shape[2]);
    let v = a.to_i64();
    let want: Vec<Vec<u32>> = (0..k)
        .map(|c| (0..t).map(|i| v[c * t + i] as u32).collect())
        .collect();
    assert_eq!(got, want);
    // Decoding past the window: NVIDIA's ring, not Kyutai's (which differs
    // there by ~4e-4 on this fixture).
    let decode = |model: &Arc<MimiModel>| {
        let mut dec = MimiDecoder::new(model.clone()).unwrap();
        let (mut audio, mut pcm) = (Vec::new(), vec![0.0f32; 1920]);
        for i in 0..t {
            let c: Vec<u32> = want.iter().map(|row| row[i]).collect();
            dec.step(&pool, &c, &mut pcm).unwrap();
            audio.extend_from_slice(&pcm);
        }
        audio.split_off(120 * 1920)
    };
    let reference = read_npy(long_reference("decoded_from_120.npy"))
        .unwrap()
        .to_f32();
    let err = |a: &[f32]| {
        a.iter()
            .zip(&reference)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0f32, f32::max)
    };
    let nvidia = err(&decode(&model));
    let kyutai = err(&decode(&mimi()));
    assert!(nvidia <= 1e-5, "NVIDIA ring: max error {nvidia}");
    assert!(kyutai > 1e-4, "the windows differ on this input ({kyutai})");
}
