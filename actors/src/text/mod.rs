pub mod sentencepiece;

pub use sentencepiece::{SentencePiece, SpmError};
