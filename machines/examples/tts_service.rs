//! A small TTS service: one loaded Kokoro `Tts` owned by a worker thread
//! that answers requests from a channel, the thread budget split
//! explicitly (the worker is lane 0 of a pool of `COMPUTE_THREADS`; the
//! caller only sends and waits, so it computes nothing).
//!
//! Run: `cargo run --release -p voxlane-machines --example tts_service`
//! (needs the default Kokoro model: `cargo run --release --bin voxlane -- fetch`).

use crossbeam_channel::{bounded, Sender};
use voxlane_machines::tts::{SynthOptions, Tts, TtsPaths};
use voxlane_runtime::fetch::{catalog, Fetcher};

/// The whole compute budget: the worker plus its pool's lanes.
const COMPUTE_THREADS: usize = 2;

/// One request: text, a voice, and where the audio goes.
pub struct Request {
    /// What to say.
    pub text: String,
    /// A voice or blend.
    pub voice: String,
    /// 24 kHz mono audio, or why not.
    pub reply: Sender<Result<Vec<f32>, String>>,
}

/// The cached default model, or why it is missing.
pub fn default_paths() -> Result<TtsPaths, String> {
    let f = Fetcher::new().map_err(|e| e.to_string())?;
    let get = |a| {
        f.cached(a)
            .ok_or("the Kokoro model is not cached: run `voxlane fetch` first".to_string())
    };
    Ok(TtsPaths {
        model: get(&catalog::KOKORO_INT8)?,
        vocab: get(&catalog::KOKORO_VOCAB)?,
        voices: get(&catalog::KOKORO_VOICES_JA)?,
    })
}

/// Start the worker; returns where to send requests and its handle.
pub fn start(paths: TtsPaths) -> Result<(Sender<Request>, std::thread::JoinHandle<()>), String> {
    let (tx, rx) = bounded::<Request>(16);
    let (ready_tx, ready_rx) = bounded(1);
    let worker = std::thread::spawn(move || {
        // The worker thread is lane 0 of its own pool: COMPUTE_THREADS in all.
        let mut tts = match Tts::load(&paths, COMPUTE_THREADS) {
            Ok(t) => {
                let _ = ready_tx.send(Ok(()));
                t
            }
            Err(e) => {
                let _ = ready_tx.send(Err(e.to_string()));
                return;
            }
        };
        for req in rx {
            let opts = SynthOptions {
                voice: req.voice,
                ..SynthOptions::default()
            };
            let audio = tts
                .synthesize_all(&req.text, &opts)
                .map_err(|e| e.to_string());
            let _ = req.reply.send(audio);
        }
    });
    ready_rx.recv().map_err(|e| e.to_string())??;
    Ok((tx, worker))
}

/// Send each text and collect the answers (audio lengths, or errors).
pub fn run(paths: TtsPaths, texts: &[&str]) -> Result<Vec<Result<Vec<f32>, String>>, String> {
    let (tx, worker) = start(paths)?;
    let mut answers = Vec::new();
    for text in texts {
        let (reply, rx) = bounded(1);
        tx.send(Request {
            text: (*text).into(),
            voice: "jf_alpha".into(),
            reply,
        })
        .map_err(|e| e.to_string())?;
        answers.push(rx.recv().map_err(|e| e.to_string())?);
    }
    drop(tx);
    worker
        .join()
        .map_err(|_| "the worker panicked".to_string())?;
    Ok(answers)
}

fn main() {
    let texts = [
        "Hello from the service.",
        "",
        "A second request, same model.",
    ];
    match default_paths().and_then(|p| run(p, &texts)) {
        Ok(answers) => {
            for (t, a) in texts.iter().zip(answers) {
                match a {
                    Ok(pcm) => println!("{t:?}: {:.2} s of audio", pcm.len() as f32 / 24_000.0),
                    Err(e) => println!("{t:?}: refused: {e}"),
                }
            }
        }
        Err(e) => {
            eprintln!("tts_service: {e}");
            std::process::exit(1);
        }
    }
}
