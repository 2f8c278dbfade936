//! Mimi weights by official tensor name: the full expected list derived from
//! the config, checked against a safetensors file (presence, shape, float
//! dtype) before anything is converted, then handed out to the model build.
//!
//! Every missing tensor and every unknown one is named in the error, so a
//! wrong config or a wrong file is diagnosed in one go. Codebooks beyond
//! `num_codebooks` are checked but not converted (they are never read).

use super::config::MimiConfig;
use super::error::MimiError;
use super::seanet;
use std::collections::{BTreeMap, BTreeSet};
use voxlane_runtime::weights::{DType, WeightFile};

/// One expected tensor.
#[derive(Debug, Clone, PartialEq)]
pub struct Expected {
    /// Official name.
    pub name: String,
    /// Torch shape.
    pub shape: Vec<usize>,
    /// Read by the model (false: validated only, e.g. unused codebooks).
    pub used: bool,
    /// May be absent (`_codebook._initialized` flags).
    pub optional: bool,
}

fn push(v: &mut Vec<Expected>, name: String, shape: Vec<usize>) {
    v.push(Expected {
        name,
        shape,
        used: true,
        optional: false,
    });
}

/// Tensor names of one projected transformer (`encoder_transformer` / `decoder_transformer`).
fn transformer_tensors(cfg: &MimiConfig, prefix: &str, v: &mut Vec<Expected>) {
    let t = &cfg.transformer;
    let d = t.d_model;
    if t.input_dimension != d {
        push(
            v,
            format!("{prefix}.input_proj.weight"),
            vec![d, t.input_dimension],
        );
    }
    if t.output_dimension != d {
        push(
            v,
            format!("{prefix}.output_projs.0.weight"),
            vec![t.output_dimension, d],
        );
    }
    for i in 0..t.num_layers {
        let l = format!("{prefix}.transformer.layers.{i}");
        push(v, format!("{l}.self_attn.in_proj_weight"), vec![3 * d, d]);
        push(v, format!("{l}.self_attn.out_proj.weight"), vec![d, d]);
        push(v, format!("{l}.linear1.weight"), vec![t.dim_feedforward, d]);
        push(v, format!("{l}.linear2.weight"), vec![d, t.dim_feedforward]);
        for n in ["norm1", "norm2"] {
            push(v, format!("{l}.{n}.weight"), vec![d]);
            push(v, format!("{l}.{n}.bias"), vec![d]);
        }
        if t.layer_scale.is_some() {
            push(v, format!("{l}.layer_scale_1.scale"), vec![d]);
            push(v, format!("{l}.layer_scale_2.scale"), vec![d]);
        }
    }
}

/// Every tensor `cfg` implies, in model order.
pub fn expected_tensors(cfg: &MimiConfig) -> Vec<Expected> {
    let mut v = Vec::new();
    for decoder in [false, true] {
        for block in seanet::layout(&cfg.seanet, decoder) {
            for (name, shape) in block.tensors() {
                push(&mut v, name, shape);
            }
        }
    }
    transformer_tensors(cfg, "encoder_transformer", &mut v);
    transformer_tensors(cfg, "decoder_transformer", &mut v);
    let dim = cfg.seanet.dimension;
    let s = cfg.resample_stride();
    if s > 1 {
        push(
            &mut v,
            "downsample.conv.conv.conv.weight".into(),
            vec![dim, dim, 2 * s],
        );
        push(
            &mut v,
            "upsample.convtr.convtr.convtr.weight".into(),
            vec![dim, 1, 2 * s],
        );
    }
    let q = &cfg.quantizer;
    for (part, n, used) in [
        ("rvq_first", q.n_q_semantic, q.n_q_semantic),
        (
            "rvq_rest",
            q.n_q - q.n_q_semantic,
            cfg.num_codebooks - q.n_q_semantic,
        ),
    ] {
        let p = format!("quantizer.{part}");
        push(
            &mut v,
            format!("{p}.input_proj.weight"),
            vec![q.dimension, q.input_dimension, 1],
        );
        push(
            &mut v,
            format!("{p}.output_proj.weight"),
            vec![q.output_dimension, q.dimension, 1],
        );
        for i in 0..n {
            let c = format!("{p}.vq.layers.{i}._codebook");
            for (name, shape) in [
                (format!("{c}.embedding_sum"), vec![q.bins, q.dimension]),
                (format!("{c}.cluster_usage"), vec![q.bins]),
            ] {
                v.push(Expected {
                    name,
                    shape,
                    used: i < used,
                    optional: false,
                });
            }
            v.push(Expected {
                name: format!("{c}._initialized"),
                shape: vec![1],
                used: false,
                optional: true,
            });
        }
    }
    v
}

