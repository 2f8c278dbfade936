//! A small constant folder for weights a float graph computes in the graph.
//!
//! A plain `torch.onnx.export` of Kokoro keeps weight norm in the graph: a
//! conv's weight is `Mul(Div(v, ReduceL2(v, axes)), g)` over the
//! `weight_v` / `weight_g` initializers, with `axes` from a `Constant` node.
//! [`fold`] evaluates such a chain once at load time, over initializers and
//! `Constant`s only, with the few ops it needs (elementwise `Add` `Sub` `Mul`
//! `Div` `Pow` with numpy broadcasting, `Sqrt` `Reciprocal` `Neg`,
//! `ReduceL2` / `ReduceSum`, `Reshape` `Transpose` `Unsqueeze` `Squeeze`
//! `Identity` `Cast`); any other op, or a value that depends on a graph
//! input, is a typed error naming the node. Arithmetic is f32 as in the
//! graph; reductions accumulate in f64.

use std::cell::Cell;

use voxlane_runtime::onnx::{AttrValue, DataType, Node, OnnxModel, Tensor};

use super::graph::KokoroError;

/// Longest producer chain followed from a weight back to its initializers.
const MAX_DEPTH: usize = 64;
/// Most nodes evaluated for one weight (a DAG re-uses values: this bounds the work).
const MAX_VISITS: usize = 4096;

/// A folded constant: its dims and elements.
#[derive(Debug, Clone, PartialEq)]
pub struct Const {
    /// Dims (`[]` for a scalar).
    pub dims: Vec<usize>,
    /// Elements, row-major.
    pub data: ConstData,
}

/// Elements of a folded constant: floats (weights) or integers (axes, shapes).
#[derive(Debug, Clone, PartialEq)]
pub enum ConstData {
    /// Any float type, as f32.
    F32(Vec<f32>),
    /// Any integer type, as i64.
    I64(Vec<i64>),
}

impl Const {
    fn numel(&self) -> usize {
        self.dims.iter().product()
    }
}

fn bad(node: &Node, detail: impl Into<String>) -> KokoroError {
    KokoroError::BadNode {
        node: node.name.clone(),
        detail: detail.into(),
    }
}

/// The value named `value`: an initializer, or computed from initializers and
/// `Constant` nodes by the ops this folder knows.
pub fn fold(model: &OnnxModel, value: &str) -> Result<Const, KokoroError> {
    fold_at(model, value, 0, &Cell::new(0))
}

fn from_tensor(t: &Tensor<'_>) -> Result<Const, KokoroError> {
    let dims = t.shape();
    let data = match t.data_type {
        DataType::Float | DataType::Float16 | DataType::Bfloat16 | DataType::Double => {
            ConstData::F32(t.to_f32()?)
        }
        _ => ConstData::I64(t.to_i64()?),
    };
    let c = Const { dims, data };
    let len = match &c.data {
        ConstData::F32(v) => v.len(),
        ConstData::I64(v) => v.len(),
    };
    if len != c.numel() {
        return Err(KokoroError::BadTensor {
            tensor: t.name.to_string(),
            detail: format!("{len} elements for dims {:?}", c.dims),
        });
    }
    Ok(c)
}

