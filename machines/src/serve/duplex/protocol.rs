//! Kyutai's websocket message framing, as Moshi's and PersonaPlex's
//! `server.py` and web client speak it: each binary message starts with a
//! kind byte, the rest is its payload.

/// The kind byte of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Server → client once the prompts are in; payload empty (server.py sends `b"\x00"`).
    Handshake = 0,
    /// Ogg/Opus pages, 24 kHz mono, both ways.
    Audio = 1,
    /// A UTF-8 text piece, server → client.
    Text = 2,
    /// A control action (start, end turn, pause, restart), one byte.
    Control = 3,
    /// Metadata as JSON.
    Metadata = 4,
    /// A UTF-8 error message; the server closes after sending it.
    Error = 5,
    /// Keep-alive, no payload.
    Ping = 6,
}

impl Kind {
    /// The kind a byte names, `None` for an unknown one (ignored, as server.py does).
    pub fn from_byte(byte: u8) -> Option<Self> {
        Some(match byte {
            0 => Self::Handshake,
            1 => Self::Audio,
            2 => Self::Text,
            3 => Self::Control,
            4 => Self::Metadata,
            5 => Self::Error,
            6 => Self::Ping,
            _ => return None,
        })
    }
}

/// A message of `kind` carrying `payload`.
pub fn encode(kind: Kind, payload: &[u8]) -> Vec<u8> {
    let mut msg = Vec::with_capacity(1 + payload.len());
    msg.push(kind as u8);
    msg.extend_from_slice(payload);
    msg
}

/// A message's kind and payload; `None` for an empty message or an unknown kind.
pub fn decode(msg: &[u8]) -> Option<(Kind, &[u8])> {
    let (&first, payload) = msg.split_first()?;
    Kind::from_byte(first).map(|kind| (kind, payload))
}
