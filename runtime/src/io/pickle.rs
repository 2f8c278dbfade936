//! A small, safe pickle machine for what `torch.save` writes: dicts, lists
//! and tuples of tensors, strings and numbers (protocol 2, plus the few
//! protocol 3/4 opcodes a newer `pickle_protocol` adds). It never runs
//! code: `GLOBAL` accepts only the tensor rebuilders, `OrderedDict` and the
//! storage classes, and `REDUCE` knows what each of them builds. Work and
//! memory are bounded by the pickle's length (containers are shared, so a
//! memo fetch is O(1), and copies on write are charged to a budget).
//!
//! The memo stores a snapshot: a dict or list mutated after `BINPUT` is seen
//! by a later `BINGET` as it was when memoized (Python shares the object).
//! `torch.save` never reads a container back after filling it.

use std::collections::HashMap;
use std::rc::Rc;

/// A tensor element type, as its storage class names it (`torch.FloatStorage`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TorchDType {
    /// `DoubleStorage`.
    F64,
    /// `FloatStorage`.
    F32,
    /// `HalfStorage`.
    F16,
    /// `BFloat16Storage`.
    BF16,
    /// `LongStorage`.
    I64,
    /// `IntStorage`.
    I32,
    /// `ShortStorage`.
    I16,
    /// `CharStorage`.
    I8,
    /// `ByteStorage`.
    U8,
    /// `BoolStorage`.
    Bool,
}

impl TorchDType {
    /// The kind of a `torch.<name>` storage class.
    pub fn from_class(name: &str) -> Option<Self> {
        Some(match name {
            "DoubleStorage" => Self::F64,
            "FloatStorage" => Self::F32,
            "HalfStorage" => Self::F16,
            "BFloat16Storage" => Self::BF16,
            "LongStorage" => Self::I64,
            "IntStorage" => Self::I32,
            "ShortStorage" => Self::I16,
            "CharStorage" => Self::I8,
            "ByteStorage" => Self::U8,
            "BoolStorage" => Self::Bool,
            _ => return None,
        })
    }

    /// The dtype's torch name (`float32`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Self::F64 => "float64",
            Self::F32 => "float32",
            Self::F16 => "float16",
            Self::BF16 => "bfloat16",
            Self::I64 => "int64",
            Self::I32 => "int32",
            Self::I16 => "int16",
            Self::I8 => "int8",
            Self::U8 => "uint8",
            Self::Bool => "bool",
        }
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Self::F64 | Self::I64 => 8,
            Self::F32 | Self::I32 => 4,
            Self::F16 | Self::BF16 | Self::I16 => 2,
            Self::I8 | Self::U8 | Self::Bool => 1,
        }
    }
}

/// The only globals the machine resolves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Global {
    /// `torch._utils._rebuild_tensor_v2`.
    RebuildTensorV2,
    /// `torch._utils._rebuild_parameter` (an `nn.Parameter`: its tensor).
    RebuildParameter,
    /// `collections.OrderedDict`.
    OrderedDict,
    /// A storage class, `torch.FloatStorage` etc.
    Storage(TorchDType),
}

impl Global {
    fn resolve(module: &str, name: &str) -> Option<Self> {
        match (module, name) {
            ("torch._utils", "_rebuild_tensor_v2") => Some(Self::RebuildTensorV2),
            ("torch._utils", "_rebuild_parameter") => Some(Self::RebuildParameter),
            ("collections", "OrderedDict") => Some(Self::OrderedDict),
            ("torch", class) => TorchDType::from_class(class).map(Self::Storage),
            _ => None,
        }
    }
}

/// A persistent storage reference: `('storage', class, key, location, numel)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageRef {
    /// Element type.
    pub kind: TorchDType,
    /// The record name under `data/`.
    pub key: String,
    /// Elements in the storage.
    pub numel: usize,
}

/// A tensor view of a storage, as `_rebuild_tensor_v2` receives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorRef {
    /// The storage it views.
    pub storage: StorageRef,
    /// First element, in storage elements.
    pub offset: usize,
    /// Sizes, outermost first.
    pub shape: Vec<usize>,
    /// Strides in elements.
    pub stride: Vec<usize>,
}

/// Deepest container nesting accepted (dropping a deeper value would recurse too far).
pub const MAX_DEPTH: usize = 100;

