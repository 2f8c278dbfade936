//! `voxlane speak` end to end on the real Kokoro model (from the cache that
//! `cargo xtask fetch-models` fills): a WAV of plausible speech, identical
//! for 1 and 2 threads, streaming PCM equal to the WAV, and no partial file
//! when synthesis cannot start.

use voxlane_machines::cli::{run_args_with_stdin, CliError};
use voxlane_runtime::io::wav::read_wav;

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("voxlane-e2e-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn speak(args: &[&str], out: &mut Vec<u8>) -> Result<(), CliError> {
    let mut argv = vec!["voxlane", "speak"];
    argv.extend_from_slice(args);
    run_args_with_stdin(argv, &mut "".as_bytes(), out)
}

const TEXT: &str = "Hello, this is voxlane.";

#[test]
fn speaks_a_wav_identical_for_every_thread_budget() {
    let dir = temp_dir("wav");
    let mut wavs = Vec::new();
    for threads in ["1", "2"] {
        let path = dir.join(format!("hello-{threads}.wav"));
        let p = path.to_str().unwrap();
        speak(&["--threads", threads, "-o", p, TEXT], &mut Vec::new()).unwrap();
        wavs.push(std::fs::read(&path).unwrap());
    }
    assert_eq!(
        wavs[0], wavs[1],
        "--threads 1 and 2 must give the same bytes"
    );
    let wav = read_wav(dir.join("hello-1.wav")).unwrap();
    assert_eq!((wav.sample_rate, wav.channels), (24_000, 1));
    let secs = wav.samples.len() as f64 / 24_000.0;
    // Five words at a natural rate: well over a second, well under five.
    assert!((1.0..5.0).contains(&secs), "{secs} s of audio");
    let rms = (wav.samples.iter().map(|s| s * s).sum::<f32>() / wav.samples.len() as f32).sqrt();
    assert!(rms > 0.02, "audio is near silence (rms {rms})");
    assert!(wav.samples.iter().all(|s| s.abs() < 1.0), "audio clips");
    // Slower speech is longer.
    let slow = dir.join("slow.wav");
    speak(
        &["--speed", "0.6", "-o", slow.to_str().unwrap(), TEXT],
        &mut Vec::new(),
    )
    .unwrap();
    let slow = read_wav(&slow).unwrap();
    assert!(slow.samples.len() as f64 > 1.3 * wav.samples.len() as f64);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn streaming_pcm_equals_the_wav() {
    let dir = temp_dir("stream");
    let path = dir.join("s.wav");
    let mut pcm = Vec::new();
    speak(&["--stream", "-o", path.to_str().unwrap(), TEXT], &mut pcm).unwrap();
    let wav = std::fs::read(&path).unwrap();
    assert_eq!(
        &wav[44..],
        &pcm[..],
        "streamed PCM differs from the WAV's data"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_foreign_model_file_is_a_clear_error_and_leaves_no_wav() {
    let dir = temp_dir("foreign");
    let model = dir.join("not-a-model.onnx");
    std::fs::write(&model, b"RIFF....WAVEfmt definitely not onnx").unwrap();
    let out = dir.join("out.wav");
    let r = speak(
        &[
            "--model",
            model.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            TEXT,
        ],
        &mut Vec::new(),
    );
    assert!(matches!(r, Err(CliError::Model(_))), "{r:?}");
    assert!(!out.exists(), "a failed run left {}", out.display());
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left.len(), 1, "{left:?}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn timestamps_time_every_word_within_the_audio() {
    let dir = temp_dir("timestamps");
    let (wav, json) = (dir.join("t.wav"), dir.join("t.json"));
    let text = "Hello there. The end of the road, 12 miles away.";
    speak(
        &[
            "--threads",
            "2",
            "-o",
            wav.to_str().unwrap(),
            "--timestamps",
            json.to_str().unwrap(),
            text,
        ],
        &mut Vec::new(),
    )
    .unwrap();
    let words: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let words = words.as_array().unwrap();
    let names: Vec<&str> = words.iter().map(|w| w["word"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["Hello", "there", "The", "end", "of", "the", "road", "twelve", "miles", "away"]
    );
    let audio = read_wav(&wav).unwrap();
    let seconds = audio.samples.len() as f64 / 24_000.0;
    let span = |w: &serde_json::Value| (w["start"].as_f64().unwrap(), w["end"].as_f64().unwrap());
    let mut last_end = 0.0;
    for w in words {
        let (start, end) = span(w);
        assert!(start >= last_end && end > start, "{w} after {last_end}");
        last_end = end;
        // The word's stretch of audio is speech.
        let s = &audio.samples[(start * 24_000.0) as usize..(end * 24_000.0) as usize];
        let rms = (s.iter().map(|x| x * x).sum::<f32>() / s.len() as f32).sqrt();
        assert!(rms > 0.01, "{w}: rms {rms}");
    }
    assert!(
        last_end <= seconds && last_end > seconds - 0.6,
        "{last_end} of {seconds} s"
    );
    // An unwritable timestamps path is refused before anything is written.
    let bad = dir.join("missing-dir").join("t.json");
    let wav2 = dir.join("t2.wav");
    let err = speak(
        &[
            "-o",
            wav2.to_str().unwrap(),
            "--timestamps",
            bad.to_str().unwrap(),
            text,
        ],
        &mut Vec::new(),
    )
    .unwrap_err();
    assert!(matches!(err, CliError::Output { .. }), "{err:?}");
    assert!(!wav2.exists() && !bad.exists());
    std::fs::remove_dir_all(dir).unwrap();
}
