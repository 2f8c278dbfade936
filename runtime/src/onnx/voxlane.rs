//! voxlane's own weight file for an ONNX graph: a safetensors file holding
//! every initializer (and attribute tensor) under its name, in its own
//! dtype where safetensors has one (int8 weights stay int8 beside their
//! scales and zero points), and the graph's structure (nodes, attributes,
//! inputs, outputs) as JSON in the `voxlane.graph` tensor (bytes).
//!
//! Converted once ([`convert`]), it is opened by [`super::OnnxModel::open`]
//! like the ONNX file: memory-mapped, every payload a byte range of the map
//! (8-byte aligned), no protobuf scan. A truncated file, a foreign
//! safetensors file or a corrupt header is a typed error naming what is
//! wrong.

use super::dtype::DataType;
use super::error::OnnxError;
use super::file::OnnxModel;
use super::model::{
    AttrValue, Attribute, Dim, Graph, ModelInfo, Node, OpsetId, Payload, TensorInfo, ValueInfo,
};
use super::parse::Bad;
use super::tensor::Tensor;
use crate::weights::{write_safetensors, TensorData};
use serde_json::{json, Map, Value};
use std::path::Path;

/// Metadata key of the format tag.
const FORMAT_KEY: &str = "voxlane.format";
/// The format tag this reader writes (and accepts, as it does the first).
pub const FORMAT: &str = "voxlane-onnx-graph/2";
/// The first format: the graph JSON as a metadata string (escaped inside
/// the header's JSON, so parsed twice; still read).
const FORMAT_1: &str = "voxlane-onnx-graph/1";
/// In a converted file's name, so a build writing a new format converts
/// again instead of failing on an older cached conversion.
pub const FILE_TAG: &str = "g2";
/// Key of the graph JSON: a `U8` tensor (format 2), metadata (format 1).
const GRAPH_KEY: &str = "voxlane.graph";

/// Does `bytes` start like a safetensors file (u64 header length, then `{`)?
pub(crate) fn looks_like_safetensors(bytes: &[u8]) -> bool {
    bytes.len() >= 9 && bytes[8] == b'{' && {
        let mut n = [0u8; 8];
        n.copy_from_slice(&bytes[..8]);
        u64::from_le_bytes(n) < 1 << 32
    }
}

/// Little-endian bytes of `t`'s elements in its own element size.
fn raw_bytes(t: &Tensor<'_>) -> Result<Vec<u8>, OnnxError> {
    if let Some(b) = t.raw() {
        return Ok(b.to_vec());
    }
    let unsupported = |detail: &str| OnnxError::Unsupported {
        tensor: t.name.to_string(),
        detail: detail.to_string(),
    };
    Ok(match t.data_type {
        DataType::Float => t.to_f32()?.iter().flat_map(|v| v.to_le_bytes()).collect(),
        DataType::Double => {
            return Err(unsupported(
                "double tensors are not kept by the voxlane format",
            ))
        }
        DataType::Float16 | DataType::Bfloat16 => t
            .half_bits()?
            .iter()
            .flat_map(|&v| (v as u16).to_le_bytes())
            .collect(),
        DataType::Int8 | DataType::Uint8 | DataType::Bool => {
            t.to_i64()?.iter().map(|&v| v as u8).collect()
        }
        DataType::Int16 | DataType::Uint16 => t
            .to_i64()?
            .iter()
            .flat_map(|&v| (v as u16).to_le_bytes())
            .collect(),
        DataType::Int32 | DataType::Uint32 => t
            .to_i64()?
            .iter()
            .flat_map(|&v| (v as u32).to_le_bytes())
            .collect(),
        DataType::Int64 | DataType::Uint64 => {
            t.to_i64()?.iter().flat_map(|&v| v.to_le_bytes()).collect()
        }
        DataType::String | DataType::Other(_) => {
            return Err(unsupported("no fixed-size element type"))
        }
    })
}

