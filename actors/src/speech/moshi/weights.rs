//! Moshi LM weights by official tensor name: the expected list derived from
//! the config, checked against a safetensors file (presence, shape, float
//! dtype) before anything is converted; then each tensor is converted on its
//! own, in the format its route names, while the file stays memory-mapped —
//! a 16.7 GB bf16 checkpoint is never held in f32, so peak memory is the
//! converted model plus one tensor.
//!
//! [`RandomSource`] builds the same model from seeded random values generated
//! directly in the target format (benchmarks on the official 7B shape need no
//! checkpoint).

use super::config::MoshiConfig;
use super::embedding::Embedding;
use super::error::MoshiError;
use crate::kernels::matmul::{bf16, f16, WeightFormat, Weights, WeightsWriter, Q8_0_BLOCK};
use std::collections::{BTreeMap, BTreeSet};
use voxlane_runtime::weights::{DType, WeightFile};

/// One expected tensor.
#[derive(Debug, Clone, PartialEq)]
pub struct Expected {
    /// Official name.
    pub name: String,
    /// Torch shape.
    pub shape: Vec<usize>,
}

/// The role of a tensor, which decides its storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// A linear layer's weight (converted to the route's format).
    Linear,
    /// An embedding table (kept as stored).
    Embedding,
    /// A norm scale (f32).
    Norm,
}

/// The family of a tensor by its name.
pub fn family(name: &str) -> Family {
    if name.ends_with(".alpha") {
        Family::Norm
    } else if name.contains("emb") {
        Family::Embedding
    } else {
        Family::Linear
    }
}

/// Every tensor `cfg` implies, in model order.
pub fn expected_tensors(cfg: &MoshiConfig) -> Vec<Expected> {
    let mut v = Vec::new();
    let mut push = |name: String, shape: Vec<usize>| v.push(Expected { name, shape });
    let (d, dd) = (cfg.dim, cfg.depformer.dim);
    for i in 0..cfg.n_q {
        push(format!("emb.{i}.weight"), vec![cfg.card + 1, d]);
    }
    push("text_emb.weight".into(), vec![cfg.text_card + 1, d]);
    for l in 0..cfg.num_layers {
        let p = format!("transformer.layers.{l}");
        push(format!("{p}.self_attn.in_proj_weight"), vec![3 * d, d]);
        push(format!("{p}.self_attn.out_proj.weight"), vec![d, d]);
        push(
            format!("{p}.gating.linear_in.weight"),
            vec![2 * cfg.hidden(), d],
        );
        push(
            format!("{p}.gating.linear_out.weight"),
            vec![d, cfg.hidden()],
        );
        push(format!("{p}.norm1.alpha"), vec![1, 1, d]);
        push(format!("{p}.norm2.alpha"), vec![1, 1, d]);
    }
    push("out_norm.alpha".into(), vec![1, 1, d]);
    push("text_linear.weight".into(), vec![cfg.text_card, d]);
    let n_in = if cfg.depformer.multi_linear {
        cfg.dep_q
    } else {
        1
    };
    for k in 0..n_in {
        push(format!("depformer_in.{k}.weight"), vec![dd, d]);
    }
    for k in 0..cfg.dep_q.saturating_sub(1) {
        push(format!("depformer_emb.{k}.weight"), vec![cfg.card + 1, dd]);
    }
    push(
        "depformer_text_emb.weight".into(),
        vec![cfg.text_card + 1, dd],
    );
    let dh = cfg.depformer_hidden();
    for l in 0..cfg.depformer.num_layers {
        let p = format!("depformer.layers.{l}");
        push(
            format!("{p}.self_attn.in_proj_weight"),
            vec![cfg.dep_q * 3 * dd, dd],
        );
        push(
            format!("{p}.self_attn.out_proj.weight"),
            vec![cfg.dep_q * dd, dd],
        );
        for k in 0..cfg.dep_q {
            push(format!("{p}.gating.{k}.linear_in.weight"), vec![2 * dh, dd]);
            push(format!("{p}.gating.{k}.linear_out.weight"), vec![dd, dh]);
        }
        push(format!("{p}.norm1.alpha"), vec![1, 1, dd]);
        push(format!("{p}.norm2.alpha"), vec![1, 1, dd]);
    }
    for k in 0..cfg.dep_q {
        push(format!("linears.{k}.weight"), vec![cfg.card, dd]);
    }
    v
}

