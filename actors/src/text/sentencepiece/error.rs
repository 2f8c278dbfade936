//! Why a SentencePiece model could not be loaded, or ids not decoded.

use std::path::PathBuf;

/// A SentencePiece error.
#[derive(Debug, thiserror::Error)]
pub enum SpmError {
    /// The model file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The model file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The protobuf ends inside a field (a cut-off file, or a length that overruns its message).
    #[error("truncated protobuf: a field at byte {offset} of its message runs past the end")]
    TruncatedProtobuf {
        /// Where the field starts to overrun, within its (sub)message.
        offset: usize,
    },
    /// Bytes that are not protobuf wire format.
    #[error("malformed protobuf at byte {offset} of its message: {detail}")]
    MalformedProtobuf {
        /// Where, within its (sub)message.
        offset: usize,
        /// What is wrong.
        detail: &'static str,
    },
    /// A string field that is not UTF-8.
    #[error("the {field} field is not UTF-8")]
    InvalidUtf8 {
        /// The field.
        field: &'static str,
    },
    /// A piece type outside NORMAL=1 … BYTE=6.
    #[error("piece {index} has type {value}, not one of 1..=6")]
    InvalidPieceType {
        /// The piece's id.
        index: usize,
        /// Its type value.
        value: i32,
    },
    /// Not a unigram model (the only kind this tokenizer runs).
    #[error("model type {0} is not unigram (1); BPE=2, WORD=3, CHAR=4 are not supported")]
    UnsupportedModelType(i32),
    /// More pieces than `u32` ids can number.
    #[error("the model has {count} pieces, more than u32 ids can number")]
    TooManyPieces {
        /// How many it has.
        count: usize,
    },
    /// The model has no pieces at all.
    #[error("the model has no pieces")]
    NoPieces,
    /// A piece with an empty string.
    #[error("piece {index} is empty")]
    EmptyPiece {
        /// The piece's id.
        index: usize,
    },
    /// The same piece string twice.
    #[error("piece {piece:?} is defined twice")]
    DuplicatePiece {
        /// The piece.
        piece: String,
    },
    /// No piece of type UNKNOWN, or more than one.
    #[error("the model must have exactly one unknown piece, it has {count}")]
    UnknownPieceCount {
        /// How many it has.
        count: usize,
    },
    /// No NORMAL, USER_DEFINED or UNUSED piece to segment text into.
    #[error("the model has no normal, user-defined or unused pieces")]
    NoSegmentPieces,
    /// A BYTE piece in a model without `byte_fallback`.
    #[error("byte piece {piece:?} found although byte_fallback is off")]
    BytePieceWithoutFallback {
        /// The piece.
        piece: String,
    },
    /// A BYTE piece that is not `<0xXX>`.
    #[error("byte piece {piece:?} is not of the form <0xXX>")]
    InvalidBytePiece {
        /// The piece.
        piece: String,
    },
    /// `byte_fallback` is on but some of the 256 byte pieces are missing.
    #[error("byte_fallback is on but byte piece <0x{byte:02X}> is missing")]
    MissingBytePiece {
        /// The first byte without a piece.
        byte: u8,
    },
    /// The normalizer's precompiled charsmap is not `<u32 size><trie><strings>`.
    #[error("broken precompiled charsmap: {detail}")]
    BadCharsmap {
        /// What is wrong.
        detail: &'static str,
    },
    /// An id past the vocabulary, given to decode.
    #[error("id {id} is out of range (vocabulary size {vocab_size})")]
    IdOutOfRange {
        /// The id.
        id: u32,
        /// The vocabulary size.
        vocab_size: usize,
    },
}