fn fold_at(
    model: &OnnxModel,
    value: &str,
    depth: usize,
    visits: &Cell<usize>,
) -> Result<Const, KokoroError> {
    if let Some(t) = model.initializer(value) {
        return from_tensor(&t);
    }
    let node = model
        .graph()
        .producer(value)
        .ok_or_else(|| KokoroError::MissingTensor(value.to_string()))?;
    visits.set(visits.get() + 1);
    if depth >= MAX_DEPTH || visits.get() > MAX_VISITS {
        return Err(bad(
            node,
            format!("constant deeper than {MAX_DEPTH} or over {MAX_VISITS} nodes"),
        ));
    }
    let input = |i: usize| -> Result<Const, KokoroError> {
        let name = node
            .inputs
            .get(i)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| bad(node, format!("has no input {i}")))?;
        fold_at(model, name, depth + 1, visits)
    };
    // Optional integer input `i` (e.g. opset-13+ `axes`), else attribute `attr`.
    let ints = |i: usize, attr: &str| -> Result<Option<Vec<i64>>, KokoroError> {
        if node.inputs.get(i).is_some_and(|s| !s.is_empty()) {
            return Ok(Some(int_data(node, input(i)?)?));
        }
        Ok(node.attr_ints(attr).map(<[i64]>::to_vec))
    };
    match node.op_type.as_str() {
        "Constant" => constant(model, node),
        "Identity" => input(0),
        "Add" | "Sub" | "Mul" | "Div" | "Pow" => binary(node, &input(0)?, &input(1)?),
        "Sqrt" | "Reciprocal" | "Neg" => {
            let x = input(0)?;
            let f: fn(f32) -> f32 = match node.op_type.as_str() {
                "Sqrt" => f32::sqrt,
                "Reciprocal" => |v| 1.0 / v,
                _ => |v: f32| -v,
            };
            let data = ConstData::F32(f32_data(node, &x)?.iter().map(|&a| f(a)).collect());
            Ok(Const { dims: x.dims, data })
        }
        "ReduceL2" | "ReduceSum" => {
            let axes = ints(1, "axes")?.unwrap_or_default();
            reduce(node, &input(0)?, &axes)
        }
        "Reshape" => {
            let shape = int_data(node, input(1)?)?;
            reshape(node, input(0)?, &shape)
        }
        "Unsqueeze" => {
            let axes = ints(1, "axes")?.ok_or_else(|| bad(node, "has no axes"))?;
            let x = input(0)?;
            let rank = x.dims.len() + axes.len();
            let axes = normalize_axes(node, &axes, rank)?;
            let mut src = x.dims.iter();
            let dims = (0..rank)
                .map(|d| {
                    if axes.contains(&d) {
                        Some(1)
                    } else {
                        src.next().copied()
                    }
                })
                .collect::<Option<Vec<usize>>>()
                .ok_or_else(|| bad(node, "repeated axes"))?;
            Ok(Const { dims, ..x })
        }
        "Squeeze" => {
            let x = input(0)?;
            let dims = match ints(1, "axes")? {
                Some(axes) => {
                    let axes = normalize_axes(node, &axes, x.dims.len())?;
                    if axes.iter().any(|&a| x.dims[a] != 1) {
                        return Err(bad(node, "squeezes a dim that is not 1"));
                    }
                    (0..x.dims.len())
                        .filter(|d| !axes.contains(d))
                        .map(|d| x.dims[d])
                        .collect()
                }
                None => x.dims.iter().copied().filter(|&d| d != 1).collect(),
            };
            Ok(Const { dims, ..x })
        }
        "Transpose" => transpose(node, input(0)?),
        "Cast" => {
            let x = input(0)?;
            let to = node
                .attr_int("to")
                .ok_or_else(|| bad(node, "has no `to`"))?;
            let data = match (DataType::from_code(to as i32), x.data) {
                (DataType::Float, ConstData::F32(v)) => ConstData::F32(v),
                (DataType::Float, ConstData::I64(v)) => {
                    ConstData::F32(v.into_iter().map(|a| a as f32).collect())
                }
                (DataType::Int64, ConstData::I64(v)) => ConstData::I64(v),
                (DataType::Int64, ConstData::F32(v)) => {
                    ConstData::I64(v.into_iter().map(|a| a as i64).collect())
                }
                (t, _) => return Err(bad(node, format!("cast to {t} is not folded"))),
            };
            Ok(Const { dims: x.dims, data })
        }
        op => Err(bad(
            node,
            format!("{op} cannot be folded into a constant weight"),
        )),
    }
}

