//! Normalization before encoding (sentencepiece's `normalizer.cc`): the
//! precompiled charsmap rewrites the longest matching prefix again and again
//! (NFKC and friends, compiled into a Darts-clone double-array trie), then
//! whitespace is trimmed, squeezed and escaped to `▁`, and `▁` is prepended.
//!
//! Works on bytes: a charsmap may map to anything, and the library's rules
//! (trailing-space trimming, `▁` escaping) are byte rules.

use super::model::NormalizerSpec;
use super::trie::Trie;
use super::utf8::valid_char_len;
use super::SpmError;

/// U+2581 LOWER ONE EIGHTH BLOCK, which stands for a space in pieces.
const SPACE_SYMBOL: &[u8] = "\u{2581}".as_bytes();

/// U+FFFD, what a malformed UTF-8 byte normalizes to.
const REPLACEMENT_CHAR: &[u8] = "\u{FFFD}".as_bytes();

/// The library reads at most this many prefix matches of the charsmap trie.
const MAX_TRIE_RESULTS: usize = 32;

/// A precompiled charsmap: `<u32 LE trie byte size><double array><NUL-terminated replacements>`.
#[derive(Debug, Clone)]
struct Charsmap {
    /// Darts-clone units.
    units: Vec<u32>,
    /// Replacement strings; a leaf's value is an offset into this.
    normalized: Vec<u8>,
}

impl Charsmap {
    fn parse(blob: &[u8]) -> Result<Self, SpmError> {
        let (header, rest) = blob
            .split_first_chunk::<4>()
            .filter(|(_, rest)| !rest.is_empty())
            .ok_or(SpmError::BadCharsmap {
                detail: "shorter than its 4-byte header and a trie",
            })?;
        let trie_size = u32::from_le_bytes(*header) as usize;
        if trie_size > rest.len() {
            return Err(SpmError::BadCharsmap {
                detail: "the trie size exceeds the blob",
            });
        }
        let (trie, normalized) = rest.split_at(trie_size);
        // The library reads `size / 4` units: a ragged tail is ignored.
        let units = trie
            .chunks_exact(4)
            .map(|unit| u32::from_le_bytes([unit[0], unit[1], unit[2], unit[3]]))
            .collect();
        Ok(Self {
            units,
            normalized: normalized.to_vec(),
        })
    }

    /// The longest rule matching a prefix of `input`: `(bytes matched, replacement)`.
    ///
    /// Darts-clone's `commonPrefixSearch`, bounds-checked: a broken trie ends
    /// the search, and a rule pointing outside the replacements is no rule.
    fn longest_match(&self, input: &[u8]) -> Option<(usize, &[u8])> {
        let unit = |pos: usize| self.units.get(pos).copied();
        // offset(): where a unit's children (and its leaf) live, XOR-relative.
        let offset = |u: u32| ((u >> 10) << ((u & (1 << 9)) >> 6)) as usize;
        let mut node = offset(unit(0)?);
        let mut best = None;
        let mut results = 0;
        for (i, &byte) in input.iter().enumerate() {
            node ^= usize::from(byte);
            let Some(u) = unit(node) else { break };
            // label(): the byte plus bit 31, which only leaf units set.
            if u & ((1 << 31) | 0xff) != u32::from(byte) {
                break;
            }
            node ^= offset(u);
            // has_leaf(): this prefix is a key; its leaf holds the value.
            if (u >> 8) & 1 == 1 {
                if results < MAX_TRIE_RESULTS {
                    if let Some(leaf) = unit(node) {
                        let value = (leaf & ((1 << 31) - 1)) as usize;
                        if let Some(replacement) = self.replacement(value) {
                            best = Some((i + 1, replacement));
                        }
                    }
                }
                results += 1;
            }
        }
        best
    }

    /// The NUL-terminated replacement at `offset`.
    fn replacement(&self, offset: usize) -> Option<&[u8]> {
        let tail = self.normalized.get(offset..).filter(|t| !t.is_empty())?;
        let end = tail.iter().position(|&b| b == 0).unwrap_or(tail.len());
        Some(&tail[..end])
    }
}