/// Validated f32 tensors by name, taken out one by one while the model binds them.
#[derive(Debug, Default)]
pub struct MimiWeights {
    tensors: BTreeMap<String, Vec<f32>>,
    /// Stored dtype of each tensor read from a file (absent: f32).
    dtypes: BTreeMap<String, DType>,
}

/// Check names and shapes: every required tensor present with its shape, nothing unknown.
fn check<'a>(
    cfg: &MimiConfig,
    names: impl Iterator<Item = &'a str>,
    shape_of: impl Fn(&str) -> Option<Vec<usize>>,
) -> Result<Vec<Expected>, MimiError> {
    let expected = expected_tensors(cfg);
    let known: BTreeSet<&str> = expected.iter().map(|e| e.name.as_str()).collect();
    let unexpected: Vec<String> = names
        .filter(|n| !known.contains(n))
        .map(str::to_string)
        .collect();
    let missing: Vec<String> = expected
        .iter()
        .filter(|e| !e.optional && shape_of(&e.name).is_none())
        .map(|e| e.name.clone())
        .collect();
    if !missing.is_empty() {
        return Err(MimiError::MissingTensors(missing));
    }
    if !unexpected.is_empty() {
        return Err(MimiError::UnexpectedTensors(unexpected));
    }
    for e in &expected {
        if let Some(found) = shape_of(&e.name) {
            if found != e.shape {
                return Err(MimiError::Shape {
                    tensor: e.name.clone(),
                    expected: e.shape.clone(),
                    found,
                });
            }
        }
    }
    Ok(expected)
}

impl MimiWeights {
    /// Check `file` against `cfg` and convert the used tensors (f32/f16/bf16) to f32.
    pub fn from_file(cfg: &MimiConfig, file: &WeightFile) -> Result<Self, MimiError> {
        let expected = check(cfg, file.names(), |n| file.get(n).map(|t| t.shape.to_vec()))?;
        let mut tensors = BTreeMap::new();
        let mut dtypes = BTreeMap::new();
        for e in expected.iter().filter(|e| e.used) {
            let t = file.require(&e.name)?;
            dtypes.insert(e.name.clone(), t.dtype);
            if !matches!(t.dtype, DType::F32 | DType::F16 | DType::BF16) {
                return Err(MimiError::Dtype {
                    tensor: e.name.clone(),
                    dtype: t.dtype.name().to_string(),
                });
            }
            tensors.insert(e.name.clone(), t.to_f32());
        }
        Ok(Self { tensors, dtypes })
    }

    /// Check in-memory tensors `name → (shape, values)` against `cfg`.
    pub fn from_tensors(
        cfg: &MimiConfig,
        mut given: BTreeMap<String, (Vec<usize>, Vec<f32>)>,
    ) -> Result<Self, MimiError> {
        let expected = check(cfg, given.keys().map(String::as_str), |n| {
            given.get(n).map(|(s, _)| s.clone())
        })?;
        let mut tensors = BTreeMap::new();
        for e in expected.iter().filter(|e| e.used) {
            if let Some((shape, data)) = given.remove(&e.name) {
                let n: usize = shape.iter().product();
                if data.len() != n {
                    return Err(MimiError::Shape {
                        tensor: e.name.clone(),
                        expected: shape,
                        found: vec![data.len()],
                    });
                }
                tensors.insert(e.name.clone(), data);
            }
        }
        Ok(Self {
            tensors,
            dtypes: BTreeMap::new(),
        })
    }

