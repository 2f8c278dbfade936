//! Prepared weights to and from packed-weights files
//! ([`voxlane_runtime::weights::packed`]).
//!
//! Quantizing and packing a large model is slow; its result is a few flat
//! buffers per weight. [`Weights::parts`] exposes them as bytes,
//! [`WeightsWriter`] streams them to a file, and [`read_weights`] maps the
//! file and rebuilds each [`Weights`] around ranges of the map
//! ([`Weights::from_parts`]): nothing is copied or converted, so a load is
//! a header check. Every length is validated against the format and shape,
//! so a truncated, damaged or foreign file is a typed error.
//!
//! Part names and element types per format (all little-endian, N×K weight):
//!
//! | format | parts |
//! |---|---|
//! | `f32` | `w`: F32, N·K |
//! | `f16` / `bf16` | `bits`: F16 / BF16, N·K |
//! | `q8_0` | `scales`: F32, N·K/32; `quants`: I8, N·K |
//! | `q4_0` | `scales`: F32, N·K/32; `quants`: U8, N·K/2 (nibbles) |
//! | `q8_0_act16` | `data`: U8, ⌈N/16⌉·(K/32)·544 (row groups, see `q8_0_act16`) |
//! | `q4_0_act16` | `data`: U8, ⌈N/16⌉·(K/32)·288 (row groups, see `q4_0_act16`) |
//!
//! [`PACKED_LAYOUT`] (stored under [`PACKED_LAYOUT_KEY`]) names this
//! layout; a file of another layout is refused rather than misread.

use super::q4_0_act16::Q4Act16Weights;
use super::q8_0::{check_k, Q8Weights};
use super::q8_0_act16::Act16Weights;
use super::{check_dims, HalfKind, Packed, WeightFormat, Weights, Q8_0_BLOCK};
use crate::kernels::error::{check_len, KernelError};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use voxlane_runtime::weights::{
    Buf, DType, PackedFile, PackedPart, PackedWriter, PartRef, Pod, WeightError,
};

/// The packing layout this build writes and reads; bump it whenever a
/// format's buffers change meaning or order.
pub const PACKED_LAYOUT: u32 = 1;
/// The metadata key holding [`PACKED_LAYOUT`] (reserved: callers may not set it).
pub const PACKED_LAYOUT_KEY: &str = "voxlane.matmul.layout";

impl WeightFormat {
    /// The tag stored in packed-weights files (`"f32"`, `"q8_0"`, ...).
    pub fn tag(self) -> &'static str {
        match self {
            Self::F32 => "f32",
            Self::F16 => "f16",
            Self::Bf16 => "bf16",
            Self::Q8_0 => "q8_0",
            Self::Q4_0 => "q4_0",
            Self::Q8_0Act16 => "q8_0_act16",
            Self::Q4_0Act16 => "q4_0_act16",
            Self::Int8 => "int8",
        }
    }

    /// The format a stored tag names, if any.
    pub fn from_tag(tag: &str) -> Option<Self> {
        [
            Self::F32,
            Self::F16,
            Self::Bf16,
            Self::Q8_0,
            Self::Q4_0,
            Self::Q8_0Act16,
            Self::Q4_0Act16,
            Self::Int8,
        ]
        .into_iter()
        .find(|f| f.tag() == tag)
    }
}

/// A prepared weight's buffers as raw bytes, borrowed (see the module table).
#[derive(Debug, Clone)]
pub struct PackedParts<'a> {
    /// The storage format.
    pub format: WeightFormat,
    /// Output features.
    pub n: usize,
    /// Input features.
    pub k: usize,
    /// The buffers, named, in the order [`Weights::from_parts`] expects.
    pub parts: Vec<PartRef<'a>>,
}

/// `a · b`, or a typed error on overflow (hostile shapes).
fn mul(what: &'static str, a: usize, b: usize) -> Result<usize, KernelError> {
    a.checked_mul(b).ok_or_else(|| KernelError::Param {
        what,
        detail: format!("{a} × {b} overflows"),
    })
}

