//! Frontend tests on a stand-in phonemizer (letters are their own phonemes);
//! the espeak-ng fixture tests live in `tests/tests/tts/tts_frontend.rs`.

use super::*;
use std::cell::RefCell;
use std::path::Path;

/// Lowercases letters; records what it was asked.
#[derive(Default)]
struct Letters {
    seen: RefCell<Vec<String>>,
}

impl Phonemizer for Letters {
    fn phonemize(&self, clauses: &[&str]) -> Result<Vec<String>, FrontendError> {
        self.seen
            .borrow_mut()
            .extend(clauses.iter().map(|c| c.to_string()));
        Ok(clauses.iter().map(|c| c.to_lowercase()).collect())
    }
}

fn vocab() -> Vocab {
    let mut entries = vec![
        r#"" ": 16"#.to_string(),
        r#"",": 3"#.into(),
        r#"".": 4"#.into(),
    ];
    entries.extend(('a'..='z').map(|c| format!(r#""{c}": {}"#, 43 + (c as u32 - 'a' as u32))));
    let json = format!(r#"{{"vocab": {{{}}}}}"#, entries.join(", "));
    Vocab::from_json(&json, Path::new("test-vocab.json")).unwrap()
}

fn frontend() -> Frontend<Letters> {
    Frontend::with_phonemizer(vocab(), Letters::default())
}

#[test]
fn pads_and_keeps_punctuation() {
    let t = frontend().tokenize("Hi, you!").unwrap();
    assert_eq!(t.chunks.len(), 1);
    // "!" is not in this vocab, so only the comma survives.
    assert_eq!(t.chunks[0].phonemes, "hi, you");
    let v = vocab();
    let mut expected = vec![PAD];
    expected.extend(v.encode("hi, you"));
    expected.push(PAD);
    assert_eq!(t.chunks[0].tokens, expected);
    assert_eq!(t.chunks[0].style_row(), "hi, you".len() - 1);
    let t = frontend()
        .punctuation(Punctuation::Drop)
        .tokenize("Hi, you.")
        .unwrap();
    assert_eq!(t.chunks[0].phonemes, "hi you");
}

#[test]
fn reports_dropped_characters() {
    let t = frontend().tokenize("Héllo wörld").unwrap();
    assert_eq!(t.chunks[0].phonemes, "hllo wrld");
    assert_eq!(t.dropped, vec!['é', 'ö']);
}

#[test]
fn typed_errors() {
    assert!(matches!(
        frontend().tokenize("  \n\t "),
        Err(FrontendError::EmptyText)
    ));
    assert!(matches!(
        frontend().tokenize("... ,!"),
        Err(FrontendError::EmptyText)
    ));
    let e = frontend().tokenize("日本語").unwrap_err();
    assert!(matches!(e, FrontendError::NoPhonemes { .. }), "{e}");
    let e = Vocab::from_json("{}", Path::new("v.json")).unwrap_err();
    assert!(matches!(e, FrontendError::VocabFormat { .. }), "{e}");
    let e = Vocab::load("/nonexistent/vocab.json").unwrap_err();
    assert!(matches!(e, FrontendError::VocabIo { .. }), "{e}");
}

#[test]
fn phonemizer_sees_normalised_clauses() {
    let f = frontend();
    f.tokenize("Dr. Smith has 2 cats, 1 dog.").unwrap();
    assert_eq!(
        *f.phonemizer().seen.borrow(),
        vec!["Doctor Smith has two cats", "one dog"]
    );
}

#[test]
fn long_text_chunks_at_sentences_within_the_limit() {
    let sentence = "the quick brown fox jumps over the lazy dog.";
    let text = vec![sentence; 40].join(" ");
    let t = frontend().tokenize(&text).unwrap();
    assert!(t.chunks.len() > 1);
    for c in &t.chunks {
        assert!(c.len_unpadded() <= MAX_IDS, "{}", c.len_unpadded());
        assert_eq!((c.tokens[0], *c.tokens.last().unwrap()), (PAD, PAD));
        assert!(c.tokens[1..c.tokens.len() - 1].iter().all(|&t| t > 0));
        // Cut between sentences: each chunk ends one.
        assert!(c.phonemes.ends_with('.'), "{}", c.phonemes);
    }
    let small = frontend().max_ids(50).tokenize(&text).unwrap();
    assert_eq!(small.chunks.len(), 40);
    assert!(small.chunks.iter().all(|c| c.len_unpadded() <= 50));
    // Dense packing (no sentence flush) needs fewer, longer calls.
    let dense = frontend().sentence_flush(MAX_IDS).tokenize(&text).unwrap();
    assert!(dense.chunks.len() < t.chunks.len());
    assert!(dense.chunks.iter().all(|c| c.len_unpadded() <= MAX_IDS));
}

#[test]
fn sentences_end_chunks_once_they_reach_the_flush_size() {
    let sentence = "the quick brown fox jumps over the lazy dog.";
    let text = [sentence; 6].join(" ");
    let f = frontend().sentence_flush(2 * sentence.len() + 1);
    let t = f.tokenize(&text).unwrap();
    // Phonemes here equal the text, so two sentences reach the flush size.
    assert_eq!(t.chunks.len(), 3, "{:?}", t.chunks);
    for c in &t.chunks {
        assert_eq!(c.phonemes, [sentence; 2].join(" "));
    }
    // A short sentence joins the next one.
    let t = frontend()
        .tokenize("Hi. the quick brown fox jumps over the lazy dog.")
        .unwrap();
    assert_eq!(t.chunks.len(), 1);
}

proptest::proptest! {
    /// Any text gives chunks within the limit, or a typed error; never a panic.
    #[test]
    fn any_text_tokenizes_or_fails_typed(
        text in "(\\PC|[0-9$.,:%-]|Mr\\. |etc\\. |\\.\\.\\.){0,80}",
        max in 1usize..40,
    ) {
        match frontend().max_ids(max).tokenize(&text) {
            Ok(t) => {
                proptest::prop_assert!(!t.chunks.is_empty());
                for c in &t.chunks {
                    proptest::prop_assert!((1..=max).contains(&c.len_unpadded()));
                    proptest::prop_assert_eq!(c.tokens.len(), c.phonemes.chars().count() + 2);
                }
            }
            Err(FrontendError::EmptyText | FrontendError::NoPhonemes { .. }) => {}
            Err(e) => proptest::prop_assert!(false, "unexpected error {e}"),
        }
    }
}

/// Like [`Letters`], but joins "of the" into one word as espeak-ng does
/// (`ʌvðə`), so the aligned tokenizer must split it back.
struct Joining;

impl Phonemizer for Joining {
    fn phonemize(&self, clauses: &[&str]) -> Result<Vec<String>, FrontendError> {
        Ok(clauses
            .iter()
            .map(|c| c.to_lowercase().replace("of the", "ofthe"))
            .collect())
    }
}

/// Each word's text as its tokens spell it (token t is phoneme character t - 1).
fn spelled(t: &Tokenized) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for chunk in &t.chunks {
        let chars: Vec<char> = chunk.phonemes.chars().collect();
        for w in &chunk.words {
            let text: String = chars[w.tokens.start - 1..w.tokens.end - 1].iter().collect();
            out.push((t.words[w.word].clone(), text));
        }
    }
    out
}

#[test]
fn aligned_words_own_their_tokens() {
    let f = Frontend::with_phonemizer(vocab(), Joining);
    let t = f
        .tokenize_aligned("The end of the road, a store of the city. Next one.")
        .unwrap();
    assert_eq!(
        t.words,
        ["The", "end", "of", "the", "road", "a", "store", "of", "the", "city", "Next", "one"]
    );
    let got = spelled(&t);
    let want: Vec<(String, String)> = t
        .words
        .iter()
        .map(|w| (w.clone(), w.to_lowercase()))
        .collect();
    assert_eq!(got, want);
    // Plain tokenize finds no words and the same tokens.
    let plain = f
        .tokenize("The end of the road, a store of the city. Next one.")
        .unwrap();
    assert!(plain.words.is_empty() && plain.chunks.iter().all(|c| c.words.is_empty()));
    let tokens = |t: &Tokenized| {
        t.chunks
            .iter()
            .map(|c| c.tokens.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(tokens(&plain), tokens(&t));
}

#[test]
fn aligned_words_follow_their_chunks() {
    // Small calls: chunks split at clauses and inside long words.
    let f = Frontend::with_phonemizer(vocab(), Joining).max_ids(7);
    let t = f
        .tokenize_aligned("Hello there, wonderful of the world.")
        .unwrap();
    assert!(t.chunks.len() > 3);
    let got = spelled(&t);
    // A word cut between two calls appears once in each, its pieces in order.
    let mut joined: Vec<(String, String)> = Vec::new();
    for (w, s) in got {
        match joined.last_mut() {
            Some((lw, ls)) if *lw == w => ls.push_str(&s),
            _ => joined.push((w, s)),
        }
    }
    let want: Vec<(String, String)> = t
        .words
        .iter()
        .map(|w| (w.clone(), w.to_lowercase()))
        .collect();
    assert_eq!(joined, want);
    for chunk in &t.chunks {
        for w in &chunk.words {
            assert!(w.tokens.start >= 1 && w.tokens.end < chunk.tokens.len());
        }
    }
}