fn constant(model: &OnnxModel, node: &Node) -> Result<Const, KokoroError> {
    let scalar = |data: ConstData| Const { dims: vec![], data };
    let list = |data: ConstData, n: usize| Const {
        dims: vec![n],
        data,
    };
    match node.attributes.first().map(|a| (a.name.as_str(), &a.value)) {
        Some(("value", AttrValue::Tensor(info))) => from_tensor(&model.view(info)),
        Some(("value_float", AttrValue::Float(v))) => Ok(scalar(ConstData::F32(vec![*v]))),
        Some(("value_int", AttrValue::Int(v))) => Ok(scalar(ConstData::I64(vec![*v]))),
        Some(("value_floats", AttrValue::Floats(v))) => {
            Ok(list(ConstData::F32(v.clone()), v.len()))
        }
        Some(("value_ints", AttrValue::Ints(v))) => Ok(list(ConstData::I64(v.clone()), v.len())),
        _ => Err(bad(node, "Constant without a numeric value")),
    }
}

fn f32_data<'c>(node: &Node, c: &'c Const) -> Result<&'c [f32], KokoroError> {
    match &c.data {
        ConstData::F32(v) => Ok(v),
        ConstData::I64(_) => Err(bad(node, "expected a float operand")),
    }
}

fn int_data(node: &Node, c: Const) -> Result<Vec<i64>, KokoroError> {
    match c.data {
        ConstData::I64(v) => Ok(v),
        ConstData::F32(_) => Err(bad(node, "expected an integer operand")),
    }
}

fn normalize_axes(node: &Node, axes: &[i64], rank: usize) -> Result<Vec<usize>, KokoroError> {
    axes.iter()
        .map(|&a| {
            let a = if a < 0 { a + rank as i64 } else { a };
            usize::try_from(a)
                .ok()
                .filter(|&a| a < rank)
                .ok_or_else(|| bad(node, format!("axis {a} outside rank {rank}")))
        })
        .collect()
}

/// Row-major strides of `dims`.
fn strides(dims: &[usize]) -> Vec<usize> {
    let mut s = vec![1; dims.len()];
    for d in (0..dims.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * dims[d + 1];
    }
    s
}

/// For each element of `out` dims, the flat index into a tensor of `dims`
/// broadcast to it (numpy rules, aligned on the right).
fn broadcast_index(dims: &[usize], out: &[usize]) -> Vec<usize> {
    let pad = out.len() - dims.len();
    let own = strides(dims);
    let st: Vec<usize> = (0..out.len())
        .map(|d| match d.checked_sub(pad) {
            Some(i) if dims[i] != 1 => own[i],
            _ => 0,
        })
        .collect();
    let n: usize = out.iter().product();
    let mut idx = Vec::with_capacity(n);
    let mut coord = vec![0usize; out.len()];
    for _ in 0..n {
        idx.push(coord.iter().zip(&st).map(|(c, s)| c * s).sum());
        for d in (0..out.len()).rev() {
            coord[d] += 1;
            if coord[d] < out[d] {
                break;
            }
            coord[d] = 0;
        }
    }
    idx
}

