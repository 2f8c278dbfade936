//! A byte trie over pieces, built once at load: the Viterbi walk asks it for
//! every piece that starts at a position (all prefixes of the rest), and the
//! normalizer for the longest user-defined symbol there.

/// One node: its children sorted by byte, and the id of the piece ending here.
#[derive(Debug, Clone, Default)]
struct Node {
    children: Vec<(u8, u32)>,
    value: Option<u32>,
}

/// Pieces (as bytes) to ids.
#[derive(Debug, Clone)]
pub(super) struct Trie {
    nodes: Vec<Node>,
}

impl Trie {
    /// A trie of `(key, value)`; a repeated key keeps its last value.
    pub fn new<'a>(entries: impl IntoIterator<Item = (&'a [u8], u32)>) -> Self {
        let mut nodes = vec![Node::default()];
        for (key, value) in entries {
            let mut at = 0usize;
            for &byte in key {
                at = match nodes[at].children.binary_search_by_key(&byte, |&(b, _)| b) {
                    Ok(i) => nodes[at].children[i].1 as usize,
                    Err(i) => {
                        // Node counts are bounded by the model's byte count, far below u32.
                        let child = nodes.len() as u32;
                        nodes[at].children.insert(i, (byte, child));
                        nodes.push(Node::default());
                        child as usize
                    }
                };
            }
            nodes[at].value = Some(value);
        }
        Self { nodes }
    }

    /// Calls `found(length, value)` for each key that is a prefix of `text`, shortest first.
    pub fn for_each_prefix(&self, text: &[u8], mut found: impl FnMut(usize, u32)) {
        let mut at = 0usize;
        for (i, &byte) in text.iter().enumerate() {
            let children = &self.nodes[at].children;
            match children.binary_search_by_key(&byte, |&(b, _)| b) {
                Ok(k) => at = children[k].1 as usize,
                Err(_) => return,
            }
            if let Some(value) = self.nodes[at].value {
                found(i + 1, value);
            }
        }
    }

    /// The length of the longest key that is a prefix of `text`.
    pub fn longest_prefix(&self, text: &[u8]) -> Option<usize> {
        let mut longest = None;
        self.for_each_prefix(text, |len, _| longest = Some(len));
        longest
    }
}
