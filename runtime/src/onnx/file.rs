//! An ONNX model file: mapped (or owned) bytes plus the decoded graph.

use super::error::OnnxError;
use super::model::{Graph, ModelInfo, TensorInfo};
use super::parse::{parse_model, Bad};
use super::tensor::Tensor;
use memmap2::Mmap;
use std::path::{Path, PathBuf};

/// Where the model's bytes live.
#[derive(Debug)]
enum Backing {
    Map(Mmap),
    Owned(Vec<u8>),
}

impl Backing {
    fn bytes(&self) -> &[u8] {
        match self {
            Self::Map(m) => m,
            Self::Owned(v) => v,
        }
    }
}

/// A decoded ONNX model whose tensor payloads stay in the file mapping.
#[derive(Debug)]
pub struct OnnxModel {
    path: PathBuf,
    data: Backing,
    info: ModelInfo,
    graph: Graph,
}

impl OnnxModel {
    /// Map `path` and decode it (structure only: payloads are not copied):
    /// an ONNX file, or its voxlane conversion ([`super::voxlane::convert`]).
    pub fn open(path: impl AsRef<Path>) -> Result<Self, OnnxError> {
        let path = path.as_ref().to_path_buf();
        let io = |source| OnnxError::Io {
            path: path.clone(),
            source,
        };
        let file = std::fs::File::open(&path).map_err(io)?;
        if file.metadata().map_err(io)?.len() == 0 {
            return Err(OnnxError::Truncated {
                path,
                detail: "the file is empty".into(),
            });
        }
        // SAFETY: the mapping is read-only; voxlane never writes a model file
        // in place (fetched files are written to a temp name and renamed).
        let map = unsafe { Mmap::map(&file) }.map_err(io)?;
        Self::decode(path, Backing::Map(map))
    }

    /// Decode a model held in memory (`label` names it in errors).
    pub fn from_bytes(bytes: Vec<u8>, label: impl Into<PathBuf>) -> Result<Self, OnnxError> {
        Self::decode(label.into(), Backing::Owned(bytes))
    }

    fn decode(path: PathBuf, data: Backing) -> Result<Self, OnnxError> {
        let bytes = data.bytes();
        let decoded = if super::voxlane::looks_like_safetensors(bytes) {
            super::voxlane::decode(bytes)
        } else {
            parse_model(bytes)
        };
        match decoded {
            Ok((info, graph)) => Ok(Self {
                path,
                data,
                info,
                graph,
            }),
            Err(Bad::Truncated(detail)) => Err(OnnxError::Truncated { path, detail }),
            Err(Bad::NotOnnx(detail)) => Err(OnnxError::NotOnnx { path, detail }),
            Err(Bad::Malformed(detail)) => Err(OnnxError::Malformed { path, detail }),
        }
    }

    /// The file (or label) this model came from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Header fields: IR version, producer, opsets.
    pub fn info(&self) -> &ModelInfo {
        &self.info
    }

    /// The main graph.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// A view of any tensor of this model (an initializer or an attribute tensor).
    pub fn view<'a>(&'a self, info: &'a TensorInfo) -> Tensor<'a> {
        Tensor::new(info, self.data.bytes())
    }

    /// The initializer named `name`.
    pub fn initializer(&self, name: &str) -> Option<Tensor<'_>> {
        self.graph.initializer(name).map(|t| self.view(t))
    }

    /// The initializer named `name`, or [`OnnxError::MissingTensor`].
    pub fn require(&self, name: &str) -> Result<Tensor<'_>, OnnxError> {
        self.initializer(name)
            .ok_or_else(|| OnnxError::MissingTensor(name.to_string()))
    }

    /// Every initializer, in file order.
    pub fn initializers(&self) -> impl Iterator<Item = Tensor<'_>> {
        self.graph.initializers.iter().map(|t| self.view(t))
    }
}