/// The parts `(name, dtype, bytes)` a stored (format, n, k) must have.
fn expected_parts(
    format: WeightFormat,
    n: usize,
    k: usize,
) -> Result<Vec<(&'static str, DType, usize)>, KernelError> {
    check_dims(n, k)?;
    let nk = mul("weight shape", n, k)?;
    Ok(match format {
        WeightFormat::F32 => vec![("w", DType::F32, mul("weight shape", nk, 4)?)],
        WeightFormat::F16 => vec![("bits", DType::F16, mul("weight shape", nk, 2)?)],
        WeightFormat::Bf16 => vec![("bits", DType::BF16, mul("weight shape", nk, 2)?)],
        WeightFormat::Q8_0 | WeightFormat::Q4_0 => {
            check_k(k)?;
            let scales = ("scales", DType::F32, nk / Q8_0_BLOCK * 4);
            if format == WeightFormat::Q8_0 {
                vec![scales, ("quants", DType::I8, nk)]
            } else {
                vec![scales, ("quants", DType::U8, nk / 2)]
            }
        }
        WeightFormat::Q8_0Act16 | WeightFormat::Q4_0Act16 => {
            check_k(k)?;
            let kbs = k / Q8_0_BLOCK;
            let len = if format == WeightFormat::Q8_0Act16 {
                Act16Weights::packed_len(n, kbs)
            } else {
                Q4Act16Weights::packed_len(n, kbs)
            };
            let len = len.ok_or_else(|| KernelError::Param {
                what: "weight shape",
                detail: format!("N={n}, K={k} overflows"),
            })?;
            vec![("data", DType::U8, len)]
        }
        WeightFormat::Int8 => {
            return Err(KernelError::Param {
                what: "weight format",
                detail: "int8 weights are not stored in packed-weights files".into(),
            })
        }
    })
}

/// `part`'s bytes as a `Buf<T>` (shared, not copied, when mapped).
fn typed<T: Pod>(name: &'static str, part: &PackedPart) -> Result<Buf<T>, KernelError> {
    part.data.cast::<T>().map_err(|e| KernelError::Param {
        what: name,
        detail: e.to_string(),
    })
}

