//! The machine's memory read bandwidth, measured on the same lane pool the
//! kernels use: the reference for memory-bound matvecs.

use voxlane_runtime::{Fork, LanePool};

const BYTES: usize = 512 << 20;
const CHUNK: usize = 1 << 16;

/// Sum a chunk with 32 independent accumulators (so the adds keep up with loads).
fn sum(chunk: &[f32]) -> f32 {
    let mut acc = [0.0f32; 32];
    let mut it = chunk.chunks_exact(32);
    for c in &mut it {
        for j in 0..32 {
            acc[j] += c[j];
        }
    }
    acc.iter().sum::<f32>() + it.remainder().iter().sum::<f32>()
}

/// Read bandwidth in GB/s with `threads` lanes streaming a 512 MiB buffer.
pub fn read_gbps(threads: usize, window: std::time::Duration) -> Result<f64, String> {
    let pool = LanePool::new(threads).map_err(|e| e.to_string())?;
    let data: Vec<f32> = (0..BYTES / 4).map(|i| (i % 7) as f32).collect();
    let sink = std::sync::atomic::AtomicU32::new(0);
    let secs = super::timing::median_secs(
        || {
            pool.for_each_chunk(data.len(), CHUNK, |r| {
                let s = sum(&data[r]);
                sink.fetch_add(s.to_bits() & 1, std::sync::atomic::Ordering::Relaxed);
            })
            .expect("bandwidth lanes");
        },
        window,
        5,
    );
    std::hint::black_box(sink.load(std::sync::atomic::Ordering::Relaxed));
    Ok(BYTES as f64 / secs / 1e9)
}
