//! NumPy `.npy` (format version 1/2, little-endian, C order) reading and writing.

use std::path::{Path, PathBuf};

/// Errors reading or writing `.npy` files.
#[derive(Debug, thiserror::Error)]
pub enum NpyError {
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// Not a `.npy` file, or one voxlane cannot read.
    #[error("{path}: {detail}")]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
}

/// Array contents, by element type.
#[derive(Debug, Clone, PartialEq)]
pub enum NpyData {
    /// `<f4`.
    F32(Vec<f32>),
    /// `<f8`.
    F64(Vec<f64>),
    /// `<i8`.
    I64(Vec<i64>),
    /// `<i4`.
    I32(Vec<i32>),
}

/// A loaded array.
#[derive(Debug, Clone, PartialEq)]
pub struct NpyArray {
    /// Shape, outermost first.
    pub shape: Vec<usize>,
    /// Values in C order.
    pub data: NpyData,
}

impl NpyArray {
    /// The values as f32 (integers and f64 converted).
    pub fn to_f32(&self) -> Vec<f32> {
        match &self.data {
            NpyData::F32(v) => v.clone(),
            NpyData::F64(v) => v.iter().map(|x| *x as f32).collect(),
            NpyData::I64(v) => v.iter().map(|x| *x as f32).collect(),
            NpyData::I32(v) => v.iter().map(|x| *x as f32).collect(),
        }
    }

    /// The values as i64 (floats truncated).
    pub fn to_i64(&self) -> Vec<i64> {
        match &self.data {
            NpyData::F32(v) => v.iter().map(|x| *x as i64).collect(),
            NpyData::F64(v) => v.iter().map(|x| *x as i64).collect(),
            NpyData::I64(v) => v.clone(),
            NpyData::I32(v) => v.iter().map(|x| *x as i64).collect(),
        }
    }
}

fn header_value<'a>(header: &'a str, key: &str) -> Option<&'a str> {
    let at = header.find(&format!("'{key}'"))?;
    let rest = &header[at + key.len() + 2..];
    let colon = rest.find(':')?;
    Some(rest[colon + 1..].trim_start())
}

/// Parse a `.npy` byte buffer (`path` names it in errors).
pub fn parse_npy(bytes: &[u8], path: &Path) -> Result<NpyArray, NpyError> {
    let bad = |detail: String| NpyError::Format {
        path: path.to_path_buf(),
        detail,
    };
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err(bad("not a .npy file (missing \\x93NUMPY magic)".into()));
    }
    let (hlen, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        v => return Err(bad(format!("unsupported .npy version {v}"))),
    };
    let header = bytes
        .get(start..start + hlen)
        .and_then(|h| std::str::from_utf8(h).ok())
        .ok_or_else(|| bad("truncated or non-UTF-8 header".into()))?;
    let descr = header_value(header, "descr").ok_or_else(|| bad("header has no descr".into()))?;
    let descr = descr
        .trim_start_matches(['\'', '"'])
        .split(['\'', '"'])
        .next()
        .unwrap_or_default();
    let fortran = header_value(header, "fortran_order").is_some_and(|v| v.starts_with("True"));
    if fortran {
        return Err(bad("Fortran-order arrays are not supported".into()));
    }
    let shape_text =
        header_value(header, "shape").ok_or_else(|| bad("header has no shape".into()))?;
    // `(d0, d1, ...)`: anything else (e.g. `)(`) is malformed, not a slice panic.
    let inner = shape_text
        .strip_prefix('(')
        .and_then(|t| t.find(')').map(|close| &t[..close]))
        .ok_or_else(|| bad("malformed shape".into()))?;
    let shape: Vec<usize> = inner
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<usize>()
                .map_err(|_| bad(format!("bad shape entry `{s}`")))
        })
        .collect::<Result<_, _>>()?;
    let n = shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| bad(format!("shape {shape:?} overflows")))?;
    let body = &bytes[start + hlen..];
    let take = |size: usize| -> Result<&[u8], NpyError> {
        n.checked_mul(size)
            .and_then(|len| body.get(..len))
            .ok_or_else(|| {
                bad(format!(
                    "truncated: {} data bytes for {n} elements of {size}",
                    body.len()
                ))
            })
    };
    let data = match descr {
        "<f4" => NpyData::F32(
            take(4)?
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        ),
        "<f8" => NpyData::F64(
            take(8)?
                .chunks_exact(8)
                .map(|c| f64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
                .collect(),
        ),
        "<i8" => NpyData::I64(
            take(8)?
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
                .collect(),
        ),
        "<i4" => NpyData::I32(
            take(4)?
                .chunks_exact(4)
                .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        ),
        other => {
            return Err(bad(format!(
                "unsupported dtype {other} (voxlane reads <f4, <f8, <i4, <i8)"
            )))
        }
    };
    Ok(NpyArray { shape, data })
}

