//! Kernel buffers that are either owned or a range of a shared memory map.
//!
//! Prepared (packed) weights are large and, once written to a file, never
//! change: mapping them back and reading them in place makes a multi-GB
//! model load in the time it takes to validate a header. [`Buf`] lets a
//! kernel hold either a `Vec` it built itself or such a mapped range behind
//! one `&[T]`, so kernels stay written against slices. A mapped range is
//! checked when it is made (inside the map, aligned for `T`, whole
//! elements), which is what makes reading it as `&[T]` sound.

use super::error::WeightError;
use memmap2::Mmap;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

mod sealed {
    pub trait Sealed {}
}

/// Plain-old-data element types a [`Buf`] may hold: every bit pattern is a
/// valid value and there is no padding, so mapped bytes can be read as them.
pub trait Pod: sealed::Sealed + Copy + Send + Sync + 'static {
    /// The element's name in messages.
    const NAME: &'static str;
}

macro_rules! pod {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl Pod for $t {
            const NAME: &'static str = stringify!($t);
        }
    )*};
}
pod!(u8, i8, u16, i16, u32, i32, f32);

/// `bytes` copied into an anonymous read-only map, so in-memory files are
/// read through the same code (and hand out the same mapped [`Buf`]s) as
/// mapped ones. A zero-length input gives a zero-length map.
pub(crate) fn map_copy(bytes: &[u8]) -> std::io::Result<Mmap> {
    let mut m = memmap2::MmapMut::map_anon(bytes.len())?;
    m.copy_from_slice(bytes);
    m.make_read_only()
}

/// Owned elements or a checked range of a shared read-only memory map; reads as `&[T]`.
pub struct Buf<T: Pod> {
    repr: Repr<T>,
}

enum Repr<T> {
    Owned(Vec<T>),
    /// `len` elements of `T` starting `offset` bytes into `map`; checked at
    /// construction: in range, aligned for `T`.
    Mapped {
        map: Arc<Mmap>,
        offset: usize,
        len: usize,
    },
}

impl<T: Pod> Buf<T> {
    /// An owned buffer (no copy).
    pub fn owned(v: Vec<T>) -> Self {
        Self {
            repr: Repr::Owned(v),
        }
    }

    /// `bytes` bytes of `map` from `offset` as `T`s, without copying; checks
    /// that the range lies in the map, starts aligned for `T` and holds whole
    /// elements. Multi-byte elements are read little-endian, so those need a
    /// little-endian host.
    pub fn mapped(map: Arc<Mmap>, offset: usize, bytes: usize) -> Result<Self, WeightError> {
        let size = std::mem::size_of::<T>();
        let bad = |detail: String| WeightError::Misaligned {
            what: T::NAME.to_string(),
            detail,
        };
        let end = offset
            .checked_add(bytes)
            .filter(|&e| e <= map.len())
            .ok_or_else(|| {
                bad(format!(
                    "range {offset}+{bytes} is outside the {}-byte map",
                    map.len()
                ))
            })?;
        if !bytes.is_multiple_of(size) {
            return Err(bad(format!(
                "{bytes} bytes are not whole {size}-byte elements"
            )));
        }
        // The map base is page-aligned; checking the address covers both.
        let addr = map.as_ptr() as usize + offset;
        if !addr.is_multiple_of(std::mem::align_of::<T>()) {
            return Err(bad(format!(
                "offset {offset} is not {}-byte aligned",
                std::mem::align_of::<T>()
            )));
        }
        if size > 1 && cfg!(target_endian = "big") {
            return Err(bad("mapped multi-byte data is little-endian".into()));
        }
        debug_assert!(end <= map.len());
        Ok(Self {
            repr: Repr::Mapped {
                map,
                offset,
                len: bytes / size,
            },
        })
    }

    /// Whether this reads a memory map (else it owns its elements).
    pub fn is_mapped(&self) -> bool {
        matches!(self.repr, Repr::Mapped { .. })
    }

    /// The raw bytes of the elements (native order, little-endian on every
    /// host a mapped buffer exists on).
    pub fn as_bytes(&self) -> &[u8] {
        let s: &[T] = self;
        // SAFETY: `T` is plain old data without padding; u8 has alignment 1
        // and the byte length is the slice's size.
        unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<u8>(), std::mem::size_of_val(s)) }
    }

    /// These bytes as `U`s: a mapped buffer is re-checked and shared
    /// (no copy); an owned one is copied into a new `Vec<U>`.
    pub fn cast<U: Pod>(&self) -> Result<Buf<U>, WeightError> {
        match &self.repr {
            Repr::Mapped { map, offset, len } => {
                Buf::mapped(Arc::clone(map), *offset, len * std::mem::size_of::<T>())
            }
            Repr::Owned(_) => {
                let bytes = self.as_bytes();
                let size = std::mem::size_of::<U>();
                if !bytes.len().is_multiple_of(size) {
                    return Err(WeightError::Misaligned {
                        what: U::NAME.to_string(),
                        detail: format!("{} bytes are not whole {size}-byte elements", bytes.len()),
                    });
                }
                let mut v: Vec<U> = Vec::with_capacity(bytes.len() / size);
                // SAFETY: `v` has room for `bytes.len() / size` elements,
                // which is exactly `bytes.len()` bytes; any bit pattern is a
                // valid `U` (Pod), and the regions do not overlap.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        bytes.as_ptr(),
                        v.as_mut_ptr().cast::<u8>(),
                        bytes.len(),
                    );
                    v.set_len(bytes.len() / size);
                }
                Ok(Buf::owned(v))
            }
        }
    }
}