/// Owned safetensors data of `t`: its own dtype when safetensors has one, else bytes.
fn tensor_data(t: &Tensor<'_>) -> Result<(TensorData, Vec<usize>), OnnxError> {
    let bytes = raw_bytes(t)?;
    let shape = t.shape();
    let le2 = |b: &[u8]| -> Vec<u16> {
        b.chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect()
    };
    let le4 = |b: &[u8]| -> Vec<[u8; 4]> {
        b.chunks_exact(4)
            .map(|c| [c[0], c[1], c[2], c[3]])
            .collect()
    };
    Ok(match t.data_type {
        DataType::Float => (
            TensorData::F32(le4(&bytes).into_iter().map(f32::from_le_bytes).collect()),
            shape,
        ),
        DataType::Float16 => (TensorData::F16(le2(&bytes)), shape),
        DataType::Bfloat16 => (TensorData::BF16(le2(&bytes)), shape),
        DataType::Int8 => (
            TensorData::I8(bytes.iter().map(|&b| b as i8).collect()),
            shape,
        ),
        DataType::Int32 => (
            TensorData::I32(le4(&bytes).into_iter().map(i32::from_le_bytes).collect()),
            shape,
        ),
        DataType::Int64 => (
            TensorData::I64(
                bytes
                    .chunks_exact(8)
                    .map(|c| {
                        let mut a = [0u8; 8];
                        a.copy_from_slice(c);
                        i64::from_le_bytes(a)
                    })
                    .collect(),
            ),
            shape,
        ),
        // u8 itself, and every other type as its raw bytes.
        _ => {
            let n = bytes.len();
            (TensorData::U8(bytes), vec![n])
        }
    })
}

fn value_info_json(v: &ValueInfo) -> Value {
    let shape = v.shape.as_ref().map(|dims| {
        dims.iter()
            .map(|d| match d {
                Dim::Value(n) => json!({ "v": n }),
                Dim::Param(p) => json!({ "p": p }),
                Dim::Unknown => Value::Null,
            })
            .collect::<Vec<_>>()
    });
    json!({ "name": v.name, "type": v.elem_type.map(DataType::code), "shape": shape })
}

/// Collects every tensor payload to write while the graph is turned into JSON.
struct Writer<'m> {
    model: &'m OnnxModel,
    tensors: Vec<(String, TensorData, Vec<usize>)>,
}

impl Writer<'_> {
    /// Store `info`'s payload under `key`; returns its JSON description.
    fn tensor(&mut self, key: String, info: &TensorInfo) -> Result<Value, OnnxError> {
        let t = self.model.view(info);
        let (data, shape) = tensor_data(&t)?;
        self.tensors.push((key.clone(), data, shape));
        Ok(
            json!({ "key": key, "name": info.name, "dims": info.dims, "type": info.data_type.code() }),
        )
    }

    fn attr(&mut self, node: usize, a: &Attribute) -> Result<Value, OnnxError> {
        let key = |i: Option<usize>| match i {
            Some(i) => format!("attr/{node}/{}/{i}", a.name),
            None => format!("attr/{node}/{}", a.name),
        };
        let v = match &a.value {
            AttrValue::Float(f) => json!({ "f": f }),
            AttrValue::Int(i) => json!({ "i": i }),
            AttrValue::String(s) => json!({ "s": s }),
            AttrValue::Floats(v) => json!({ "floats": v }),
            AttrValue::Ints(v) => json!({ "ints": v }),
            AttrValue::Strings(v) => json!({ "strings": v }),
            AttrValue::Tensor(t) => json!({ "t": self.tensor(key(None), t)? }),
            AttrValue::Tensors(ts) => {
                let mut list = Vec::with_capacity(ts.len());
                for (i, t) in ts.iter().enumerate() {
                    list.push(self.tensor(key(Some(i)), t)?);
                }
                json!({ "tensors": list })
            }
            AttrValue::Other(code) => json!({ "other": code }),
            AttrValue::Graph(_) | AttrValue::Graphs(_) => {
                return Err(OnnxError::Unsupported {
                    tensor: a.name.clone(),
                    detail: "subgraph attributes are not kept by the voxlane format".into(),
                })
            }
        };
        Ok(json!({ "name": a.name, "value": v }))
    }

    fn graph(&mut self, g: &Graph) -> Result<Value, OnnxError> {
        let mut inits = Vec::with_capacity(g.initializers.len());
        for t in &g.initializers {
            inits.push(self.tensor(format!("init/{}", t.name), t)?);
        }
        let mut nodes = Vec::with_capacity(g.nodes.len());
        for (i, n) in g.nodes.iter().enumerate() {
            let mut attrs = Vec::with_capacity(n.attributes.len());
            for a in &n.attributes {
                attrs.push(self.attr(i, a)?);
            }
            nodes.push(json!({
                "name": n.name, "op": n.op_type, "domain": n.domain,
                "inputs": n.inputs, "outputs": n.outputs, "attrs": attrs,
            }));
        }
        Ok(json!({
            "name": g.name,
            "initializers": inits,
            "nodes": nodes,
            "inputs": g.inputs.iter().map(value_info_json).collect::<Vec<_>>(),
            "outputs": g.outputs.iter().map(value_info_json).collect::<Vec<_>>(),
            "value_info": g.value_info.iter().map(value_info_json).collect::<Vec<_>>(),
        }))
    }
}