    /// Deterministic random weights of the shapes `cfg` implies (tests, benchmarks):
    /// uniform `±1/√fan_in` weights, zero biases, unit norms, 0.01 layer scales,
    /// codebooks with usage 1.
    pub fn synthetic(cfg: &MimiConfig, seed: u64) -> Self {
        let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut rnd = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
        };
        let mut tensors = BTreeMap::new();
        for e in expected_tensors(cfg).into_iter().filter(|e| e.used) {
            let n: usize = e.shape.iter().product();
            let name = e.name.as_str();
            let data: Vec<f32> = if name.ends_with(".bias") {
                vec![0.0; n]
            } else if name.ends_with("norm1.weight") || name.ends_with("norm2.weight") {
                vec![1.0; n]
            } else if name.ends_with(".scale") {
                vec![cfg.transformer.layer_scale.unwrap_or(1.0); n]
            } else if name.ends_with("cluster_usage") {
                vec![1.0; n]
            } else if name.ends_with("embedding_sum") {
                (0..n).map(|_| rnd()).collect()
            } else {
                let fan_in: usize = e.shape[1..].iter().product::<usize>().max(1);
                let s = 1.0 / (fan_in as f32).sqrt();
                (0..n).map(|_| rnd() * s).collect()
            };
            tensors.insert(e.name, data);
        }
        Self {
            tensors,
            dtypes: BTreeMap::new(),
        }
    }

    /// Take a tensor out (each is bound exactly once).
    pub fn take(&mut self, name: &str) -> Result<Vec<f32>, MimiError> {
        self.tensors
            .remove(name)
            .ok_or_else(|| MimiError::MissingTensors(vec![name.to_string()]))
    }

    /// The dtype `name` was stored in (f32 for in-memory tensors).
    pub fn stored_dtype(&self, name: &str) -> DType {
        self.dtypes.get(name).copied().unwrap_or(DType::F32)
    }

    /// Shape-free look at a tensor not yet taken.
    pub fn peek(&self, name: &str) -> Option<&[f32]> {
        self.tensors.get(name).map(Vec::as_slice)
    }

    /// Names not yet taken.
    pub fn remaining(&self) -> impl Iterator<Item = &str> {
        self.tensors.keys().map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn official_layout_names_and_shapes() {
        let e = expected_tensors(&MimiConfig::default());
        let find = |n: &str| {
            e.iter()
                .find(|x| x.name == n)
                .unwrap_or_else(|| panic!("{n}"))
        };
        assert_eq!(find("encoder.model.0.conv.conv.weight").shape, [64, 1, 7]);
        assert_eq!(
            find("encoder.model.12.conv.conv.weight").shape,
            [1024, 512, 16]
        );
        assert_eq!(
            find("encoder.model.14.conv.conv.weight").shape,
            [512, 1024, 3]
        );
        assert_eq!(
            find("decoder.model.2.convtr.convtr.weight").shape,
            [1024, 512, 16]
        );
        assert_eq!(find("decoder.model.14.conv.conv.weight").shape, [1, 64, 3]);
        assert_eq!(
            find("downsample.conv.conv.conv.weight").shape,
            [512, 512, 4]
        );
        assert_eq!(
            find("upsample.convtr.convtr.convtr.weight").shape,
            [512, 1, 4]
        );
        let l = "decoder_transformer.transformer.layers.7";
        assert_eq!(
            find(&format!("{l}.self_attn.in_proj_weight")).shape,
            [1536, 512]
        );
        assert_eq!(find(&format!("{l}.linear1.weight")).shape, [2048, 512]);
        let last = find("quantizer.rvq_rest.vq.layers.30._codebook.embedding_sum");
        assert_eq!(
            (last.shape.as_slice(), last.used),
            ([2048, 256].as_slice(), false)
        );
        assert!(find("quantizer.rvq_rest.vq.layers.6._codebook.cluster_usage").used);
        assert!(!find("quantizer.rvq_rest.vq.layers.7._codebook.cluster_usage").used);
        assert!(find("quantizer.rvq_first.vq.layers.0._codebook._initialized").optional);
        // Per SEANet: 2 outer convs + 4 × (strided conv + 2-conv residual block), weight and
        // bias each; 2 × 8 transformer layers of 10; resampling; 2 × 2 projections; 32 codebooks.
        let required = e.iter().filter(|x| !x.optional).count();
        assert_eq!(required, 2 * (2 * 2 + 4 * 6) + 2 * 8 * 10 + 2 + 4 + 32 * 2);
    }
}
