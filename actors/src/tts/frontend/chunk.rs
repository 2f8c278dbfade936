//! Packing phonemized clauses into model calls of at most `max` symbols.
//!
//! Whole sentences are packed first; a sentence longer than `max` is packed
//! by clauses, a clause longer than `max` by words, and only a single word
//! longer than `max` is cut mid-word. Pieces are joined by one space.
//!
//! Chunks also aim at `flush` symbols: a whole sentence that would carry
//! a non-empty chunk past `flush` starts a new one, and a chunk that
//! reaches `flush` ends with its sentence. Short sentences share a call
//! (prosody needs some context), long texts become about a sentence per
//! call, so the first audio comes after one sentence and a call's
//! workspace stays sentence-sized.

/// Chunks of at most `max` characters (each phoneme character is one token
/// id once unknown characters are gone) from sentences of clause strings.
pub fn chunk(sentences: &[Vec<String>], max: usize, flush: usize) -> Vec<String> {
    let mut packer = Packer {
        max: max.max(1),
        chunks: Vec::new(),
        current: String::new(),
        len: 0,
    };
    for sentence in sentences {
        let clauses: Vec<&str> = sentence
            .iter()
            .map(|c| c.trim())
            .filter(|c| !c.is_empty())
            .collect();
        let whole = clauses.join(" ");
        let n = whole.chars().count();
        if n <= packer.max {
            if packer.len > 0 && packer.len + 1 + n > flush.max(1) {
                packer.close();
            }
            packer.push(&whole);
            packer.end_sentence(flush);
            continue;
        }
        for clause in clauses {
            if clause.chars().count() <= packer.max {
                packer.push(clause);
                continue;
            }
            for word in clause.split(' ').filter(|w| !w.is_empty()) {
                for piece in cut(word, packer.max) {
                    packer.push(&piece);
                }
            }
        }
        packer.end_sentence(flush);
    }
    packer.finish()
}

/// Greedy packing of pieces (each at most `max` long) into chunks.
struct Packer {
    max: usize,
    chunks: Vec<String>,
    current: String,
    /// Characters in `current`.
    len: usize,
}

impl Packer {
    /// Append `piece` to the current chunk, or start a new one when it does not fit.
    fn push(&mut self, piece: &str) {
        let n = piece.chars().count();
        if n == 0 {
            return;
        }
        let needed = if self.len == 0 { n } else { self.len + 1 + n };
        if needed > self.max {
            if self.len > 0 {
                self.chunks.push(std::mem::take(&mut self.current));
            }
            self.current = piece.to_string();
            self.len = n;
        } else {
            if self.len > 0 {
                self.current.push(' ');
            }
            self.current.push_str(piece);
            self.len = needed;
        }
    }

    /// Close the current chunk at a sentence end once it holds `flush` symbols.
    fn end_sentence(&mut self, flush: usize) {
        if self.len >= flush.max(1) {
            self.close();
        }
    }

    /// End the current chunk (if any).
    fn close(&mut self) {
        if self.len > 0 {
            self.chunks.push(std::mem::take(&mut self.current));
            self.len = 0;
        }
    }

    fn finish(mut self) -> Vec<String> {
        if self.len > 0 {
            self.chunks.push(self.current);
        }
        self.chunks
    }
}

/// `word` cut into pieces of at most `max` characters.
fn cut(word: &str, max: usize) -> Vec<String> {
    let chars: Vec<char> = word.chars().collect();
    chars.chunks(max).map(|c| c.iter().collect()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(clauses: &[&str]) -> Vec<String> {
        clauses.iter().map(|c| c.to_string()).collect()
    }

    #[test]
    fn packs_sentences_then_clauses_then_words() {
        let sentences = vec![s(&["ab,", "cd."]), s(&["efgh."]), s(&["ij."])];
        // Everything fits: one chunk.
        assert_eq!(chunk(&sentences, 100, 100), vec!["ab, cd. efgh. ij."]);
        // Sentence boundaries are preferred.
        assert_eq!(chunk(&sentences, 8, 100), vec!["ab, cd.", "efgh.", "ij."]);
        assert_eq!(chunk(&sentences, 11, 100), vec!["ab, cd.", "efgh. ij."]);
        // A sentence longer than max is split at its clauses.
        assert_eq!(
            chunk(&sentences, 5, 100),
            vec!["ab,", "cd.", "efgh.", "ij."]
        );
        // A clause longer than max at its words, a word longer than max mid-word.
        assert_eq!(chunk(&[s(&["aa bb cc,"])], 5, 100), vec!["aa bb", "cc,"]);
        assert_eq!(chunk(&[s(&["abcdefg"])], 3, 100), vec!["abc", "def", "g"]);
        assert!(chunk(&[s(&["", " "])], 3, 100).is_empty());
        // A sentence end closes a chunk that reached the flush size.
        assert_eq!(chunk(&sentences, 100, 5), vec!["ab, cd.", "efgh.", "ij."]);
        assert_eq!(chunk(&sentences, 100, 13), vec!["ab, cd. efgh.", "ij."]);
        // A sentence that would carry the chunk past the flush size starts a new one.
        assert_eq!(chunk(&sentences, 100, 9), vec!["ab, cd.", "efgh. ij."]);
    }

    #[test]
    fn never_exceeds_max() {
        let words: Vec<String> = (0..400)
            .map(|i| format!("w{}", "x".repeat(i % 13)))
            .collect();
        let sentences: Vec<Vec<String>> =
            words.chunks(7).map(|w| vec![w.join(" ") + "."]).collect();
        for (max, flush) in [(1, 1), (5, 3), (17, 510), (510, 100), (510, 510)] {
            let chunks = chunk(&sentences, max, flush);
            assert!(chunks
                .iter()
                .all(|c| (1..=max).contains(&c.chars().count())));
            // Nothing lost but the spaces at cuts.
            let joined: String = chunks.concat().chars().filter(|c| *c != ' ').collect();
            let all: String = sentences
                .concat()
                .concat()
                .chars()
                .filter(|c| *c != ' ')
                .collect();
            assert_eq!(joined, all, "max {max}");
        }
    }
}
