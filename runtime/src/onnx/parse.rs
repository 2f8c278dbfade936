//! Decoding `ModelProto` and the messages under it from wire format.
//!
//! Errors carry the message path (`graph.node[12].attribute[0]`) so a corrupt
//! file says where it is corrupt. Only the outermost message can be cut short
//! by truncation; inside a length-delimited field whose length was satisfied,
//! running out of bytes means corruption, not truncation.

use super::dtype::DataType;
use super::model::{
    AttrValue, Attribute, Dim, Graph, ModelInfo, Node, OpsetId, Payload, TensorInfo, ValueInfo,
};
use super::wire::{
    packed_fixed32, packed_fixed64, packed_varints, Field, Reader, Value, WireError,
};

/// Subgraph nesting voxlane follows (deep nesting is only seen in hostile files).
const MAX_DEPTH: usize = 8;

/// How a parse failed, before the file path is attached.
#[derive(Debug)]
pub(crate) enum Bad {
    /// The file ended inside a top-level field.
    Truncated(String),
    /// The bytes are not an ONNX model.
    NotOnnx(String),
    /// Inconsistent contents.
    Malformed(String),
}

/// A failure inside a message, with the path to it (innermost last).
#[derive(Debug)]
struct Fail {
    path: Vec<String>,
    what: String,
}

type R<T> = Result<T, Fail>;

fn fail<T>(what: impl Into<String>) -> R<T> {
    Err(Fail {
        path: Vec::new(),
        what: what.into(),
    })
}

fn within<T>(r: R<T>, seg: impl FnOnce() -> String) -> R<T> {
    r.map_err(|mut f| {
        f.path.insert(0, seg());
        f
    })
}

impl From<WireError> for Fail {
    fn from(e: WireError) -> Self {
        Fail {
            path: Vec::new(),
            what: e.to_string(),
        }
    }
}

impl Fail {
    fn describe(&self) -> String {
        if self.path.is_empty() {
            self.what.clone()
        } else {
            format!("{}: {}", self.path.join("."), self.what)
        }
    }
}

/// Parse context: the whole buffer, so payload slices become file offsets.
struct Cx<'a> {
    root: &'a [u8],
}

impl Cx<'_> {
    fn offset_of(&self, inner: &[u8]) -> usize {
        // `inner` is always a sub-slice of `root` (the reader only slices it).
        inner.as_ptr() as usize - self.root.as_ptr() as usize
    }
}

fn wrong(field: &Field<'_>) -> Fail {
    Fail {
        path: Vec::new(),
        what: format!("field {} has an unexpected wire type", field.number),
    }
}

fn bytes<'a>(f: &Field<'a>) -> R<&'a [u8]> {
    match f.value {
        Value::Bytes(b) => Ok(b),
        _ => Err(wrong(f)),
    }
}

fn string(f: &Field<'_>) -> R<String> {
    let b = bytes(f)?;
    String::from_utf8(b.to_vec()).or_else(|_| fail(format!("field {} is not UTF-8", f.number)))
}

fn varint(f: &Field<'_>) -> R<u64> {
    match f.value {
        Value::Varint(v) => Ok(v),
        _ => Err(wrong(f)),
    }
}

/// Repeated varints, packed (one bytes field) or not (one varint per field).
fn push_varints(f: &Field<'_>, out: &mut Vec<u64>) -> R<()> {
    match f.value {
        Value::Varint(v) => out.push(v),
        Value::Bytes(b) => packed_varints(b, out)?,
        _ => return Err(wrong(f)),
    }
    Ok(())
}

/// Repeated fixed32, packed or not.
fn push_fixed32(f: &Field<'_>, out: &mut Vec<u32>) -> R<()> {
    match f.value {
        Value::Fixed32(v) => out.push(v),
        Value::Bytes(b) => packed_fixed32(b, out)?,
        _ => return Err(wrong(f)),
    }
    Ok(())
}

/// Repeated fixed64, packed or not.
fn push_fixed64(f: &Field<'_>, out: &mut Vec<u64>) -> R<()> {
    match f.value {
        Value::Fixed64(v) => out.push(v),
        Value::Bytes(b) => packed_fixed64(b, out)?,
        _ => return Err(wrong(f)),
    }
    Ok(())
}

