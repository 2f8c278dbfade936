//! A SentencePiece tokenizer for unigram `.model` files (Kyutai's
//! `tokenizer_spm_32k_3.model` and the like), equal to the Python
//! `sentencepiece` library's `encode` / `decode`, without its C++.
//!
//! ```text
//! text ─► normalize (charsmap, whitespace, ▁) ─► Viterbi over the piece trie ─► ids
//! ids ─► pieces (▁ → space, control → "", <unk> → " ⁇ ", <0xXX> → bytes) ─► text
//! ```
//!
//! Not replicated: sampling and n-best encoding, `extra_options`
//! (`bos:eos:reverse`), the load-time self test, BPE / WORD / CHAR models.

mod decode;
mod encode;
mod error;
mod model;
mod normalize;
mod trie;
mod utf8;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::path::Path;

use encode::Segmenter;
use model::{ModelProto, Piece, PieceType};
use normalize::Normalizer;
use trie::Trie;

pub use error::SpmError;

/// What `<unk>` decodes to unless the model says otherwise: U+2047 between spaces.
const DEFAULT_UNK_SURFACE: &str = " \u{2047} ";

/// A loaded unigram SentencePiece model.
#[derive(Debug, Clone)]
pub struct SentencePiece {
    pieces: Vec<Piece>,
    /// Every piece string to its id.
    ids: HashMap<String, u32>,
    segmenter: Segmenter,
    normalizer: Normalizer,
    /// Applied to decoded text when the model has a `denormalizer_spec` charsmap.
    denormalizer: Option<Normalizer>,
    /// The ids of `<0x00>` … `<0xFF>` when the model falls back to bytes.
    byte_ids: Option<Vec<u32>>,
    unk_surface: String,
    bos_id: Option<u32>,
    eos_id: Option<u32>,
    pad_id: Option<u32>,
    normalizer_name: String,
    add_dummy_prefix: bool,
    remove_extra_whitespaces: bool,
}

/// One encoded token: its id and where its piece text comes from.
#[derive(Debug, Clone, Copy)]
struct Token {
    id: u32,
    surface: Surface,
}

#[derive(Debug, Clone, Copy)]
enum Surface {
    /// Bytes `start..end` of the normalized text.
    Span(usize, usize),
    /// One byte of an unknown character, as `<0xXX>`.
    Byte(u8),
}