impl Weights {
    /// The buffers as bytes, to store with [`WeightsWriter`]; int8 weights
    /// are not stored (an error).
    pub fn parts(&self) -> Result<PackedParts<'_>, KernelError> {
        let format = self.format();
        let names = expected_parts(format, self.n, self.k)?;
        let bufs: Vec<&[u8]> = match &self.packed {
            Packed::F32(w) => vec![w.as_bytes()],
            Packed::Half(h) => vec![h.bits.as_bytes()],
            Packed::Q8_0(q) => vec![q.scales.as_bytes(), q.quants.as_bytes()],
            Packed::Q8Act16(q) => vec![q.data.as_bytes()],
            Packed::Q4Act16(q) => vec![q.data.as_bytes()],
            Packed::Int8(_) => Vec::new(),
        };
        let parts = names
            .into_iter()
            .zip(bufs)
            .map(|((name, dtype, len), bytes)| {
                check_len(name, len, bytes.len())?;
                Ok(PartRef { name, dtype, bytes })
            })
            .collect::<Result<_, KernelError>>()?;
        Ok(PackedParts {
            format,
            n: self.n,
            k: self.k,
            parts,
        })
    }

    /// Rebuild a weight from stored `parts` (e.g. a [`PackedFile`] entry's),
    /// checking every name, dtype and length against (`format`, `n`, `k`);
    /// mapped parts are used in place, without copying.
    pub fn from_parts(
        format: WeightFormat,
        n: usize,
        k: usize,
        parts: &[PackedPart],
    ) -> Result<Self, KernelError> {
        let want = expected_parts(format, n, k)?;
        if parts.len() != want.len() {
            return Err(KernelError::Param {
                what: "stored parts",
                detail: format!(
                    "{} wants parts {:?}, got {:?}",
                    format.tag(),
                    want.iter().map(|w| w.0).collect::<Vec<_>>(),
                    parts.iter().map(|p| p.name.as_str()).collect::<Vec<_>>()
                ),
            });
        }
        for ((name, dtype, len), p) in want.iter().zip(parts) {
            if p.name != *name || p.dtype != *dtype {
                return Err(KernelError::Param {
                    what: name,
                    detail: format!(
                        "expected part `{name}` of {}, got `{}` of {}",
                        dtype.name(),
                        p.name,
                        p.dtype.name()
                    ),
                });
            }
            check_len(name, *len, p.data.len())?;
        }
        let packed = match format {
            WeightFormat::F32 => Packed::F32(typed("w", &parts[0])?),
            WeightFormat::F16 | WeightFormat::Bf16 => Packed::Half(super::half::HalfWeights {
                kind: if format == WeightFormat::F16 {
                    HalfKind::F16
                } else {
                    HalfKind::Bf16
                },
                bits: typed("bits", &parts[0])?,
            }),
            WeightFormat::Q8_0 | WeightFormat::Q4_0 => Packed::Q8_0(Q8Weights {
                scales: typed("scales", &parts[0])?,
                quants: typed("quants", &parts[1])?,
                q4: format == WeightFormat::Q4_0,
            }),
            WeightFormat::Q8_0Act16 => Packed::Q8Act16(Act16Weights {
                data: typed("data", &parts[0])?,
                kbs: k / Q8_0_BLOCK,
            }),
            WeightFormat::Q4_0Act16 => Packed::Q4Act16(Q4Act16Weights {
                data: typed("data", &parts[0])?,
                kbs: k / Q8_0_BLOCK,
            }),
            // `expected_parts` refused it above.
            WeightFormat::Int8 => {
                return Err(KernelError::Param {
                    what: "weight format",
                    detail: "int8 weights are not stored".into(),
                })
            }
        };
        Ok(Self { n, k, packed })
    }

    /// Whether every buffer reads a memory map (a weight from [`read_weights`]).
    pub fn is_mapped(&self) -> bool {
        match &self.packed {
            Packed::F32(w) => w.is_mapped(),
            Packed::Half(h) => h.bits.is_mapped(),
            Packed::Q8_0(q) => q.scales.is_mapped() && q.quants.is_mapped(),
            Packed::Q8Act16(q) => q.data.is_mapped(),
            Packed::Q4Act16(q) => q.data.is_mapped(),
            Packed::Int8(_) => false,
        }
    }
}

/// Why a packed-weights file could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum WeightStoreError {
    /// The container: I/O, truncation, a foreign or damaged file.
    #[error(transparent)]
    File(#[from] WeightError),
    /// One weight's format, shape or parts do not fit together.
    #[error("weight `{name}`: {source}")]
    Weight {
        /// Entry name.
        name: String,
        /// What does not fit.
        source: KernelError,
    },
    /// Written by a build that packs differently: rebuild the file.
    #[error("{path}: matmul packing layout {found:?}, this build uses {expected}")]
    Layout {
        /// The file.
        path: PathBuf,
        /// The layout the file names (`None`: no layout key).
        found: Option<String>,
        /// [`PACKED_LAYOUT`].
        expected: u32,
    },
}

/// Streams prepared weights into a packed-weights file, one [`push`] at a
/// time (the caller may drop each weight after pushing it); [`finish`]
/// renames the file into place, dropping it unfinished leaves nothing.
///
/// [`push`]: WeightsWriter::push
/// [`finish`]: WeightsWriter::finish
#[derive(Debug)]
pub struct WeightsWriter {
    inner: PackedWriter,
}

impl WeightsWriter {
    /// Start writing `path`.
    pub fn create(path: impl AsRef<Path>) -> Result<Self, WeightStoreError> {
        Ok(Self {
            inner: PackedWriter::create(path)?,
        })
    }