fn binary(node: &Node, a: &Const, b: &Const) -> Result<Const, KokoroError> {
    let (va, vb) = (f32_data(node, a)?, f32_data(node, b)?);
    let rank = a.dims.len().max(b.dims.len());
    let dim = |d: &[usize], i: usize| {
        i.checked_sub(rank - d.len())
            .map_or(1, |j| d.get(j).copied().unwrap_or(1))
    };
    let dims = (0..rank)
        .map(|i| match (dim(&a.dims, i), dim(&b.dims, i)) {
            (x, y) if x == y => Ok(x),
            (1, y) => Ok(y),
            (x, 1) => Ok(x),
            (x, y) => Err(bad(node, format!("cannot broadcast {x} with {y}"))),
        })
        .collect::<Result<Vec<usize>, _>>()?;
    let (ia, ib) = (
        broadcast_index(&a.dims, &dims),
        broadcast_index(&b.dims, &dims),
    );
    let f: fn(f32, f32) -> f32 = match node.op_type.as_str() {
        "Add" => |x, y| x + y,
        "Sub" => |x, y| x - y,
        "Mul" => |x, y| x * y,
        "Div" => |x, y| x / y,
        // Squares and square roots exactly as the graph's runtime computes them.
        _ => |x, y| match y {
            2.0 => x * x,
            0.5 => x.sqrt(),
            _ => x.powf(y),
        },
    };
    let data = ia.iter().zip(&ib).map(|(&i, &j)| f(va[i], vb[j])).collect();
    Ok(Const {
        dims,
        data: ConstData::F32(data),
    })
}

fn reduce(node: &Node, x: &Const, axes: &[i64]) -> Result<Const, KokoroError> {
    let v = f32_data(node, x)?;
    let rank = x.dims.len();
    let keep = node.attr_int("keepdims").unwrap_or(1) != 0;
    let axes = if axes.is_empty() {
        if node.attr_int("noop_with_empty_axes").unwrap_or(0) != 0 {
            return Ok(x.clone());
        }
        (0..rank).collect()
    } else {
        normalize_axes(node, axes, rank)?
    };
    let kept: Vec<usize> = (0..rank)
        .map(|d| if axes.contains(&d) { 1 } else { x.dims[d] })
        .collect();
    // Each input element adds into the output element with its reduced coordinates at 0.
    let own = strides(&x.dims);
    let out_st = strides(&kept);
    let mut acc = vec![0.0f64; kept.iter().product()];
    let l2 = node.op_type == "ReduceL2";
    for (i, &a) in v.iter().enumerate() {
        let o: usize = (0..rank)
            .filter(|d| !axes.contains(d))
            .map(|d| (i / own[d]) % x.dims[d] * out_st[d])
            .sum();
        let a = f64::from(a);
        acc[o] += if l2 { a * a } else { a };
    }
    let data = acc
        .into_iter()
        .map(|s| if l2 { s.sqrt() as f32 } else { s as f32 })
        .collect();
    let dims = if keep {
        kept
    } else {
        (0..rank)
            .filter(|d| !axes.contains(d))
            .map(|d| x.dims[d])
            .collect()
    };
    Ok(Const {
        dims,
        data: ConstData::F32(data),
    })
}

fn reshape(node: &Node, x: Const, shape: &[i64]) -> Result<Const, KokoroError> {
    let n = x.numel();
    let allow_zero = node.attr_int("allowzero").unwrap_or(0) != 0;
    let mut dims = Vec::with_capacity(shape.len());
    let mut infer = None;
    for (i, &s) in shape.iter().enumerate() {
        dims.push(match s {
            -1 if infer.is_none() => {
                infer = Some(i);
                1
            }
            0 if !allow_zero => *x
                .dims
                .get(i)
                .ok_or_else(|| bad(node, "shape 0 past the input's rank"))?,
            s if s >= 0 => s as usize,
            _ => return Err(bad(node, format!("bad shape {shape:?}"))),
        });
    }
    let known = dims
        .iter()
        .try_fold(1usize, |p, &d| p.checked_mul(d))
        .ok_or_else(|| bad(node, format!("shape {shape:?} overflows")))?;
    if let Some(i) = infer {
        if known == 0 || !n.is_multiple_of(known) {
            return Err(bad(node, format!("cannot infer -1 in {shape:?} for {n}")));
        }
        dims[i] = n / known;
    }
    if infer.is_none() && known != n {
        return Err(bad(
            node,
            format!("shape {shape:?} does not hold {n} elements"),
        ));
    }
    Ok(Const { dims, ..x })
}