/// What a conversion wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Converted {
    /// Tensors stored (initializers and attribute tensors).
    pub tensors: usize,
    /// Nodes described.
    pub nodes: usize,
}

/// Write `model` to `out` in the voxlane format (atomically: no partial file
/// on failure); `metadata` is stored beside the graph (e.g. the source's sha256).
pub fn convert(
    model: &OnnxModel,
    out: &Path,
    metadata: &[(&str, &str)],
) -> Result<Converted, OnnxError> {
    let mut w = Writer {
        model,
        tensors: Vec::new(),
    };
    let graph = w.graph(model.graph())?;
    let info = model.info();
    let header = json!({
        "ir_version": info.ir_version,
        "producer_name": info.producer_name,
        "producer_version": info.producer_version,
        "domain": info.domain,
        "model_version": info.model_version,
        "opsets": info.opset_import.iter().map(|o| json!([o.domain, o.version])).collect::<Vec<_>>(),
        "graph": graph,
    })
    .to_string();
    let mut refs: Vec<(&str, TensorData, Vec<usize>)> = w
        .tensors
        .iter()
        .map(|(n, d, s)| (n.as_str(), d.clone(), s.clone()))
        .collect();
    let tensors = refs.len();
    let len = header.len();
    refs.push((GRAPH_KEY, TensorData::U8(header.into_bytes()), vec![len]));
    let mut meta = vec![(FORMAT_KEY, FORMAT)];
    meta.extend_from_slice(metadata);
    write_safetensors(out, &refs, &meta).map_err(|e| OnnxError::Io {
        path: out.to_path_buf(),
        source: std::io::Error::other(e.to_string()),
    })?;
    Ok(Converted {
        tensors,
        nodes: model.graph().nodes.len(),
    })
}

/// The file's tensor table: key → byte range of the file.
struct Table {
    entries: Map<String, Value>,
    data_start: usize,
    len: usize,
}

impl Table {
    fn range(&self, key: &str, at: &str) -> Result<std::ops::Range<usize>, Bad> {
        let bad = || Bad::Malformed(format!("{key}: bad data_offsets"));
        let e = self
            .entries
            .get(key)
            .ok_or_else(|| Bad::Malformed(format!("{at}: tensor `{key}` is not in the file")))?;
        let off = e
            .get("data_offsets")
            .and_then(Value::as_array)
            .ok_or_else(bad)?;
        let offset = |v: &Value| -> Result<usize, Bad> {
            v.as_u64()
                .and_then(|o| usize::try_from(o).ok())
                .and_then(|o| self.data_start.checked_add(o))
                .ok_or_else(bad)
        };
        let (a, b) = match off.as_slice() {
            [a, b] => (offset(a)?, offset(b)?),
            _ => return Err(bad()),
        };
        if a > b {
            return Err(Bad::Malformed(format!("{key}: data_offsets run backwards")));
        }
        if b > self.len {
            return Err(Bad::Truncated(format!(
                "tensor `{key}` ends at byte {b}, the file has {}",
                self.len
            )));
        }
        Ok(a..b)
    }

