//! The bind cache: every dense int8 conv's, int8 GEMM's (`MatMulInteger`,
//! LSTM) and polyphase transposed conv's weights packed for this CPU's
//! route, kept in a packed-weights file beside the voxlane weight file, so
//! a later load maps them in place instead of packing them again (packing
//! and the pages it fills were most of a load).
//!
//! The file is `<model stem>.<route>.vxp` (e.g. `kokoro-….avx2.vxp`): one
//! per route, since each route packs its own tiles. It records the model
//! file's length and modification time; a cache that does not match them,
//! cannot be read, or lacks an entry is never trusted: what it cannot give
//! is packed as usual, and a missing or unreadable cache is written anew
//! (atomically, so an interrupted write leaves none). A readable cache that
//! could not bind every conv (a packing changed, an entry was refused) is
//! removed when the load finishes, so the next load writes it whole. The
//! stamp carries [`PACK_LAYOUT`] too. Writing is best effort: a read-only
//! cache directory only costs the packing.

use super::qgemm::{PackedInt8, QRoute};
use crate::kernels::conv1d_int8::{Conv1dInt8, PreparedBufs};
use crate::kernels::conv_transpose1d::{ConvTranspose1d, ConvTranspose1dParams};
use crate::kernels::cpu::route_name;
use crate::kernels::KernelError;
use std::cell::{Cell, RefCell};
use std::path::{Path, PathBuf};
use voxlane_runtime::weights::{DType, PackedEntry, PackedFile, PackedWriter, PartRef};

/// Format tag of a cached conv entry, before `/` and its tiles' name.
const FORMAT: &str = "voxlane.conv1d_int8";
/// Format tag of a cached int8 GEMM weight, before `/` and its route.
const QGEMM_FORMAT: &str = "voxlane.qgemm";
/// Format tag of a cached transposed conv (its polyphase conv's f32 weights).
const PHASES_FORMAT: &str = "voxlane.conv_transpose1d/phases-f32";

/// Version of the packed layouts a cache holds: raise it with any change to
/// how a route packs, so every older cache is rewritten at once.
pub const PACK_LAYOUT: u32 = 9;

/// Where the bind cache of voxlane weight file `model` lives on this CPU's route.
pub fn cache_path(model: &Path) -> PathBuf {
    model.with_extension(format!("{}.vxp", route_name()))
}

/// The packed conv weights of one model file on this route: read from its
/// cache file, or recorded while binding and written by [`BindCache::finish`].
#[derive(Debug)]
pub struct BindCache {
    path: PathBuf,
    /// `(key, value)` the cache must carry to match the model.
    stamp: Vec<(&'static str, String)>,
    file: Option<PackedFile>,
    writer: RefCell<Option<PackedWriter>>,
    /// A mapped cache failed to bind some conv: remove it at [`BindCache::finish`].
    stale: Cell<bool>,
}

impl BindCache {
    /// The cache of the voxlane weight file `model` (`.vxw`) on this
    /// route; `None` for any other file (an ONNX export binds as usual).
    pub fn open(model: &Path) -> Option<Self> {
        if model.extension().is_none_or(|e| e != "vxw") {
            return None;
        }
        let meta = std::fs::metadata(model).ok()?;
        let mtime = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        let stamp = vec![
            ("voxlane.route", route_name()),
            ("voxlane.pack_layout", PACK_LAYOUT.to_string()),
            ("voxlane.model_len", meta.len().to_string()),
            ("voxlane.model_mtime_ns", mtime.to_string()),
        ];
        let path = cache_path(model);
        let file = PackedFile::open(&path).ok().filter(|f| {
            stamp
                .iter()
                .all(|(k, v)| f.metadata().get(*k).is_some_and(|got| got == v))
        });
        // No usable cache: record this load's packing into a new one.
        let writer = match file {
            Some(_) => None,
            None => PackedWriter::create(&path)
                .map_err(|e| tracing::debug!("bind cache not written: {e}"))
                .ok(),
        };
        Some(Self {
            path,
            stamp,
            file,
            writer: RefCell::new(writer),
            stale: Cell::new(false),
        })
    }

    /// Where the cache lives.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the cache was read from its file (not being written).
    pub fn is_mapped(&self) -> bool {
        self.file.is_some()
    }

