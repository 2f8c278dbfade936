use super::*;
use crate::kernels::matmul::{matmul, IntWeights};
use crate::kernels::test_rng::symmetric;
use ::half::{bf16, f16};
use proptest::prelude::*;
use voxlane_runtime::weights::PackedWriter;
use voxlane_runtime::LanePool;

const CACHED: [WeightFormat; 7] = [
    WeightFormat::F32,
    WeightFormat::F16,
    WeightFormat::Bf16,
    WeightFormat::Q8_0,
    WeightFormat::Q4_0,
    WeightFormat::Q8_0Act16,
    WeightFormat::Q4_0Act16,
];

/// (N, K): K = 32, odd N, N off multiples of 16 and 64, several blocks.
const SHAPES: [(usize, usize); 5] = [(1, 32), (7, 32), (17, 64), (65, 32), (130, 96)];

fn tmp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("voxlane-wstore-{}-{name}", std::process::id()))
}

fn weight(format: WeightFormat, n: usize, k: usize, seed: u64) -> Weights {
    let src = symmetric(seed, n * k);
    match format {
        WeightFormat::F32 => Weights::f32(src, n, k),
        WeightFormat::F16 => {
            let h: Vec<f16> = src.iter().map(|&v| f16::from_f32(v)).collect();
            Weights::f16(&h, n, k)
        }
        WeightFormat::Bf16 => {
            let h: Vec<bf16> = src.iter().map(|&v| bf16::from_f32(v)).collect();
            Weights::bf16(&h, n, k)
        }
        WeightFormat::Q8_0 => Weights::q8_0_from_f32(&src, n, k),
        WeightFormat::Q4_0 => Weights::q4_0_from_f32(&src, n, k),
        WeightFormat::Q8_0Act16 => Weights::q8_0_act16_from_f32(&src, n, k),
        WeightFormat::Q4_0Act16 => Weights::q4_0_act16_from_f32(&src, n, k),
        WeightFormat::Int8 => unreachable!("not stored"),
    }
    .unwrap()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// `a · Wᵀ + bias` for M = 1 and 3 on 1 and 2 lanes, as bits.
fn results(w: &Weights, seed: u64) -> Vec<Vec<u32>> {
    let (n, k) = (w.n(), w.k());
    let bias = symmetric(seed ^ 0xb1a5, n);
    let mut all = Vec::new();
    for threads in [1, 2] {
        let pool = LanePool::new(threads).unwrap();
        for m in [1, 3] {
            let a = symmetric(seed ^ 0xa, m * k);
            let mut out = vec![0.0f32; m * n];
            matmul(&a, m, k, w, Some(&bias), &mut out, &pool).unwrap();
            all.push(bits(&out));
        }
    }
    all
}

/// The buffers' addresses and whether each is mapped.
fn buffers(w: &Weights) -> Vec<(usize, bool)> {
    match &w.packed {
        Packed::F32(b) => vec![(b.as_ptr() as usize, b.is_mapped())],
        Packed::Half(h) => vec![(h.bits.as_ptr() as usize, h.bits.is_mapped())],
        Packed::Q8_0(q) => vec![
            (q.scales.as_ptr() as usize, q.scales.is_mapped()),
            (q.quants.as_ptr() as usize, q.quants.is_mapped()),
        ],
        Packed::Q8Act16(q) => vec![(q.data.as_ptr() as usize, q.data.is_mapped())],
        Packed::Q4Act16(q) => vec![(q.data.as_ptr() as usize, q.data.is_mapped())],
        Packed::Int8(_) => Vec::new(),
    }
}

fn name(format: WeightFormat, n: usize, k: usize) -> String {
    format!("{}.{n}x{k}", format.tag())
}

/// Every cached format at every shape, written to one file.
fn write_all(path: &Path) -> Vec<(String, Weights)> {
    let mut all = Vec::new();
    for (i, format) in CACHED.into_iter().enumerate() {
        for (j, &(n, k)) in SHAPES.iter().enumerate() {
            all.push((
                name(format, n, k),
                weight(format, n, k, (i * 10 + j) as u64),
            ));
        }
    }
    // A K off the q8_0 block for the float formats.
    for format in [WeightFormat::F32, WeightFormat::F16, WeightFormat::Bf16] {
        all.push((name(format, 5, 7), weight(format, 5, 7, 99)));
    }
    write_weights(
        path,
        all.iter().map(|(n, w)| (n.as_str(), w)),
        &[("source", "test-model"), ("options", "q8_0")],
    )
    .unwrap();
    all
}

#[test]
fn mapped_weights_compute_the_same_bits() {
    let p = tmp("rt.vxlpack");
    let want = write_all(&p);
    let got = read_weights(&p).unwrap();
    assert_eq!(got.metadata.len(), 2, "{:?}", got.metadata);
    assert_eq!(got.metadata["source"], "test-model");
    assert_eq!(got.metadata["options"], "q8_0");
    assert_eq!(got.weights.len(), want.len());
    for (seed, (name, w)) in want.iter().enumerate() {
        let m = &got.weights[name];
        assert_eq!(
            (m.format(), m.n(), m.k()),
            (w.format(), w.n(), w.k()),
            "{name}"
        );
        assert_eq!(m.bytes(), w.bytes(), "{name}");
        assert!(m.is_mapped() && !w.is_mapped(), "{name}");
        assert_eq!(results(m, seed as u64), results(w, seed as u64), "{name}");
        let (a, b) = (m.parts().unwrap(), w.parts().unwrap());
        for (x, y) in a.parts.iter().zip(&b.parts) {
            assert_eq!(
                (x.name, x.dtype, x.bytes),
                (y.name, y.dtype, y.bytes),
                "{name}"
            );
        }
    }
    // The weights outlive the file handle and can be written again.
    let again = tmp("rt2.vxlpack");
    write_weights(
        &again,
        got.weights.iter().map(|(n, w)| (n.as_str(), w)),
        &[],
    )
    .unwrap();
    let again_w = read_weights(&again).unwrap();
    assert!(again_w.metadata.is_empty());
    assert_eq!(again_w.weights.len(), want.len());
    std::fs::remove_file(&p).unwrap();
    std::fs::remove_file(&again).unwrap();
}

#[test]
fn mapped_weights_point_into_the_file() {
    let p = tmp("ptr.vxlpack");
    write_all(&p);
    let file = PackedFile::open(&p).unwrap();
    let mut owned_bytes = 0;
    for e in file.entries() {
        let format = WeightFormat::from_tag(&e.format).unwrap();
        let w = Weights::from_parts(format, e.shape[0], e.shape[1], &e.parts).unwrap();
        let bufs = buffers(&w);
        assert_eq!(bufs.len(), e.parts.len());
        for ((addr, mapped), part) in bufs.into_iter().zip(&e.parts) {
            assert!(mapped && part.data.is_mapped(), "{}", e.name);
            // The weight reads the file's own bytes: no payload was allocated.
            assert_eq!(addr, part.data.as_ptr() as usize, "{}", e.name);
            assert_eq!(addr % voxlane_runtime::weights::PACKED_ALIGN, 0);
        }
        // Owned parts take the copying path and give the same weight.
        let owned: Vec<PackedPart> = e
            .parts
            .iter()
            .map(|p| PackedPart {
                name: p.name.clone(),
                dtype: p.dtype,
                data: Buf::owned(p.data.to_vec()),
            })
            .collect();
        let o = Weights::from_parts(format, e.shape[0], e.shape[1], &owned).unwrap();
        assert!(!o.is_mapped());
        owned_bytes += o.bytes();
        assert_eq!(results(&o, 7), results(&w, 7), "{}", e.name);
    }
    assert!(owned_bytes > 0);
    std::fs::remove_file(&p).unwrap();
}

/// Write one raw entry (format tag, shape, parts) with the layout key set.
fn raw_file(path: &Path, format: &str, shape: &[usize], parts: &[PartRef<'_>]) {
    let mut w = PackedWriter::create(path).unwrap();
    w.push("x", format, shape, parts).unwrap();
    w.finish(&[(PACKED_LAYOUT_KEY, &PACKED_LAYOUT.to_string())])
        .unwrap();
}

fn weight_error(path: &Path) -> KernelError {
    match read_weights(path) {
        Err(WeightStoreError::Weight { name, source }) => {
            assert_eq!(name, "x");
            source
        }
        other => panic!("expected a weight error, got {other:?}"),
    }
}

#[test]
fn foreign_parts_are_typed_errors() {
    let p = tmp("bad.vxlpack");
    let q = weight(WeightFormat::Q8_0, 17, 64, 1);
    let qp = q.parts().unwrap();
    raw_file(&p, "q8_0", &[17, 64], &qp.parts);
    assert!(read_weights(&p).is_ok());
    // Wrong or unknown format tags.
    raw_file(&p, "q9_0", &[17, 64], &qp.parts);
    assert!(matches!(weight_error(&p), KernelError::Param { .. }));
    raw_file(&p, "f16", &[17, 64], &qp.parts);
    assert!(matches!(weight_error(&p), KernelError::Param { .. }));
    raw_file(&p, "q4_0", &[17, 64], &qp.parts);
    assert!(matches!(weight_error(&p), KernelError::Param { .. }));
    raw_file(&p, "int8", &[17, 64], &qp.parts);
    assert!(matches!(weight_error(&p), KernelError::Param { .. }));
    // Lengths that do not match N and K.
    for shape in [[18, 64], [17, 96], [16, 64], [17, 32]] {
        raw_file(&p, "q8_0", &shape, &qp.parts);
        assert!(
            matches!(weight_error(&p), KernelError::Shape { .. }),
            "{shape:?}"
        );
    }
    raw_file(&p, "q8_0", &[17, 48], &qp.parts);
    assert!(matches!(weight_error(&p), KernelError::Param { .. }));
    for shape in [
        &[17][..],
        &[17, 64, 1],
        &[0, 64],
        &[usize::MAX, 64],
        &[1 << 40, 1 << 40],
    ] {
        raw_file(&p, "q8_0", shape, &qp.parts);
        let e = weight_error(&p);
        assert!(matches!(e, KernelError::Param { .. }), "{shape:?}: {e}");
    }
    for tag in ["q8_0_act16", "q4_0_act16"] {
        for shape in [[usize::MAX / 2, 64], [usize::MAX, 32]] {
            raw_file(&p, tag, &shape, &qp.parts);
            assert!(matches!(weight_error(&p), KernelError::Param { .. }));
        }
        // A q8_0 weight's parts are not this format's.
        raw_file(&p, tag, &[17, 64], &qp.parts);
        assert!(matches!(weight_error(&p), KernelError::Param { .. }));
    }
    // One row group of q4_0_act16 is 288 bytes per block: a q8_0_act16
    // part of the same shape has the wrong length.
    let q8a = weight(WeightFormat::Q8_0Act16, 17, 64, 1);
    raw_file(&p, "q4_0_act16", &[17, 64], &q8a.parts().unwrap().parts);
    assert!(matches!(weight_error(&p), KernelError::Shape { .. }));
    let q4a = weight(WeightFormat::Q4_0Act16, 17, 64, 1);
    raw_file(&p, "q4_0_act16", &[17, 64], &q4a.parts().unwrap().parts);
    assert!(read_weights(&p).is_ok());
    // Missing, extra, renamed and retyped parts.
    raw_file(&p, "q8_0", &[17, 64], &qp.parts[..1]);
    assert!(matches!(weight_error(&p), KernelError::Param { .. }));
    let extra = [qp.parts[0], qp.parts[1], qp.parts[1]];
    let mut renamed = extra;
    renamed[2].name = "extra";
    raw_file(&p, "q8_0", &[17, 64], &renamed);
    assert!(matches!(weight_error(&p), KernelError::Param { .. }));
    let swapped = [qp.parts[1], qp.parts[0]];
    raw_file(&p, "q8_0", &[17, 64], &swapped);
    assert!(matches!(weight_error(&p), KernelError::Param { .. }));
    let mut retyped = [qp.parts[0], qp.parts[1]];
    retyped[1].dtype = DType::U8;
    raw_file(&p, "q8_0", &[17, 64], &retyped);
    assert!(matches!(weight_error(&p), KernelError::Param { .. }));
    // No layout key, or another layout.
    let mut w = PackedWriter::create(&p).unwrap();
    w.push("x", "q8_0", &[17, 64], &qp.parts).unwrap();
    w.finish(&[]).unwrap();
    assert!(matches!(
        read_weights(&p),
        Err(WeightStoreError::Layout { found: None, .. })
    ));
    let mut w = PackedWriter::create(&p).unwrap();
    w.push("x", "q8_0", &[17, 64], &qp.parts).unwrap();
    w.finish(&[(PACKED_LAYOUT_KEY, "0")]).unwrap();
    assert!(matches!(
        read_weights(&p),
        Err(WeightStoreError::Layout { found: Some(_), .. })
    ));
    std::fs::remove_file(&p).unwrap();
}

#[test]
fn damaged_files_are_typed_errors() {
    let p = tmp("damaged.vxlpack");
    write_all(&p);
    let full = std::fs::read(&p).unwrap();
    std::fs::write(&p, &full[..full.len() - 1]).unwrap();
    assert!(matches!(
        read_weights(&p),
        Err(WeightStoreError::File(WeightError::Truncated { .. }))
    ));
    std::fs::write(&p, &full[..full.len() / 2]).unwrap();
    assert!(matches!(
        read_weights(&p),
        Err(WeightStoreError::File(WeightError::Truncated { .. }))
    ));
    // A flipped byte in the header (the file's tail).
    let mut flipped = full.clone();
    let at = full.len() - 20;
    flipped[at] ^= 0x04;
    std::fs::write(&p, &flipped).unwrap();
    assert!(matches!(
        read_weights(&p),
        Err(WeightStoreError::File(WeightError::Corrupt { .. }))
    ));
    std::fs::write(&p, b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ").unwrap();
    assert!(matches!(
        read_weights(&p),
        Err(WeightStoreError::File(WeightError::Foreign { .. }))
    ));
    std::fs::remove_file(&p).unwrap();
    assert!(matches!(
        read_weights(&p),
        Err(WeightStoreError::File(WeightError::Io { .. }))
    ));
}

#[test]
fn int8_and_reserved_keys_are_refused_without_a_file() {
    let dir = tmp("refused");
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("w.vxlpack");
    let q: Vec<i8> = vec![1; 64];
    let i8w = Weights::int8(IntWeights::I8(&q), 2, 32, &[0.5], &[0]).unwrap();
    assert!(i8w.parts().is_err());
    assert!(!i8w.is_mapped());
    let e = write_weights(&p, [("i", &i8w)], &[]).unwrap_err();
    assert!(matches!(e, WeightStoreError::Weight { .. }), "{e}");
    let f = weight(WeightFormat::F32, 2, 3, 1);
    let e = write_weights(&p, [("f", &f)], &[(PACKED_LAYOUT_KEY, "7")]).unwrap_err();
    assert!(matches!(e, WeightStoreError::File(_)), "{e}");
    let e = write_weights(&p, [("f", &f), ("f", &f)], &[]).unwrap_err();
    assert!(matches!(e, WeightStoreError::File(_)), "{e}");
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        0,
        "partial file left"
    );
    std::fs::remove_dir(&dir).unwrap();
}

#[test]
fn format_tags_round_trip() {
    for f in CACHED.into_iter().chain([WeightFormat::Int8]) {
        assert_eq!(WeightFormat::from_tag(f.tag()), Some(f));
    }
    assert_eq!(WeightFormat::from_tag("Q8_0"), None);
}

/// A small valid file (every cached format once), written once.
fn small_file() -> &'static [u8] {
    static BYTES: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    BYTES.get_or_init(|| {
        let p = tmp("small.vxlpack");
        let all: Vec<(String, Weights)> = CACHED
            .into_iter()
            .map(|f| (f.tag().to_string(), weight(f, 3, 32, 5)))
            .collect();
        write_weights(&p, all.iter().map(|(n, w)| (n.as_str(), w)), &[("s", "t")]).unwrap();
        let b = std::fs::read(&p).unwrap();
        std::fs::remove_file(&p).unwrap();
        b
    })
}

/// Read `bytes` as a file; whatever loads must also run.
fn load_and_run(bytes: &[u8], tag: &str) -> bool {
    let p = tmp(&format!("prop-{tag}.vxlpack"));
    std::fs::write(&p, bytes).unwrap();
    let r = read_weights(&p);
    std::fs::remove_file(&p).unwrap();
    let Ok(s) = r else { return false };
    let pool = LanePool::new(1).unwrap();
    for w in s.weights.values() {
        let a = vec![0.5f32; 2 * w.k()];
        let mut out = vec![0.0f32; 2 * w.n()];
        matmul(&a, 2, w.k(), w, None, &mut out, &pool).unwrap();
    }
    true
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]
    #[test]
    fn damaged_weight_files_never_panic(
        cut in any::<prop::sample::Index>(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), 1u8..), 0..3),
    ) {
        let mut b = small_file().to_vec();
        let cut_at = cut.index(b.len() + 1);
        for (at, x) in &flips {
            let i = at.index(b.len());
            b[i] ^= x;
        }
        let whole = cut_at == b.len();
        b.truncate(cut_at);
        let loaded = load_and_run(&b, "damaged");
        // Cut short, it must fail; whole, only data flips may still load.
        prop_assert!(whole || !loaded);
    }

    #[test]
    fn random_bytes_never_load(mut b in prop::collection::vec(any::<u8>(), 0..400), magic in any::<bool>()) {
        if magic {
            let n = b.len().min(8);
            b[..n].copy_from_slice(&voxlane_runtime::weights::PACKED_MAGIC[..n]);
        }
        prop_assert!(!load_and_run(&b, "random"));
    }
}

