//! Kokoro text frontend and voice packs against the shared fixtures: the
//! fixture texts through espeak-ng must give exactly `tokens.npy`, and the
//! `jf_alpha` row chosen for each token count must equal `style.npy`.
//!
//! Needs `espeak-ng` (CI installs it) and the cached vocab and voices
//! (`cargo xtask fetch-models`; fetched here when missing).

use std::path::PathBuf;
use voxlane_actors::tts::frontend::{Frontend, FrontendError, Punctuation, Vocab, MAX_IDS, PAD};
use voxlane_actors::tts::voices::Voices;
use voxlane_runtime::fetch::{catalog, Fetcher};
use voxlane_runtime::io::read_npy;

fn fixture(case: usize, file: &str) -> PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/fixtures/kokoro")
        .join(format!("case{case}"))
        .join(file)
}

fn case_json(case: usize) -> serde_json::Value {
    let text = std::fs::read_to_string(fixture(case, "case.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn cached(artifact: &voxlane_runtime::fetch::Artifact<'static>) -> PathBuf {
    Fetcher::new()
        .and_then(|f| f.ensure(artifact, |_| {}))
        .unwrap_or_else(|e| {
            panic!(
                "fetch {}: {e} (run `cargo xtask fetch-models`)",
                artifact.file
            )
        })
}

fn vocab() -> Vocab {
    Vocab::load(cached(&catalog::KOKORO_VOCAB)).unwrap()
}

#[test]
fn fixture_texts_give_fixture_tokens() {
    let frontend = Frontend::new(vocab()).punctuation(Punctuation::Drop);
    for case in 0..3 {
        let json = case_json(case);
        let text = json["text"].as_str().unwrap();
        let t = frontend
            .tokenize(text)
            .unwrap_or_else(|e| panic!("case{case}: {e}"));
        assert_eq!(t.chunks.len(), 1, "case{case}");
        assert_eq!(
            t.chunks[0].phonemes,
            json["phonemes"].as_str().unwrap(),
            "case{case} phonemes"
        );
        let want = read_npy(fixture(case, "tokens.npy")).unwrap().to_i64();
        assert_eq!(t.chunks[0].tokens, want, "case{case} tokens");
        assert!(t.dropped.is_empty(), "case{case}: {:?}", t.dropped);
    }
}

#[test]
fn kept_punctuation_sits_after_its_clause() {
    let t = Frontend::new(vocab())
        .tokenize("Open the pod bay doors, please. I am afraid I can't do that!")
        .unwrap();
    assert_eq!(
        t.chunks[0].phonemes,
        "ˈoʊpən ðə pˈɑːd bˈeɪ dˈoːɹz, plˈiːz. aɪɐm ɐfɹˈeɪd aɪ kˈænt dˈuː ðˈæt!"
    );
}

#[test]
fn long_text_chunks_within_the_model_limit() {
    let text = [
        "The quick brown fox jumps over the lazy dog.",
        "Open the pod bay doors, please.",
        "In 1984, Dr. Smith paid $3.50 for 2 coffees.",
    ]
    .repeat(12)
    .join(" ");
    let t = Frontend::new(vocab()).tokenize(&text).unwrap();
    assert!(t.chunks.len() >= 2, "{} chunks", t.chunks.len());
    for c in &t.chunks {
        assert!((1..=MAX_IDS).contains(&c.len_unpadded()));
        assert_eq!((c.tokens[0], c.tokens[c.tokens.len() - 1]), (PAD, PAD));
        assert!(
            c.phonemes.ends_with('.'),
            "cut between sentences: {}",
            c.phonemes
        );
    }
}

#[test]
fn frontend_errors_are_typed() {
    let f = Frontend::new(vocab());
    assert!(matches!(f.tokenize(" \n "), Err(FrontendError::EmptyText)));
    let missing = Frontend::with_phonemizer(
        vocab(),
        voxlane_actors::tts::frontend::EspeakNg::new().program("/nonexistent/espeak-ng"),
    );
    let e = missing.tokenize("hello").unwrap_err();
    assert!(e.to_string().contains("install"), "{e}");
}

#[test]
fn fixture_styles_are_jf_alpha_rows() {
    let voices = Voices::open(cached(&catalog::KOKORO_VOICES_JA)).unwrap();
    assert!(voices.contains("jf_alpha"), "{:?}", voices.names());
    let pack = voices.select("jf_alpha").unwrap();
    assert_eq!(pack.rows(), 510);
    for case in 0..3 {
        let tokens = read_npy(fixture(case, "tokens.npy")).unwrap().to_i64();
        let style = pack.style(tokens.len() - 2).unwrap();
        let want = read_npy(fixture(case, "style.npy")).unwrap();
        assert_eq!(want.shape, [1, 256]);
        assert_eq!(style.0, want.to_f32(), "case{case}");
    }
    // A blend of a voice with itself is the voice (up to rounding).
    let blend = voices.select("jf_alpha:0.7,jf_alpha:0.3").unwrap();
    let max_diff = blend
        .as_slice()
        .iter()
        .zip(pack.as_slice())
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    assert!(max_diff < 1e-6, "{max_diff}");
    let mixed = voices.select("jf_alpha:0.7,jm_kumo:0.3").unwrap();
    let kumo = voices.select("jm_kumo").unwrap();
    let (a, k, m) = (pack.as_slice()[5], kumo.as_slice()[5], mixed.as_slice()[5]);
    assert!((m - (0.7 * a + 0.3 * k)).abs() < 1e-6, "{m} vs {a} {k}");
    let e = voices.select("jf_alpha:0.7,nobody:0.3").unwrap_err();
    assert!(e.to_string().contains("jm_kumo"), "{e}");
}