    /// A [`TensorInfo`] from its description in the graph.
    fn tensor(&self, t: doc::Tensor, at: &str) -> Result<TensorInfo, Bad> {
        let key = t.key;
        let data_type = DataType::from_code(t.ty);
        let range = self.range(&key, at)?;
        // Checked: hostile dims must neither be negative nor overflow
        // (`TensorInfo::numel` relies on both).
        let dims = t.dims;
        let numel = dims
            .iter()
            .try_fold(1usize, |n, &d| n.checked_mul(usize::try_from(d).ok()?))
            .ok_or_else(|| {
                Bad::Malformed(format!(
                    "tensor `{key}`: dims {dims:?} are negative or overflow"
                ))
            })?;
        if let Some(size) = data_type.size() {
            if numel.checked_mul(size) != Some(range.len()) {
                return Err(Bad::Malformed(format!(
                    "tensor `{key}`: {} bytes for dims {dims:?} of {data_type}",
                    range.len()
                )));
            }
        }
        Ok(TensorInfo {
            name: t.name,
            dims,
            data_type,
            payload: Payload::Raw(range),
        })
    }
}

/// The graph JSON as [`Writer`] lays it out, read straight into typed
/// values (a generic JSON tree first was most of a model's load).
mod doc {
    use serde::Deserialize;

    #[derive(Deserialize)]
    pub struct Model {
        pub ir_version: i64,
        pub producer_name: String,
        pub producer_version: String,
        pub domain: String,
        pub model_version: i64,
        pub opsets: Vec<(String, i64)>,
        pub graph: Graph,
    }

    #[derive(Deserialize)]
    pub struct Graph {
        pub name: String,
        pub initializers: Vec<Tensor>,
        pub nodes: Vec<Node>,
        pub inputs: Vec<ValueInfo>,
        pub outputs: Vec<ValueInfo>,
        pub value_info: Vec<ValueInfo>,
    }

    #[derive(Deserialize)]
    pub struct Tensor {
        pub key: String,
        pub name: String,
        pub dims: Vec<i64>,
        #[serde(rename = "type")]
        pub ty: i32,
    }

    #[derive(Deserialize)]
    pub struct Node {
        pub name: String,
        pub op: String,
        pub domain: String,
        pub inputs: Vec<String>,
        pub outputs: Vec<String>,
        pub attrs: Vec<Attr>,
    }

    #[derive(Deserialize)]
    pub struct Attr {
        pub name: String,
        pub value: Value,
    }

    /// One attribute value: an object with one key naming its kind.
    #[derive(Deserialize)]
    #[serde(rename_all = "lowercase")]
    pub enum Value {
        F(f64),
        I(i64),
        S(Vec<u8>),
        Floats(Vec<f64>),
        Ints(Vec<i64>),
        Strings(Vec<Vec<u8>>),
        T(Tensor),
        Tensors(Vec<Tensor>),
        Other(i64),
    }

    #[derive(Deserialize)]
    pub struct ValueInfo {
        pub name: String,
        #[serde(rename = "type")]
        pub ty: Option<i32>,
        pub shape: Option<Vec<Option<Dim>>>,
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "lowercase")]
    pub enum Dim {
        V(i64),
        P(String),
    }
}

fn value_info(v: doc::ValueInfo) -> ValueInfo {
    ValueInfo {
        name: v.name,
        elem_type: v.ty.map(DataType::from_code),
        shape: v.shape.map(|dims| {
            dims.into_iter()
                .map(|d| match d {
                    None => Dim::Unknown,
                    Some(doc::Dim::V(n)) => Dim::Value(n),
                    Some(doc::Dim::P(p)) => Dim::Param(p),
                })
                .collect()
        }),
    }
}