    /// The cached packed weights of conv `name`, if the cache has them.
    pub fn conv(&self, name: &str) -> Option<PreparedBufs> {
        let e = self.file.as_ref()?.get(name)?;
        let tiles = e.format.strip_prefix(FORMAT)?.strip_prefix('/')?;
        let packed = e.part("packed")?.data.cast::<i8>().ok()?;
        let wsum = e.part("wsum")?.data.cast::<i32>().ok()?.to_vec();
        Some(PreparedBufs {
            tiles: tiles.to_string(),
            packed,
            wsum,
        })
    }

    /// Int8 GEMM weight `name` (`[k, n]`): mapped from the cache where it
    /// holds this route's packing, else `pack()`ed and recorded.
    pub fn qgemm_or<E>(
        &self,
        name: &str,
        k: usize,
        n: usize,
        pack: impl FnOnce() -> Result<PackedInt8, E>,
    ) -> Result<PackedInt8, E> {
        let format = format!("{QGEMM_FORMAT}/{:?}", QRoute::best());
        let cached = self.entry(name, &format).and_then(|e| {
            let [a, b, c] = e.shape[..] else { return None };
            let i32s = |part: &str| Some(e.part(part)?.data.cast::<i32>().ok()?.to_vec());
            PackedInt8::from_cached(
                k,
                n,
                [a, b, c],
                e.part("data")?.data.cast::<i8>().ok()?,
                e.part("fixes")?.data.cast::<i32>().ok()?,
                i32s("fix_at")?,
                e.part("excess")?.data.cast::<i8>().ok()?,
                i32s("col_sums")?,
                i32s("kzc")?,
                i32s("zero")?,
                e.part("scale")?.data.cast::<f32>().ok()?.to_vec(),
            )
        });
        self.bound(cached.is_some());
        if let Some(p) = cached {
            return Ok(p);
        }
        let p = pack()?;
        if !self.recording() {
            return Ok(p);
        }
        let c = p.cached();
        let bytes = |v: &[i32]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
        let (col_sums, kzc, zero) = (bytes(c.col_sums), bytes(c.kzc), bytes(c.zero));
        let scale: Vec<u8> = c.scale.iter().flat_map(|x| x.to_le_bytes()).collect();
        let (fixes, fix_at) = (bytes(c.fixes), bytes(c.fix_at));
        let part = |name, dtype, bytes| PartRef { name, dtype, bytes };
        self.push(
            name,
            &format!("{QGEMM_FORMAT}/{:?}", c.route),
            &c.dims,
            &[
                part("data", DType::I8, bytemuck_i8(c.data)),
                part("fixes", DType::I32, &fixes),
                part("fix_at", DType::I32, &fix_at),
                part("excess", DType::I8, bytemuck_i8(c.excess)),
                part("col_sums", DType::I32, &col_sums),
                part("kzc", DType::I32, &kzc),
                part("zero", DType::I32, &zero),
                part("scale", DType::F32, &scale),
            ],
        );
        Ok(p)
    }

    /// Transposed conv `name` on its polyphase route: its packed weights
    /// mapped from the cache where it holds them, else `bind()`ed and recorded.
    pub fn conv_transpose_or<E: From<KernelError>>(
        &self,
        name: &str,
        params: ConvTranspose1dParams,
        bias: Option<&[f32]>,
        bind: impl FnOnce() -> Result<ConvTranspose1d, E>,
    ) -> Result<ConvTranspose1d, E> {
        let cached = self
            .entry(name, PHASES_FORMAT)
            .filter(|e| e.shape == [params.c_in, params.c_out, params.kernel, params.stride])
            .and_then(|e| e.part("packed")?.data.cast::<f32>().ok())
            .and_then(|w| ConvTranspose1d::with_packed_phases(params, w, bias).ok());
        if let Some(c) = cached {
            self.bound(true);
            return Ok(c);
        }
        let conv = bind()?;
        // A conv off the polyphase route has nothing to cache (and so
        // leaves a mapped cache whole).
        let Some(w) = conv.packed_phases() else {
            return Ok(conv);
        };
        self.bound(false);
        if self.recording() {
            let bytes: Vec<u8> = w.iter().flat_map(|x| x.to_le_bytes()).collect();
            self.push(
                name,
                PHASES_FORMAT,
                &[params.c_in, params.c_out, params.kernel, params.stride],
                &[PartRef {
                    name: "packed",
                    dtype: DType::F32,
                    bytes: &bytes,
                }],
            );
        }
        Ok(conv)
    }