fn fields<'a>(buf: &'a [u8], mut each: impl FnMut(Field<'a>) -> R<()>) -> R<()> {
    let mut r = Reader::new(buf);
    while let Some(f) = r.field()? {
        each(f)?;
    }
    Ok(())
}

/// `ModelProto` field numbers and wire types, to recognise an ONNX file by its first field.
const MODEL_FIELDS: &[(u32, u8)] = &[
    (1, 0),  // ir_version
    (2, 2),  // producer_name
    (3, 2),  // producer_version
    (4, 2),  // domain
    (5, 0),  // model_version
    (6, 2),  // doc_string
    (7, 2),  // graph
    (8, 2),  // opset_import
    (14, 2), // metadata_props
    (20, 2), // training_info
    (25, 2), // functions
];

fn wire_type(v: &Value<'_>) -> u8 {
    match v {
        Value::Varint(_) => 0,
        Value::Fixed64(_) => 1,
        Value::Bytes(_) => 2,
        Value::Fixed32(_) => 5,
    }
}

const FIELD_NAMES: &[(u32, &str)] = &[
    (1, "ir_version"),
    (2, "producer_name"),
    (3, "producer_version"),
    (4, "domain"),
    (5, "model_version"),
    (6, "doc_string"),
    (7, "graph"),
    (8, "opset_import"),
];

fn field_name(n: u32) -> String {
    FIELD_NAMES
        .iter()
        .find(|(k, _)| *k == n)
        .map(|(_, s)| format!("{s} (field {n})"))
        .unwrap_or_else(|| format!("field {n}"))
}

/// A failure inside top-level field `n`, as a malformed-model error.
fn at_top<T>(n: u32, r: R<T>) -> Result<T, Bad> {
    r.map_err(|e| Bad::Malformed(format!("{}: {}", field_name(n), e.describe())))
}

/// Parse a whole model file.
pub(crate) fn parse_model(root: &[u8]) -> Result<(ModelInfo, Graph), Bad> {
    if root.is_empty() {
        return Err(Bad::Truncated("the file is empty".into()));
    }
    let cx = Cx { root };
    let mut r = Reader::new(root);
    let mut info = ModelInfo::default();
    let mut graph = None;
    let mut have_ir = false;
    let mut first = true;
    loop {
        let at = r.pos();
        let f = match r.field() {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(WireError::Eof { need, have }) if !first => {
                // Peek at the tag to name the field that was cut off.
                let tag = Reader::new(&root[at..]).varint().ok();
                let name = tag.map_or_else(|| "a tag".into(), |t| field_name((t >> 3) as u32));
                return Err(Bad::Truncated(format!(
                    "{name} at byte {at} needs {need} bytes, {have} left"
                )));
            }
            Err(e) if first => {
                return Err(Bad::NotOnnx(format!(
                    "first bytes are not a protobuf field: {e}"
                )))
            }
            Err(e) => return Err(Bad::Malformed(format!("byte {at}: {e}"))),
        };
        if first {
            let wt = wire_type(&f.value);
            if !MODEL_FIELDS.contains(&(f.number, wt)) {
                return Err(Bad::NotOnnx(format!(
                    "first field (number {}, wire type {wt}) is not a ModelProto field",
                    f.number
                )));
            }
            first = false;
        }
        let n = f.number;
        match n {
            1 => {
                info.ir_version = at_top(n, varint(&f))? as i64;
                have_ir = true;
            }
            2 => info.producer_name = at_top(n, string(&f))?,
            3 => info.producer_version = at_top(n, string(&f))?,
            4 => info.domain = at_top(n, string(&f))?,
            5 => info.model_version = at_top(n, varint(&f))? as i64,
            7 => {
                let b = at_top(n, bytes(&f))?;
                graph = Some(at_top(n, parse_graph(&cx, b, 0))?);
            }
            8 => {
                let b = at_top(n, bytes(&f))?;
                let i = info.opset_import.len();
                let op = at_top(n, within(parse_opset(b), || format!("[{i}]")))?;
                info.opset_import.push(op);
            }
            _ => {}
        }
    }
    if !have_ir {
        return Err(Bad::NotOnnx("no ir_version (field 1)".into()));
    }
    if !(1..=100).contains(&info.ir_version) {
        return Err(Bad::NotOnnx(format!(
            "ir_version {} is implausible",
            info.ir_version
        )));
    }
    // A plausible header that simply stops is a cut-off file, not a foreign one.
    let len = root.len();
    let graph = graph.ok_or_else(|| {
        Bad::Truncated(format!("ends after {len} bytes without a graph (field 7)"))
    })?;
    if info.opset_import.is_empty() {
        return Err(Bad::Truncated(format!(
            "ends after {len} bytes without opset_import (field 8)"
        )));
    }
    Ok((info, graph))
}

