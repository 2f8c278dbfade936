//! Voice prompt loading against the PersonaPlex fixtures (the `.pt` voice
//! file, its safetensors twin, the WAV and its −24 LUFS reference), other
//! rates and channel counts, each typed error, the framing and the sine.

use super::loudness::{pairwise_sum, LoudnessError, Meter};
use super::prompt::*;
use super::resample::ResampleError;
use std::path::{Path, PathBuf};
use voxlane_runtime::io::read_npy;
use voxlane_runtime::io::wav::header_pcm16;
use voxlane_runtime::weights::{write_safetensors, TensorData};

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../shared/fixtures/personaplex-tiny"
);

/// PersonaPlex-tiny: model width 64, 8 codebooks per speaker, max delay 1.
const DIM: usize = 64;
const CODEBOOKS: usize = 8;

fn fixture(name: &str) -> PathBuf {
    Path::new(FIXTURE).join(name)
}

/// A unique temp path; the file is removed when the guard drops.
struct Temp(PathBuf);

impl Temp {
    fn new(name: &str) -> Self {
        Self(std::env::temp_dir().join(format!("voxlane-voice-{}-{name}", std::process::id())))
    }

    fn write(name: &str, bytes: &[u8]) -> Self {
        let t = Self::new(name);
        std::fs::write(&t.0, bytes).unwrap();
        t
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// 16-bit PCM WAV bytes of interleaved `samples`.
fn wav_bytes(samples: &[f32], channels: u16, rate: u32) -> Vec<u8> {
    let pcm: Vec<u8> = samples
        .iter()
        .flat_map(|s| ((s.clamp(-1.0, 1.0) * 32767.0).round() as i16).to_le_bytes())
        .collect();
    let mut h = header_pcm16(rate, pcm.len() as u32).to_vec();
    h[22..24].copy_from_slice(&channels.to_le_bytes());
    h[28..32].copy_from_slice(&(rate * 2 * u32::from(channels)).to_le_bytes());
    h[32..34].copy_from_slice(&(2 * channels).to_le_bytes());
    h.extend(pcm);
    h
}

fn sine(rate: u32, seconds: f64, freq: f64, amp: f64) -> Vec<f32> {
    let n = (f64::from(rate) * seconds) as usize;
    (0..n)
        .map(|i| {
            (amp * (2.0 * std::f64::consts::PI * freq * i as f64 / f64::from(rate)).sin()) as f32
        })
        .collect()
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

#[test]
fn pt_voice_file_loads_and_equals_its_safetensors_twin() {
    let pt = VoicePrompt::load(fixture("voice_prompt.pt"), DIM, CODEBOOKS).unwrap();
    let st = VoicePrompt::load(
        fixture("voice_prompt_embeddings.safetensors"),
        DIM,
        CODEBOOKS,
    )
    .unwrap();
    assert_eq!(pt, st);
    let VoicePrompt::Embeddings {
        embeddings,
        frames,
        dim,
        cache,
        cache_shape,
    } = &pt
    else {
        panic!("not embeddings")
    };
    assert_eq!((*frames, *dim, *cache_shape), (33, 64, [1, 17, 4]));
    assert_eq!((embeddings.len(), cache.len()), (33 * 64, 68));
    assert_eq!(pt.frames(), 33);
    // The fixture's LM has delays up to 1: a ring of 4.
    pt.check_cache_width(1).unwrap();
    assert!(matches!(
        pt.check_cache_width(2),
        Err(VoicePromptError::CacheWidth {
            expected: 5,
            found: 4
        })
    ));
}

#[test]
fn wav_prompt_equals_the_reference_normalisation() {
    let got = VoicePrompt::load(fixture("voice_prompt.wav"), DIM, CODEBOOKS).unwrap();
    let want = read_npy(fixture("voice_prompt_normalized.npy"))
        .unwrap()
        .to_f32();
    let VoicePrompt::Audio(audio) = &got else {
        panic!("not audio")
    };
    let err = max_abs_diff(audio, &want);
    assert!(err < 1e-6, "max abs error {err}");
    // 64347 samples: 34 frames, the last one padded, as `voice_prompt_codes.npy` has.
    assert_eq!(got.frames(), 34);
    got.check_cache_width(7).unwrap();
}

#[test]
fn stereo_at_48k_is_mixed_resampled_and_normalised() {
    let left = sine(48_000, 1.5, 440.0, 0.4);
    let right = sine(48_000, 1.5, 660.0, 0.1);
    let stereo: Vec<f32> = left
        .iter()
        .zip(&right)
        .flat_map(|(&l, &r)| [l, r])
        .collect();
    let f = Temp::write("stereo48k.wav", &wav_bytes(&stereo, 2, 48_000));
    let VoicePrompt::Audio(audio) = VoicePrompt::load(&f.0, DIM, CODEBOOKS).unwrap() else {
        panic!("not audio")
    };
    assert_eq!(audio.len(), 36_000);
    let lufs = Meter::new(24_000)
        .unwrap()
        .integrated_loudness(&audio)
        .unwrap();
    assert!((lufs - PROMPT_LUFS).abs() < 1e-6, "{lufs}");
    // The same as mixing first, then the mono path.
    let wav = voxlane_runtime::io::read_wav(&f.0).unwrap();
    let mono: Vec<f32> = wav
        .samples
        .chunks_exact(2)
        .map(|c| ((f64::from(c[0]) + f64::from(c[1])) / 2.0) as f32)
        .collect();
    let again = prompt_audio(&mono, 1, 48_000, &f.0).unwrap();
    assert_eq!(audio, again);
}

#[test]
fn a_16k_prompt_keeps_its_content() {
    // A 16 kHz recording of a 24 kHz signal's band comes back close to it.
    let x16 = sine(16_000, 1.0, 500.0, 0.3);
    let x24 = sine(24_000, 1.0, 500.0, 0.3);
    let a = prompt_audio(&x16, 1, 16_000, Path::new("a.wav")).unwrap();
    let b = prompt_audio(&x24, 1, 24_000, Path::new("b.wav")).unwrap();
    assert_eq!(a.len(), b.len());
    let err = max_abs_diff(&a[1000..23_000], &b[1000..23_000]);
    assert!(err < 1e-3, "{err}");
}

#[test]
fn each_problem_has_its_typed_error() {
    let emb = |n: usize, d: usize| TensorData::F32(vec![0.5; n * d]);
    let cache = |s: usize, w: usize| TensorData::I64(vec![3; s * w]);
    let st = |name: &str, tensors: Vec<(&str, TensorData, Vec<usize>)>| {
        let t = Temp::new(name);
        write_safetensors(&t.0, &tensors, &[]).unwrap();
        t
    };
    let load = |t: &Temp| VoicePrompt::load(&t.0, DIM, CODEBOOKS).unwrap_err();

    let ok = st(
        "ok.safetensors",
        vec![
            ("embeddings", emb(3, DIM), vec![3, 1, 1, DIM]),
            ("cache", cache(17, 4), vec![1, 17, 4]),
        ],
    );
    assert_eq!(
        VoicePrompt::load(&ok.0, DIM, CODEBOOKS).unwrap().frames(),
        3
    );

    let t = st(
        "nocache.safetensors",
        vec![("embeddings", emb(3, DIM), vec![3, 1, 1, DIM])],
    );
    assert!(matches!(
        load(&t),
        VoicePromptError::MissingTensor {
            tensor: "cache",
            ..
        }
    ));

    let err = VoicePrompt::load(&ok.0, 32, CODEBOOKS).unwrap_err();
    assert!(
        matches!(&err, VoicePromptError::Shape { tensor: "embeddings", found, .. } if found == &[3, 1, 1, 64]),
        "{err}"
    );
    assert!(
        err.to_string().contains("expected [frames >= 1, 1, 1, 32]"),
        "{err}"
    );

    let err = VoicePrompt::load(&ok.0, DIM, 4).unwrap_err();
    assert!(
        matches!(
            &err,
            VoicePromptError::Shape {
                tensor: "cache",
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("[1, 9, max_delay + 3]"), "{err}");

    let t = st(
        "noframes.safetensors",
        vec![
            ("embeddings", emb(0, DIM), vec![0, 1, 1, DIM]),
            ("cache", cache(17, 4), vec![1, 17, 4]),
        ],
    );
    assert!(matches!(
        load(&t),
        VoicePromptError::Shape {
            tensor: "embeddings",
            ..
        }
    ));

    let t = st(
        "intemb.safetensors",
        vec![
            (
                "embeddings",
                TensorData::I64(vec![0; DIM]),
                vec![1, 1, 1, DIM],
            ),
            ("cache", cache(17, 4), vec![1, 17, 4]),
        ],
    );
    let err = load(&t);
    assert!(
        matches!(&err, VoicePromptError::Dtype { tensor: "embeddings", found, .. } if found == "I64"),
        "{err}"
    );

    let t = st(
        "floatcache.safetensors",
        vec![
            ("embeddings", emb(1, DIM), vec![1, 1, 1, DIM]),
            ("cache", TensorData::F32(vec![0.0; 68]), vec![1, 17, 4]),
        ],
    );
    assert!(matches!(
        load(&t),
        VoicePromptError::Dtype {
            tensor: "cache",
            ..
        }
    ));

    // Corrupt files: the format's own reader names the damage.
    let pt = std::fs::read(fixture("voice_prompt.pt")).unwrap();
    let t = Temp::write("cut.pt", &pt[..pt.len() / 2]);
    assert!(matches!(load(&t), VoicePromptError::Torch(_)));
    let s = std::fs::read(fixture("voice_prompt_embeddings.safetensors")).unwrap();
    let t = Temp::write("cut.safetensors", &s[..s.len() - 10]);
    assert!(matches!(load(&t), VoicePromptError::Weights(_)));
    let t = Temp::write("noise.wav", b"RIFF....WAVEjunk");
    assert!(matches!(load(&t), VoicePromptError::Wav(_)));
    let t = Temp::write("garbage.wav", b"definitely not audio");
    assert!(matches!(load(&t), VoicePromptError::Wav(_)));
    let t = Temp::write("notes.txt", b"hello");
    assert!(matches!(load(&t), VoicePromptError::UnknownFormat { .. }));
    let missing = Temp::new("absent.wav");
    assert!(matches!(load(&missing), VoicePromptError::Io { .. }));

    // A .pt without the cache, from the torch reader's side.
    let pt_cut = Temp::write("nocache.pt", &without_cache(&pt));
    assert!(matches!(
        load(&pt_cut),
        VoicePromptError::MissingTensor {
            tensor: "cache",
            ..
        }
    ));

    // Audio problems.
    let t = Temp::write("empty.wav", &wav_bytes(&[], 1, 24_000));
    assert!(matches!(load(&t), VoicePromptError::EmptyAudio { .. }));
    let t = Temp::write("short.wav", &wav_bytes(&[0.1; 4000], 1, 24_000));
    assert!(matches!(
        load(&t),
        VoicePromptError::Loudness {
            source: LoudnessError::TooShort { .. },
            ..
        }
    ));
    let t = Temp::write("silent.wav", &wav_bytes(&[0.0; 24_000], 1, 24_000));
    assert!(matches!(
        load(&t),
        VoicePromptError::Loudness {
            source: LoudnessError::Silent,
            ..
        }
    ));
    let t = Temp::write("slow.wav", &wav_bytes(&[0.1; 24_000], 1, 1000));
    assert!(matches!(
        load(&t),
        VoicePromptError::Resample {
            source: ResampleError::Rate { rate: 1000 },
            ..
        }
    ));
}

/// The fixture `.pt` with its pickle's `cache` entry renamed to `cachf`.
fn without_cache(pt: &[u8]) -> Vec<u8> {
    use std::io::{Read, Write};
    let mut zin = zip::ZipArchive::new(std::io::Cursor::new(pt)).unwrap();
    let mut zout = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let opts =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    for i in 0..zin.len() {
        let mut f = zin.by_index(i).unwrap();
        let mut data = Vec::new();
        f.read_to_end(&mut data).unwrap();
        if f.name().ends_with("data.pkl") {
            let at = data.windows(5).position(|w| w == b"cache").unwrap();
            data[at + 4] = b'f';
        }
        zout.start_file(f.name(), opts).unwrap();
        zout.write_all(&data).unwrap();
    }
    zout.finish().unwrap().into_inner()
}

#[test]
fn framing_pads_only_a_partial_last_frame() {
    let audio: Vec<f32> = (0..5000).map(|i| i as f32).collect();
    for (len, count) in [
        (0, 0),
        (1, 1),
        (1919, 1),
        (1920, 1),
        (1921, 2),
        (3840, 2),
        (5000, 3),
    ] {
        let frames: Vec<_> = frames(&audio[..len], FRAME_SIZE).collect();
        assert_eq!(frames.len(), count, "{len}");
        assert_eq!(frame_count(len, FRAME_SIZE), count);
        assert!(frames.iter().all(|f| f.len() == FRAME_SIZE));
        let flat: Vec<f32> = frames.iter().flat_map(|f| f.iter().copied()).collect();
        assert_eq!(&flat[..len], &audio[..len]);
        assert!(flat[len..].iter().all(|&x| x == 0.0));
    }
    assert!(matches!(
        frames(&audio[..1920], FRAME_SIZE).next(),
        Some(std::borrow::Cow::Borrowed(_))
    ));
    assert_eq!(frames(&audio, 0).count(), 0);
    assert_eq!(frame_count(10, 0), 0);
}

#[test]
fn sine_frame_equals_numpy() {
    // numpy: create_sinewave(1920 / 24000, 24000), float32 bits at a few
    // indices, and pairwise sums of the values and of their magnitudes.
    let s = sine_frame();
    assert_eq!(s.len(), 1920);
    for (i, bits) in [
        (0, 0x0000_0000u32),
        (1, 0x3d6b_642b),
        (2, 0x3de9_d4cf),
        (3, 0x3e2d_6f0f),
        (100, 0xbedd_b3d7),
        (777, 0x3eff_dfa9),
        (1000, 0x3edd_b3d7),
        (1919, 0x3ee8_c3b3),
    ] {
        assert_eq!(s[i].to_bits(), bits, "sample {i}");
    }
    let v: Vec<f64> = s.iter().map(|&x| f64::from(x)).collect();
    let abs: Vec<f64> = v.iter().map(|x| x.abs()).collect();
    assert_eq!(pairwise_sum(&v), 2.758191970642642);
    assert_eq!(pairwise_sum(&abs), 610.4360992428847);
    // `int(rate * duration)` truncates: 0.01 s at 16 kHz is 160 samples.
    assert_eq!(create_sinewave(0.01, 16_000).len(), 160);
    assert!(create_sinewave(0.0, 24_000).is_empty());
    assert!(create_sinewave(f64::NAN, 24_000).is_empty());
    assert!(create_sinewave(-1.0, 24_000).is_empty());
}
