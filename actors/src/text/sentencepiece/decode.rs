//! Decoding (the library's `Decode`): pieces joined, `▁` back to spaces, the
//! dummy prefix dropped, control pieces silent, `<unk>` as its surface, runs
//! of `<0xXX>` pieces as UTF-8 (each malformed byte as U+FFFD), then the
//! model's denormalizer if it has one.

use super::model::PieceType;
use super::utf8::valid_char_len;
use super::{byte_of_piece, SentencePiece, SpmError};

impl SentencePiece {
    /// Text of `ids`, as the library's `decode(ids)`; an id past the vocabulary is an error.
    pub fn decode(&self, ids: &[u32]) -> Result<String, SpmError> {
        let mut tokens = Vec::with_capacity(ids.len());
        for &id in ids {
            let piece = self.id_to_piece(id).ok_or(SpmError::IdOutOfRange {
                id,
                vocab_size: self.pieces.len(),
            })?;
            tokens.push((piece, id));
        }
        Ok(self.decode_tokens(&tokens))
    }

    /// Text of `pieces`, as the library's `decode(pieces)`: a piece not in the vocabulary stays as it is.
    pub fn decode_pieces<S: AsRef<str>>(&self, pieces: &[S]) -> String {
        let tokens: Vec<(&str, u32)> = pieces
            .iter()
            .map(|p| {
                let p = p.as_ref();
                (p, self.ids.get(p).copied().unwrap_or(self.segmenter.unk_id))
            })
            .collect();
        self.decode_tokens(&tokens)
    }

    /// The library's `Decode` over `(piece, id)` pairs.
    fn decode_tokens(&self, tokens: &[(&str, u32)]) -> String {
        let mut text = String::new();
        let mut bytes = Vec::new();
        // Only the first piece's leading `▁` (the dummy prefix) is dropped; with
        // `remove_extra_whitespaces`, every leading `▁` until some text appears.
        let mut is_bos_ws = true;
        let mut bos_ws_seen = false;
        for &(piece, id) in tokens {
            let kind = self.kind(id);
            if kind == Some(PieceType::Byte) {
                if let Some(byte) = byte_of_piece(piece) {
                    bytes.push(byte);
                }
                continue;
            }
            push_bytes_lossy(&mut text, &mut bytes);
            if bos_ws_seen || !text.is_empty() {
                is_bos_ws = false;
            }
            bos_ws_seen = false;
            match kind {
                Some(PieceType::Control) => {}
                Some(PieceType::Unknown) => {
                    if self.id_to_piece(id) == Some(piece) {
                        text.push_str(&self.unk_surface);
                    } else {
                        text.push_str(piece);
                    }
                }
                _ => {
                    let mut piece = piece;
                    if is_bos_ws && (self.add_dummy_prefix || self.remove_extra_whitespaces) {
                        if let Some(rest) = piece.strip_prefix('\u{2581}') {
                            piece = rest;
                            bos_ws_seen = !self.remove_extra_whitespaces;
                        }
                    }
                    text.push_str(&piece.replace('\u{2581}', " "));
                }
            }
        }
        push_bytes_lossy(&mut text, &mut bytes);
        match &self.denormalizer {
            Some(denormalizer) => {
                String::from_utf8_lossy(&denormalizer.normalize(text.as_bytes())).into_owned()
            }
            None => text,
        }
    }
}

/// Appends byte pieces as UTF-8, each malformed byte as U+FFFD (the library's rule,
/// which differs from `from_utf8_lossy` on truncated sequences), and clears them.
fn push_bytes_lossy(text: &mut String, bytes: &mut Vec<u8>) {
    let mut rest = &bytes[..];
    while !rest.is_empty() {
        match valid_char_len(rest) {
            Some(len) => {
                text.push_str(std::str::from_utf8(&rest[..len]).unwrap_or("\u{FFFD}"));
                rest = &rest[len..];
            }
            None => {
                text.push('\u{FFFD}');
                rest = &rest[1..];
            }
        }
    }
    bytes.clear();
}
