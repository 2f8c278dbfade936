//! Phonemes → words, for word timestamps: which word of its clause each
//! phoneme character of the model's input belongs to.
//!
//! espeak-ng prints one phoneme word per text word, except that it joins
//! some short words ("of the" → `ʌvðə`, "in the" → `ɪnðə`) and may split
//! others. Where a clause's counts agree the words map one to one; where
//! they do not, each text word is phonemized alone and the clause's phoneme
//! words are matched to runs of them, left to right, by edit distance.

/// Stress and length marks: no sound of their own, ignored when comparing.
fn is_mark(c: char) -> bool {
    matches!(c, 'ˈ' | 'ˌ' | 'ː' | 'ˑ')
}

/// Clause punctuation the frontend appends after a clause's phonemes.
pub fn is_punct(c: char) -> bool {
    c.is_ascii_punctuation() || matches!(c, '—' | '…' | '“' | '”' | '‘' | '’' | '«' | '»')
}

/// The words of a clause's text that are spoken: whitespace-separated,
/// quotes and brackets trimmed, those without a letter or digit skipped.
pub fn clause_words(text: &str) -> Vec<String> {
    text.split_whitespace()
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()))
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

/// A phoneme word of the clause: its character range (in chars) in the clause string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Piece {
    start: usize,
    end: usize,
}

/// The phoneme words of `clause` that carry sound (punctuation-only ones skipped).
fn pieces(chars: &[char]) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == ' ' {
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len() && chars[i] != ' ' {
            i += 1;
        }
        if chars[start..i].iter().any(|&c| !is_punct(c) && !is_mark(c)) {
            out.push(Piece { start, end: i });
        }
    }
    out
}

fn sounds(s: impl Iterator<Item = char>) -> Vec<char> {
    s.filter(|&c| c != ' ' && !is_mark(c) && !is_punct(c))
        .collect()
}