fn parse_opset(buf: &[u8]) -> R<OpsetId> {
    let mut o = OpsetId {
        domain: String::new(),
        version: 0,
    };
    fields(buf, |f| {
        match f.number {
            1 => o.domain = string(&f)?,
            2 => o.version = varint(&f)? as i64,
            _ => {}
        }
        Ok(())
    })?;
    Ok(o)
}

fn parse_graph(cx: &Cx<'_>, buf: &[u8], depth: usize) -> R<Graph> {
    if depth > MAX_DEPTH {
        return fail(format!("subgraphs nested deeper than {MAX_DEPTH}"));
    }
    let mut g = Graph::default();
    fields(buf, |f| {
        match f.number {
            1 => {
                let i = g.nodes.len();
                let n = within(parse_node(cx, bytes(&f)?, depth), || format!("node[{i}]"))?;
                g.nodes.push(n);
            }
            2 => g.name = string(&f)?,
            5 => {
                let i = g.initializers.len();
                let t = within(parse_tensor(cx, bytes(&f)?), || format!("initializer[{i}]"))?;
                g.initializers.push(t);
            }
            11..=13 => {
                let list = match f.number {
                    11 => &mut g.inputs,
                    12 => &mut g.outputs,
                    _ => &mut g.value_info,
                };
                let i = list.len();
                let kind = ["input", "output", "value_info"][(f.number - 11) as usize];
                list.push(within(parse_value_info(bytes(&f)?), || {
                    format!("{kind}[{i}]")
                })?);
            }
            _ => {}
        }
        Ok(())
    })?;
    g.build_index();
    Ok(g)
}

fn parse_node(cx: &Cx<'_>, buf: &[u8], depth: usize) -> R<Node> {
    let mut n = Node::default();
    fields(buf, |f| {
        match f.number {
            1 => n.inputs.push(string(&f)?),
            2 => n.outputs.push(string(&f)?),
            3 => n.name = string(&f)?,
            4 => n.op_type = string(&f)?,
            5 => {
                let i = n.attributes.len();
                let a = within(parse_attribute(cx, bytes(&f)?, depth), || {
                    format!("attribute[{i}]")
                })?;
                n.attributes.push(a);
            }
            7 => n.domain = string(&f)?,
            _ => {}
        }
        Ok(())
    })
    .map_err(|mut e| {
        // Name the node once it is known: easier to find than an index.
        if !n.name.is_empty() {
            e.path.insert(0, format!("`{}`", n.name));
        }
        e
    })?;
    Ok(n)
}

/// `AttributeProto.AttributeType` codes voxlane decodes.
mod attr_type {
    pub const FLOAT: i64 = 1;
    pub const INT: i64 = 2;
    pub const STRING: i64 = 3;
    pub const TENSOR: i64 = 4;
    pub const GRAPH: i64 = 5;
    pub const FLOATS: i64 = 6;
    pub const INTS: i64 = 7;
    pub const STRINGS: i64 = 8;
    pub const TENSORS: i64 = 9;
    pub const GRAPHS: i64 = 10;
}

