//! Typed weight bundles resolved from Kokoro's ONNX exports.
//!
//! Two graphs load: the int8 export (`kokoro-v1.0.int8.onnx`) and the plain
//! fp32 export (`kokoro-v1.0.onnx`). The stage loaders ask for the int8
//! node names (`.../MatMul_quant`); when that node is absent, [`KokoroGraph::node`]
//! resolves the float node it was quantized from (the name without `_quant`;
//! `<x>/Gemm_MatMul_quant` was the Linear `<x>/Gemm`), and each resolver
//! quantizes the float weights at load time exactly as onnxruntime's
//! `quantize_dynamic` did for the int8 export ([`super::quant::weights`]), so
//! both graphs run on the same int8 kernels. Weights the fp32 graph computes
//! in the graph (weight norm) are folded by [`super::fold`].
//!
//! The export's conventions (see `GRAPH.md`, "Quantization scheme") are
//! followed from a compute node outward through the graph, never by guessing
//! initializer names: a `MatMulInteger`'s per-channel scale sits on the
//! `*_scales_mul` Mul that multiplies the activation scale by it, a
//! `ConvInteger`'s on `<module>.bias_scale_node`, its float bias behind the
//! in-graph `Div → Floor → Cast → Reshape` chain, and so on. Bundles own
//! their data (copied out of the map) and pack kernel weights once here.

use std::borrow::Cow;
use voxlane_runtime::onnx::{DataType, Node, OnnxError, OnnxModel, Tensor};

use super::bind_cache::BindCache;
use super::fold::{fold, ConstData};
use super::quant::{weights, CacheKey, QConv, QLinear, QLstm, StoredQLinear, StoredQLstm};
use crate::kernels::conv1d::Conv1dParams;
use crate::kernels::KernelError;

