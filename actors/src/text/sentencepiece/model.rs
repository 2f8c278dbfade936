//! The `ModelProto` protobuf of a `.model` file, read by a minimal wire-format
//! reader: only the fields the unigram encoder and decoder use are kept,
//! everything else (trainer inputs, self-test data, extensions) is skipped.
//!
//! Protobuf semantics kept: a later scalar overrides an earlier one, a repeated
//! embedded message (`trainer_spec` twice) merges, and a known field number
//! sent with another wire type is an unknown field (skipped). Every read is
//! bounds-checked, so arbitrary bytes give an error, never a panic.

use super::SpmError;

/// What a piece is for (`ModelProto.SentencePiece.Type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PieceType {
    Normal,
    Unknown,
    Control,
    UserDefined,
    Unused,
    Byte,
}

impl PieceType {
    fn from_proto(value: i32) -> Option<Self> {
        Some(match value {
            1 => Self::Normal,
            2 => Self::Unknown,
            3 => Self::Control,
            4 => Self::UserDefined,
            5 => Self::Unused,
            6 => Self::Byte,
            _ => return None,
        })
    }
}

/// One vocabulary entry.
#[derive(Debug, Clone)]
pub(super) struct Piece {
    pub piece: String,
    pub score: f32,
    pub kind: PieceType,
}

/// The `TrainerSpec` fields that change encoding or decoding.
#[derive(Debug, Clone)]
pub(super) struct TrainerSpec {
    /// `UNIGRAM = 1` (the default), `BPE = 2`, `WORD = 3`, `CHAR = 4`.
    pub model_type: i32,
    pub byte_fallback: bool,
    pub treat_whitespace_as_suffix: bool,
    pub unk_piece: String,
    pub bos_piece: String,
    pub eos_piece: String,
    pub pad_piece: String,
    /// `None` when absent: the library then decodes `<unk>` as `" ⁇ "`.
    pub unk_surface: Option<String>,
}

impl Default for TrainerSpec {
    fn default() -> Self {
        Self {
            model_type: 1,
            byte_fallback: false,
            treat_whitespace_as_suffix: false,
            unk_piece: String::new(),
            bos_piece: String::new(),
            eos_piece: String::new(),
            pad_piece: String::new(),
            unk_surface: None,
        }
    }
}

/// `NormalizerSpec` (also the optional `denormalizer_spec`).
#[derive(Debug, Clone)]
pub(super) struct NormalizerSpec {
    pub name: String,
    pub precompiled_charsmap: Vec<u8>,
    pub add_dummy_prefix: bool,
    pub remove_extra_whitespaces: bool,
    pub escape_whitespaces: bool,
}

impl Default for NormalizerSpec {
    fn default() -> Self {
        // The proto2 defaults: all three flags on.
        Self {
            name: String::new(),
            precompiled_charsmap: Vec::new(),
            add_dummy_prefix: true,
            remove_extra_whitespaces: true,
            escape_whitespaces: true,
        }
    }
}

/// The parts of `ModelProto` the tokenizer needs.
#[derive(Debug, Clone, Default)]
pub(super) struct ModelProto {
    pub pieces: Vec<Piece>,
    pub trainer: TrainerSpec,
    pub normalizer: NormalizerSpec,
    pub denormalizer: Option<NormalizerSpec>,
}

impl ModelProto {
    /// Parses a serialized `ModelProto`.
    pub fn parse(bytes: &[u8]) -> Result<Self, SpmError> {
        let mut model = Self::default();
        let mut reader = Reader::new(bytes);
        while let Some((field, value)) = reader.next_field()? {
            match (field, value) {
                (1, Value::Bytes(b)) => {
                    let index = model.pieces.len();
                    model.pieces.push(parse_piece(b, index)?);
                }
                (2, Value::Bytes(b)) => parse_trainer_spec(b, &mut model.trainer)?,
                (3, Value::Bytes(b)) => parse_normalizer_spec(b, &mut model.normalizer)?,
                (5, Value::Bytes(b)) => parse_normalizer_spec(
                    b,
                    model.denormalizer.get_or_insert_with(Default::default),
                )?,
                _ => {}
            }
        }
        Ok(model)
    }
}

fn parse_piece(bytes: &[u8], index: usize) -> Result<Piece, SpmError> {
    let mut piece = Piece {
        piece: String::new(),
        score: 0.0,
        kind: PieceType::Normal,
    };
    let mut reader = Reader::new(bytes);
    while let Some((field, value)) = reader.next_field()? {
        match (field, value) {
            (1, Value::Bytes(b)) => piece.piece = utf8(b, "piece")?,
            (2, Value::Fixed32(bits)) => piece.score = f32::from_bits(bits),
            (3, Value::Varint(v)) => {
                let value = v as i32;
                piece.kind = PieceType::from_proto(value)
                    .ok_or(SpmError::InvalidPieceType { index, value })?;
            }
            _ => {}
        }
    }
    Ok(piece)
}

