//! The protobuf wire format: varints, fixed32/64 and length-delimited fields.
//!
//! ONNX is a protobuf schema; decoding its few messages by hand keeps the
//! reader dependency-free and lets `bytes` fields stay borrowed slices of the
//! memory map. Groups (wire types 3/4, unused by ONNX) are rejected.

/// Why a buffer is not valid wire format; [`WireError::Eof`] means it ended early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireError {
    /// The buffer ended inside a field (`need` more bytes were declared than `have`).
    Eof {
        /// Bytes the field needed from its start.
        need: u64,
        /// Bytes that were left.
        have: u64,
    },
    /// A varint longer than 10 bytes.
    VarintOverflow,
    /// A tag with field number 0.
    ZeroField,
    /// A wire type protobuf does not define, or a group.
    WireType(u8),
}

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Eof { need, have } => write!(f, "needs {need} bytes, {have} left"),
            Self::VarintOverflow => write!(f, "varint longer than 10 bytes"),
            Self::ZeroField => write!(f, "field number 0"),
            Self::WireType(t) => write!(f, "wire type {t} (not used by ONNX)"),
        }
    }
}

/// One field's payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value<'a> {
    /// Wire type 0.
    Varint(u64),
    /// Wire type 1 (little-endian).
    Fixed64(u64),
    /// Wire type 2: bytes, a string, a sub-message or a packed repeated field.
    Bytes(&'a [u8]),
    /// Wire type 5 (little-endian).
    Fixed32(u32),
}

/// A field: its number, its payload, and where its tag started in the buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field<'a> {
    /// Field number.
    pub number: u32,
    /// Payload.
    pub value: Value<'a>,
    /// Offset of the tag in the buffer the reader walks.
    pub at: usize,
}

/// Walks the fields of one message.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader over one message's bytes.
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    /// Bytes consumed so far.
    pub fn pos(&self) -> usize {
        self.pos
    }

    fn left(&self) -> u64 {
        (self.buf.len() - self.pos) as u64
    }

    /// Read a base-128 varint.
    pub fn varint(&mut self) -> Result<u64, WireError> {
        let mut out = 0u64;
        for i in 0..10 {
            let Some(&b) = self.buf.get(self.pos) else {
                return Err(WireError::Eof {
                    need: i as u64 + 1,
                    have: i as u64,
                });
            };
            self.pos += 1;
            out |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(out);
            }
        }
        Err(WireError::VarintOverflow)
    }

    fn take(&mut self, n: u64) -> Result<&'a [u8], WireError> {
        if n > self.left() {
            return Err(WireError::Eof {
                need: n,
                have: self.left(),
            });
        }
        // n <= left <= usize::MAX, so the cast is exact.
        let s = &self.buf[self.pos..self.pos + n as usize];
        self.pos += n as usize;
        Ok(s)
    }

    /// The next field, or `None` at the end of the buffer.
    pub fn field(&mut self) -> Result<Option<Field<'a>>, WireError> {
        if self.pos == self.buf.len() {
            return Ok(None);
        }
        let at = self.pos;
        let tag = self.varint()?;
        let number = tag >> 3;
        if number == 0 {
            return Err(WireError::ZeroField);
        }
        let number = u32::try_from(number).map_err(|_| WireError::WireType((tag & 7) as u8))?;
        let value = match tag & 7 {
            0 => Value::Varint(self.varint()?),
            1 => {
                let b = self.take(8)?;
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                Value::Fixed64(u64::from_le_bytes(a))
            }
            2 => {
                let n = self.varint()?;
                Value::Bytes(self.take(n)?)
            }
            5 => {
                let b = self.take(4)?;
                let mut a = [0u8; 4];
                a.copy_from_slice(b);
                Value::Fixed32(u32::from_le_bytes(a))
            }
            t => return Err(WireError::WireType(t as u8)),
        };
        Ok(Some(Field { number, value, at }))
    }
}

/// Decode a packed run of varints.
pub fn packed_varints(bytes: &[u8], out: &mut Vec<u64>) -> Result<(), WireError> {
    let mut r = Reader::new(bytes);
    while r.pos() < bytes.len() {
        out.push(r.varint()?);
    }
    Ok(())
}

/// Decode a packed run of little-endian fixed32 values.
pub fn packed_fixed32(bytes: &[u8], out: &mut Vec<u32>) -> Result<(), WireError> {
    if !bytes.len().is_multiple_of(4) {
        return Err(WireError::Eof {
            need: bytes.len().next_multiple_of(4) as u64,
            have: bytes.len() as u64,
        });
    }
    out.extend(
        bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])),
    );
    Ok(())
}

/// Decode a packed run of little-endian fixed64 values.
pub fn packed_fixed64(bytes: &[u8], out: &mut Vec<u64>) -> Result<(), WireError> {
    if !bytes.len().is_multiple_of(8) {
        return Err(WireError::Eof {
            need: bytes.len().next_multiple_of(8) as u64,
            have: bytes.len() as u64,
        });
    }
    out.extend(bytes.chunks_exact(8).map(|c| {
        let mut a = [0u8; 8];
        a.copy_from_slice(c);
        u64::from_le_bytes(a)
    }));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_each_wire_type() {
        // field 1 varint 150, field 2 bytes "hi", field 3 fixed32, field 4 fixed64
        let mut buf = vec![0x08, 0x96, 0x01, 0x12, 0x02, b'h', b'i', 0x1d];
        buf.extend(1.5f32.to_le_bytes());
        buf.push(0x21);
        buf.extend(7u64.to_le_bytes());
        let mut r = Reader::new(&buf);
        let f = |n, value, at| {
            Some(Field {
                number: n,
                value,
                at,
            })
        };
        assert_eq!(r.field().unwrap(), f(1, Value::Varint(150), 0));
        assert_eq!(r.field().unwrap(), f(2, Value::Bytes(b"hi"), 3));
        assert_eq!(
            r.field().unwrap(),
            f(3, Value::Fixed32(1.5f32.to_bits()), 7)
        );
        assert_eq!(r.field().unwrap(), f(4, Value::Fixed64(7), 12));
        assert_eq!(r.field().unwrap(), None);
    }

    #[test]
    fn rejects_bad_input() {
        assert_eq!(
            Reader::new(&[0x12, 0x05, 1]).field(),
            Err(WireError::Eof { need: 5, have: 1 })
        );
        assert_eq!(
            Reader::new(&[0x08]).field(),
            Err(WireError::Eof { need: 1, have: 0 })
        );
        assert_eq!(Reader::new(&[0x00]).field(), Err(WireError::ZeroField));
        assert_eq!(Reader::new(&[0x0b]).field(), Err(WireError::WireType(3)));
        assert_eq!(
            Reader::new(&[0xff; 12]).varint(),
            Err(WireError::VarintOverflow)
        );
        let mut v = Vec::new();
        assert!(packed_fixed32(&[0; 5], &mut v).is_err());
        assert!(packed_varints(&[0x80], &mut Vec::new()).is_err());
    }
}