/// A configured normalizer (the model's, or the decoder's denormalizer).
#[derive(Debug, Clone)]
pub(super) struct Normalizer {
    charsmap: Option<Charsmap>,
    /// User-defined symbols pass through unnormalized, longest first.
    user_symbols: Option<Trie>,
    add_dummy_prefix: bool,
    remove_extra_whitespaces: bool,
    escape_whitespaces: bool,
    treat_whitespace_as_suffix: bool,
}

impl Normalizer {
    /// A normalizer for `spec`; `user_symbols` are the model's user-defined pieces.
    pub fn new(
        spec: &NormalizerSpec,
        treat_whitespace_as_suffix: bool,
        user_symbols: Option<Trie>,
    ) -> Result<Self, SpmError> {
        let charsmap = if spec.precompiled_charsmap.is_empty() {
            None
        } else {
            Some(Charsmap::parse(&spec.precompiled_charsmap)?)
        };
        Ok(Self {
            charsmap,
            user_symbols,
            add_dummy_prefix: spec.add_dummy_prefix,
            remove_extra_whitespaces: spec.remove_extra_whitespaces,
            escape_whitespaces: spec.escape_whitespaces,
            treat_whitespace_as_suffix,
        })
    }

    /// `Normalizer::Normalize`: the text the encoder segments.
    pub fn normalize(&self, input: &[u8]) -> Vec<u8> {
        let mut input = input;
        // Leading whitespace goes: anything that normalizes to exactly " ".
        if self.remove_extra_whitespaces {
            while !input.is_empty() {
                let (normalized, consumed) = self.normalize_prefix(input);
                if normalized != b" " {
                    break;
                }
                input = &input[consumed..];
            }
        }
        if input.is_empty() {
            return Vec::new();
        }

        let space: &[u8] = if self.escape_whitespaces {
            SPACE_SYMBOL
        } else {
            b" "
        };
        let mut out = Vec::with_capacity(input.len() * 3);
        // The dummy prefix lets "world" and "hello world" share "▁world".
        if self.add_dummy_prefix && !self.treat_whitespace_as_suffix {
            out.extend_from_slice(space);
        }
        let mut is_prev_space = self.remove_extra_whitespaces;
        while !input.is_empty() {
            let (mut normalized, consumed) = self.normalize_prefix(input);
            // Squeeze runs: drop the leading spaces after a space.
            if is_prev_space {
                let spaces = normalized.iter().take_while(|&&b| b == b' ').count();
                normalized = &normalized[spaces..];
            }
            if !normalized.is_empty() {
                for &byte in normalized {
                    if byte == b' ' {
                        out.extend_from_slice(space);
                    } else {
                        out.push(byte);
                    }
                }
                is_prev_space = normalized.ends_with(b" ");
            }
            input = &input[consumed..];
            if !self.remove_extra_whitespaces {
                is_prev_space = false;
            }
        }
        // Trailing whitespace goes too (a literal trailing `▁` included, as in the library).
        if self.remove_extra_whitespaces {
            while out.ends_with(space) {
                out.truncate(out.len() - space.len());
            }
        }
        if self.add_dummy_prefix && self.treat_whitespace_as_suffix {
            out.extend_from_slice(space);
        }
        out
    }

    /// `NormalizePrefix`: the normalized form of the start of `input` and how
    /// many bytes of `input` it stands for (at least 1).
    fn normalize_prefix<'a>(&'a self, input: &'a [u8]) -> (&'a [u8], usize) {
        if let Some(len) = self
            .user_symbols
            .as_ref()
            .and_then(|t| t.longest_prefix(input))
        {
            return (&input[..len], len);
        }
        if let Some((len, replacement)) =
            self.charsmap.as_ref().and_then(|c| c.longest_match(input))
        {
            return (replacement, len);
        }
        match valid_char_len(input) {
            Some(len) => (&input[..len], len),
            None => (REPLACEMENT_CHAR, 1),
        }
    }
}
