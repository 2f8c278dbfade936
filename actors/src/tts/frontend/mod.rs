//! Kokoro's text frontend: text → normalised text → sentences and clauses →
//! IPA phonemes (espeak-ng en-us) → token ids, in chunks the model accepts.
//!
//! ```text
//! normalize ─► split ─► Phonemizer (libespeak-ng, or the espeak-ng program) ─► Vocab ─► chunk ─► [0, ids…, 0]
//! ```
//!
//! Kokoro takes at most [`MAX_IDS`] ids per call (its position table has 512
//! rows, two of them for the 0 padding), so long text becomes several
//! [`Chunk`]s, cut at sentence boundaries where possible.

pub mod align;
pub mod chunk;
pub mod error;
pub mod espeak;
pub mod espeak_lib;
pub mod normalize;
pub mod numbers;
pub mod split;
pub mod vocab;

pub use error::FrontendError;
pub use espeak::{EspeakNg, Phonemizer};
pub use normalize::normalize;
pub use split::{split, Clause, Sentence};
pub use vocab::Vocab;

use std::collections::BTreeSet;

/// Most ids in one model call, padding excluded.
pub const MAX_IDS: usize = 510;

/// Ids after which a sentence end closes a chunk (about 5 s of speech).
pub const SENTENCE_FLUSH_IDS: usize = 100;

/// The padding token placed at both ends of every chunk.
pub const PAD: i64 = 0;

/// What happens to clause punctuation (`, ; : — … . ! ?`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Punctuation {
    /// Kept after its clause's phonemes, as kokoro (misaki) and kokoro-onnx
    /// do: `həlˈoʊ, wˈɜːld.`; the model pauses on it.
    #[default]
    Keep,
    /// Dropped, clauses joined by a space: exactly what
    /// `espeak-ng -q --ipa -v en-us` prints, the fixtures' convention.
    Drop,
}

/// One model call's input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// The phonemes of this chunk (only vocab characters).
    pub phonemes: String,
    /// Token ids, padded: `[0, ids…, 0]`.
    pub tokens: Vec<i64>,
    /// The words spoken in this chunk and their tokens, in order (empty
    /// unless tokenized with [`Frontend::tokenize_aligned`]).
    pub words: Vec<ChunkWord>,
}

/// A word of the text and the tokens it is spoken in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkWord {
    /// Index into [`Tokenized::words`].
    pub word: usize,
    /// Its tokens, as indices into [`Chunk::tokens`] (so never the leading pad).
    pub tokens: std::ops::Range<usize>,
}

impl Chunk {
    /// Number of ids without the padding.
    pub fn len_unpadded(&self) -> usize {
        self.tokens.len().saturating_sub(2)
    }

    /// The voice-pack row the style comes from: `len(ids) - 1`.
    pub fn style_row(&self) -> usize {
        self.len_unpadded().saturating_sub(1)
    }
}

/// The frontend's result for one text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tokenized {
    /// The text after normalisation.
    pub normalized: String,
    /// The model calls, in order; never empty.
    pub chunks: Vec<Chunk>,
    /// Phoneme characters that are not in the vocab and were dropped, sorted.
    pub dropped: Vec<char>,
    /// The spoken words of the normalised text, in order (empty unless
    /// tokenized with [`Frontend::tokenize_aligned`]).
    pub words: Vec<String>,
}

/// Text → token chunks, with a vocab and a [`Phonemizer`].
#[derive(Debug, Clone)]
pub struct Frontend<P = EspeakNg> {
    vocab: Vocab,
    phonemizer: P,
    punctuation: Punctuation,
    max_ids: usize,
    flush_ids: usize,
}

impl Frontend<EspeakNg> {
    /// A frontend on `espeak-ng` en-us, keeping punctuation, chunks of [`MAX_IDS`].
    pub fn new(vocab: Vocab) -> Self {
        Self::with_phonemizer(vocab, EspeakNg::new())
    }
}

impl<P: Phonemizer> Frontend<P> {
    /// A frontend on another phonemizer.
    pub fn with_phonemizer(vocab: Vocab, phonemizer: P) -> Self {
        Self {
            vocab,
            phonemizer,
            punctuation: Punctuation::default(),
            max_ids: MAX_IDS,
            flush_ids: SENTENCE_FLUSH_IDS,
        }
    }

    /// Choose what happens to clause punctuation.
    pub fn punctuation(mut self, punctuation: Punctuation) -> Self {
        self.punctuation = punctuation;
        self
    }

    /// Close a chunk at the first sentence end reaching `ids` ids
    /// ([`MAX_IDS`]: pack sentences as densely as the model allows).
    pub fn sentence_flush(mut self, ids: usize) -> Self {
        self.flush_ids = ids.clamp(1, MAX_IDS);
        self
    }

    /// Cap ids per chunk (clamped to `1..=MAX_IDS`).
    pub fn max_ids(mut self, max_ids: usize) -> Self {
        self.max_ids = max_ids.clamp(1, MAX_IDS);
        self
    }

    /// The phonemizer in use.
    pub fn phonemizer(&self) -> &P {
        &self.phonemizer
    }

    /// The vocab in use.
    pub fn vocab(&self) -> &Vocab {
        &self.vocab
    }

    /// Normalise, split, phonemize, map through the vocab and chunk `text`.
    pub fn tokenize(&self, text: &str) -> Result<Tokenized, FrontendError> {
        self.tokenize_with(text, false)
    }

    /// As [`Frontend::tokenize`], also finding which tokens speak each word
    /// (for word timestamps; costs a second phonemizer pass over the clauses
    /// where espeak-ng joined or split words).
    pub fn tokenize_aligned(&self, text: &str) -> Result<Tokenized, FrontendError> {
        self.tokenize_with(text, true)
    }