    /// Append weight `name` (its bytes are written now, not kept).
    pub fn push(&mut self, name: &str, weights: &Weights) -> Result<(), WeightStoreError> {
        let p = weights.parts().map_err(|source| WeightStoreError::Weight {
            name: name.to_string(),
            source,
        })?;
        self.inner
            .push(name, p.format.tag(), &[p.n, p.k], &p.parts)?;
        Ok(())
    }

    /// Write `metadata` (e.g. the source model's id and the load options,
    /// to tell a stale file from a current one) and move the file into place.
    pub fn finish(self, metadata: &[(&str, &str)]) -> Result<(), WeightStoreError> {
        if metadata.iter().any(|(k, _)| *k == PACKED_LAYOUT_KEY) {
            return Err(WeightError::Mismatch {
                tensor: PACKED_LAYOUT_KEY.into(),
                expected: "a key the writer sets itself".into(),
                found: "a caller's metadata entry".into(),
            }
            .into());
        }
        let layout = PACKED_LAYOUT.to_string();
        let mut all = metadata.to_vec();
        all.push((PACKED_LAYOUT_KEY, &layout));
        self.inner.finish(&all)?;
        Ok(())
    }
}

/// Write `weights` (name, weight) and `metadata` to `path` atomically.
pub fn write_weights<'a>(
    path: impl AsRef<Path>,
    weights: impl IntoIterator<Item = (&'a str, &'a Weights)>,
    metadata: &[(&str, &str)],
) -> Result<(), WeightStoreError> {
    let mut w = WeightsWriter::create(path)?;
    for (name, weights) in weights {
        w.push(name, weights)?;
    }
    w.finish(metadata)
}

/// The weights and metadata of a packed-weights file; the weights read the
/// file's map in place and keep it alive.
#[derive(Debug)]
pub struct StoredWeights {
    /// Each weight by name.
    pub weights: BTreeMap<String, Weights>,
    /// The writer's metadata (without [`PACKED_LAYOUT_KEY`]).
    pub metadata: BTreeMap<String, String>,
}

/// Map `path` and rebuild every weight in place (header and lengths checked, data not copied).
pub fn read_weights(path: impl AsRef<Path>) -> Result<StoredWeights, WeightStoreError> {
    StoredWeights::from_packed(PackedFile::open(path)?)
}

impl StoredWeights {
    /// Rebuild every weight of an opened packed-weights file (e.g. one from
    /// [`PackedFile::from_bytes`]): layout, formats, shapes and lengths checked.
    pub fn from_packed(file: PackedFile) -> Result<Self, WeightStoreError> {
        weights_of(file)
    }
}

fn weights_of(file: PackedFile) -> Result<StoredWeights, WeightStoreError> {
    let path = file.path().to_path_buf();
    let (entries, mut metadata) = file.into_parts();
    let layout = metadata.remove(PACKED_LAYOUT_KEY);
    if layout.as_deref() != Some(PACKED_LAYOUT.to_string().as_str()) {
        return Err(WeightStoreError::Layout {
            path,
            found: layout,
            expected: PACKED_LAYOUT,
        });
    }
    let mut weights = BTreeMap::new();
    for e in entries {
        let bad = |source| WeightStoreError::Weight {
            name: e.name.clone(),
            source,
        };
        let format = WeightFormat::from_tag(&e.format).ok_or_else(|| {
            bad(KernelError::Param {
                what: "weight format",
                detail: format!("unknown format tag `{}`", e.format),
            })
        })?;
        let (n, k) = match e.shape[..] {
            [n, k] => (n, k),
            _ => {
                return Err(bad(KernelError::Param {
                    what: "weight shape",
                    detail: format!("expected [N, K], got {:?}", e.shape),
                }))
            }
        };
        let w = Weights::from_parts(format, n, k, &e.parts).map_err(bad)?;
        weights.insert(e.name, w);
    }
    Ok(StoredWeights { weights, metadata })
}

#[cfg(test)]
mod tests;