fn attribute(table: &Table, a: doc::Attr, at: &str) -> Result<Attribute, Bad> {
    let at = format!("{at} attribute {}", a.name);
    let value = match a.value {
        doc::Value::F(f) => AttrValue::Float(f as f32),
        doc::Value::I(i) => AttrValue::Int(i),
        doc::Value::S(s) => AttrValue::String(s),
        doc::Value::Floats(v) => AttrValue::Floats(v.into_iter().map(|f| f as f32).collect()),
        doc::Value::Ints(v) => AttrValue::Ints(v),
        doc::Value::Strings(v) => AttrValue::Strings(v),
        doc::Value::T(t) => AttrValue::Tensor(table.tensor(t, &at)?),
        doc::Value::Tensors(ts) => AttrValue::Tensors(
            ts.into_iter()
                .map(|t| table.tensor(t, &at))
                .collect::<Result<_, _>>()?,
        ),
        doc::Value::Other(code) => AttrValue::Other(code),
    };
    Ok(Attribute {
        name: a.name,
        value,
    })
}

/// Decode a voxlane-format file held in `bytes`.
pub(crate) fn decode(bytes: &[u8]) -> Result<(ModelInfo, Graph), Bad> {
    let mut n = [0u8; 8];
    n.copy_from_slice(&bytes[..8]);
    let hl = u64::from_le_bytes(n) as usize;
    let header = bytes.get(8..8 + hl).ok_or_else(|| {
        Bad::Truncated(format!(
            "safetensors header of {hl} bytes, the file has {}",
            bytes.len()
        ))
    })?;
    let header: Value = serde_json::from_slice(header)
        .map_err(|e| Bad::Malformed(format!("safetensors header: {e}")))?;
    let Value::Object(mut entries) = header else {
        return Err(Bad::Malformed("safetensors header is not an object".into()));
    };
    let meta = entries.remove("__metadata__").unwrap_or(Value::Null);
    let table = Table {
        entries,
        data_start: 8 + hl,
        len: bytes.len(),
    };
    let text: &[u8] = match meta.get(FORMAT_KEY).and_then(Value::as_str) {
        Some(FORMAT) => &bytes[table.range(GRAPH_KEY, "graph")?],
        Some(FORMAT_1) => meta
            .get(GRAPH_KEY)
            .and_then(Value::as_str)
            .ok_or_else(|| Bad::Malformed(format!("no `{GRAPH_KEY}` metadata")))?
            .as_bytes(),
        Some(other) => {
            return Err(Bad::NotOnnx(format!(
                "voxlane weight file of format `{other}`, this build reads `{FORMAT}`"
            )))
        }
        None => {
            return Err(Bad::NotOnnx(
                "a safetensors file without a voxlane graph (`voxlane.format` metadata)".into(),
            ))
        }
    };
    let doc: doc::Model =
        serde_json::from_slice(text).map_err(|e| Bad::Malformed(format!("`{GRAPH_KEY}`: {e}")))?;
    let g = doc.graph;
    let mut graph = Graph {
        name: g.name,
        ..Graph::default()
    };
    graph.initializers = g
        .initializers
        .into_iter()
        .map(|t| table.tensor(t, "initializer"))
        .collect::<Result<_, _>>()?;
    graph.nodes.reserve(g.nodes.len());
    for (i, n) in g.nodes.into_iter().enumerate() {
        let at = format!("node {i}");
        let attributes = n
            .attrs
            .into_iter()
            .map(|a| attribute(&table, a, &at))
            .collect::<Result<_, _>>()?;
        graph.nodes.push(Node {
            name: n.name,
            op_type: n.op,
            domain: n.domain,
            inputs: n.inputs,
            outputs: n.outputs,
            attributes,
        });
    }
    graph.inputs = g.inputs.into_iter().map(value_info).collect();
    graph.outputs = g.outputs.into_iter().map(value_info).collect();
    graph.value_info = g.value_info.into_iter().map(value_info).collect();
    graph.build_index();
    let info = ModelInfo {
        ir_version: doc.ir_version,
        producer_name: doc.producer_name,
        producer_version: doc.producer_version,
        domain: doc.domain,
        model_version: doc.model_version,
        opset_import: (doc.opsets.into_iter())
            .map(|(domain, version)| OpsetId { domain, version })
            .collect(),
    };
    Ok((info, graph))
}