/// Check a file's tensor names and shapes against `cfg`, naming every
/// missing and unknown tensor, then every misshapen or non-float one.
pub fn check_file(cfg: &MoshiConfig, file: &WeightFile) -> Result<Vec<Expected>, MoshiError> {
    let expected = expected_tensors(cfg);
    let known: BTreeSet<&str> = expected.iter().map(|e| e.name.as_str()).collect();
    let missing: Vec<String> = expected
        .iter()
        .filter(|e| file.get(&e.name).is_none())
        .map(|e| e.name.clone())
        .collect();
    if !missing.is_empty() {
        return Err(MoshiError::MissingTensors(missing));
    }
    let unexpected: Vec<String> = file
        .names()
        .filter(|n| !known.contains(n))
        .map(str::to_string)
        .collect();
    if !unexpected.is_empty() {
        return Err(MoshiError::UnexpectedTensors(unexpected));
    }
    for e in &expected {
        let t = file.require(&e.name)?;
        if t.shape != e.shape.as_slice() {
            return Err(MoshiError::Shape {
                tensor: e.name.clone(),
                expected: e.shape.clone(),
                found: t.shape.to_vec(),
            });
        }
        if !matches!(t.dtype, DType::F32 | DType::F16 | DType::BF16) {
            return Err(MoshiError::Dtype {
                tensor: e.name.clone(),
                dtype: t.dtype.name().to_string(),
            });
        }
    }
    Ok(expected)
}

/// The format a linear with `k` inputs gets under the family route `route`:
/// the block formats need K to be a multiple of 32, else the weight stays f32.
pub fn linear_format(route: WeightFormat, k: usize) -> WeightFormat {
    match route {
        WeightFormat::Q8_0
        | WeightFormat::Q8_0Act16
        | WeightFormat::Q4_0
        | WeightFormat::Q4_0Act16
            if !k.is_multiple_of(Q8_0_BLOCK) =>
        {
            WeightFormat::F32
        }
        f => f,
    }
}

/// Where the model build takes its tensors from.
pub trait TensorSource {
    /// Rows `first..first + n` of the `[*, k]` linear weight `name`, in `format`.
    fn linear(
        &mut self,
        name: &str,
        first: usize,
        n: usize,
        k: usize,
        format: WeightFormat,
    ) -> Result<Weights, MoshiError>;
    /// A norm scale of `len` values.
    fn vector(&mut self, name: &str, len: usize) -> Result<Vec<f32>, MoshiError>;
    /// A `[rows, dim]` embedding table.
    fn embedding(&mut self, name: &str, rows: usize, dim: usize) -> Result<Embedding, MoshiError>;
}

/// Pack f32 rows in `format` (half routes round to nearest even).
fn pack(v: Vec<f32>, n: usize, k: usize, format: WeightFormat) -> Result<Weights, MoshiError> {
    Ok(match format {
        WeightFormat::F16 => {
            let h: Vec<f16> = v.iter().map(|&x| f16::from_f32(x)).collect();
            Weights::f16(&h, n, k)?
        }
        WeightFormat::Bf16 => {
            let h: Vec<bf16> = v.iter().map(|&x| bf16::from_f32(x)).collect();
            Weights::bf16(&h, n, k)?
        }
        WeightFormat::Q8_0 => Weights::q8_0_from_f32(&v, n, k)?,
        WeightFormat::Q8_0Act16 => Weights::q8_0_act16_from_f32(&v, n, k)?,
        WeightFormat::Q4_0 => Weights::q4_0_from_f32(&v, n, k)?,
        WeightFormat::Q4_0Act16 => Weights::q4_0_act16_from_f32(&v, n, k)?,
        WeightFormat::F32 | WeightFormat::Int8 => Weights::f32(v, n, k)?,
    })
}

/// The key a linear's rows are stored under in a packed-weights cache.
pub fn cache_key(name: &str, first: usize, n: usize) -> String {
    format!("{name}@{first}+{n}")
}