/// The items of a tuple or list, with its nesting depth.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Seq {
    /// 1 + the deepest item's depth.
    pub depth: usize,
    /// The items.
    pub items: Vec<Value>,
}

/// The entries of a dict, in insertion order, with its nesting depth.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Map {
    /// 1 + the deepest key's or value's depth.
    pub depth: usize,
    /// Key, value pairs (a repeated key: the last one wins).
    pub entries: Vec<(Value, Value)>,
}

/// An unpickled value; containers are shared (`Rc`) and copied on write.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `None`.
    None,
    /// `True` / `False`.
    Bool(bool),
    /// An integer that fits i64.
    Int(i64),
    /// A float.
    Float(f64),
    /// A text string.
    Str(Rc<str>),
    /// A bytes object.
    Bytes(Rc<[u8]>),
    /// A tuple.
    Tuple(Rc<Seq>),
    /// A list.
    List(Rc<Seq>),
    /// A dict or `OrderedDict`, in insertion order.
    Dict(Rc<Map>),
    /// A resolved global.
    Global(Global),
    /// A storage reference (from `BINPERSID`).
    Storage(Rc<StorageRef>),
    /// A tensor (from `_rebuild_tensor_v2`).
    Tensor(Rc<TensorRef>),
}

impl Value {
    /// Container nesting depth (0 for scalars).
    pub fn depth(&self) -> usize {
        match self {
            Value::Tuple(s) | Value::List(s) => s.depth,
            Value::Dict(m) => m.depth,
            _ => 0,
        }
    }

    /// A short name of the value's type, for error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::None => "None",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Float(_) => "float",
            Value::Str(_) => "str",
            Value::Bytes(_) => "bytes",
            Value::Tuple(_) => "tuple",
            Value::List(_) => "list",
            Value::Dict(_) => "dict",
            Value::Global(_) => "global",
            Value::Storage(_) => "storage",
            Value::Tensor(_) => "tensor",
        }
    }
}

/// What went wrong in a pickle, and where.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PickleError {
    /// The stream ended inside an opcode or before `STOP`.
    #[error("pickle truncated at byte {offset}")]
    Truncated {
        /// Where more bytes were needed.
        offset: usize,
    },
    /// An opcode outside the supported subset.
    #[error("pickle byte {offset}: unsupported opcode 0x{opcode:02x}")]
    UnknownOpcode {
        /// Its position.
        offset: usize,
        /// The opcode byte.
        opcode: u8,
    },
    /// A protocol newer than 5.
    #[error("pickle byte {offset}: unsupported protocol {protocol}")]
    Protocol {
        /// Its position.
        offset: usize,
        /// The protocol number.
        protocol: u8,
    },
    /// An opcode needed more stack items than there are (above the mark).
    #[error("pickle byte {offset}: stack underflow")]
    StackUnderflow {
        /// Its position.
        offset: usize,
    },
    /// An opcode needed a mark and none is set.
    #[error("pickle byte {offset}: no mark")]
    NoMark {
        /// Its position.
        offset: usize,
    },
    /// `BINGET` of an index never stored.
    #[error("pickle byte {offset}: memo index {index} was never stored")]
    MemoMissing {
        /// Its position.
        offset: usize,
        /// The index.
        index: u32,
    },
    /// A global outside the allowed set (no code is ever run).
    #[error("pickle byte {offset}: global `{module}.{name}` is not allowed")]
    UnknownGlobal {
        /// Its position.
        offset: usize,
        /// Module name.
        module: String,
        /// Attribute name.
        name: String,
    },
    /// An operand has the wrong type or value.
    #[error("pickle byte {offset}: {detail}")]
    BadOperand {
        /// Its position.
        offset: usize,
        /// What is wrong.
        detail: String,
    },
    /// More work or memory than the pickle's length can justify.
    #[error("pickle byte {offset}: work budget of {limit} exceeded")]
    Budget {
        /// Its position.
        offset: usize,
        /// The budget.
        limit: usize,
    },
}

/// Unpickle `bytes`, returning the value `STOP` pops.
pub fn load(bytes: &[u8]) -> Result<Value, PickleError> {
    Machine::new(bytes).run()
}

struct Machine<'a> {
    bytes: &'a [u8],
    pos: usize,
    /// Start of the current opcode (for errors).
    at: usize,
    stack: Vec<Value>,
    marks: Vec<usize>,
    memo: HashMap<u32, Value>,
    work: usize,
    limit: usize,
}