fn parse_attribute(cx: &Cx<'_>, buf: &[u8], depth: usize) -> R<Attribute> {
    let mut name = String::new();
    let mut ty: Option<i64> = None;
    let (mut f32v, mut i64v, mut s, mut t, mut g) = (None, None, None, None, None);
    let (mut floats, mut ints) = (Vec::new(), Vec::new());
    let (mut strings, mut tensors, mut graphs) = (Vec::new(), Vec::new(), Vec::new());
    fields(buf, |f| {
        match f.number {
            1 => name = string(&f)?,
            2 => match f.value {
                Value::Fixed32(v) => f32v = Some(f32::from_bits(v)),
                _ => return Err(wrong(&f)),
            },
            3 => i64v = Some(varint(&f)? as i64),
            4 => s = Some(bytes(&f)?.to_vec()),
            5 => t = Some(within(parse_tensor(cx, bytes(&f)?), || "t".into())?),
            6 => {
                g = Some(within(parse_graph(cx, bytes(&f)?, depth + 1), || {
                    "g".into()
                })?)
            }
            7 => push_fixed32(&f, &mut floats)?,
            8 => push_varints(&f, &mut ints)?,
            9 => strings.push(bytes(&f)?.to_vec()),
            10 => tensors.push(within(parse_tensor(cx, bytes(&f)?), || "tensors".into())?),
            11 => graphs.push(within(parse_graph(cx, bytes(&f)?, depth + 1), || {
                "graphs".into()
            })?),
            20 => ty = Some(varint(&f)? as i64),
            _ => {}
        }
        Ok(())
    })
    .map_err(|mut e| {
        if !name.is_empty() {
            e.path.insert(0, format!("`{name}`"));
        }
        e
    })?;
    // Old writers omit `type`: infer it from the field that is set.
    let ty = ty.unwrap_or(if f32v.is_some() {
        attr_type::FLOAT
    } else if i64v.is_some() {
        attr_type::INT
    } else if s.is_some() {
        attr_type::STRING
    } else if t.is_some() {
        attr_type::TENSOR
    } else if g.is_some() {
        attr_type::GRAPH
    } else if !floats.is_empty() {
        attr_type::FLOATS
    } else if !ints.is_empty() {
        attr_type::INTS
    } else if !strings.is_empty() {
        attr_type::STRINGS
    } else if !tensors.is_empty() {
        attr_type::TENSORS
    } else {
        attr_type::GRAPHS
    });
    let missing = |what: &str| -> R<AttrValue> {
        within(fail(format!("type says {what} but none is set")), || {
            format!("`{name}`")
        })
    };
    let value = match ty {
        attr_type::FLOAT => f32v
            .map(AttrValue::Float)
            .map_or_else(|| missing("f"), Ok)?,
        attr_type::INT => i64v.map(AttrValue::Int).map_or_else(|| missing("i"), Ok)?,
        attr_type::STRING => AttrValue::String(s.unwrap_or_default()),
        attr_type::TENSOR => t.map(AttrValue::Tensor).map_or_else(|| missing("t"), Ok)?,
        attr_type::GRAPH => g
            .map(|g| AttrValue::Graph(Box::new(g)))
            .map_or_else(|| missing("g"), Ok)?,
        attr_type::FLOATS => AttrValue::Floats(floats.into_iter().map(f32::from_bits).collect()),
        attr_type::INTS => AttrValue::Ints(ints.into_iter().map(|v| v as i64).collect()),
        attr_type::STRINGS => AttrValue::Strings(strings),
        attr_type::TENSORS => AttrValue::Tensors(tensors),
        attr_type::GRAPHS => AttrValue::Graphs(graphs),
        other => AttrValue::Other(other),
    };
    Ok(Attribute { name, value })
}