impl<T: Pod> Deref for Buf<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        match &self.repr {
            Repr::Owned(v) => v,
            Repr::Mapped { map, offset, len } => {
                // SAFETY: checked in `mapped`: `offset + len·size_of::<T>()`
                // lies inside the map, the start is aligned for `T`, and `T`
                // is Pod. The map is read-only and lives as long as `self`.
                unsafe { std::slice::from_raw_parts(map.as_ptr().add(*offset).cast::<T>(), *len) }
            }
        }
    }
}

impl<T: Pod> From<Vec<T>> for Buf<T> {
    fn from(v: Vec<T>) -> Self {
        Self::owned(v)
    }
}

impl<T: Pod> Clone for Buf<T> {
    /// Owned elements are copied; a mapped range shares its map.
    fn clone(&self) -> Self {
        let repr = match &self.repr {
            Repr::Owned(v) => Repr::Owned(v.clone()),
            Repr::Mapped { map, offset, len } => Repr::Mapped {
                map: Arc::clone(map),
                offset: *offset,
                len: *len,
            },
        };
        Self { repr }
    }
}

impl<T: Pod> fmt::Debug for Buf<T> {
    /// The storage and length, not the (possibly gigabytes of) elements.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.repr {
            Repr::Owned(v) => write!(f, "Buf::Owned({} x {})", v.len(), T::NAME),
            Repr::Mapped { offset, len, .. } => {
                write!(f, "Buf::Mapped({len} x {} at {offset})", T::NAME)
            }
        }
    }
}

impl<T: Pod> Default for Buf<T> {
    fn default() -> Self {
        Self::owned(Vec::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map_of(bytes: &[u8]) -> Arc<Mmap> {
        let mut m = memmap2::MmapMut::map_anon(bytes.len().max(1)).unwrap();
        m[..bytes.len()].copy_from_slice(bytes);
        Arc::new(m.make_read_only().unwrap())
    }

    #[test]
    fn mapped_reads_in_place() {
        let vals = [1.5f32, -2.0, 3.25, 0.0];
        let bytes: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
        let map = map_of(&bytes);
        let b = Buf::<f32>::mapped(Arc::clone(&map), 4, 8).unwrap();
        assert_eq!(&b[..], &vals[1..3]);
        assert!(b.is_mapped());
        assert_eq!(b.as_ptr() as usize, map.as_ptr() as usize + 4);
        let c = b.clone();
        assert_eq!(c.as_ptr(), b.as_ptr());
        let h = b.cast::<u16>().unwrap();
        assert_eq!(h.len(), 4);
        assert_eq!(h.as_bytes(), &bytes[4..12]);
    }

    #[test]
    fn bad_ranges_are_errors() {
        let map = map_of(&[0u8; 64]);
        for (off, len) in [(2, 4), (0, 6), (64, 4), (60, 8), (usize::MAX, 4)] {
            let e = Buf::<f32>::mapped(Arc::clone(&map), off, len).unwrap_err();
            assert!(matches!(e, WeightError::Misaligned { .. }), "{off} {len}");
        }
        assert!(Buf::<u16>::mapped(Arc::clone(&map), 1, 2).is_err());
        assert_eq!(
            Buf::<u8>::mapped(Arc::clone(&map), 1, 63).unwrap().len(),
            63
        );
        assert_eq!(Buf::<u8>::mapped(map, 64, 0).unwrap().len(), 0);
    }

    #[test]
    fn owned_buffers() {
        let b = Buf::from(vec![1u16, 2, 3]);
        assert!(!b.is_mapped());
        assert_eq!(&b[..], &[1, 2, 3]);
        assert_eq!(b.as_bytes(), &[1, 0, 2, 0, 3, 0]);
        assert!(b.cast::<f32>().is_err());
        let f = Buf::from(vec![1u16, 2]).cast::<f32>().unwrap();
        assert_eq!(f[0].to_bits(), 0x0002_0001);
        assert_eq!(format!("{b:?}"), "Buf::Owned(3 x u16)");
    }
}
