//! The decoded structure of an ONNX model: graph, nodes, attributes, tensors.
//!
//! Everything but tensor payloads is owned (names are small); payloads in
//! `raw_data` are byte ranges into the file so the weights stay in the map.

use super::dtype::DataType;
use std::collections::HashMap;
use std::ops::Range;

/// `ModelProto` header fields.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelInfo {
    /// ONNX IR version.
    pub ir_version: i64,
    /// Tool that wrote the file.
    pub producer_name: String,
    /// Its version.
    pub producer_version: String,
    /// Model domain.
    pub domain: String,
    /// Model version.
    pub model_version: i64,
    /// Operator sets the graph uses.
    pub opset_import: Vec<OpsetId>,
}

/// One imported operator set (`""` is the default ONNX domain).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpsetId {
    /// Domain, e.g. `""` or `"com.microsoft"`.
    pub domain: String,
    /// Opset version.
    pub version: i64,
}

/// One dimension of a declared shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dim {
    /// A fixed size.
    Value(i64),
    /// A symbolic size, e.g. `sequence_length`.
    Param(String),
    /// Neither given.
    Unknown,
}

/// A graph input, output or value_info entry.
#[derive(Debug, Clone, PartialEq)]
pub struct ValueInfo {
    /// Value name.
    pub name: String,
    /// Element type, when the value is a tensor with a declared type.
    pub elem_type: Option<DataType>,
    /// Declared shape, when given.
    pub shape: Option<Vec<Dim>>,
}

/// Where a tensor's elements are.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Payload {
    /// `raw_data`: a byte range of the file (little-endian).
    Raw(Range<usize>),
    /// `float_data`.
    F32(Vec<f32>),
    /// `int32_data` (also carries int8/uint8/int16/f16/bf16/bool when not raw).
    I32(Vec<i32>),
    /// `int64_data`.
    I64(Vec<i64>),
    /// `double_data`.
    F64(Vec<f64>),
    /// `uint64_data` (also uint32).
    U64(Vec<u64>),
    /// Stored outside the file (`data_location = EXTERNAL`).
    External,
    /// No data field (empty tensor or string tensor).
    Empty,
}

/// A `TensorProto` (an initializer or an attribute value), payload not copied.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorInfo {
    /// Tensor name (may be empty for attribute tensors).
    pub name: String,
    /// Dimensions, outermost first.
    pub dims: Vec<i64>,
    /// Element type.
    pub data_type: DataType,
    pub(crate) payload: Payload,
}

impl TensorInfo {
    /// Number of elements.
    pub fn numel(&self) -> usize {
        // dims were checked non-negative and their product to fit at parse time.
        self.dims.iter().map(|&d| d as usize).product()
    }
}

/// An attribute value.
#[derive(Debug, Clone, PartialEq)]
pub enum AttrValue {
    /// `f`.
    Float(f32),
    /// `i`.
    Int(i64),
    /// `s` (bytes; usually UTF-8).
    String(Vec<u8>),
    /// `t`.
    Tensor(TensorInfo),
    /// `g` (a subgraph, e.g. an `If` branch).
    Graph(Box<Graph>),
    /// `floats`.
    Floats(Vec<f32>),
    /// `ints`.
    Ints(Vec<i64>),
    /// `strings`.
    Strings(Vec<Vec<u8>>),
    /// `tensors`.
    Tensors(Vec<TensorInfo>),
    /// `graphs`.
    Graphs(Vec<Graph>),
    /// An attribute type voxlane does not decode (the ONNX `AttributeType` code).
    Other(i64),
}

/// A named attribute of a node.
#[derive(Debug, Clone, PartialEq)]
pub struct Attribute {
    /// Attribute name.
    pub name: String,
    /// Its value.
    pub value: AttrValue,
}

/// A `NodeProto`: one operator application.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Node {
    /// Node name, e.g. `/decoder/decoder/generator/conv_post/Conv_quant`.
    pub name: String,
    /// Operator, e.g. `ConvInteger`.
    pub op_type: String,
    /// Operator domain (`""` for ONNX, `com.microsoft` for ORT contrib ops).
    pub domain: String,
    /// Input value names (`""` marks an omitted optional input).
    pub inputs: Vec<String>,
    /// Output value names.
    pub outputs: Vec<String>,
    /// Attributes, in file order.
    pub attributes: Vec<Attribute>,
}

