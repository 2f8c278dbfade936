//! sentencepiece's byte-level UTF-8 rules (`util.h`): the normalizer, the
//! Viterbi walk and the byte-piece decoder step through bytes, not `char`s,
//! since a charsmap or byte pieces can yield bytes that are not UTF-8.

/// `OneCharLen`: the length a lead byte announces (1 for a stray continuation byte).
pub(super) fn one_char_len(lead: u8) -> usize {
    match lead >> 4 {
        0xc | 0xd => 2,
        0xe => 3,
        0xf => 4,
        _ => 1,
    }
}

/// `IsValidDecodeUTF8`: the length of the well-formed character `bytes` starts
/// with, `None` when it starts with a malformed one (which then counts as one byte).
pub(super) fn valid_char_len(bytes: &[u8]) -> Option<usize> {
    let &lead = bytes.first()?;
    // `F8..FF` announce 4 in `one_char_len` but never start a character.
    let len = if lead >= 0xf8 { 1 } else { one_char_len(lead) };
    let char_bytes = bytes.get(..len)?;
    // `std` rejects what `DecodeUTF8` rejects: overlong forms, surrogates,
    // code points past U+10FFFF, missing continuation bytes.
    std::str::from_utf8(char_bytes).ok().map(|_| len)
}
