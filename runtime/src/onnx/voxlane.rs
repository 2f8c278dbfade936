//! voxlane's own weight file for an ONNX graph: a safetensors file holding
//! every initializer (and attribute tensor) under its name, in its own
//! dtype where safetensors has one (int8 weights stay int8 beside their
//! scales and zero points), and the graph's structure (nodes, attributes,
//! inputs, outputs) as JSON in the metadata (`voxlane.graph`).
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
/// The format tag this reader writes and accepts.
pub const FORMAT: &str = "voxlane-onnx-graph/1";
/// Metadata key of the graph JSON.
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
    let refs: Vec<(&str, TensorData, Vec<usize>)> = w
        .tensors
        .iter()
        .map(|(n, d, s)| (n.as_str(), d.clone(), s.clone()))
        .collect();
    let mut meta = vec![(FORMAT_KEY, FORMAT), (GRAPH_KEY, header.as_str())];
    meta.extend_from_slice(metadata);
    write_safetensors(out, &refs, &meta).map_err(|e| OnnxError::Io {
        path: out.to_path_buf(),
        source: std::io::Error::other(e.to_string()),
    })?;
    Ok(Converted {
        tensors: refs.len(),
        nodes: model.graph().nodes.len(),
    })
}

/// Read helpers over the decoded JSON, each failure a [`Bad::Malformed`].
fn field<'a>(v: &'a Value, key: &str, at: &str) -> Result<&'a Value, Bad> {
    v.get(key)
        .ok_or_else(|| Bad::Malformed(format!("{at}: missing `{key}`")))
}

fn string(v: &Value, key: &str, at: &str) -> Result<String, Bad> {
    field(v, key, at)?
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| Bad::Malformed(format!("{at}: `{key}` is not a string")))
}

fn int(v: &Value, at: &str) -> Result<i64, Bad> {
    v.as_i64()
        .ok_or_else(|| Bad::Malformed(format!("{at}: expected an integer, found {v}")))
}

fn list<'a>(v: &'a Value, key: &str, at: &str) -> Result<&'a Vec<Value>, Bad> {
    field(v, key, at)?
        .as_array()
        .ok_or_else(|| Bad::Malformed(format!("{at}: `{key}` is not a list")))
}

fn strings(v: &Value, key: &str, at: &str) -> Result<Vec<String>, Bad> {
    list(v, key, at)?
        .iter()
        .map(|s| {
            s.as_str()
                .map(str::to_string)
                .ok_or_else(|| Bad::Malformed(format!("{at}: `{key}` holds a non-string")))
        })
        .collect()
}

/// The file's tensor table: key → byte range of the file.
struct Table {
    entries: Map<String, Value>,
    data_start: usize,
    len: usize,
}

impl Table {
    fn range(&self, key: &str, at: &str) -> Result<std::ops::Range<usize>, Bad> {
        let e = self
            .entries
            .get(key)
            .ok_or_else(|| Bad::Malformed(format!("{at}: tensor `{key}` is not in the file")))?;
        let off = list(e, "data_offsets", key)?;
        let offset = |v: &Value| -> Result<usize, Bad> {
            usize::try_from(int(v, key)?)
                .ok()
                .and_then(|o| self.data_start.checked_add(o))
                .ok_or_else(|| Bad::Malformed(format!("{key}: bad data_offsets")))
        };
        let (a, b) = match off.as_slice() {
            [a, b] => (offset(a)?, offset(b)?),
            _ => return Err(Bad::Malformed(format!("{key}: bad data_offsets"))),
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

    /// A [`TensorInfo`] from its JSON description.
    fn tensor(&self, v: &Value, at: &str) -> Result<TensorInfo, Bad> {
        let key = string(v, "key", at)?;
        let dims = list(v, "dims", &key)?
            .iter()
            .map(|d| int(d, &key))
            .collect::<Result<Vec<_>, _>>()?;
        let data_type = DataType::from_code(int(field(v, "type", &key)?, &key)? as i32);
        let range = self.range(&key, at)?;
        // Checked: hostile dims must neither be negative nor overflow
        // (`TensorInfo::numel` relies on both).
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
            name: string(v, "name", &key)?,
            dims,
            data_type,
            payload: Payload::Raw(range),
        })
    }
}

fn value_info(v: &Value, at: &str) -> Result<ValueInfo, Bad> {
    let shape = match field(v, "shape", at)? {
        Value::Null => None,
        Value::Array(dims) => Some(
            dims.iter()
                .map(|d| match d {
                    Value::Null => Ok(Dim::Unknown),
                    d if d.get("v").is_some() => Ok(Dim::Value(int(field(d, "v", at)?, at)?)),
                    d => Ok(Dim::Param(string(d, "p", at)?)),
                })
                .collect::<Result<Vec<_>, Bad>>()?,
        ),
        other => return Err(Bad::Malformed(format!("{at}: bad shape {other}"))),
    };
    Ok(ValueInfo {
        name: string(v, "name", at)?,
        elem_type: field(v, "type", at)?
            .as_i64()
            .map(|c| DataType::from_code(c as i32)),
        shape,
    })
}

fn bytes_of(v: &Value, at: &str) -> Result<Vec<u8>, Bad> {
    v.as_array()
        .ok_or_else(|| Bad::Malformed(format!("{at}: expected bytes")))?
        .iter()
        .map(|b| int(b, at).map(|b| b as u8))
        .collect()
}