    /// Whether a cache is being written (so packings are worth serializing).
    fn recording(&self) -> bool {
        self.writer.borrow().is_some()
    }

    /// The mapped cache's entry `name` if its format is `format`.
    fn entry(&self, name: &str, format: &str) -> Option<&PackedEntry> {
        self.file.as_ref()?.get(name).filter(|e| e.format == format)
    }

    /// On a mapped cache, a weight not bound from it makes it stale.
    fn bound(&self, from_cache: bool) {
        if self.file.is_some() && !from_cache {
            self.stale.set(true);
        }
    }

    /// Append an entry to the cache being written (if one is).
    fn push(&self, name: &str, format: &str, shape: &[usize], parts: &[PartRef<'_>]) {
        let mut slot = self.writer.borrow_mut();
        let Some(w) = slot.as_mut() else { return };
        if let Err(e) = w.push(name, format, shape, parts) {
            tracing::debug!("bind cache not written: {e}");
            *slot = None;
        }
    }

    /// Record conv `name`'s packed weights for the cache being written; on a
    /// mapped cache, note whether `conv` was bound from it.
    pub fn record(&self, name: &str, conv: &Conv1dInt8) {
        let Some(prep) = conv.prepared() else {
            return;
        };
        if let Some(file) = &self.file {
            let mapped = file
                .get(name)
                .and_then(|e| e.part("packed"))
                .is_some_and(|p| std::ptr::eq(p.data.as_ptr().cast::<i8>(), prep.packed.as_ptr()));
            self.bound(mapped);
            return;
        }
        let wsum: Vec<u8> = prep.wsum.iter().flat_map(|v| v.to_le_bytes()).collect();
        let packed: &[u8] = bytemuck_i8(prep.packed);
        let parts = [
            PartRef {
                name: "packed",
                dtype: DType::I8,
                bytes: packed,
            },
            PartRef {
                name: "wsum",
                dtype: DType::I32,
                bytes: &wsum,
            },
        ];
        self.push(
            name,
            &format!("{FORMAT}/{}", prep.tiles),
            &[prep.packed.len()],
            &parts,
        );
    }

    /// Whether some conv was not bound from the mapped cache (it will be
    /// removed at [`BindCache::finish`]).
    pub fn is_stale(&self) -> bool {
        self.stale.get()
    }

    /// Write the recorded cache (when one was being recorded), or remove a
    /// stale one; best effort.
    pub fn finish(self) {
        if self.stale.get() {
            tracing::debug!("bind cache {} is stale: removed", self.path.display());
            std::fs::remove_file(&self.path).ok();
        }
        if let Some(w) = self.writer.into_inner() {
            let meta: Vec<(&str, &str)> =
                self.stamp.iter().map(|(k, v)| (*k, v.as_str())).collect();
            if let Err(e) = w.finish(&meta) {
                tracing::debug!("bind cache not written: {e}");
            }
        }
    }
}

/// `i8` bytes as `u8` (same size and alignment).
fn bytemuck_i8(v: &[i8]) -> &[u8] {
    // SAFETY: i8 and u8 have the same size, alignment and valid bit patterns.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), v.len()) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::conv1d::Conv1dParams;
    use crate::kernels::cpu::available_levels;
    use crate::kernels::matmul::IntWeights;

    /// The packed bytes of every tiles kind this machine can pack, hashed
    /// (FNV-1a) for [`PACK_LAYOUT`] 9 (5 split the AVX2 GEMM's pairs, 6 keeps
    /// many fixes as a plane, 7 packs Winograd F(6,3), 8 F(6,4) where it
    /// takes fewer multiplies, 9 splits the AVX2 GEMM's lanes of two groups). A cache maps packings written by an
    /// earlier build: when this fails, a packing changed, so raise
    /// `PACK_LAYOUT` (older caches are then rewritten) and record the new hashes.
    #[test]
    fn packings_match_their_layout_version() {
        // (shape, tiles, hash)
        const KNOWN: [(usize, &str, u64); 9] = [
            (0, "amx-i8", 0xf849704ba4fc0078),
            (1, "amx-i8", 0x782b0162586f76e3),
            (2, "amx-i8", 0x95104060c6763372),
            (0, "vector-i8", 0x154c4011aae61510),
            (0, "wino64-i16", 0x7e23a5ff07cb1933),
            (1, "vector-i8", 0xbdf7a9a76607de63),
            (1, "wide-i16", 0xe0ca3a1db899c146),
            (2, "vector-i8", 0xaf6bbb335b8375e2),
            (2, "wino63-i16", 0xb2d60c23e2c14d40),
        ];
        // (route, AMX padding, hash) of the int8 GEMM packings.
        const KNOWN_QGEMM: [(QRoute, bool, u64); 4] = [
            (QRoute::Vnni, false, 0x1dd0643ce2f60139),
            (QRoute::Vnni, true, 0xcd735fe0eeb18939),
            (QRoute::AvxVnni, false, 0x1dd0643ce2f60139),
            (QRoute::Avx2, false, 0x0ce5befcc28777c5),
        ];
        assert_eq!(
            PACK_LAYOUT, 9,
            "record the hashes of the new layout version"
        );
        let fnv = |bytes: &[u8]| {
            bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
                (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
            })
        };
        let shapes = [
            Conv1dParams::new(9, 7, 7).dilation(2).padding(6, 6),
            Conv1dParams::new(9, 7, 4).stride(2).padding(1, 2),
            Conv1dParams::new(9, 7, 3).padding(1, 1),
        ];
        for (si, p) in shapes.into_iter().enumerate() {
            let w: Vec<u8> = (0..p.weight_len()).map(|i| (i * 89 + 7) as u8).collect();
            let mut conv = Conv1dInt8::new(p, IntWeights::U8(&w), &[0.01], &[131], None).unwrap();
            for level in available_levels() {
                conv.set_level(level);
                let prep = conv.prepared().expect("a dense conv");
                let mut bytes = bytemuck_i8(prep.packed).to_vec();
                bytes.extend(prep.wsum.iter().flat_map(|v| v.to_le_bytes()));
                let got = fnv(&bytes);
                match KNOWN
                    .iter()
                    .find(|(i, name, _)| *i == si && *name == prep.tiles)
                {
                    Some((_, _, want)) => assert_eq!(
                        got, *want,
                        "{} tiles of {p:?} packed anew (hash {got:#x}): raise PACK_LAYOUT",
                        prep.tiles
                    ),
                    None => eprintln!(
                        "{} tiles of shape {si}: no recorded hash (this machine's: {got:#x})",
                        prep.tiles
                    ),
                }
            }
        }
        // Every i8 value in both places of a pair (the AVX2 route's fixes as
        // a plane), and small weights with an extreme in 37 (as a list).
        let (k, n) = (70, 50);
        let even: Vec<i8> = (0..k * n)
            .map(|i| ((i * 131 + 7) % 256) as u8 as i8)
            .collect();
        let bell: Vec<i8> = (0..k * n)
            .map(|i| match i % 37 {
                0 => 120,
                1 => -125,
                _ => (i * 29 % 41) as i8 - 20,
            })
            .collect();
        for route in QRoute::available() {
            if route == QRoute::Reference {
                continue;
            }
            let (mut bytes, mut amx) = (Vec::new(), false);
            for w in [&even, &bell] {
                let p = PackedInt8::with_route(k, n, w, &[0.01], &[3], route).expect("pack");
                let c = p.cached();
                amx = c.dims[2].is_multiple_of(64) && route == QRoute::Vnni;
                bytes.extend(bytemuck_i8(c.data));
                bytes.extend(bytemuck_i8(c.excess));
                for v in [c.fixes, c.fix_at, c.col_sums, c.kzc] {
                    bytes.extend(v.iter().flat_map(|x| x.to_le_bytes()));
                }
            }
            let got = fnv(&bytes);
            match KNOWN_QGEMM
                .iter()
                .find(|(r, a, _)| *r == route && *a == amx)
            {
                Some((_, _, want)) => assert_eq!(
                    got, *want,
                    "{route:?} GEMM packing changed (hash {got:#x}): raise PACK_LAYOUT"
                ),
                None => eprintln!("{route:?} GEMM (AMX {amx}): no recorded hash ({got:#x})"),
            }
        }
    }
}