fn parse_trainer_spec(bytes: &[u8], spec: &mut TrainerSpec) -> Result<(), SpmError> {
    let mut reader = Reader::new(bytes);
    while let Some((field, value)) = reader.next_field()? {
        match (field, value) {
            // Enums and int32 are varints truncated to 32 bits, as protobuf does.
            (3, Value::Varint(v)) => spec.model_type = v as i32,
            (24, Value::Varint(v)) => spec.treat_whitespace_as_suffix = v != 0,
            (35, Value::Varint(v)) => spec.byte_fallback = v != 0,
            (44, Value::Bytes(b)) => spec.unk_surface = Some(utf8(b, "unk_surface")?),
            (45, Value::Bytes(b)) => spec.unk_piece = utf8(b, "unk_piece")?,
            (46, Value::Bytes(b)) => spec.bos_piece = utf8(b, "bos_piece")?,
            (47, Value::Bytes(b)) => spec.eos_piece = utf8(b, "eos_piece")?,
            (48, Value::Bytes(b)) => spec.pad_piece = utf8(b, "pad_piece")?,
            _ => {}
        }
    }
    Ok(())
}

fn parse_normalizer_spec(bytes: &[u8], spec: &mut NormalizerSpec) -> Result<(), SpmError> {
    let mut reader = Reader::new(bytes);
    while let Some((field, value)) = reader.next_field()? {
        match (field, value) {
            (1, Value::Bytes(b)) => spec.name = utf8(b, "normalizer name")?,
            (2, Value::Bytes(b)) => spec.precompiled_charsmap = b.to_vec(),
            (3, Value::Varint(v)) => spec.add_dummy_prefix = v != 0,
            (4, Value::Varint(v)) => spec.remove_extra_whitespaces = v != 0,
            (5, Value::Varint(v)) => spec.escape_whitespaces = v != 0,
            _ => {}
        }
    }
    Ok(())
}

fn utf8(bytes: &[u8], field: &'static str) -> Result<String, SpmError> {
    String::from_utf8(bytes.to_vec()).map_err(|_| SpmError::InvalidUtf8 { field })
}

/// One field's payload.
#[derive(Debug, Clone, Copy)]
enum Value<'a> {
    Varint(u64),
    /// Skipped: no field read here is a fixed64.
    Fixed64,
    Bytes(&'a [u8]),
    Fixed32(u32),
}

/// A cursor over one message's bytes.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    fn malformed(&self, detail: &'static str) -> SpmError {
        SpmError::MalformedProtobuf {
            offset: self.pos,
            detail,
        }
    }

    fn truncated(&self) -> SpmError {
        SpmError::TruncatedProtobuf { offset: self.pos }
    }

    /// The next `(field number, value)`, or `None` at the end of the message.
    fn next_field(&mut self) -> Result<Option<(u32, Value<'a>)>, SpmError> {
        if self.pos >= self.buf.len() {
            return Ok(None);
        }
        let tag = self.varint()?;
        let field =
            u32::try_from(tag >> 3).map_err(|_| self.malformed("field number too large"))?;
        if field == 0 {
            return Err(self.malformed("field number 0"));
        }
        let value = match tag & 7 {
            0 => Value::Varint(self.varint()?),
            1 => {
                self.take(8)?;
                Value::Fixed64
            }
            2 => {
                let len = usize::try_from(self.varint()?).map_err(|_| self.truncated())?;
                Value::Bytes(self.take(len)?)
            }
            5 => Value::Fixed32(u32::from_le_bytes(self.take_array()?)),
            // 3 and 4 are the deprecated groups, never written by sentencepiece.
            _ => return Err(self.malformed("unsupported wire type")),
        };
        Ok(Some((field, value)))
    }

    fn varint(&mut self) -> Result<u64, SpmError> {
        let mut value = 0u64;
        // At most 10 bytes; bits past 64 are dropped, as protobuf does.
        for shift in (0..70).step_by(7) {
            let &byte = self.buf.get(self.pos).ok_or_else(|| self.truncated())?;
            self.pos += 1;
            if shift < 64 {
                value |= u64::from(byte & 0x7f) << shift;
            }
            if byte < 0x80 {
                return Ok(value);
            }
        }
        Err(self.malformed("varint longer than 10 bytes"))
    }

    fn take(&mut self, len: usize) -> Result<&'a [u8], SpmError> {
        let end = self
            .pos
            .checked_add(len)
            .filter(|&end| end <= self.buf.len())
            .ok_or_else(|| self.truncated())?;
        let bytes = &self.buf[self.pos..end];
        self.pos = end;
        Ok(bytes)
    }

    fn take_array<const N: usize>(&mut self) -> Result<[u8; N], SpmError> {
        let bytes = self.take(N)?;
        let mut out = [0u8; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }
}