impl SentencePiece {
    /// Reads a `.model` file.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, SpmError> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|source| SpmError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_bytes(&bytes)
    }

    /// Parses a serialized `ModelProto` and checks it as the library's loader does.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, SpmError> {
        let proto = ModelProto::parse(bytes)?;
        if proto.trainer.model_type != 1 {
            return Err(SpmError::UnsupportedModelType(proto.trainer.model_type));
        }
        let pieces = proto.pieces;
        if pieces.is_empty() {
            return Err(SpmError::NoPieces);
        }
        if u32::try_from(pieces.len()).is_err() {
            return Err(SpmError::TooManyPieces {
                count: pieces.len(),
            });
        }

        let mut ids = HashMap::with_capacity(pieces.len());
        let mut unk_ids = Vec::new();
        let mut byte_ids = [None; 256];
        for (index, piece) in pieces.iter().enumerate() {
            let id = index as u32;
            if piece.piece.is_empty() {
                return Err(SpmError::EmptyPiece { index });
            }
            if ids.insert(piece.piece.clone(), id).is_some() {
                return Err(SpmError::DuplicatePiece {
                    piece: piece.piece.clone(),
                });
            }
            match piece.kind {
                PieceType::Unknown => unk_ids.push(id),
                PieceType::Byte => {
                    if !proto.trainer.byte_fallback {
                        return Err(SpmError::BytePieceWithoutFallback {
                            piece: piece.piece.clone(),
                        });
                    }
                    let byte =
                        byte_of_piece(&piece.piece).ok_or_else(|| SpmError::InvalidBytePiece {
                            piece: piece.piece.clone(),
                        })?;
                    byte_ids[usize::from(byte)] = Some(id);
                }
                _ => {}
            }
        }
        let unk_id = match unk_ids[..] {
            [id] => id,
            _ => {
                return Err(SpmError::UnknownPieceCount {
                    count: unk_ids.len(),
                })
            }
        };
        let byte_ids = if proto.trainer.byte_fallback {
            let mut all = Vec::with_capacity(256);
            for (byte, id) in (0..=255u8).zip(byte_ids) {
                all.push(id.ok_or(SpmError::MissingBytePiece { byte })?);
            }
            Some(all)
        } else {
            None
        };

        let segmenter = build_segmenter(&pieces, unk_id)?;
        let user_symbols = pieces
            .iter()
            .enumerate()
            .filter(|(_, p)| p.kind == PieceType::UserDefined)
            .map(|(id, p)| (p.piece.as_bytes(), id as u32))
            .collect::<Vec<_>>();
        let user_symbols = (!user_symbols.is_empty()).then(|| Trie::new(user_symbols));
        let normalizer = Normalizer::new(
            &proto.normalizer,
            proto.trainer.treat_whitespace_as_suffix,
            user_symbols,
        )?;
        let denormalizer = match &proto.denormalizer {
            Some(spec) if !spec.precompiled_charsmap.is_empty() => {
                Some(Normalizer::new(spec, false, None)?)
            }
            _ => None,
        };

        // bos/eos/pad: the named piece (or its default name), if it is a control piece.
        let control_id = |name: &str, default: &str| {
            let name = if name.is_empty() { default } else { name };
            ids.get(name).copied().filter(|&id| {
                pieces
                    .get(id as usize)
                    .is_some_and(|p| p.kind == PieceType::Control)
            })
        };
        let bos_id = control_id(&proto.trainer.bos_piece, "<s>");
        let eos_id = control_id(&proto.trainer.eos_piece, "</s>");
        let pad_id = control_id(&proto.trainer.pad_piece, "<pad>");

        Ok(Self {
            segmenter,
            normalizer,
            denormalizer,
            byte_ids,
            unk_surface: proto
                .trainer
                .unk_surface
                .unwrap_or_else(|| DEFAULT_UNK_SURFACE.to_string()),
            bos_id,
            eos_id,
            pad_id,
            normalizer_name: proto.normalizer.name,
            add_dummy_prefix: proto.normalizer.add_dummy_prefix,
            remove_extra_whitespaces: proto.normalizer.remove_extra_whitespaces,
            pieces,
            ids,
        })
    }

    /// Token ids of `text`, as the library's `encode(text)`.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        self.tokens(text).1.iter().map(|t| t.id).collect()
    }

    /// Pieces of `text`, as the library's `encode(text, out_type=str)`: an
    /// unknown run is its own normalized text, not `<unk>`.
    pub fn encode_pieces(&self, text: &str) -> Vec<String> {
        let (normalized, tokens) = self.tokens(text);
        tokens
            .iter()
            .map(|t| match t.surface {
                Surface::Span(start, end) => {
                    String::from_utf8_lossy(&normalized[start..end]).into_owned()
                }
                Surface::Byte(byte) => format!("<0x{byte:02X}>"),
            })
            .collect()
    }

    /// The normalized text the encoder segments (spaces as `▁`), as the library's `normalize`.
    pub fn normalize(&self, text: &str) -> String {
        String::from_utf8_lossy(&self.normalizer.normalize(text.as_bytes())).into_owned()
    }

    /// The piece string of `id`.
    pub fn id_to_piece(&self, id: u32) -> Option<&str> {
        self.pieces.get(id as usize).map(|p| p.piece.as_str())
    }

    /// The id of `piece` (`None` where the library would answer the unknown id).
    pub fn piece_to_id(&self, piece: &str) -> Option<u32> {
        self.ids.get(piece).copied()
    }

    /// Number of pieces (ids run `0..vocab_size`).
    pub fn vocab_size(&self) -> usize {
        self.pieces.len()
    }

    /// The id unknown text encodes to.
    pub fn unk_id(&self) -> u32 {
        self.segmenter.unk_id
    }

    /// The beginning-of-sentence control id, if the model has one.
    pub fn bos_id(&self) -> Option<u32> {
        self.bos_id
    }

    /// The end-of-sentence control id, if the model has one.
    pub fn eos_id(&self) -> Option<u32> {
        self.eos_id
    }

    /// The padding control id, if the model has one.
    pub fn pad_id(&self) -> Option<u32> {
        self.pad_id
    }

    /// Whether `id` is a control piece (`<s>`, `</s>`, …), which decodes to nothing.
    pub fn is_control(&self, id: u32) -> bool {
        self.kind(id) == Some(PieceType::Control)
    }

    /// The normalizer's name in the model (`nmt_nfkc`, `identity`, …); informational.
    pub fn normalizer_name(&self) -> &str {
        &self.normalizer_name
    }

    fn kind(&self, id: u32) -> Option<PieceType> {
        self.pieces.get(id as usize).map(|p| p.kind)
    }

    /// Normalizes and segments `text`; tokens point into the returned normalized bytes.
    fn tokens(&self, text: &str) -> (Vec<u8>, Vec<Token>) {
        let normalized = self.normalizer.normalize(text.as_bytes());
        let spans = self.segmenter.segment(&normalized, &self.pieces);
        let unk_id = self.segmenter.unk_id;
        let mut tokens: Vec<Token> = Vec::with_capacity(spans.len());
        let mut prev_unk = false;
        for (start, end, id) in spans {
            let is_unk = id == unk_id;
            match (&self.byte_ids, tokens.last_mut()) {
                // Byte fallback: an unknown character becomes its UTF-8 bytes.
                (Some(byte_ids), _) if is_unk => {
                    tokens.extend(normalized[start..end].iter().map(|&b| Token {
                        id: byte_ids[usize::from(b)],
                        surface: Surface::Byte(b),
                    }));
                }
                // A run of unknown characters is one `<unk>`, as the library merges them.
                (None, Some(last)) if prev_unk && is_unk => {
                    if let Surface::Span(_, last_end) = &mut last.surface {
                        *last_end = end;
                    }
                }
                _ => tokens.push(Token {
                    id,
                    surface: Surface::Span(start, end),
                }),
            }
            prev_unk = is_unk;
        }
        (normalized, tokens)
    }
}