impl<'a> Machine<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Self {
            bytes,
            pos: 0,
            at: 0,
            stack: Vec::new(),
            marks: Vec::new(),
            memo: HashMap::new(),
            work: 0,
            // Each opcode costs at least one byte; copies on write may add
            // a few times the pickle's size, never more.
            limit: bytes.len().saturating_mul(8).saturating_add(1 << 16),
        }
    }

    fn bad(&self, detail: impl Into<String>) -> PickleError {
        PickleError::BadOperand {
            offset: self.at,
            detail: detail.into(),
        }
    }

    fn charge(&mut self, n: usize) -> Result<(), PickleError> {
        self.work = self.work.saturating_add(n);
        if self.work > self.limit {
            return Err(PickleError::Budget {
                offset: self.at,
                limit: self.limit,
            });
        }
        Ok(())
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], PickleError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or(PickleError::Truncated {
                offset: self.bytes.len(),
            })?;
        let s = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn u8(&mut self) -> Result<u8, PickleError> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, PickleError> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    fn u32(&mut self) -> Result<u32, PickleError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Result<u64, PickleError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    fn len_of(&self, n: u64) -> Result<usize, PickleError> {
        usize::try_from(n).map_err(|_| PickleError::Truncated {
            offset: self.bytes.len(),
        })
    }

    fn line(&mut self) -> Result<&'a str, PickleError> {
        let rest = &self.bytes[self.pos..];
        let n = rest
            .iter()
            .position(|&b| b == b'\n')
            .ok_or(PickleError::Truncated {
                offset: self.bytes.len(),
            })?;
        let line = self.take(n + 1)?;
        std::str::from_utf8(&line[..n]).map_err(|_| self.bad("GLOBAL name is not UTF-8"))
    }

    fn text(&self, raw: &[u8]) -> Result<Value, PickleError> {
        std::str::from_utf8(raw)
            .map(|s| Value::Str(Rc::from(s)))
            .map_err(|_| self.bad("string is not valid UTF-8"))
    }

    fn push(&mut self, v: Value) -> Result<(), PickleError> {
        self.charge(1)?;
        self.stack.push(v);
        Ok(())
    }

    fn floor(&self) -> usize {
        self.marks.last().copied().unwrap_or(0)
    }

    fn pop(&mut self) -> Result<Value, PickleError> {
        if self.stack.len() <= self.floor() {
            return Err(PickleError::StackUnderflow { offset: self.at });
        }
        self.stack
            .pop()
            .ok_or(PickleError::StackUnderflow { offset: self.at })
    }

    fn top(&mut self) -> Result<&mut Value, PickleError> {
        if self.stack.len() <= self.floor() {
            return Err(PickleError::StackUnderflow { offset: self.at });
        }
        self.stack
            .last_mut()
            .ok_or(PickleError::StackUnderflow { offset: self.at })
    }

    fn pop_mark(&mut self) -> Result<Vec<Value>, PickleError> {
        let m = self
            .marks
            .pop()
            .ok_or(PickleError::NoMark { offset: self.at })?;
        Ok(self.stack.split_off(m.min(self.stack.len())))
    }

    fn pop_n(&mut self, n: usize) -> Result<Vec<Value>, PickleError> {
        if self.stack.len() < self.floor() + n {
            return Err(PickleError::StackUnderflow { offset: self.at });
        }
        Ok(self.stack.split_off(self.stack.len() - n))
    }

    fn memo_put(&mut self, index: u32) -> Result<(), PickleError> {
        let v = self.top()?.clone();
        self.charge(1)?;
        self.memo.insert(index, v);
        Ok(())
    }

    fn memo_get(&mut self, index: u32) -> Result<(), PickleError> {
        let v = self
            .memo
            .get(&index)
            .cloned()
            .ok_or(PickleError::MemoMissing {
                offset: self.at,
                index,
            })?;
        self.push(v)
    }

    /// The depth of a container holding `items`, checked against [`MAX_DEPTH`].
    fn depth_of<'v>(&self, items: impl Iterator<Item = &'v Value>) -> Result<usize, PickleError> {
        let depth = 1 + items.map(Value::depth).max().unwrap_or(0);
        if depth > MAX_DEPTH {
            return Err(self.bad(format!("containers nested deeper than {MAX_DEPTH}")));
        }
        Ok(depth)
    }

    fn tuple(&self, items: Vec<Value>) -> Result<Value, PickleError> {
        let depth = self.depth_of(items.iter())?;
        Ok(Value::Tuple(Rc::new(Seq { depth, items })))
    }

    /// Appends `items` to the list on top of the stack.
    fn extend_list(&mut self, items: Vec<Value>) -> Result<(), PickleError> {
        let depth = self.depth_of(items.iter())?;
        let at = self.at;
        let top = self.top()?;
        let Value::List(list) = top else {
            let found = top.type_name();
            return Err(PickleError::BadOperand {
                offset: at,
                detail: format!("APPEND to a {found}"),
            });
        };
        let copy = if Rc::strong_count(list) > 1 {
            list.items.len()
        } else {
            0
        };
        let list = Rc::make_mut(list);
        list.depth = list.depth.max(depth);
        list.items.extend(items);
        self.charge(copy)
    }

    /// Sets `pairs` on the dict on top of the stack.
    fn extend_dict(&mut self, items: Vec<Value>) -> Result<(), PickleError> {
        if !items.len().is_multiple_of(2) {
            return Err(self.bad("SETITEMS with an odd number of items"));
        }
        let depth = self.depth_of(items.iter())?;
        let at = self.at;
        let top = self.top()?;
        let Value::Dict(dict) = top else {
            let found = top.type_name();
            return Err(PickleError::BadOperand {
                offset: at,
                detail: format!("SETITEM on a {found}"),
            });
        };
        let copy = if Rc::strong_count(dict) > 1 {
            dict.entries.len()
        } else {
            0
        };
        let d = Rc::make_mut(dict);
        d.depth = d.depth.max(depth);
        let mut it = items.into_iter();
        while let (Some(k), Some(v)) = (it.next(), it.next()) {
            d.entries.push((k, v));
        }
        self.charge(copy)
    }

    fn int(&self, v: &Value, what: &str) -> Result<usize, PickleError> {
        match v {
            Value::Int(i) => {
                usize::try_from(*i).map_err(|_| self.bad(format!("{what} is negative ({i})")))
            }
            other => Err(self.bad(format!("{what} is a {}, not an int", other.type_name()))),
        }
    }

    fn ints(&self, v: &Value, what: &str) -> Result<Vec<usize>, PickleError> {
        match v {
            Value::Tuple(t) => t.items.iter().map(|x| self.int(x, what)).collect(),
            other => Err(self.bad(format!("{what} is a {}, not a tuple", other.type_name()))),
        }
    }

    fn persistent(&self, pid: Value) -> Result<Value, PickleError> {
        let Value::Tuple(t) = &pid else {
            return Err(self.bad(format!(
                "persistent id is a {}, not a tuple",
                pid.type_name()
            )));
        };
        match &t.items[..] {
            [Value::Str(tag), Value::Global(Global::Storage(kind)), key, _location, numel]
                if &**tag == "storage" =>
            {
                let key = match key {
                    Value::Str(s) => s.to_string(),
                    Value::Int(i) => i.to_string(),
                    other => {
                        return Err(self.bad(format!("storage key is a {}", other.type_name())))
                    }
                };
                let numel = self.int(numel, "storage size")?;
                Ok(Value::Storage(Rc::new(StorageRef {
                    kind: *kind,
                    key,
                    numel,
                })))
            }
            _ => Err(self.bad(
                "persistent id is not ('storage', <torch storage class>, key, location, numel)",
            )),
        }
    }

    fn reduce(&self, callable: Value, args: Value) -> Result<Value, PickleError> {
        let Value::Tuple(args) = args else {
            return Err(self.bad(format!(
                "REDUCE arguments are a {}, not a tuple",
                args.type_name()
            )));
        };
        let Value::Global(g) = callable else {
            return Err(self.bad(format!("REDUCE of a {}", callable.type_name())));
        };
        match g {
            Global::RebuildTensorV2 => {
                let [storage, offset, size, stride, ..] = &args.items[..] else {
                    return Err(
                        self.bad("_rebuild_tensor_v2 needs (storage, offset, size, stride, ...)")
                    );
                };
                let Value::Storage(storage) = storage else {
                    return Err(self.bad(format!(
                        "_rebuild_tensor_v2 storage is a {}",
                        storage.type_name()
                    )));
                };
                let offset = self.int(offset, "tensor offset")?;
                let shape = self.ints(size, "tensor size")?;
                let stride = self.ints(stride, "tensor stride")?;
                if shape.len() != stride.len() {
                    return Err(self.bad(format!(
                        "tensor size has {} dims but stride has {}",
                        shape.len(),
                        stride.len()
                    )));
                }
                Ok(Value::Tensor(Rc::new(TensorRef {
                    storage: (**storage).clone(),
                    offset,
                    shape,
                    stride,
                })))
            }
            Global::RebuildParameter => match args.items.first() {
                Some(t @ Value::Tensor(_)) => Ok(t.clone()),
                _ => Err(self.bad("_rebuild_parameter needs a tensor")),
            },
            Global::OrderedDict if args.items.is_empty() => Ok(Value::Dict(Rc::default())),
            Global::OrderedDict => Err(self.bad("OrderedDict called with arguments")),
            Global::Storage(_) => Err(self.bad("a storage class cannot be called")),
        }
    }

    fn global(&self, module: &str, name: &str) -> Result<Value, PickleError> {
        Global::resolve(module, name)
            .map(Value::Global)
            .ok_or_else(|| PickleError::UnknownGlobal {
                offset: self.at,
                module: module.to_string(),
                name: name.to_string(),
            })
    }

    fn run(mut self) -> Result<Value, PickleError> {
        loop {
            self.at = self.pos;
            self.charge(1)?;
            let op = self.u8()?;
            match op {
                // PROTO
                0x80 => {
                    let protocol = self.u8()?;
                    if protocol > 5 {
                        return Err(PickleError::Protocol {
                            offset: self.at,
                            protocol,
                        });
                    }
                }
                // FRAME: a length hint only.
                0x95 => {
                    self.u64()?;
                }
                // STOP
                b'.' => return self.pop(),
                b'}' => self.push(Value::Dict(Rc::default()))?,
                b']' => self.push(Value::List(Rc::default()))?,
                b')' => self.push(Value::Tuple(Rc::default()))?,
                b'(' => {
                    self.charge(1)?;
                    self.marks.push(self.stack.len());
                }
                // BINUNICODE, SHORT_BINUNICODE, BINUNICODE8, BINSTRING, SHORT_BINSTRING
                b'X' | 0x8c | 0x8d | b'T' | b'U' => {
                    let n = match op {
                        b'X' => u64::from(self.u32()?),
                        0x8c | b'U' => u64::from(self.u8()?),
                        0x8d => self.u64()?,
                        _ => {
                            let n = self.u32()? as i32;
                            u64::try_from(n)
                                .map_err(|_| self.bad(format!("negative string length {n}")))?
                        }
                    };
                    let n = self.len_of(n)?;
                    let raw = self.take(n)?;
                    let v = self.text(raw)?;
                    self.push(v)?;
                }
                // BINBYTES, SHORT_BINBYTES
                b'B' | b'C' => {
                    let n = if op == b'B' {
                        u64::from(self.u32()?)
                    } else {
                        u64::from(self.u8()?)
                    };
                    let n = self.len_of(n)?;
                    let raw = self.take(n)?;
                    self.push(Value::Bytes(Rc::from(raw)))?;
                }
                // GLOBAL
                b'c' => {
                    let module = self.line()?;
                    let name = self.line()?;
                    let v = self.global(module, name)?;
                    self.push(v)?;
                }
                // STACK_GLOBAL
                0x93 => {
                    let name = self.pop()?;
                    let module = self.pop()?;
                    let (Value::Str(module), Value::Str(name)) = (&module, &name) else {
                        return Err(self.bad("STACK_GLOBAL needs two strings"));
                    };
                    let v = self.global(module, name)?;
                    self.push(v)?;
                }
                // BINPUT, LONG_BINPUT, MEMOIZE
                b'q' => {
                    let i = self.u8()?;
                    self.memo_put(u32::from(i))?;
                }
                b'r' => {
                    let i = self.u32()?;
                    self.memo_put(i)?;
                }
                0x94 => {
                    let i =
                        u32::try_from(self.memo.len()).map_err(|_| self.bad("memo too large"))?;
                    self.memo_put(i)?;
                }
                // BINGET, LONG_BINGET
                b'h' => {
                    let i = self.u8()?;
                    self.memo_get(u32::from(i))?;
                }
                b'j' => {
                    let i = self.u32()?;
                    self.memo_get(i)?;
                }
                // BININT, BININT1, BININT2
                b'J' => {
                    let v = self.u32()? as i32;
                    self.push(Value::Int(i64::from(v)))?;
                }
                b'K' => {
                    let v = self.u8()?;
                    self.push(Value::Int(i64::from(v)))?;
                }
                b'M' => {
                    let v = self.u16()?;
                    self.push(Value::Int(i64::from(v)))?;
                }
                // LONG1: little-endian two's complement of n bytes.
                0x8a => {
                    let n = usize::from(self.u8()?);
                    let raw = self.take(n)?;
                    if n > 8 {
                        return Err(self.bad(format!("LONG1 of {n} bytes does not fit i64")));
                    }
                    let fill = if raw.last().is_some_and(|b| b & 0x80 != 0) {
                        0xff
                    } else {
                        0
                    };
                    let mut a = [fill; 8];
                    a[..n].copy_from_slice(raw);
                    self.push(Value::Int(i64::from_le_bytes(a)))?;
                }
                // BINFLOAT: big-endian f64.
                b'G' => {
                    let b = self.take(8)?;
                    let mut a = [0u8; 8];
                    a.copy_from_slice(b);
                    self.push(Value::Float(f64::from_be_bytes(a)))?;
                }
                // TUPLE, TUPLE1..3
                b't' => {
                    let items = self.pop_mark()?;
                    let t = self.tuple(items)?;
                    self.push(t)?;
                }
                0x85..=0x87 => {
                    let items = self.pop_n(usize::from(op - 0x84))?;
                    let t = self.tuple(items)?;
                    self.push(t)?;
                }
                0x88 => self.push(Value::Bool(true))?,
                0x89 => self.push(Value::Bool(false))?,
                b'N' => self.push(Value::None)?,
                // BINPERSID
                b'Q' => {
                    let pid = self.pop()?;
                    let v = self.persistent(pid)?;
                    self.push(v)?;
                }
                // REDUCE
                b'R' => {
                    let args = self.pop()?;
                    let callable = self.pop()?;
                    let v = self.reduce(callable, args)?;
                    self.push(v)?;
                }
                // SETITEM, SETITEMS
                b's' => {
                    let kv = self.pop_n(2)?;
                    self.extend_dict(kv)?;
                }
                b'u' => {
                    let items = self.pop_mark()?;
                    self.extend_dict(items)?;
                }
                // APPEND, APPENDS
                b'a' => {
                    let v = self.pop()?;
                    self.extend_list(vec![v])?;
                }
                b'e' => {
                    let items = self.pop_mark()?;
                    self.extend_list(items)?;
                }
                // BUILD: object state (an OrderedDict's `_metadata`) is not needed.
                b'b' => {
                    self.pop()?;
                    self.top()?;
                }
                // POP, POP_MARK, DUP
                b'0' => {
                    self.pop()?;
                }
                b'1' => {
                    self.pop_mark()?;
                }
                b'2' => {
                    let v = self.top()?.clone();
                    self.push(v)?;
                }
                opcode => {
                    return Err(PickleError::UnknownOpcode {
                        offset: self.at,
                        opcode,
                    })
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(x: &str) -> Value {
        Value::Str(Rc::from(x))
    }

    fn seq(items: Vec<Value>) -> Rc<Seq> {
        Rc::new(Seq { depth: 1, items })
    }

    #[test]
    fn dict_of_scalars_and_containers() {
        // pickle.dumps({'a': 1, 'b': [True, None, -2], 'c': (3.5, b'x'), 'd': 2**40}, 2)
        // written out by hand with the opcodes the machine accepts.
        let mut p = vec![0x80, 2, b'}', b'q', 0, b'('];
        p.extend(b"X\x01\x00\x00\x00aK\x01");
        p.extend(b"\x8c\x01b]q\x01(\x88N\x8a\x01\xfee");
        p.extend(b"U\x01cG\x40\x0c\x00\x00\x00\x00\x00\x00C\x01x\x86");
        p.extend(b"X\x01\x00\x00\x00d\x8a\x06\x00\x00\x00\x00\x00\x01");
        p.extend(b"u.");
        let v = load(&p).unwrap();
        let Value::Dict(d) = v else { panic!() };
        let d = &d.entries;
        assert_eq!(d.len(), 4);
        assert_eq!(d[0], (s("a"), Value::Int(1)));
        assert_eq!(
            d[1].1,
            Value::List(seq(vec![Value::Bool(true), Value::None, Value::Int(-2)]))
        );
        assert_eq!(
            d[2].1,
            Value::Tuple(seq(vec![
                Value::Float(3.5),
                Value::Bytes(Rc::from(&b"x"[..]))
            ]))
        );
        assert_eq!(d[3].1, Value::Int(1 << 40));
    }

    #[test]
    fn memo_and_stack_ops() {
        // [1, 1] via MEMOIZE/BINGET, DUP and POP, then SETITEM into a dict.
        let p = b"\x80\x04}K\x07\x94](h\x00h\x00e2 0".to_vec();
        // `2` DUP then `0` POP; b' ' is not an opcode: the error names it.
        assert_eq!(
            load(&p),
            Err(PickleError::UnknownOpcode {
                offset: 14,
                opcode: b' '
            })
        );
        let p = b"\x80\x04}X\x01\x00\x00\x00kK\x07\x940](h\x00h\x00e20s.".to_vec();
        let Value::Dict(d) = load(&p).unwrap() else {
            panic!()
        };
        assert_eq!(
            d.entries[0],
            (s("k"), Value::List(seq(vec![Value::Int(7), Value::Int(7)])))
        );
    }

    #[test]
    fn typed_errors() {
        let cases: Vec<(&[u8], &str)> = vec![
            (b"", "truncated"),
            (b"\x80\x02", "truncated"),
            (b"\x80\x09.", "protocol 9"),
            (b"X\xff\xff\xff\xff", "truncated"),
            (b"cos\nsystem\n", "`os.system` is not allowed"),
            (b"h\x05", "memo index 5"),
            (b"t", "no mark"),
            (b"(\x85", "stack underflow"),
            (b"K\x01K\x02s", "stack underflow"),
            (b"K\x01(K\x02K\x03u", "SETITEM on a int"),
            (b"}(K\x02u.", "odd number"),
            (
                b"\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x00",
                "does not fit",
            ),
            (b"X\x01\x00\x00\x00\xff", "UTF-8"),
            (b"ctorch._utils\n_rebuild_tensor_v2\n)R", "needs (storage"),
            (b"ccollections\nOrderedDict\nK\x01\x85R", "with arguments"),
            (b"K\x01Q", "persistent id is a int"),
            (b"N)R", "REDUCE of a None"),
            (b"T\xff\xff\xff\xff", "negative string length"),
        ];
        for (bytes, want) in cases {
            let err = load(bytes).unwrap_err().to_string();
            assert!(err.contains(want), "{bytes:?}: {err}");
        }
    }

    #[test]
    fn doubling_memo_is_cheap_and_bounded() {
        // Each round doubles a tuple through the memo: shared, not copied.
        let mut p = b"\x80\x02K\x00q\x00".to_vec();
        for _ in 0..MAX_DEPTH - 1 {
            p.extend(b"h\x00h\x00\x86q\x000");
        }
        p.extend(b"h\x00.");
        assert!(matches!(load(&p), Ok(Value::Tuple(_))));
        // Copy-on-write of a shared list is charged: appending to a list
        // memoized after every append copies it each time.
        let mut p = b"](".to_vec();
        p.extend(std::iter::repeat_n(b'N', 3000));
        p.extend(b"e");
        for _ in 0..3000 {
            p.extend(b"q\x00Na");
        }
        assert!(matches!(load(&p), Err(PickleError::Budget { .. })));
    }

    #[test]
    fn nesting_is_bounded() {
        let mut p = b"N".to_vec();
        p.extend(std::iter::repeat_n(0x85, MAX_DEPTH));
        p.push(b'.');
        assert_eq!(load(&p).unwrap().depth(), MAX_DEPTH);
        let mut p = b"N".to_vec();
        p.extend(std::iter::repeat_n(0x85, 100_000));
        let err = load(&p).unwrap_err().to_string();
        assert!(err.contains("nested deeper"), "{err}");
        // Lists and dicts grow their depth as items arrive.
        let mut p = b"N".to_vec();
        for _ in 0..MAX_DEPTH {
            p.extend(b"q\x000]h\x00a");
        }
        let ok = [&p[..], b"."].concat();
        assert_eq!(load(&ok).unwrap().depth(), MAX_DEPTH);
        p.extend(b"q\x000]h\x00a.");
        let err = load(&p).unwrap_err().to_string();
        assert!(err.contains("nested deeper"), "{err}");
    }
}