/// A table or norm of a checkpoint as stored, mapped in place when aligned
/// (else copied).
fn embedding_from(
    file: &WeightFile,
    name: &str,
    rows: usize,
    dim: usize,
) -> Result<Embedding, MoshiError> {
    let t = file.require(name)?;
    match t.dtype {
        DType::BF16 | DType::F16 => {
            let bits = file.buf::<u16>(name).unwrap_or_else(|_| t.to_u16().into());
            if t.dtype == DType::BF16 {
                Embedding::bf16(name, bits, rows, dim)
            } else {
                Embedding::f16(name, bits, rows, dim)
            }
        }
        DType::F32 => {
            let v = file.buf::<f32>(name).unwrap_or_else(|_| t.to_f32().into());
            Embedding::f32(name, v, rows, dim)
        }
        _ => Embedding::f32(name, t.to_f32().into(), rows, dim),
    }
}

fn vector_from(file: &WeightFile, name: &str, len: usize) -> Result<Vec<f32>, MoshiError> {
    let v = file.require(name)?.to_f32();
    if v.len() != len {
        return Err(MoshiError::Shape {
            tensor: name.to_string(),
            expected: vec![len],
            found: vec![v.len()],
        });
    }
    Ok(v)
}

/// Tensors converted one at a time from a memory-mapped, checked
/// safetensors file; each converted linear optionally streamed to a
/// packed-weights cache file.
pub struct FileSource<'a> {
    file: &'a WeightFile,
    cache: Option<WeightsWriter>,
}

impl<'a> FileSource<'a> {
    /// A source over `file`, after [`check_file`] accepted it for `cfg`.
    pub fn new(cfg: &MoshiConfig, file: &'a WeightFile) -> Result<Self, MoshiError> {
        check_file(cfg, file)?;
        Ok(Self { file, cache: None })
    }

    /// Also stream every converted linear into `writer`.
    pub fn caching(mut self, writer: WeightsWriter) -> Self {
        self.cache = Some(writer);
        self
    }

    /// The cache writer, once every tensor has been taken.
    pub fn into_cache(self) -> Option<WeightsWriter> {
        self.cache
    }
}

impl TensorSource for FileSource<'_> {
    fn linear(
        &mut self,
        name: &str,
        first: usize,
        n: usize,
        k: usize,
        format: WeightFormat,
    ) -> Result<Weights, MoshiError> {
        let t = self.file.require(name)?;
        let esize = t.dtype.size();
        let (a, b) = (first * k * esize, (first + n) * k * esize);
        let bytes = t.bytes.get(a..b).ok_or_else(|| MoshiError::Shape {
            tensor: name.to_string(),
            expected: vec![first + n, k],
            found: t.shape.to_vec(),
        })?;
        let rows = voxlane_runtime::weights::TensorView {
            name: t.name,
            dtype: t.dtype,
            shape: t.shape,
            bytes,
        };
        let w = if format == WeightFormat::Bf16 && t.dtype == DType::BF16 {
            // Stored bf16 stays bf16 bit for bit.
            let h: Vec<bf16> = rows.to_u16().into_iter().map(bf16::from_bits).collect();
            Weights::bf16(&h, n, k)?
        } else {
            pack(rows.to_f32(), n, k, format)?
        };
        // The converted copy is what stays resident, not the file's pages.
        self.file.release(name);
        if let Some(c) = self.cache.as_mut() {
            c.push(&cache_key(name, first, n), &w)
                .map_err(|e| MoshiError::Cache(e.to_string()))?;
        }
        Ok(w)
    }

    fn vector(&mut self, name: &str, len: usize) -> Result<Vec<f32>, MoshiError> {
        vector_from(self.file, name, len)
    }

    fn embedding(&mut self, name: &str, rows: usize, dim: usize) -> Result<Embedding, MoshiError> {
        embedding_from(self.file, name, rows, dim)
    }
}

/// Linears mapped from a packed-weights cache written by a [`FileSource`];
/// embeddings and norms from the checkpoint itself.
pub struct CachedSource<'a> {
    file: &'a WeightFile,
    stored: BTreeMap<String, Weights>,
}

impl<'a> CachedSource<'a> {
    /// A source over a checked `file` and the weights read from its cache.
    pub fn new(
        cfg: &MoshiConfig,
        file: &'a WeightFile,
        stored: BTreeMap<String, Weights>,
    ) -> Result<Self, MoshiError> {
        check_file(cfg, file)?;
        Ok(Self { file, stored })
    }
}