fn parse_tensor(cx: &Cx<'_>, buf: &[u8]) -> R<TensorInfo> {
    let mut name = String::new();
    let mut dims_raw = Vec::new();
    let mut code = 0i64;
    let mut raw: Option<&[u8]> = None;
    let (mut f32s, mut i32s, mut i64s, mut f64s, mut u64s) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut external = false;
    fields(buf, |f| {
        match f.number {
            1 => push_varints(&f, &mut dims_raw)?,
            2 => code = varint(&f)? as i64,
            3 => return fail("segmented tensors are not supported"),
            4 => push_fixed32(&f, &mut f32s)?,
            5 => push_varints(&f, &mut i32s)?,
            7 => push_varints(&f, &mut i64s)?,
            8 => name = string(&f)?,
            9 => raw = Some(bytes(&f)?),
            10 => push_fixed64(&f, &mut f64s)?,
            11 => push_varints(&f, &mut u64s)?,
            14 => external = varint(&f)? == 1,
            _ => {}
        }
        Ok(())
    })
    .map_err(|mut e| {
        if !name.is_empty() {
            e.path.insert(0, format!("`{name}`"));
        }
        e
    })?;
    let bad = |what: String| -> Fail {
        Fail {
            path: vec![format!("`{name}`")],
            what,
        }
    };
    let dims: Vec<i64> = dims_raw.iter().map(|&d| d as i64).collect();
    let mut numel: usize = 1;
    for &d in &dims {
        let d = usize::try_from(d).map_err(|_| bad(format!("negative dimension in {dims:?}")))?;
        numel = numel
            .checked_mul(d)
            .ok_or_else(|| bad(format!("dimensions {dims:?} overflow")))?;
    }
    let code32 = i32::try_from(code).map_err(|_| bad(format!("data type {code}")))?;
    let data_type = DataType::from_code(code32);
    let count = |n: usize, field: &str| -> R<()> {
        if n == numel {
            Ok(())
        } else {
            Err(bad(format!(
                "{field} holds {n} values, dims {dims:?} need {numel}"
            )))
        }
    };
    let payload = if external {
        Payload::External
    } else if let Some(r) = raw {
        if let Some(size) = data_type.size() {
            let need = numel
                .checked_mul(size)
                .ok_or_else(|| bad(format!("dimensions {dims:?} overflow")))?;
            if r.len() != need {
                return Err(bad(format!(
                    "raw_data has {} bytes, dims {dims:?} of {data_type} need {need}",
                    r.len()
                )));
            }
        }
        let start = cx.offset_of(r);
        Payload::Raw(start..start + r.len())
    } else if !f32s.is_empty() {
        count(f32s.len(), "float_data")?;
        Payload::F32(f32s.into_iter().map(f32::from_bits).collect())
    } else if !i32s.is_empty() {
        count(i32s.len(), "int32_data")?;
        // int32 values are sign-extended to 64 bits on the wire.
        Payload::I32(i32s.into_iter().map(|v| v as i64 as i32).collect())
    } else if !i64s.is_empty() {
        count(i64s.len(), "int64_data")?;
        Payload::I64(i64s.into_iter().map(|v| v as i64).collect())
    } else if !f64s.is_empty() {
        count(f64s.len(), "double_data")?;
        Payload::F64(f64s.into_iter().map(f64::from_bits).collect())
    } else if !u64s.is_empty() {
        count(u64s.len(), "uint64_data")?;
        Payload::U64(u64s)
    } else {
        if numel != 0 && data_type != DataType::String {
            return Err(bad(format!("no data for dims {dims:?}")));
        }
        Payload::Empty
    };
    Ok(TensorInfo {
        name,
        dims,
        data_type,
        payload,
    })
}

fn parse_value_info(buf: &[u8]) -> R<ValueInfo> {
    let mut v = ValueInfo {
        name: String::new(),
        elem_type: None,
        shape: None,
    };
    fields(buf, |f| {
        match f.number {
            1 => v.name = string(&f)?,
            // TypeProto: only tensor_type (field 1) is decoded.
            2 => fields(bytes(&f)?, |t| {
                if t.number == 1 {
                    fields(bytes(&t)?, |tt| {
                        match tt.number {
                            1 => {
                                let c = varint(&tt)? as i64;
                                v.elem_type = i32::try_from(c).ok().map(DataType::from_code);
                            }
                            2 => v.shape = Some(parse_shape(bytes(&tt)?)?),
                            _ => {}
                        }
                        Ok(())
                    })?;
                }
                Ok(())
            })?,
            _ => {}
        }
        Ok(())
    })?;
    Ok(v)
}

fn parse_shape(buf: &[u8]) -> R<Vec<Dim>> {
    let mut dims = Vec::new();
    fields(buf, |f| {
        if f.number == 1 {
            let mut d = Dim::Unknown;
            fields(bytes(&f)?, |x| {
                match x.number {
                    1 => d = Dim::Value(varint(&x)? as i64),
                    2 => d = Dim::Param(string(&x)?),
                    _ => {}
                }
                Ok(())
            })?;
            dims.push(d);
        }
        Ok(())
    })?;
    Ok(dims)
}
