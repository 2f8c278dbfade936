//! Process memory policy for workspaces that grow with the utterance.
//!
//! glibc raises its mmap threshold each time a large mmapped block is
//! freed, after which large workspaces come from the brk heap, and a
//! workspace that grows chunk after chunk leaves holes there that count in
//! the resident set (measured: Kokoro's peak RSS 438 MB instead of 371 MB
//! on a three-sentence paragraph). Pinning the threshold at glibc's own
//! initial value keeps every large block an mmap of its own, returned to
//! the system when freed.

/// Keep large allocations (≥ 128 KiB) as individual mmaps, so freed
/// workspaces leave the resident set. Idempotent; a no-op off glibc.
pub fn return_large_frees_to_os() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        /// glibc's `M_MMAP_THRESHOLD` parameter of `mallopt`.
        const M_MMAP_THRESHOLD: i32 = -3;
        /// glibc's initial (default) threshold.
        const THRESHOLD: i32 = 128 * 1024;
        extern "C" {
            fn mallopt(param: i32, value: i32) -> i32;
        }
        // SAFETY: `mallopt` only sets an allocator parameter; any value is valid.
        unsafe {
            mallopt(M_MMAP_THRESHOLD, THRESHOLD);
        }
    }
}

/// Grow `v` to at least `n` elements, new ones zero (`T::default()`), keeping
/// its contents. A reallocation takes fresh zeroed memory from the allocator
/// (untouched pages of a large one cost nothing until used) rather than
/// writing every new element, so a workspace reserved for the longest input
/// costs a short one only the pages it touches.
pub fn grow<T: Copy + Default>(v: &mut Vec<T>, n: usize) {
    if v.len() >= n {
        return;
    }
    if v.capacity() < n {
        // `vec![T::default(); n]` of a primitive zero is `calloc`.
        let mut fresh = vec![T::default(); n];
        fresh[..v.len()].copy_from_slice(v);
        *v = fresh;
    } else {
        v.resize(n, T::default());
    }
}

#[cfg(test)]
mod tests {
    use super::grow;

    #[test]
    fn grow_keeps_contents_and_zero_fills() {
        let mut v = vec![1.5f32, -2.0];
        grow(&mut v, 5);
        assert_eq!(v, [1.5, -2.0, 0.0, 0.0, 0.0]);
        grow(&mut v, 3);
        assert_eq!(v.len(), 5, "never shrinks");
        v.truncate(1);
        grow(&mut v, 4);
        assert_eq!(v, [1.5, 0.0, 0.0, 0.0], "refilled within capacity");
        let mut e: Vec<u8> = Vec::new();
        grow(&mut e, 1 << 20);
        assert!(e.iter().all(|&b| b == 0) && e.len() == 1 << 20);
    }
}