/// Levenshtein distance of two short phoneme strings.
fn distance(a: &[char], b: &[char]) -> usize {
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, &ca) in a.iter().enumerate() {
        let mut diag = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let next = (diag + usize::from(ca != cb))
                .min(row[j] + 1)
                .min(row[j + 1] + 1);
            diag = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

/// Per character of `clause`, the index of its word when the clause has as
/// many sounding phoneme words as `words` text words; `None` otherwise.
/// Spaces and punctuation get `None` in the labels.
pub fn label_direct(clause: &str, words: usize) -> Option<Vec<Option<usize>>> {
    let chars: Vec<char> = clause.chars().collect();
    let pieces = pieces(&chars);
    if pieces.len() != words {
        return None;
    }
    let mut labels = vec![None; chars.len()];
    for (w, p) in pieces.iter().enumerate() {
        for (i, label) in labels.iter_mut().enumerate().take(p.end).skip(p.start) {
            if !is_punct(chars[i]) {
                *label = Some(w);
            }
        }
    }
    Some(labels)
}

/// Most words one phoneme word may stand for, or phoneme words one word may become.
const MAX_RUN: usize = 4;

/// Per character of `clause`, the index of its word, matching the clause's
/// phoneme words to `alone` (each text word phonemized on its own) left to
/// right: each step takes the run (several words joined into one phoneme
/// word, or one word split over several) whose phonemes are closest.
/// Every word gets at least one character while characters last.
pub fn label_aligned(clause: &str, alone: &[String]) -> Vec<Option<usize>> {
    let chars: Vec<char> = clause.chars().collect();
    let pieces = pieces(&chars);
    let mut labels = vec![None; chars.len()];
    let alone: Vec<Vec<char>> = alone.iter().map(|w| sounds(w.chars())).collect();
    let (n, m) = (alone.len(), pieces.len());
    let (mut i, mut j) = (0, 0);
    let set = |labels: &mut Vec<Option<usize>>, p: Piece, from: usize, to: usize, w: usize| {
        for (k, label) in labels.iter_mut().enumerate().take(to.min(p.end)).skip(from) {
            if !is_punct(chars[k]) {
                *label = Some(w);
            }
        }
    };
    while i < n && j < m {
        let (words_left, pieces_left) = (n - i, m - j);
        // (words, pieces) of this step: one side is always 1.
        let mut best = (1, 1);
        let mut best_cost = f64::INFINITY;
        if pieces_left == 1 {
            best = (words_left, 1);
        } else if words_left == 1 {
            best = (1, pieces_left);
        } else {
            let max_words = MAX_RUN.min(words_left - 1);
            let max_pieces = MAX_RUN.min(pieces_left - 1);
            let runs = (1..=max_words)
                .map(|k| (k, 1))
                .chain((2..=max_pieces).map(|r| (1, r)));
            for (k, r) in runs {
                let said: Vec<char> = alone[i..i + k].iter().flatten().copied().collect();
                let heard = sounds(
                    pieces[j..j + r]
                        .iter()
                        .flat_map(|p| chars[p.start..p.end].iter().copied()),
                );
                let len = said.len().max(heard.len()).max(1) as f64;
                // A small bias to one-to-one keeps ties (and empty words) simple.
                let bias = if (k, r) == (1, 1) { 0.0 } else { 0.05 };
                let cost = distance(&said, &heard) as f64 / len + bias;
                if cost < best_cost {
                    best_cost = cost;
                    best = (k, r);
                }
            }
        }
        let (k, r) = best;
        if r > 1 {
            for p in &pieces[j..j + r] {
                set(&mut labels, *p, p.start, p.end, i);
            }
        } else {
            // One phoneme word for k words: split its characters in
            // proportion to the words' own phoneme lengths.
            let p = pieces[j];
            let weights: Vec<usize> = alone[i..i + k].iter().map(|w| w.len().max(1)).collect();
            let total: usize = weights.iter().sum();
            let span = p.end - p.start;
            let mut at = p.start;
            let mut acc = 0;
            for (q, w) in weights.iter().enumerate() {
                acc += w;
                let to = if q + 1 == k {
                    p.end
                } else {
                    (p.start + span * acc / total).max(at + 1).min(p.end)
                };
                set(&mut labels, p, at, to, i + q);
                at = to;
            }
        }
        i += k;
        j += r;
    }
    labels
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words_of(clause: &str, labels: &[Option<usize>], names: &[&str]) -> Vec<String> {
        let chars: Vec<char> = clause.chars().collect();
        names
            .iter()
            .enumerate()
            .map(|(w, _)| {
                chars
                    .iter()
                    .zip(labels)
                    .filter(|(_, l)| **l == Some(w))
                    .map(|(c, _)| *c)
                    .collect()
            })
            .collect()
    }

    #[test]
    fn one_to_one_when_counts_agree() {
        let clause = "həlˈoʊ ðˈɛɹ,";
        let labels = label_direct(clause, 2).unwrap();
        assert_eq!(
            words_of(clause, &labels, &["hello", "there"]),
            ["həlˈoʊ", "ðˈɛɹ"]
        );
        assert_eq!(*labels.last().unwrap(), None);
        assert!(label_direct(clause, 3).is_none());
        // A standalone dash is punctuation, not a word.
        assert!(label_direct("wˈʌn  —", 1).is_some());
    }

    #[test]
    fn joined_words_are_split_back() {
        // espeak-ng: "the store of the city" → `ðə stˈoːɹ ʌvðə sˈɪɾi`.
        let clause = "ðə stˈoːɹ ʌvðə sˈɪɾi.";
        let alone: Vec<String> = ["ðə", "stˈoːɹ", "ʌv", "ðə", "sˈɪɾi"]
            .map(String::from)
            .to_vec();
        let labels = label_aligned(clause, &alone);
        let got = words_of(clause, &labels, &["the", "store", "of", "the", "city"]);
        assert_eq!(got, ["ðə", "stˈoːɹ", "ʌv", "ðə", "sˈɪɾi"]);
        assert_eq!(*labels.last().unwrap(), None);
    }

    #[test]
    fn a_word_split_in_two_keeps_both_halves() {
        let clause = "ɡˈʊd wˈɛl nˈoʊn θˈɪŋ";
        let alone: Vec<String> = ["ɡˈʊd", "wˈɛlnˈoʊn", "θˈɪŋ"].map(String::from).to_vec();
        let labels = label_aligned(clause, &alone);
        let got = words_of(clause, &labels, &["good", "well-known", "thing"]);
        assert_eq!(got, ["ɡˈʊd", "wˈɛlnˈoʊn", "θˈɪŋ"]);
    }

    #[test]
    fn every_word_gets_characters_while_they_last() {
        // More words than characters could ever separate: no panic, labels monotone.
        let alone: Vec<String> = ["a", "b", "c", "d", "e", "f"].map(String::from).to_vec();
        for clause in ["ab", "a b", "", " , ", "abcdef ghij"] {
            let labels = label_aligned(clause, &alone);
            assert_eq!(labels.len(), clause.chars().count());
            let seen: Vec<usize> = labels.iter().flatten().copied().collect();
            assert!(seen.windows(2).all(|w| w[0] <= w[1]), "{clause}: {seen:?}");
        }
        assert!(label_aligned("abc", &[]).iter().all(Option::is_none));
    }

    #[test]
    fn clause_words_skip_punctuation() {
        assert_eq!(
            clause_words("\"Well\" — it's 5 o'clock (sharp) & ok"),
            ["Well", "it's", "5", "o'clock", "sharp", "ok"]
        );
    }
}
