//! Unigram segmentation: the best-scoring split of the normalized text into
//! pieces, by the library's `Model::EncodeOptimized` (the encoder it runs by
//! default), down to its arithmetic so that ties and near-ties resolve the
//! same way: path scores add in f32, rounding at every step. (That is what the
//! 0.2.3 wheel does, bisected with hand-made models; the v0.2.0 source would
//! sum in f64. The tests pin both this and the user-defined score.)
//!
//! For each end position it keeps the best path ending there, the first found
//! on a tie (so the path whose last piece starts earliest). A start position
//! offers every piece the trie finds at it; a character no single piece
//! covers becomes `<unk>` scored `min_score - 10`.

use super::model::{Piece, PieceType};
use super::trie::Trie;
use super::utf8::one_char_len;

/// sentencepiece's `kUnkPenalty`.
const UNK_PENALTY: f32 = 10.0;

/// A user-defined piece's score: 0.1 per byte, less 0.1, so it beats its
/// characters spelled out with typical (negative) scores.
///
/// Measured on sentencepiece 0.2.3 (bisecting the score at which `ee…e` as
/// single characters overtakes the user-defined `ee…e`: 0.1, 0.2, 0.7, 1.5
/// for 2, 3, 8, 16 bytes, whatever the other scores); the v0.2.0 source reads
/// `length * max_score - 0.1` instead. Computed in f64, then stored as f32.
fn user_defined_score(bytes: usize) -> f32 {
    (bytes as f64 * 0.1 - 0.1) as f32
}

/// What the segmenter needs to know about the vocabulary.
#[derive(Debug, Clone)]
pub(super) struct Segmenter {
    /// NORMAL, USER_DEFINED and UNUSED pieces.
    pub trie: Trie,
    pub unk_id: u32,
    /// The lowest NORMAL score (`f32::MAX` if none), as the library's `min_score`.
    pub min_score: f32,
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
                    let score = if piece.kind == PieceType::UserDefined {
                        user_defined_score(length)
                    } else {
                        piece.score
                    };
                    // All in f32, as the library: sums round at every step.
                    let candidate = score + score_here;
                    let target = &mut best[starts_at + length];
                    // Strictly better: on a tie the earlier start wins.
                    if target.starts_at == usize::MAX || candidate > target.score {
                        *target = BestPath {
                            id,
                            score: candidate,
                            starts_at,
                        };
                    }
                    has_single_char_piece |= length == char_len;
                });
            if !has_single_char_piece {
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
