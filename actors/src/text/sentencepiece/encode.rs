//! Unigram segmentation: the best-scoring split of the normalized text into
//! pieces, by the library's `Model::EncodeOptimized` (the encoder it runs by
//! default), reproduced down to its float arithmetic so ties and near-ties
//! resolve the same way.
//!
//! For each end position it keeps the best path ending there. A start position
//! offers every piece the trie finds at it; a character no single piece
//! covers becomes `<unk>` scored `min_score - 10`; a user-defined symbol
//! scores `len * max_score - 0.1` so that it is always taken.

use super::model::{Piece, PieceType};
use super::trie::Trie;
use super::utf8::one_char_len;

/// sentencepiece's `kUnkPenalty`.
const UNK_PENALTY: f32 = 10.0;

/// What the segmenter needs to know about the vocabulary.
#[derive(Debug, Clone)]
pub(super) struct Segmenter {
    /// NORMAL, USER_DEFINED and UNUSED pieces.
    pub trie: Trie,
    pub unk_id: u32,
    /// The lowest and highest NORMAL score, starting from `FLT_MAX` / `FLT_MIN` as the library does.
    pub min_score: f32,
    pub max_score: f32,
}

/// The best path ending at one position.
#[derive(Debug, Clone, Copy)]
struct BestPath {
    id: u32,
    score: f32,
    /// Where its last piece starts; `usize::MAX` before any path reaches here.
    starts_at: usize,
}

impl Segmenter {
    /// Splits `normalized` into `(start, end, id)` spans that tile it.
    pub fn segment(&self, normalized: &[u8], pieces: &[Piece]) -> Vec<(usize, usize, u32)> {
        let size = normalized.len();
        if size == 0 {
            return Vec::new();
        }
        let unset = BestPath {
            id: self.unk_id,
            score: 0.0,
            starts_at: usize::MAX,
        };
        let mut best = vec![unset; size + 1];
        let unk_score = self.min_score - UNK_PENALTY;
        let mut starts_at = 0;
        while starts_at < size {
            let score_here = best[starts_at].score;
            let char_len = one_char_len(normalized[starts_at]).min(size - starts_at);
            let mut has_single_char_piece = false;
            self.trie
                .for_each_prefix(&normalized[starts_at..], |length, id| {
                    let Some(piece) = pieces.get(id as usize) else {
                        return;
                    };
                    if piece.kind == PieceType::Unused {
                        return;
                    }
                    // The library's arithmetic: a user-defined score is
                    // `size_t * float - 0.1` (a double), so the sum is a double,
                    // compared with the stored float and then rounded to float.
                    let score = if piece.kind == PieceType::UserDefined {
                        f64::from(length as f32 * self.max_score) - 0.1
                    } else {
                        f64::from(piece.score)
                    };
                    let candidate = score + f64::from(score_here);
                    let target = &mut best[starts_at + length];
                    // Strictly better: on a tie the earlier start wins.
                    if target.starts_at == usize::MAX || candidate > f64::from(target.score) {
                        *target = BestPath {
                            id,
                            score: candidate as f32,
                            starts_at,
                        };
                    }
                    has_single_char_piece |= length == char_len;
                });
            if !has_single_char_piece {
                // Float arithmetic here, as in the library.
                let candidate = unk_score + score_here;
                let target = &mut best[starts_at + char_len];
                if target.starts_at == usize::MAX || candidate > target.score {
                    *target = BestPath {
                        id: self.unk_id,
                        score: candidate,
                        starts_at,
                    };
                }
            }
            starts_at += char_len;
        }

        let mut spans = Vec::new();
        let mut end = size;
        while end > 0 {
            let node = best[end];
            // Every position the walk lands on is reached; this only guards the loop.
            if node.starts_at >= end {
                break;
            }
            spans.push((node.starts_at, end, node.id));
            end = node.starts_at;
        }
        spans.reverse();
        spans
    }
}