/// Why a Kokoro stage could not be loaded or run.
#[derive(Debug, thiserror::Error)]
pub enum KokoroError {
    /// A node the stage needs is not in the graph.
    #[error("node `{0}` is missing from the Kokoro graph")]
    MissingNode(String),
    /// A node does not have the shape the export's conventions promise.
    #[error("node `{node}`: {detail}")]
    BadNode {
        /// Node name.
        node: String,
        /// What is wrong.
        detail: String,
    },
    /// An initializer the stage needs is absent.
    #[error("tensor `{0}` is missing from the Kokoro graph")]
    MissingTensor(String),
    /// An initializer has the wrong type or shape.
    #[error("tensor `{tensor}`: {detail}")]
    BadTensor {
        /// Tensor name.
        tensor: String,
        /// What is wrong.
        detail: String,
    },
    /// Inputs the model cannot take (bad token ids, too many tokens, bad style).
    #[error("invalid Kokoro input: {0}")]
    Input(String),
    /// The ONNX file could not be read.
    #[error(transparent)]
    Onnx(#[from] OnnxError),
    /// A kernel rejected its operands.
    #[error(transparent)]
    Kernel(#[from] KernelError),
    /// A lane of the pool panicked.
    #[error(transparent)]
    Lane(#[from] voxlane_runtime::LaneError),
}

fn bad_node(node: &Node, detail: impl Into<String>) -> KokoroError {
    KokoroError::BadNode {
        node: node.name.clone(),
        detail: detail.into(),
    }
}

fn bad_tensor(t: &Tensor<'_>, detail: impl Into<String>) -> KokoroError {
    KokoroError::BadTensor {
        tensor: t.name.to_string(),
        detail: detail.into(),
    }
}

/// Float `LayerNormalization` / `SkipLayerNormalization` parameters.
#[derive(Debug, Clone)]
pub struct LayerNormParams {
    /// Scale `[dim]`.
    pub gamma: Vec<f32>,
    /// Shift `[dim]`.
    pub beta: Vec<f32>,
    /// The node's epsilon.
    pub eps: f32,
}

/// An INT8 embedding table dequantized per tensor (`Gather` + `DequantizeLinear`).
#[derive(Debug, Clone)]
pub struct QEmbedding {
    /// Rows (vocabulary or positions).
    pub rows: usize,
    /// Row width.
    pub dim: usize,
    /// `[rows, dim]` int8 table.
    pub table: Vec<i8>,
    /// Dequantization scale.
    pub scale: f32,
    /// Dequantization zero point.
    pub zero_point: i8,
}

impl QEmbedding {
    /// Row `i` dequantized into `out[dim]` as `DequantizeLinear` does: `(q − zp) · scale`.
    pub fn row_into(&self, i: usize, out: &mut [f32]) -> Result<(), KokoroError> {
        let row = self
            .table
            .get(i * self.dim..(i + 1) * self.dim)
            .ok_or_else(|| KokoroError::Input(format!("id {i} is outside 0..{}", self.rows)))?;
        for (o, &q) in out.iter_mut().zip(row) {
            *o = (i32::from(q) - i32::from(self.zero_point)) as f32 * self.scale;
        }
        Ok(())
    }
}

/// A float `Conv` or `ConvTranspose` (weights as stored, `[c_out, c_in/g, k]`
/// for Conv and `[c_in, c_out/g, k]` for ConvTranspose).
#[derive(Debug, Clone)]
pub struct FloatConv {
    /// Weight dims as stored.
    pub dims: [usize; 3],
    /// Weight elements.
    pub weight: Vec<f32>,
    /// Bias, when the node has one.
    pub bias: Option<Vec<f32>>,
    /// Symmetric padding (`pads[0]`; the export only has symmetric pads).
    pub pad: usize,
    /// Stride.
    pub stride: usize,
    /// Dilation.
    pub dilation: usize,
    /// Groups.
    pub groups: usize,
    /// `output_padding` (ConvTranspose only; 0 otherwise).
    pub output_padding: usize,
}

/// Resolves nodes of the Kokoro int8 graph into typed weight bundles.
#[derive(Debug, Clone, Copy)]
pub struct KokoroGraph<'m> {
    model: &'m OnnxModel,
    cache: Option<&'m BindCache>,
}

impl<'m> KokoroGraph<'m> {
    /// A resolver over `model`.
    pub fn new(model: &'m OnnxModel) -> Self {
        Self { model, cache: None }
    }

    /// A resolver over `model` whose int8 convs take their packed weights
    /// from `cache` where it has them (and record them where it is being written).
    pub fn with_cache(model: &'m OnnxModel, cache: Option<&'m BindCache>) -> Self {
        Self { model, cache }
    }

    /// The model behind this resolver.
    pub fn model(&self) -> &'m OnnxModel {
        self.model
    }

    /// The bind cache, with `name` as a packing's entry in it (see [`CacheKey`]).
    pub fn cache_key<'a>(&'a self, name: &'a str) -> CacheKey<'a> {
        self.cache.map(|c| (c, name))
    }

    /// The bind cache this resolver binds through, if any.
    pub fn cache(&self) -> Option<&'m BindCache> {
        self.cache
    }