/// Read a `.npy` file.
pub fn read_npy(path: impl AsRef<Path>) -> Result<NpyArray, NpyError> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|source| NpyError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse_npy(&bytes, path)
}

/// Encode an array as `.npy` version 1 bytes.
pub fn encode_npy(a: &NpyArray) -> Vec<u8> {
    let (descr, body): (&str, Vec<u8>) = match &a.data {
        NpyData::F32(v) => ("<f4", v.iter().flat_map(|x| x.to_le_bytes()).collect()),
        NpyData::F64(v) => ("<f8", v.iter().flat_map(|x| x.to_le_bytes()).collect()),
        NpyData::I64(v) => ("<i8", v.iter().flat_map(|x| x.to_le_bytes()).collect()),
        NpyData::I32(v) => ("<i4", v.iter().flat_map(|x| x.to_le_bytes()).collect()),
    };
    let dims: Vec<String> = a.shape.iter().map(|d| d.to_string()).collect();
    let shape = if dims.len() == 1 {
        format!("({},)", dims[0])
    } else {
        format!("({})", dims.join(", "))
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    // Pad with spaces so magic + len + header + newline is a multiple of 64.
    while !(10 + header.len() + 1).is_multiple_of(64) {
        header.push(' ');
    }
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + body.len());
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(&body);
    out
}

/// Write `a` to `path` atomically.
pub fn write_npy(path: impl AsRef<Path>, a: &NpyArray) -> Result<(), NpyError> {
    let path = path.as_ref();
    super::atomic::write_atomic(path, &encode_npy(a)).map_err(|source| NpyError::Io {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A v1 `.npy` with `header` (padded as numpy pads it) and `body`.
    fn with_header(header: &str, body: &[u8]) -> Vec<u8> {
        let mut h = header.to_string();
        while !(10 + h.len() + 1).is_multiple_of(64) {
            h.push(' ');
        }
        h.push('\n');
        let mut v = b"\x93NUMPY\x01\x00".to_vec();
        v.extend_from_slice(&(h.len() as u16).to_le_bytes());
        v.extend_from_slice(h.as_bytes());
        v.extend_from_slice(body);
        v
    }

    #[test]
    fn crafted_shapes_are_typed_errors() {
        // Found by coverage-guided fuzzing: a shape value starting with `)` sliced `[1..0]`.
        for shape in [
            ")(52, 3)",
            ")",
            "(",
            "52, 3)",
            "(18446744073709551615, 2)",
            "(4294967296, 4294967296)",
        ] {
            let bytes = with_header(
                &format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}"),
                &[0; 16],
            );
            let r = parse_npy(&bytes, Path::new("crafted.npy"));
            assert!(r.is_err(), "shape {shape}: {r:?}");
        }
        let ok = with_header(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }",
            &[0; 16],
        );
        assert_eq!(
            parse_npy(&ok, Path::new("ok.npy")).unwrap().shape,
            vec![2, 2]
        );
    }

    #[test]
    fn round_trips_each_dtype() {
        for data in [
            NpyData::F32(vec![1.5, -2.0, 3.25, 0.0, 1e-3, 7.0]),
            NpyData::F64(vec![1.5, -2.0, 3.25, 0.0, 1e-3, 7.0]),
            NpyData::I64(vec![1, -2, 3, 0, 9, 7]),
            NpyData::I32(vec![1, -2, 3, 0, 9, 7]),
        ] {
            let a = NpyArray {
                shape: vec![2, 3],
                data,
            };
            let b = parse_npy(&encode_npy(&a), Path::new("mem")).unwrap();
            assert_eq!(a, b);
        }
        let v = NpyArray {
            shape: vec![4],
            data: NpyData::F32(vec![1.0; 4]),
        };
        assert_eq!(parse_npy(&encode_npy(&v), Path::new("mem")).unwrap(), v);
    }

    #[test]
    fn rejects_foreign_and_truncated() {
        let a = NpyArray {
            shape: vec![8],
            data: NpyData::F32(vec![0.5; 8]),
        };
        let bytes = encode_npy(&a);
        let err = parse_npy(&bytes[..bytes.len() - 4], Path::new("t.npy")).unwrap_err();
        assert!(err.to_string().contains("truncated"), "{err}");
        let err = parse_npy(b"RIFF....WAVEfmt ", Path::new("x.wav")).unwrap_err();
        assert!(err.to_string().contains("not a .npy file"), "{err}");
    }
}