#[test]
fn an_intact_small_file_loads_and_runs() {
    assert!(load_and_run(small_file(), "intact"));
}

fn peak_rss_mb() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb / 1024)
}

/// `VOXLANE_STORE_BENCH_GB=7.5 cargo test -p voxlane-actors --lib bench_store -- --ignored --nocapture`
#[test]
#[ignore = "writes gigabytes"]
fn bench_store_write_and_load() {
    use std::time::Instant;
    let gb: f64 = std::env::var("VOXLANE_STORE_BENCH_GB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1.0);
    let w = weight(WeightFormat::Q8_0, 4096, 4096, 1);
    let count = (gb * 1e9 / w.bytes() as f64).ceil() as usize;
    let p = tmp("bench.vxlpack");
    let rss0 = peak_rss_mb();
    let t = Instant::now();
    let mut out = WeightsWriter::create(&p).unwrap();
    for i in 0..count {
        out.push(&format!("layer.{i}"), &w).unwrap();
    }
    out.finish(&[("source", "bench")]).unwrap();
    let size = std::fs::metadata(&p).unwrap().len();
    eprintln!(
        "write: {count} × q8_0 4096², {:.2} GB in {:.2} s; peak RSS {rss0} → {} MB",
        size as f64 / 1e9,
        t.elapsed().as_secs_f64(),
        peak_rss_mb()
    );
    let t = Instant::now();
    let s = read_weights(&p).unwrap();
    eprintln!(
        "load (map + header + from_parts): {:.1} ms",
        t.elapsed().as_secs_f64() * 1e3
    );
    assert!(s.weights.values().all(Weights::is_mapped));
    let pool = LanePool::new(1).unwrap();
    let a = symmetric(3, 4096);
    let mut y = vec![0.0f32; 4096];
    let want = {
        matmul(&a, 1, 4096, &w, None, &mut y, &pool).unwrap();
        bits(&y)
    };
    let t = Instant::now();
    for m in s.weights.values() {
        matmul(&a, 1, 4096, m, None, &mut y, &pool).unwrap();
        assert_eq!(bits(&y), want);
    }
    eprintln!(
        "first matvec over every mapped weight: {:.2} s ({:.2} GB/s)",
        t.elapsed().as_secs_f64(),
        size as f64 / 1e9 / t.elapsed().as_secs_f64()
    );
    drop(s);
    std::fs::remove_file(&p).unwrap();
}