    /// The node named `name`; in a float graph, an int8 name `<x>_quant`
    /// resolves to the float node `<x>` it was quantized from (and
    /// `<x>/Gemm_MatMul_quant` to the Linear's `<x>/Gemm`).
    pub fn node(&self, name: &str) -> Result<&'m Node, KokoroError> {
        let g = self.model.graph();
        if let Some(n) = g.node(name) {
            return Ok(n);
        }
        let float = name.strip_suffix("_quant").and_then(|base| {
            g.node(base).or_else(|| {
                base.strip_suffix("_MatMul")
                    .and_then(|gemm| g.node(gemm))
                    .filter(|n| n.op_type == "Gemm")
            })
        });
        float.ok_or_else(|| KokoroError::MissingNode(name.to_string()))
    }

    /// The node named `name`, checked to be an `op`.
    pub fn node_op(&self, name: &str, op: &str) -> Result<&'m Node, KokoroError> {
        let n = self.node(name)?;
        if n.op_type != op {
            return Err(bad_node(n, format!("is a {}, expected {op}", n.op_type)));
        }
        Ok(n)
    }

    /// The initializer named `name`.
    pub fn tensor(&self, name: &str) -> Result<Tensor<'m>, KokoroError> {
        self.model
            .initializer(name)
            .ok_or_else(|| KokoroError::MissingTensor(name.to_string()))
    }

    /// Input `i` of `node` as an initializer.
    pub fn input_tensor(&self, node: &Node, i: usize) -> Result<Tensor<'m>, KokoroError> {
        let name = node
            .inputs
            .get(i)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| bad_node(node, format!("has no input {i}")))?;
        self.tensor(name)
    }

    /// Input `i` of `node` as a float constant: an initializer, or a value the
    /// graph computes from initializers (e.g. weight norm), folded. Returns
    /// the dims and the elements.
    pub fn const_input(
        &self,
        node: &Node,
        i: usize,
    ) -> Result<(Vec<usize>, Vec<f32>), KokoroError> {
        let name = node
            .inputs
            .get(i)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| bad_node(node, format!("has no input {i}")))?;
        let c = fold(self.model, name)?;
        match c.data {
            ConstData::F32(v) => Ok((c.dims, v)),
            ConstData::I64(_) => Err(bad_node(node, format!("input `{name}` is not float"))),
        }
    }

    /// Float elements of input `i` of the node named `node` (see [`Self::const_input`]).
    pub fn const_input_f32s(&self, node: &str, i: usize) -> Result<Vec<f32>, KokoroError> {
        Ok(self.const_input(self.node(node)?, i)?.1)
    }

    /// Float elements of an initializer.
    pub fn f32s(&self, t: &Tensor<'m>) -> Result<Vec<f32>, KokoroError> {
        if t.data_type != DataType::Float {
            return Err(bad_tensor(t, format!("is {}, expected FLOAT", t.data_type)));
        }
        Ok(t.to_f32()?)
    }

    /// INT8 elements of an initializer (borrowed from the map).
    pub fn i8s(&self, t: &Tensor<'m>) -> Result<&'m [i8], KokoroError> {
        t.as_i8()
            .ok_or_else(|| bad_tensor(t, format!("is {}, expected raw INT8", t.data_type)))
    }

    /// UINT8 elements of an initializer (borrowed from the map).
    pub fn u8s(&self, t: &Tensor<'m>) -> Result<&'m [u8], KokoroError> {
        t.as_u8()
            .ok_or_else(|| bad_tensor(t, format!("is {}, expected raw UINT8", t.data_type)))
    }

    /// INT8 elements of an initializer, copied (raw or `int32_data` storage).
    pub fn i8_vec(&self, t: &Tensor<'m>) -> Result<Vec<i8>, KokoroError> {
        Ok(self.i8_cow(t)?.into_owned())
    }

    /// As [`KokoroGraph::i8_vec`], borrowing the stored bytes where they are raw.
    fn i8_cow(&self, t: &Tensor<'m>) -> Result<Cow<'m, [i8]>, KokoroError> {
        if t.data_type != DataType::Int8 {
            return Err(bad_tensor(t, format!("is {}, expected INT8", t.data_type)));
        }
        match t.as_i8() {
            Some(v) => Ok(Cow::Borrowed(v)),
            None => Ok(Cow::Owned(
                t.to_i64()?.into_iter().map(|v| v as i8).collect(),
            )),
        }
    }

    /// UINT8 elements of an initializer, copied (raw or `int32_data` storage).
    pub fn u8_vec(&self, t: &Tensor<'m>) -> Result<Vec<u8>, KokoroError> {
        Ok(self.u8_cow(t)?.into_owned())
    }

    /// As [`KokoroGraph::u8_vec`], borrowing the stored bytes where they are raw.
    fn u8_cow(&self, t: &Tensor<'m>) -> Result<Cow<'m, [u8]>, KokoroError> {
        if t.data_type != DataType::Uint8 {
            return Err(bad_tensor(t, format!("is {}, expected UINT8", t.data_type)));
        }
        match t.as_u8() {
            Some(v) => Ok(Cow::Borrowed(v)),
            None => Ok(Cow::Owned(
                t.to_i64()?.into_iter().map(|v| v as u8).collect(),
            )),
        }
    }

    /// The only consumer of `node`'s first output that is an `op`.
    fn next_op(&self, node: &'m Node, op: &str) -> Result<&'m Node, KokoroError> {
        let out = node
            .outputs
            .first()
            .ok_or_else(|| bad_node(node, "has no output"))?;
        self.model
            .graph()
            .consumers(out)
            .find(|c| c.op_type == op)
            .ok_or_else(|| bad_node(node, format!("output is not consumed by a {op}")))
    }

    /// The node producing input `i` of `node`.
    fn input_producer(&self, node: &'m Node, i: usize) -> Result<&'m Node, KokoroError> {
        let name = node
            .inputs
            .get(i)
            .ok_or_else(|| bad_node(node, format!("has no input {i}")))?;
        self.model
            .graph()
            .producer(name)
            .ok_or_else(|| bad_node(node, format!("input `{name}` has no producer")))
    }

    /// The one initializer input of a binary node (e.g. the bias of an Add).
    fn init_operand(&self, node: &Node) -> Result<Tensor<'m>, KokoroError> {
        node.inputs
            .iter()
            .find_map(|i| self.model.initializer(i))
            .ok_or_else(|| bad_node(node, "has no initializer operand"))
    }

    /// `MatMulInteger` `name`: int8 `[in, out]` weight, per-channel scale from
    /// its `*_scales_mul`, zero points, and the bias of the following Add. In
    /// a float graph, the `MatMul` (+ bias Add) or `Gemm` it was quantized
    /// from, its weight quantized per output channel.
    pub fn qlinear(&self, name: &str) -> Result<QLinear, KokoroError> {
        let node = self.node(name)?;
        let stored = self.qlinear_stored_at(node)?;
        stored
            .pack_cached(self.cache_key(name))
            .map_err(|e| match e {
                KokoroError::Kernel(k) => bad_node(node, k.to_string()),
                e => e,
            })
    }

    /// As [`KokoroGraph::qlinear`], not yet packed (to fuse layers first).
    pub fn qlinear_stored(&self, name: &str) -> Result<StoredQLinear<'m>, KokoroError> {
        self.qlinear_stored_at(self.node(name)?)
    }

    fn qlinear_stored_at(&self, node: &'m Node) -> Result<StoredQLinear<'m>, KokoroError> {
        match node.op_type.as_str() {
            "MatMulInteger" => self.qlinear_int8(node),
            "MatMul" | "Gemm" => self.qlinear_float(node),
            op => Err(bad_node(node, format!("is a {op}, expected MatMulInteger"))),
        }
    }

    fn qlinear_int8(&self, node: &'m Node) -> Result<StoredQLinear<'m>, KokoroError> {
        let wt = self.input_tensor(node, 1)?;
        let dims = wt.shape();
        let [k, n] = dims[..] else {
            return Err(bad_tensor(
                &wt,
                format!("weight dims {dims:?}, expected [in, out]"),
            ));
        };
        let weight = self.i8_cow(&wt)?;
        let zp = self.input_tensor(node, 3)?;
        let w_zero = self.i8_vec(&zp)?;
        // Cast(int32 → f32) → Mul(output_scale_mul) with `<x_scale × w_scale>`.
        let cast = self.next_op(node, "Cast")?;
        let mul = self.next_op(cast, "Mul")?;
        let scales_mul = mul
            .inputs
            .iter()
            .filter_map(|i| self.model.graph().producer(i))
            .find(|p| p.op_type == "Mul")
            .ok_or_else(|| bad_node(mul, "no `*_scales_mul` producer among its inputs"))?;
        let w_scale = self.f32s(&self.init_operand(scales_mul)?)?;
        let bias = match self.next_op(mul, "Add") {
            Ok(add) => match self.init_operand(add) {
                Ok(b) if b.numel() == n => Some(self.f32s(&b)?),
                _ => None,
            },
            Err(_) => None,
        };
        Ok(StoredQLinear {
            k,
            n,
            weight,
            w_scale,
            w_zero,
            bias,
        })
    }

    /// A float `MatMul` (weight `[in, out]`, bias from the following Add) or
    /// `Gemm` (`transB`: weight `[out, in]`; bias input 2), quantized.
    fn qlinear_float(&self, node: &'m Node) -> Result<StoredQLinear<'m>, KokoroError> {
        let (dims, w) = self.const_input(node, 1)?;
        let [a, b] = dims[..] else {
            return Err(bad_node(
                node,
                format!("weight dims {dims:?}, expected rank 2"),
            ));
        };
        let gemm = node.op_type == "Gemm";
        let trans_b = gemm && node.attr_int("transB").unwrap_or(0) != 0;
        if gemm
            && (node.attr_int("transA").unwrap_or(0) != 0
                || node.attr_float("alpha").unwrap_or(1.0) != 1.0
                || node.attr_float("beta").unwrap_or(1.0) != 1.0)
        {
            return Err(bad_node(
                node,
                "Gemm with transA, alpha or beta is not a Linear",
            ));
        }
        let (k, n, w) = if trans_b {
            let mut t = vec![0.0f32; w.len()];
            for (o, row) in w.chunks_exact(b.max(1)).enumerate() {
                for (i, &v) in row.iter().enumerate() {
                    t[i * a + o] = v;
                }
            }
            (b, a, t)
        } else {
            (a, b, w)
        };
        let bias = if gemm {
            match node.inputs.get(2).filter(|s| !s.is_empty()) {
                Some(_) => Some(self.const_input(node, 2)?.1),
                None => None,
            }
        } else {
            match self.next_op(node, "Add") {
                Ok(add) => match self.init_operand(add) {
                    Ok(b) if b.numel() == n => Some(self.f32s(&b)?),
                    _ => None,
                },
                Err(_) => None,
            }
        };
        if bias.as_ref().is_some_and(|b| b.len() != n) {
            return Err(bad_node(node, format!("bias is not [{n}]")));
        }
        let (weight, w_scale) = weights::i8_per_column(&w, k, n);
        Ok(StoredQLinear {
            k,
            n,
            weight: Cow::Owned(weight),
            w_scale,
            w_zero: vec![0; n],
            bias,
        })
    }

    /// `ConvInteger` `name`: uint8 `[out, in/g, k]` weight (input 1), per-tensor
    /// scale from `<module>.bias_scale_node`, zero point, attributes, and the
    /// float bias the graph floor-quantizes (if any).
    /// In a float graph, the `Conv` it was quantized from (weight folded if the
    /// graph computes it), quantized per tensor.
    pub fn qconv(&self, name: &str) -> Result<QConv, KokoroError> {
        let node = self.node(name)?;
        match node.op_type.as_str() {
            "ConvInteger" => self.qconv_int8(node),
            "Conv" => self.qconv_float(node),
            op => Err(bad_node(node, format!("is a {op}, expected ConvInteger"))),
        }
    }

    /// Conv1d geometry from a `Conv` / `ConvInteger`'s attributes and weight dims.
    fn conv_params(&self, node: &Node, dims: &[usize]) -> Result<Conv1dParams, KokoroError> {
        let [c_out, cig, kernel] = dims[..] else {
            return Err(bad_node(
                node,
                format!("weight dims {dims:?}, expected [out, in, k]"),
            ));
        };
        let groups = node.attr_int("group").unwrap_or(1).max(1) as usize;
        let pads = node.attr_ints("pads").unwrap_or(&[0, 0]);
        let (pl, pr) = (
            pads.first().copied().unwrap_or(0) as usize,
            pads.get(1).copied().unwrap_or(0) as usize,
        );
        let stride = node
            .attr_ints("strides")
            .and_then(|s| s.first())
            .copied()
            .unwrap_or(1);
        let dilation = node
            .attr_ints("dilations")
            .and_then(|s| s.first())
            .copied()
            .unwrap_or(1);
        Ok(Conv1dParams::new(cig * groups, c_out, kernel)
            .stride(stride as usize)
            .dilation(dilation as usize)
            .padding(pl, pr)
            .groups(groups))
    }

    fn qconv_float(&self, node: &'m Node) -> Result<QConv, KokoroError> {
        let (dims, w) = self.const_input(node, 1)?;
        let params = self.conv_params(node, &dims)?;
        let bias = match node.inputs.get(2).filter(|s| !s.is_empty()) {
            Some(_) => Some(self.const_input(node, 2)?.1),
            None => None,
        };
        let (weight, w_scale, w_zero) = weights::u8_per_tensor(&w);
        self.bind_qconv(node, params, &weight, w_scale, w_zero, bias)
    }

    /// [`QConv::new`], its packed weights from the bind cache when it has them.
    fn bind_qconv(
        &self,
        node: &Node,
        params: Conv1dParams,
        weight: &[u8],
        w_scale: f32,
        w_zero: u8,
        bias: Option<Vec<f32>>,
    ) -> Result<QConv, KokoroError> {
        let cached = self.cache.and_then(|c| c.conv(&node.name));
        let q =
            QConv::with_cache(params, weight, w_scale, w_zero, bias, cached).map_err(
                |e| match e {
                    KokoroError::Kernel(k) => bad_node(node, k.to_string()),
                    e => e,
                },
            )?;
        if let Some(c) = self.cache {
            c.record(&node.name, &q.conv);
        }
        Ok(q)
    }

    fn qconv_int8(&self, node: &'m Node) -> Result<QConv, KokoroError> {
        let wt = self.input_tensor(node, 1)?;
        let weight = self.u8_cow(&wt)?;
        let params = self.conv_params(node, &wt.shape())?;
        let zpt = self.input_tensor(node, 3)?;
        let w_zero = *self
            .u8_vec(&zpt)?
            .first()
            .ok_or_else(|| bad_tensor(&zpt, "empty zero point"))?;
        // With a bias: Add(int32) → Cast → Mul(bias_scale); without: Cast → Mul.
        let (bias, cast) = match self.next_op(node, "Add") {
            Ok(add) => {
                // Add ← Reshape ← Cast ← Floor ← Div(bias, bias_scale).
                let reshape = add
                    .inputs
                    .iter()
                    .filter_map(|i| self.model.graph().producer(i))
                    .find(|p| p.op_type == "Reshape")
                    .ok_or_else(|| bad_node(add, "bias add without a Reshape input"))?;
                let cast_i = self.input_producer(reshape, 0)?;
                let floor = self.input_producer(cast_i, 0)?;
                let div = self.input_producer(floor, 0)?;
                if floor.op_type != "Floor" || div.op_type != "Div" {
                    return Err(bad_node(node, "bias is not quantized by Div → Floor"));
                }
                let b = self.input_tensor(div, 0)?;
                (Some(self.f32s(&b)?), self.next_op(add, "Cast")?)
            }
            Err(_) => (None, self.next_op(node, "Cast")?),
        };
        let mul = self.next_op(cast, "Mul")?;
        let scale_node = mul
            .inputs
            .iter()
            .filter_map(|i| self.model.graph().producer(i))
            .find(|p| p.op_type == "Mul")
            .ok_or_else(|| bad_node(mul, "no bias_scale Mul among its inputs"))?;
        let st = self.init_operand(scale_node)?;
        let w_scale = *self
            .f32s(&st)?
            .first()
            .ok_or_else(|| bad_tensor(&st, "empty scale"))?;
        self.bind_qconv(node, params, &weight, w_scale, w_zero, bias)
    }

    /// Float `Conv` / `ConvTranspose` `name`: weight (input 1), bias (input 2), attributes.
    pub fn float_conv(&self, name: &str) -> Result<FloatConv, KokoroError> {
        self.float_conv_with(name, true)
    }

    /// As [`KokoroGraph::float_conv`] without reading a stored weight
    /// (`weight` is then empty; its dims are the initializer's): for a conv
    /// whose packing may come from the bind cache.
    pub fn float_conv_meta(&self, name: &str) -> Result<FloatConv, KokoroError> {
        self.float_conv_with(name, false)
    }

    fn float_conv_with(&self, name: &str, read_weight: bool) -> Result<FloatConv, KokoroError> {
        let node = self.node(name)?;
        if node.op_type != "Conv" && node.op_type != "ConvTranspose" {
            return Err(bad_node(
                node,
                format!("is a {}, expected a float conv", node.op_type),
            ));
        }
        let stored = node
            .inputs
            .get(1)
            .and_then(|i| self.model.initializer(i))
            .filter(|t| !read_weight && t.data_type == DataType::Float);
        let (shape, weight) = match stored {
            Some(t) => (t.shape(), Vec::new()),
            None => self.const_input(node, 1)?,
        };
        let [a, b, c] = shape[..] else {
            return Err(bad_node(
                node,
                format!("weight dims {shape:?}, expected rank 3"),
            ));
        };
        let bias = match node.inputs.get(2).filter(|s| !s.is_empty()) {
            Some(_) => Some(self.const_input(node, 2)?.1),
            None => None,
        };
        let first = |attr: &str, dflt: i64| {
            node.attr_ints(attr)
                .and_then(|v| v.first())
                .copied()
                .unwrap_or(dflt)
                .max(0) as usize
        };
        Ok(FloatConv {
            dims: [a, b, c],
            weight,
            bias,
            pad: first("pads", 0),
            stride: first("strides", 1).max(1),
            dilation: first("dilations", 1).max(1),
            groups: node.attr_int("group").unwrap_or(1).max(1) as usize,
            output_padding: first("output_padding", 0),
        })
    }

    /// `LayerNormalization` (inputs 1, 2) or `SkipLayerNormalization` (inputs 2, 3) `name`.
    pub fn layer_norm(&self, name: &str) -> Result<LayerNormParams, KokoroError> {
        let node = self.node(name)?;
        let (g, b) = match node.op_type.as_str() {
            "LayerNormalization" => (1, 2),
            "SkipLayerNormalization" => (2, 3),
            op => return Err(bad_node(node, format!("is a {op}, expected a layer norm"))),
        };
        if node.op_type == "SkipLayerNormalization"
            && node.inputs.get(4).is_some_and(|s| !s.is_empty())
        {
            return Err(bad_node(node, "has a bias input (not supported)"));
        }
        Ok(LayerNormParams {
            // Initializers, or `Constant`s (a norm without affine parameters).
            gamma: self.const_input(node, g)?.1,
            beta: self.const_input(node, b)?.1,
            eps: node
                .attr_float("epsilon")
                .ok_or_else(|| bad_node(node, "has no epsilon"))?,
        })
    }

    /// The layer norm the output of node `name` flows into through its bias
    /// and residual `Add`s (and, in the int8 graph, the dequantizing `Cast`
    /// / `Mul`): `SkipLayerNormalization` in the onnxruntime-fused int8
    /// graph, `Add` → `LayerNormalization` in a plain export.
    pub fn layer_norm_after(&self, name: &str) -> Result<LayerNormParams, KokoroError> {
        let start = self.node(name)?;
        let mut frontier = vec![start];
        for _ in 0..6 {
            let mut next = Vec::new();
            for n in frontier {
                for out in &n.outputs {
                    for c in self.model.graph().consumers(out) {
                        match c.op_type.as_str() {
                            "LayerNormalization" | "SkipLayerNormalization" => {
                                return self.layer_norm(&c.name)
                            }
                            "Add" | "Cast" | "Mul" => next.push(c),
                            _ => {}
                        }
                    }
                }
            }
            frontier = next;
        }
        Err(bad_node(start, "output does not reach a layer norm"))
    }

    /// `Gather` `name` on an INT8 table, with its `DequantizeLinear` scale and zero point.
    pub fn embedding(&self, name: &str) -> Result<QEmbedding, KokoroError> {
        let node = self.node_op(name, "Gather")?;
        let t = self.input_tensor(node, 0)?;
        let shape = t.shape();
        let [rows, dim] = shape[..] else {
            return Err(bad_tensor(
                &t,
                format!("table dims {shape:?}, expected [rows, dim]"),
            ));
        };
        if t.data_type != DataType::Int8 {
            // A float table (fp32 graph): quantized per tensor as the export did.
            let (table, scale) = weights::i8_per_tensor(&self.f32s(&t)?);
            return Ok(QEmbedding {
                rows,
                dim,
                table,
                scale,
                zero_point: 0,
            });
        }
        let table = self.i8_vec(&t)?;
        let dq = self.next_op(node, "DequantizeLinear")?;
        let st = self.input_tensor(dq, 1)?;
        let scale = *self
            .f32s(&st)?
            .first()
            .ok_or_else(|| bad_tensor(&st, "empty scale"))?;
        let zero_point = match dq.inputs.get(2).filter(|s| !s.is_empty()) {
            Some(_) => {
                let zt = self.input_tensor(dq, 2)?;
                *self
                    .i8_vec(&zt)?
                    .first()
                    .ok_or_else(|| bad_tensor(&zt, "empty zero point"))?
            }
            None => 0,
        };
        Ok(QEmbedding {
            rows,
            dim,
            table,
            scale,
            zero_point,
        })
    }

    /// `DynamicQuantizeLSTM` `name`: W `[2,in,4H]`, R `[2,H,4H]` int8 (gates iofc),
    /// B `[2,8H]`, per-direction W/R scales and zero points (inputs 8..=11).
    /// In a float graph, the ONNX `LSTM` it was quantized from (W `[2, 4H, in]`,
    /// R `[2, 4H, H]`), quantized per direction and transposed to that layout.
    pub fn qlstm(&self, name: &str) -> Result<QLstm, KokoroError> {
        let node = self.node(name)?;
        let stored = match node.op_type.as_str() {
            "DynamicQuantizeLSTM" => self.qlstm_int8(node),
            "LSTM" => self.qlstm_float(node),
            op => Err(bad_node(
                node,
                format!("is a {op}, expected DynamicQuantizeLSTM"),
            )),
        }?;
        stored
            .pack_cached(self.cache_key(name))
            .map_err(|e| match e {
                KokoroError::Kernel(k) => bad_node(node, k.to_string()),
                e => e,
            })
    }

    fn qlstm_float(&self, node: &'m Node) -> Result<StoredQLstm<'m>, KokoroError> {
        let hidden = node
            .attr_int("hidden_size")
            .and_then(|h| usize::try_from(h).ok())
            .filter(|&h| h > 0)
            .ok_or_else(|| bad_node(node, "has no positive hidden_size"))?;
        if node.attr("activations").is_some()
            || node.attr("clip").is_some()
            || node.attr_int("input_forget").unwrap_or(0) != 0
            || node.attr_int("layout").unwrap_or(0) != 0
        {
            return Err(bad_node(
                node,
                "non-default activations / clip / input_forget / layout",
            ));
        }
        let (wd, w) = self.const_input(node, 1)?;
        let (rd, r) = self.const_input(node, 2)?;
        let [dirs, g4, input] = wd[..] else {
            return Err(bad_node(
                node,
                format!("W dims {wd:?}, expected [dirs, 4H, in]"),
            ));
        };
        if input == 0 || g4 != 4 * hidden || rd != [dirs, 4 * hidden, hidden] {
            return Err(bad_node(node, "W/R shapes disagree with hidden_size"));
        }
        let b = match node.inputs.get(3).filter(|s| !s.is_empty()) {
            Some(_) => self.const_input(node, 3)?.1,
            None => vec![0.0; dirs * 8 * hidden],
        };
        if b.len() != dirs * 8 * hidden {
            return Err(bad_node(node, format!("B has {} elements", b.len())));
        }
        // Per direction: quantize [4H, cols] as one tensor, store it [cols, 4H].
        let quantize = |m: &[f32], cols: usize| -> (Vec<i8>, Vec<f32>) {
            let mut q = vec![0i8; m.len()];
            let mut scales = Vec::with_capacity(dirs);
            for (d, block) in m.chunks_exact(g4 * cols).enumerate() {
                let (qd, s) = weights::i8_per_tensor(block);
                scales.push(s);
                let dst = &mut q[d * g4 * cols..(d + 1) * g4 * cols];
                for (gate, row) in qd.chunks_exact(cols).enumerate() {
                    for (c, &v) in row.iter().enumerate() {
                        dst[c * g4 + gate] = v;
                    }
                }
            }
            (q, scales)
        };
        let (wq, ws) = quantize(&w, input);
        let (rq, rs) = quantize(&r, hidden);
        Ok(StoredQLstm {
            input,
            hidden,
            dirs,
            w: Cow::Owned(wq),
            r: Cow::Owned(rq),
            b,
            scales: [ws, rs],
            zeros: [vec![0; dirs], vec![0; dirs]],
        })
    }

    fn qlstm_int8(&self, node: &'m Node) -> Result<StoredQLstm<'m>, KokoroError> {
        let hidden = node
            .attr_int("hidden_size")
            .ok_or_else(|| bad_node(node, "has no hidden_size"))? as usize;
        let wt = self.input_tensor(node, 1)?;
        let rt = self.input_tensor(node, 2)?;
        let bt = self.input_tensor(node, 3)?;
        let ws = wt.shape();
        let [dirs, input, g4] = ws[..] else {
            return Err(bad_tensor(
                &wt,
                format!("dims {ws:?}, expected [dirs, in, 4H]"),
            ));
        };
        if g4 != 4 * hidden
            || rt.shape() != [dirs, hidden, 4 * hidden]
            || bt.shape() != [dirs, 8 * hidden]
        {
            return Err(bad_node(node, "W/R/B shapes disagree with hidden_size"));
        }
        let zp = |i: usize| -> Result<Vec<i8>, KokoroError> {
            self.i8_vec(&self.input_tensor(node, i)?)
        };
        Ok(StoredQLstm {
            input,
            hidden,
            dirs,
            w: self.i8_cow(&wt)?,
            r: self.i8_cow(&rt)?,
            b: self.f32s(&bt)?,
            scales: [
                self.f32s(&self.input_tensor(node, 8)?)?,
                self.f32s(&self.input_tensor(node, 10)?)?,
            ],
            zeros: [zp(9)?, zp(11)?],
        })
    }
}