impl Node {
    /// The attribute named `name`.
    pub fn attr(&self, name: &str) -> Option<&AttrValue> {
        self.attributes
            .iter()
            .find(|a| a.name == name)
            .map(|a| &a.value)
    }

    /// An integer attribute.
    pub fn attr_int(&self, name: &str) -> Option<i64> {
        match self.attr(name)? {
            AttrValue::Int(i) => Some(*i),
            _ => None,
        }
    }

    /// A float attribute.
    pub fn attr_float(&self, name: &str) -> Option<f32> {
        match self.attr(name)? {
            AttrValue::Float(f) => Some(*f),
            _ => None,
        }
    }

    /// An integer-list attribute.
    pub fn attr_ints(&self, name: &str) -> Option<&[i64]> {
        match self.attr(name)? {
            AttrValue::Ints(v) => Some(v),
            _ => None,
        }
    }
}

/// A `GraphProto`: nodes in topological order, initializers, inputs and outputs.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Graph {
    /// Graph name.
    pub name: String,
    /// Nodes, in file (topological) order.
    pub nodes: Vec<Node>,
    /// Initializers (weights and constants).
    pub initializers: Vec<TensorInfo>,
    /// Graph inputs (initializers may also be listed in old IR versions).
    pub inputs: Vec<ValueInfo>,
    /// Graph outputs.
    pub outputs: Vec<ValueInfo>,
    /// Declared types of intermediate values.
    pub value_info: Vec<ValueInfo>,
    pub(crate) init_index: HashMap<String, usize>,
    pub(crate) node_index: HashMap<String, usize>,
    /// Value name → the first node producing it.
    pub(crate) producer_index: HashMap<String, usize>,
    /// Value name → the nodes consuming it, in node order.
    pub(crate) consumer_index: HashMap<String, Vec<usize>>,
}

impl Graph {
    /// The initializer named `name`.
    pub fn initializer(&self, name: &str) -> Option<&TensorInfo> {
        self.init_index.get(name).map(|&i| &self.initializers[i])
    }

    /// The node named `name`.
    pub fn node(&self, name: &str) -> Option<&Node> {
        self.node_index.get(name).map(|&i| &self.nodes[i])
    }

    /// The node that produces value `value`.
    pub fn producer(&self, value: &str) -> Option<&Node> {
        if !self.indexed() {
            return self
                .nodes
                .iter()
                .find(|n| n.outputs.iter().any(|o| o == value));
        }
        self.producer_index.get(value).map(|&i| &self.nodes[i])
    }

    /// The nodes that consume value `value`.
    pub fn consumers<'g>(&'g self, value: &'g str) -> impl Iterator<Item = &'g Node> + 'g {
        // A graph built without its index (`Default` plus nodes) scans.
        let (indexed, scan) = match self.indexed() {
            true => (self.consumer_index.get(value).map(Vec::as_slice), None),
            false => (None, Some(self.nodes.iter())),
        };
        indexed
            .into_iter()
            .flatten()
            .map(|&i| &self.nodes[i])
            .chain(
                scan.into_iter()
                    .flatten()
                    .filter(move |n| n.inputs.iter().any(|i| i == value)),
            )
    }

    /// Whether the value indexes cover the nodes (a parsed graph's do).
    fn indexed(&self) -> bool {
        self.nodes.is_empty() || !self.producer_index.is_empty() || !self.consumer_index.is_empty()
    }

    pub(crate) fn build_index(&mut self) {
        self.init_index = self
            .initializers
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.clone(), i))
            .collect();
        self.node_index = self
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| !n.name.is_empty())
            .map(|(i, n)| (n.name.clone(), i))
            .collect();
        // Graph walks (a node's producer, its consumers) were linear scans
        // of every node, thousands per model load.
        self.producer_index.clear();
        self.consumer_index.clear();
        for (i, n) in self.nodes.iter().enumerate() {
            for o in &n.outputs {
                self.producer_index.entry(o.clone()).or_insert(i);
            }
            for v in &n.inputs {
                let users = self.consumer_index.entry(v.clone()).or_default();
                // A node reading one value twice is still one consumer.
                if users.last() != Some(&i) {
                    users.push(i);
                }
            }
        }
    }
}
