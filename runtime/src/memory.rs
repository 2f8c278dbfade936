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