fn attribute(table: &Table, v: &Value, at: &str) -> Result<Attribute, Bad> {
    let name = string(v, "name", at)?;
    let at = format!("{at} attribute {name}");
    let val = field(v, "value", &at)?;
    let floats = |x: &Value| -> Result<Vec<f32>, Bad> {
        x.as_array()
            .ok_or_else(|| Bad::Malformed(format!("{at}: expected floats")))?
            .iter()
            .map(|f| {
                f.as_f64()
                    .map(|f| f as f32)
                    .ok_or_else(|| Bad::Malformed(format!("{at}: expected a float")))
            })
            .collect()
    };
    let value = if let Some(f) = val.get("f") {
        AttrValue::Float(
            f.as_f64()
                .ok_or_else(|| Bad::Malformed(format!("{at}: bad float")))? as f32,
        )
    } else if let Some(i) = val.get("i") {
        AttrValue::Int(int(i, &at)?)
    } else if let Some(s) = val.get("s") {
        AttrValue::String(bytes_of(s, &at)?)
    } else if let Some(f) = val.get("floats") {
        AttrValue::Floats(floats(f)?)
    } else if let Some(i) = val.get("ints") {
        AttrValue::Ints(
            i.as_array()
                .ok_or_else(|| Bad::Malformed(format!("{at}: expected ints")))?
                .iter()
                .map(|x| int(x, &at))
                .collect::<Result<_, _>>()?,
        )
    } else if let Some(s) = val.get("strings") {
        AttrValue::Strings(
            s.as_array()
                .ok_or_else(|| Bad::Malformed(format!("{at}: expected strings")))?
                .iter()
                .map(|x| bytes_of(x, &at))
                .collect::<Result<_, _>>()?,
        )
    } else if let Some(t) = val.get("t") {
        AttrValue::Tensor(table.tensor(t, &at)?)
    } else if let Some(ts) = val.get("tensors") {
        AttrValue::Tensors(
            ts.as_array()
                .ok_or_else(|| Bad::Malformed(format!("{at}: expected tensors")))?
                .iter()
                .map(|t| table.tensor(t, &at))
                .collect::<Result<_, _>>()?,
        )
    } else if let Some(c) = val.get("other") {
        AttrValue::Other(int(c, &at)?)
    } else {
        return Err(Bad::Malformed(format!(
            "{at}: unknown attribute kind {val}"
        )));
    };
    Ok(Attribute { name, value })
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
    let mut entries = header
        .as_object()
        .cloned()
        .ok_or_else(|| Bad::Malformed("safetensors header is not an object".into()))?;
    let meta = entries.remove("__metadata__").unwrap_or(Value::Null);
    match meta.get(FORMAT_KEY).and_then(Value::as_str) {
        Some(FORMAT) => {}
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
    }
    let text = meta
        .get(GRAPH_KEY)
        .and_then(Value::as_str)
        .ok_or_else(|| Bad::Malformed(format!("no `{GRAPH_KEY}` metadata")))?;
    let doc: Value = serde_json::from_str(text)
        .map_err(|e| Bad::Malformed(format!("`{GRAPH_KEY}` is not JSON: {e}")))?;
    let table = Table {
        entries,
        data_start: 8 + hl,
        len: bytes.len(),
    };
    let at = "graph";
    let g = field(&doc, "graph", at)?;
    let mut graph = Graph {
        name: string(g, "name", at)?,
        ..Graph::default()
    };
    for t in list(g, "initializers", at)? {
        graph.initializers.push(table.tensor(t, "initializer")?);
    }
    for (i, n) in list(g, "nodes", at)?.iter().enumerate() {
        let at = format!("node {i}");
        let attributes = list(n, "attrs", &at)?
            .iter()
            .map(|a| attribute(&table, a, &at))
            .collect::<Result<_, _>>()?;
        graph.nodes.push(Node {
            name: string(n, "name", &at)?,
            op_type: string(n, "op", &at)?,
            domain: string(n, "domain", &at)?,
            inputs: strings(n, "inputs", &at)?,
            outputs: strings(n, "outputs", &at)?,
            attributes,
        });
    }
    for (key, dst) in [
        ("inputs", &mut graph.inputs),
        ("outputs", &mut graph.outputs),
        ("value_info", &mut graph.value_info),
    ] {
        for v in list(g, key, at)? {
            dst.push(value_info(v, key)?);
        }
    }
    graph.build_index();
    let opsets = list(&doc, "opsets", "model")?
        .iter()
        .map(|o| match o.as_array().map(Vec::as_slice) {
            Some([d, v]) => Ok(OpsetId {
                domain: d.as_str().unwrap_or_default().to_string(),
                version: int(v, "opset")?,
            }),
            _ => Err(Bad::Malformed(format!("bad opset entry {o}"))),
        })
        .collect::<Result<_, _>>()?;
    let info = ModelInfo {
        ir_version: int(field(&doc, "ir_version", "model")?, "ir_version")?,
        producer_name: string(&doc, "producer_name", "model")?,
        producer_version: string(&doc, "producer_version", "model")?,
        domain: string(&doc, "domain", "model")?,
        model_version: int(field(&doc, "model_version", "model")?, "model_version")?,
        opset_import: opsets,
    };
    Ok((info, graph))
}