/// The segmenter over the NORMAL, USER_DEFINED and UNUSED pieces.
fn build_segmenter(pieces: &[Piece], unk_id: u32) -> Result<Segmenter, SpmError> {
    let segment_pieces = pieces
        .iter()
        .enumerate()
        .filter(|(_, p)| {
            matches!(
                p.kind,
                PieceType::Normal | PieceType::UserDefined | PieceType::Unused
            )
        })
        .map(|(id, p)| (p.piece.as_bytes(), id as u32))
        .collect::<Vec<_>>();
    if segment_pieces.is_empty() {
        return Err(SpmError::NoSegmentPieces);
    }
    // `std::min` from `FLT_MAX`, as the library (a NaN score never wins).
    let min_score = pieces
        .iter()
        .filter(|p| p.kind == PieceType::Normal)
        .fold(f32::MAX, |min, p| if p.score < min { p.score } else { min });
    Ok(Segmenter {
        trie: Trie::new(segment_pieces),
        unk_id,
        min_score,
    })
}

/// The byte of a `<0xXX>` piece (upper-case hex, as the library writes them).
fn byte_of_piece(piece: &str) -> Option<u8> {
    let hex = piece.strip_prefix("<0x")?.strip_suffix('>')?;
    let is_upper_hex = |c: u8| c.is_ascii_digit() || (b'A'..=b'F').contains(&c);
    if hex.len() != 2 || !hex.bytes().all(is_upper_hex) {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}