impl TensorSource for CachedSource<'_> {
    fn linear(
        &mut self,
        name: &str,
        first: usize,
        n: usize,
        k: usize,
        format: WeightFormat,
    ) -> Result<Weights, MoshiError> {
        let key = cache_key(name, first, n);
        let w = self
            .stored
            .remove(&key)
            .ok_or_else(|| MoshiError::Cache(format!("`{key}` is not in the cache")))?;
        if (w.n(), w.k(), w.format()) != (n, k, format) {
            return Err(MoshiError::Cache(format!(
                "`{key}` is {:?} {}×{} in the cache, the model needs {format:?} {n}×{k}",
                w.format(),
                w.n(),
                w.k()
            )));
        }
        Ok(w)
    }

    fn vector(&mut self, name: &str, len: usize) -> Result<Vec<f32>, MoshiError> {
        vector_from(self.file, name, len)
    }

    fn embedding(&mut self, name: &str, rows: usize, dim: usize) -> Result<Embedding, MoshiError> {
        embedding_from(self.file, name, rows, dim)
    }
}

/// Seeded random tensors generated directly in the target format (benchmarks).
///
/// Linear weights are uniform with scale `1/√k` (block formats: random
/// quants under an f16 scale of the same size), embeddings bf16, norms 1.
pub struct RandomSource {
    state: u64,
}

impl RandomSource {
    /// A source whose every tensor is fixed by `seed`.
    pub fn new(seed: u64) -> Self {
        Self {
            state: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
        }
    }

    fn next(&mut self) -> u64 {
        // xorshift64*: fast enough to fill a 7B model in seconds.
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        self.state.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn uniform(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n)
            .map(|_| ((self.next() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale)
            .collect()
    }

    /// GGML blocks of `block_bytes` with an f16 scale `d` then random quant bytes.
    fn blocks(&mut self, n: usize, k: usize, block_bytes: usize, d: f32) -> Vec<u8> {
        let blocks = n * (k / Q8_0_BLOCK);
        let mut out = vec![0u8; blocks * block_bytes];
        let scale = f16::from_f32(d).to_le_bytes();
        for b in out.chunks_exact_mut(block_bytes) {
            b[..2].copy_from_slice(&scale);
            for c in b[2..].chunks_mut(8) {
                let r = self.next().to_le_bytes();
                c.copy_from_slice(&r[..c.len()]);
            }
        }
        out
    }
}

impl TensorSource for RandomSource {
    fn linear(
        &mut self,
        _name: &str,
        _first: usize,
        n: usize,
        k: usize,
        format: WeightFormat,
    ) -> Result<Weights, MoshiError> {
        let s = 1.0 / (k as f32).sqrt();
        Ok(match format {
            // Quants span ±127 (q8) / ±8 (q4): scale them to about ±s.
            WeightFormat::Q8_0 => Weights::q8_0_from_ggml(&self.blocks(n, k, 34, s / 127.0), n, k)?,
            WeightFormat::Q8_0Act16 => {
                Weights::q8_0_act16_from_ggml(&self.blocks(n, k, 34, s / 127.0), n, k)?
            }
            WeightFormat::Q4_0 => Weights::q4_0_from_ggml(&self.blocks(n, k, 18, s / 8.0), n, k)?,
            WeightFormat::Q4_0Act16 => {
                Weights::q4_0_act16_from_ggml(&self.blocks(n, k, 18, s / 8.0), n, k)?
            }
            f => {
                let v = self.uniform(n * k, s);
                pack(v, n, k, f)?
            }
        })
    }

    fn vector(&mut self, _name: &str, len: usize) -> Result<Vec<f32>, MoshiError> {
        Ok(vec![1.0; len])
    }

    fn embedding(&mut self, name: &str, rows: usize, dim: usize) -> Result<Embedding, MoshiError> {
        let v = self.uniform(rows * dim, 1.0);
        let bits: Vec<u16> = v.into_iter().map(|x| bf16::from_f32(x).to_bits()).collect();
        Embedding::bf16(name, bits.into(), rows, dim)
    }
}
