//! The Kokoro phoneme vocab: one token id per IPA character (`vocab.json`).

use super::error::FrontendError;
use std::collections::{BTreeSet, HashMap};
use std::path::Path;

/// Symbol → token id, read from Kokoro's `vocab.json` (`{"vocab": {symbol: id}}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vocab {
    ids: HashMap<char, i64>,
}

impl Vocab {
    /// Read a `vocab.json` file.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, FrontendError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| FrontendError::VocabIo {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_json(&text, path)
    }

    /// Parse `vocab.json` text (`path` names it in errors).
    pub fn from_json(text: &str, path: &Path) -> Result<Self, FrontendError> {
        let bad = |detail: String| FrontendError::VocabFormat {
            path: path.to_path_buf(),
            detail,
        };
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| bad(e.to_string()))?;
        let map = value
            .get("vocab")
            .and_then(|v| v.as_object())
            .ok_or_else(|| bad("no `vocab` object".into()))?;
        let mut ids = HashMap::with_capacity(map.len());
        for (symbol, id) in map {
            let mut chars = symbol.chars();
            let (Some(c), None) = (chars.next(), chars.next()) else {
                return Err(bad(format!("symbol {symbol:?} is not one character")));
            };
            let id = id
                .as_i64()
                .filter(|&i| i > 0)
                .ok_or_else(|| bad(format!("id of {symbol:?} is not a positive integer")))?;
            ids.insert(c, id);
        }
        if ids.is_empty() {
            return Err(bad("the vocab is empty".into()));
        }
        Ok(Self { ids })
    }

    /// The id of one symbol.
    pub fn id(&self, c: char) -> Option<i64> {
        self.ids.get(&c).copied()
    }

    /// Number of symbols.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether the vocab has no symbols (never true for a loaded vocab).
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// `text` with every character outside the vocab removed; removed ones go to `dropped`.
    pub fn keep_known(&self, text: &str, dropped: &mut BTreeSet<char>) -> String {
        text.chars()
            .filter(|&c| {
                let known = self.ids.contains_key(&c);
                if !known {
                    dropped.insert(c);
                }
                known
            })
            .collect()
    }

    /// Token ids of `text`, skipping characters outside the vocab.
    pub fn encode(&self, text: &str) -> Vec<i64> {
        text.chars().filter_map(|c| self.id(c)).collect()
    }
}
