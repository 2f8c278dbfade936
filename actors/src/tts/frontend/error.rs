//! Why text could not be turned into Kokoro tokens.

use std::path::PathBuf;

/// A text frontend error.
#[derive(Debug, thiserror::Error)]
pub enum FrontendError {
    /// The text is empty or only whitespace and symbols with nothing to say.
    #[error("the text is empty: nothing to speak")]
    EmptyText,
    /// The `espeak-ng` program could not be started.
    #[error("espeak-ng is not installed (could not run `{program}`: {detail}); install it, e.g. `apt-get install espeak-ng`")]
    EspeakMissing {
        /// The program tried.
        program: String,
        /// The OS error.
        detail: String,
    },
    /// `espeak-ng` ran but failed.
    #[error("espeak-ng failed ({status}): {stderr}")]
    EspeakFailed {
        /// Its exit status.
        status: String,
        /// The tail of its stderr.
        stderr: String,
    },
    /// Every phoneme of the text fell outside the vocab (or espeak-ng said nothing).
    #[error("the text maps to no phonemes in the Kokoro vocab: {text:?}")]
    NoPhonemes {
        /// The normalised text.
        text: String,
    },
    /// The vocab file could not be read.
    #[error("{path}: {source}")]
    VocabIo {
        /// The vocab file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The vocab file is not Kokoro's `{"vocab": {symbol: id}}` JSON.
    #[error("{path}: not a Kokoro vocab.json: {detail}")]
    VocabFormat {
        /// The vocab file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
}