    fn tokenize_with(&self, text: &str, aligned: bool) -> Result<Tokenized, FrontendError> {
        let normalized = normalize(text);
        let sentences = split(&normalized);
        if sentences.is_empty() {
            return Err(FrontendError::EmptyText);
        }
        let clause_texts: Vec<&str> = sentences
            .iter()
            .flat_map(|s| s.clauses.iter().map(|c| c.text.as_str()))
            .collect();
        let phonemes = self.phonemizer.phonemize(&clause_texts)?;
        let mut dropped = BTreeSet::new();
        let mut next = phonemes.into_iter();
        let mut phonemized: Vec<Vec<String>> = Vec::with_capacity(sentences.len());
        // With `aligned`: each kept clause's phonemes and its spoken words.
        let mut spoken: Vec<(String, Vec<String>)> = Vec::new();
        for sentence in &sentences {
            let mut clauses = Vec::with_capacity(sentence.clauses.len());
            for clause in &sentence.clauses {
                let ipa = next.next().unwrap_or_default();
                let known = self.vocab.keep_known(&ipa, &mut dropped);
                let mut kept = known.trim().to_string();
                if kept.is_empty() {
                    continue;
                }
                if let (Punctuation::Keep, Some(p)) = (self.punctuation, clause.punct) {
                    if self.vocab.id(p).is_some() {
                        // A dash stands apart ("a — b"); other marks follow their word.
                        if p == '—' {
                            kept.push(' ');
                        }
                        kept.push(p);
                    }
                }
                if aligned {
                    spoken.push((kept.clone(), align::clause_words(&clause.text)));
                }
                clauses.push(kept);
            }
            if !clauses.is_empty() {
                phonemized.push(clauses);
            }
        }
        let (words, mut labels) = if aligned {
            self.word_labels(&spoken)?
        } else {
            (Vec::new(), Vec::new().into_iter())
        };
        let chunks: Vec<Chunk> = chunk::chunk(&phonemized, self.max_ids, self.flush_ids)
            .into_iter()
            .map(|phonemes| {
                let mut tokens = Vec::with_capacity(phonemes.len() + 2);
                tokens.push(PAD);
                tokens.extend(self.vocab.encode(&phonemes));
                tokens.push(PAD);
                let words = if aligned {
                    self.chunk_words(&phonemes, &mut labels)
                } else {
                    Vec::new()
                };
                Chunk {
                    phonemes,
                    tokens,
                    words,
                }
            })
            .collect();
        if chunks.is_empty() {
            return Err(FrontendError::NoPhonemes { text: normalized });
        }
        if !dropped.is_empty() {
            tracing::warn!(?dropped, "phonemes outside the Kokoro vocab were dropped");
        }
        Ok(Tokenized {
            normalized,
            chunks,
            dropped: dropped.into_iter().collect(),
            words,
        })
    }

    /// Every spoken word of the kept clauses, and per non-space character of
    /// those clauses (in order, as the chunks hold them) the word it speaks.
    #[allow(clippy::type_complexity)]
    fn word_labels(
        &self,
        spoken: &[(String, Vec<String>)],
    ) -> Result<(Vec<String>, std::vec::IntoIter<Option<usize>>), FrontendError> {
        let direct: Vec<Option<Vec<Option<usize>>>> = spoken
            .iter()
            .map(|(kept, words)| align::label_direct(kept, words.len()))
            .collect();
        // One phonemizer pass for the words of every clause that needs aligning.
        let alone: Vec<&str> = spoken
            .iter()
            .zip(&direct)
            .filter(|(_, d)| d.is_none())
            .flat_map(|((_, words), _)| words.iter().map(String::as_str))
            .collect();
        let mut alone = if alone.is_empty() {
            Vec::new()
        } else {
            let mut ignored = BTreeSet::new();
            self.phonemizer
                .phonemize(&alone)?
                .iter()
                .map(|p| self.vocab.keep_known(p, &mut ignored))
                .collect()
        }
        .into_iter();
        let mut words = Vec::new();
        let mut labels = Vec::new();
        for ((kept, clause_words), direct) in spoken.iter().zip(direct) {
            let local = match direct {
                Some(l) => l,
                None => {
                    let own: Vec<String> = alone.by_ref().take(clause_words.len()).collect();
                    align::label_aligned(kept, &own)
                }
            };
            let offset = words.len();
            labels.extend(
                kept.chars()
                    .zip(local)
                    .filter(|(c, _)| *c != ' ')
                    .map(|(_, l)| l.map(|w| w + offset)),
            );
            words.extend(clause_words.iter().cloned());
        }
        Ok((words, labels.into_iter()))
    }

    /// The words of one chunk and their token ranges, taking the labels of
    /// its non-space characters from `labels`.
    fn chunk_words(
        &self,
        phonemes: &str,
        labels: &mut std::vec::IntoIter<Option<usize>>,
    ) -> Vec<ChunkWord> {
        let mut out: Vec<ChunkWord> = Vec::new();
        // Token 0 is the leading pad.
        let mut token = 1;
        for c in phonemes.chars() {
            let label = if c == ' ' {
                None
            } else {
                labels.next().flatten()
            };
            if self.vocab.id(c).is_none() {
                continue;
            }
            if let Some(word) = label {
                match out.last_mut() {
                    Some(last) if last.word == word => last.tokens.end = token + 1,
                    _ => out.push(ChunkWord {
                        word,
                        tokens: token..token + 1,
                    }),
                }
            }
            token += 1;
        }
        out
    }
}

#[cfg(test)]
mod tests;