fn transpose(node: &Node, x: Const) -> Result<Const, KokoroError> {
    let rank = x.dims.len();
    let perm: Vec<usize> = match node.attr_ints("perm") {
        Some(p) => normalize_axes(node, p, rank)?,
        None => (0..rank).rev().collect(),
    };
    let mut seen = vec![false; rank];
    for &p in &perm {
        seen[p] = true;
    }
    if perm.len() != rank || seen.iter().any(|s| !s) {
        return Err(bad(node, format!("perm {perm:?} for rank {rank}")));
    }
    let dims: Vec<usize> = perm.iter().map(|&p| x.dims[p]).collect();
    let own = strides(&x.dims);
    // out[c] = in[c permuted back]: the input stride of each output axis.
    let permuted: Vec<usize> = perm.iter().map(|&p| own[p]).collect();
    let idx = {
        let mut idx = Vec::with_capacity(x.numel());
        let mut coord = vec![0usize; rank];
        for _ in 0..x.numel() {
            idx.push(
                coord
                    .iter()
                    .zip(&permuted)
                    .map(|(c, s)| c * s)
                    .sum::<usize>(),
            );
            for d in (0..rank).rev() {
                coord[d] += 1;
                if coord[d] < dims[d] {
                    break;
                }
                coord[d] = 0;
            }
        }
        idx
    };
    let data = match x.data {
        ConstData::F32(v) => ConstData::F32(idx.iter().map(|&i| v[i]).collect()),
        ConstData::I64(v) => ConstData::I64(idx.iter().map(|&i| v[i]).collect()),
    };
    Ok(Const { dims, data })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(dims: &[usize], v: &[f32]) -> Const {
        Const {
            dims: dims.to_vec(),
            data: ConstData::F32(v.to_vec()),
        }
    }

    fn node(op: &str) -> Node {
        Node {
            name: format!("/t/{op}"),
            op_type: op.to_string(),
            domain: String::new(),
            inputs: vec![],
            outputs: vec![],
            attributes: vec![],
        }
    }

    #[test]
    fn weight_norm_chain_folds() {
        // v [2, 1, 2], g [2, 1, 1]: w = v / ‖v‖ · g per output channel.
        let v = c(&[2, 1, 2], &[3.0, 4.0, 0.0, 2.0]);
        let g = c(&[2, 1, 1], &[10.0, 1.0]);
        let norm = reduce(&node("ReduceL2"), &v, &[1, 2]).expect("reduce");
        assert_eq!(norm, c(&[2, 1, 1], &[5.0, 2.0]));
        let w = binary(&node("Div"), &v, &norm).expect("div");
        let w = binary(&node("Mul"), &w, &g).expect("mul");
        assert_eq!(w, c(&[2, 1, 2], &[6.0, 8.0, 0.0, 1.0]));
    }

    #[test]
    fn shapes_move_data_like_numpy() {
        let x = c(&[2, 3], &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
        let t = transpose(&node("Transpose"), x.clone()).expect("transpose");
        assert_eq!(t, c(&[3, 2], &[0.0, 3.0, 1.0, 4.0, 2.0, 5.0]));
        let r = reshape(&node("Reshape"), x.clone(), &[-1, 2]).expect("reshape");
        assert_eq!(r.dims, vec![3, 2]);
        assert!(reshape(&node("Reshape"), x.clone(), &[4, -1]).is_err());
        let s = reduce(&node("ReduceSum"), &x, &[0]).expect("sum");
        assert_eq!(s, c(&[1, 3], &[3.0, 5.0, 7.0]));
        let b = binary(&node("Sub"), &x, &c(&[3], &[1.0, 1.0, 1.0])).expect("broadcast");
        assert_eq!(b, c(&[2, 3], &[-1.0, 0.0, 1.0, 2.0, 3.0, 4.0]));
        assert!(binary(&node("Add"), &x, &c(&[2], &[1.0, 1.0])).is_err());
    }
}
