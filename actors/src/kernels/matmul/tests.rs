use super::reference;
use super::*;
use crate::kernels::test_rng::symmetric as rnd_vec;
use ::half::{bf16, f16};
use proptest::prelude::*;
use voxlane_runtime::LanePool;

fn rnd_bytes(seed: u64, len: usize) -> Vec<u8> {
    rnd_vec(seed, len)
        .iter()
        .map(|v| ((v + 1.0) * 127.9) as u8)
        .collect()
}

/// A prepared weight and the f32 values it stands for.
fn float_weights(format: WeightFormat, seed: u64, n: usize, k: usize) -> (Weights, Vec<f32>) {
    let src = rnd_vec(seed, n * k);
    match format {
        WeightFormat::F32 => (Weights::f32(src.clone(), n, k).unwrap(), src),
        WeightFormat::F16 => {
            let h: Vec<f16> = src.iter().map(|&v| f16::from_f32(v)).collect();
            let dense = h.iter().map(|v| v.to_f32()).collect();
            (Weights::f16(&h, n, k).unwrap(), dense)
        }
        WeightFormat::Bf16 => {
            let h: Vec<bf16> = src.iter().map(|&v| bf16::from_f32(v)).collect();
            let dense = h.iter().map(|v| v.to_f32()).collect();
            (Weights::bf16(&h, n, k).unwrap(), dense)
        }
        WeightFormat::Q8_0 => {
            let bytes = quantize_q8_0(&src, k).unwrap();
            let dense = reference::dequantize_q8_0(&bytes).unwrap();
            (Weights::q8_0_from_ggml(&bytes, n, k).unwrap(), dense)
        }
        WeightFormat::Q8_0Act16 => {
            let bytes = quantize_q8_0(&src, k).unwrap();
            let dense = reference::dequantize_q8_0(&bytes).unwrap();
            (Weights::q8_0_act16_from_ggml(&bytes, n, k).unwrap(), dense)
        }
        WeightFormat::Q4_0 => {
            let bytes = quantize_q4_0(&src, k).unwrap();
            let dense = reference::dequantize_q4_0(&bytes).unwrap();
            (Weights::q4_0_from_ggml(&bytes, n, k).unwrap(), dense)
        }
        WeightFormat::Q4_0Act16 => {
            let bytes = quantize_q4_0(&src, k).unwrap();
            let dense = reference::dequantize_q4_0(&bytes).unwrap();
            (Weights::q4_0_act16_from_ggml(&bytes, n, k).unwrap(), dense)
        }
        WeightFormat::Int8 => unreachable!("not a float format"),
    }
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

const FLOATS: [WeightFormat; 7] = [
    WeightFormat::F32,
    WeightFormat::F16,
    WeightFormat::Bf16,
    WeightFormat::Q8_0,
    WeightFormat::Q4_0,
    WeightFormat::Q8_0Act16,
    WeightFormat::Q4_0Act16,
];

/// The error the i16-activation formats' rounding may add per output:
/// `Σ_j |w_j| · dx_b / 2` with `dx_b` its row's block scale (0 for the
/// other formats, whose activations stay f32).
fn activation_error(
    format: WeightFormat,
    a: &[f32],
    m: usize,
    k: usize,
    w: &[f32],
    n: usize,
) -> Vec<f32> {
    let mut e = vec![0.0f32; m * n];
    if !matches!(format, WeightFormat::Q8_0Act16 | WeightFormat::Q4_0Act16) {
        return e;
    }
    for r in 0..m {
        for c in 0..n {
            let mut s = 0.0f64;
            for (xb, wb) in a[r * k..(r + 1) * k]
                .chunks(32)
                .zip(w[c * k..(c + 1) * k].chunks(32))
            {
                let amax = xb.iter().fold(0.0f32, |m, v| m.max(v.abs())) as f64;
                s += wb.iter().map(|v| v.abs() as f64).sum::<f64>() * amax / 32767.0 / 2.0;
            }
            e[r * n + c] = (s * 1.01) as f32;
        }
    }
    e
}

fn check_float(format: WeightFormat, m: usize, n: usize, k: usize, with_bias: bool, seed: u64) {
    let (w, dense) = float_weights(format, seed, n, k);
    let a = rnd_vec(seed ^ 0x1234, m * k);
    let b = rnd_vec(seed ^ 0x4321, n);
    let bias = with_bias.then_some(&b[..]);
    let want = reference::matmul_f32(&a, m, k, &dense, n, bias).unwrap();
    let mag = reference::magnitudes(&a, m, k, &dense, n);
    let act = activation_error(format, &a, m, k, &dense, n);
    let pool = LanePool::new(1).unwrap();
    let mut ws = MatmulWorkspace::default();
    let mut first: Option<Vec<f32>> = None;
    for level in cpu::available_levels() {
        let mut got = vec![f32::NAN; m * n];
        matmul_with(level, &a, m, k, &w, bias, &mut got, &mut ws, &pool).unwrap();
        for i in 0..m * n {
            assert!(
                (got[i] - want[i]).abs() <= 1e-5 * mag[i] + act[i] + 1e-6,
                "{format:?} {level:?} m={m} n={n} k={k} [{i}]: {} vs {}",
                got[i],
                want[i]
            );
        }
        // Decoding is exact and the order is fixed, so routes agree bit for bit.
        match &first {
            None => first = Some(got),
            Some(f) => assert_eq!(bits(f), bits(&got), "{format:?} {level:?} m={m}"),
        }
    }
}

fn check_int8(m: usize, n: usize, k: usize, unsigned: bool, per_channel: bool, seed: u64) {
    let raw = rnd_bytes(seed, n * k);
    let signed: Vec<i8> = raw.iter().map(|&v| v as i8).collect();
    let w = if unsigned {
        IntWeights::U8(&raw)
    } else {
        IntWeights::I8(&signed)
    };
    let cnt = if per_channel { n } else { 1 };
    let scales: Vec<f32> = rnd_vec(seed ^ 7, cnt)
        .iter()
        .map(|v| v.abs() * 0.01 + 1e-4)
        .collect();
    let zps: Vec<i32> = rnd_bytes(seed ^ 9, cnt)
        .iter()
        .map(|&z| if unsigned { z as i32 } else { z as i8 as i32 })
        .collect();
    let a: Vec<f32> = rnd_vec(seed ^ 3, m * k)
        .iter()
        .map(|v| v * 3.0 + 0.5)
        .collect();
    let b = rnd_vec(seed ^ 5, n);
    let want = reference::matmul_int8(&a, m, k, w, n, &scales, &zps, Some(&b)).unwrap();
    let mut prepared = vec![("[n, k]", Weights::int8(w, n, k, &scales, &zps).unwrap())];
    if !unsigned {
        // ONNX's [k, n] layout, transposed while packing.
        let kn = transpose(&signed, n, k).unwrap();
        prepared.push((
            "[k, n]",
            Weights::int8_kn(&kn, n, k, &scales, &zps).unwrap(),
        ));
    }
    let pool = LanePool::new(1).unwrap();
    let mut ws = MatmulWorkspace::new(m, k);
    for level in cpu::available_levels() {
        for (layout, weights) in &prepared {
            let mut got = vec![f32::NAN; m * n];
            matmul_with(level, &a, m, k, weights, Some(&b), &mut got, &mut ws, &pool).unwrap();
            assert_eq!(
                bits(&want),
                bits(&got),
                "int8 {level:?} m={m} n={n} k={k} u8={unsigned} {layout}"
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn float_formats_match_reference(m in 1usize..10, n in 1usize..90, k in 1usize..200,
                                     bias in any::<bool>(), seed in any::<u64>()) {
        for format in [WeightFormat::F32, WeightFormat::F16, WeightFormat::Bf16] {
            check_float(format, m, n, k, bias, seed);
        }
    }

    #[test]
    fn q8_0_matches_reference(m in 1usize..10, n in 1usize..90, blocks in 1usize..9,
                              bias in any::<bool>(), seed in any::<u64>()) {
        check_float(WeightFormat::Q8_0, m, n, blocks * Q8_0_BLOCK, bias, seed);
    }

    #[test]
    fn q8_0_act16_matches_reference(m in 1usize..10, n in 1usize..90, blocks in 1usize..9,
                                    bias in any::<bool>(), seed in any::<u64>()) {
        check_float(WeightFormat::Q8_0Act16, m, n, blocks * Q8_0_BLOCK, bias, seed);
    }

    #[test]
    fn q4_0_act16_matches_reference(m in 1usize..18, n in 1usize..90, blocks in 1usize..9,
                                    bias in any::<bool>(), seed in any::<u64>()) {
        // K = 32 included, odd N and N off multiples of 16 / 64, M past a
        // group of 8 rows; every level bit for bit against the scalar one.
        check_float(WeightFormat::Q4_0Act16, m, n, blocks * Q8_0_BLOCK, bias, seed);
    }

    #[test]
    fn q4_0_act16_lanes_are_bit_identical(m in 1usize..18, n in 1usize..300, blocks in 1usize..5,
                                          seed in any::<u64>()) {
        let k = blocks * Q8_0_BLOCK;
        let (w, _) = float_weights(WeightFormat::Q4_0Act16, seed, n, k);
        let a = rnd_vec(seed ^ 0x99, m * k);
        // Sized at creation: the calls below grow nothing.
        let mut ws = MatmulWorkspace::new(m, k);
        let words = ws.words();
        let mut first: Option<Vec<f32>> = None;
        for threads in 1..=3 {
            let mut out = vec![f32::NAN; m * n];
            matmul_ws(&a, m, k, &w, None, &mut out, &mut ws, &LanePool::new(threads).unwrap()).unwrap();
            match &first {
                None => first = Some(out),
                Some(f) => prop_assert_eq!(bits(f), bits(&out), "m={} n={} t={}", m, n, threads),
            }
        }
        prop_assert_eq!(ws.words(), words);
    }

    #[test]
    fn q4_0_act16_from_ggml_is_from_f32_of_its_values(n in 1usize..40, blocks in 1usize..5,
                                                       seed in any::<u64>()) {
        // GGML's quantizer gives back the same blocks from their dequantized
        // values, so both constructors pack the same bytes.
        let k = blocks * Q8_0_BLOCK;
        let bytes = quantize_q4_0(&rnd_vec(seed, n * k), k).unwrap();
        let dense = reference::dequantize_q4_0(&bytes).unwrap();
        let a = Weights::q4_0_act16_from_ggml(&bytes, n, k).unwrap();
        let b = Weights::q4_0_act16_from_f32(&dense, n, k).unwrap();
        prop_assert_eq!(a.format(), WeightFormat::Q4_0Act16);
        prop_assert_eq!(a.bytes(), n.div_ceil(16) * blocks * 288);
        prop_assert_eq!(a.parts().unwrap().parts[0].bytes, b.parts().unwrap().parts[0].bytes);
    }

    #[test]
    fn q4_0_matches_reference(m in 1usize..10, n in 1usize..90, blocks in 1usize..9,
                              bias in any::<bool>(), seed in any::<u64>()) {
        check_float(WeightFormat::Q4_0, m, n, blocks * Q8_0_BLOCK, bias, seed);
    }

    #[test]
    fn streaming_m_rows_equal_their_own_matvecs(m in 2usize..17, n in 1usize..90,
                                                blocks in 1usize..9, seed in any::<u64>()) {
        // Grouped small-M routes (streaming frames) give each row the bits of
        // its m = 1 matvec, for f32 and q8_0 weights.
        let k = blocks * Q8_0_BLOCK;
        for format in [WeightFormat::F32, WeightFormat::Q8_0, WeightFormat::Q4_0, WeightFormat::Q8_0Act16,
                       WeightFormat::Q4_0Act16] {
            let (w, _) = float_weights(format, seed, n, k);
            let a = rnd_vec(seed ^ 0x77, m * k);
            let pool = LanePool::new(2).unwrap();
            let mut ws = MatmulWorkspace::default();
            for level in cpu::available_levels() {
                let mut all = vec![f32::NAN; m * n];
                matmul_with(level, &a, m, k, &w, None, &mut all, &mut ws, &pool).unwrap();
                for r in 0..m {
                    let mut one = vec![f32::NAN; n];
                    matmul_with(level, &a[r * k..(r + 1) * k], 1, k, &w, None, &mut one, &mut ws, &pool)
                        .unwrap();
                    prop_assert_eq!(bits(&all[r * n..(r + 1) * n]), bits(&one), "{:?} {:?} m={} row {}", format, level, m, r);
                }
            }
        }
    }

    #[test]
    fn int8_is_exact(m in 1usize..10, n in 1usize..90, k in 1usize..200, unsigned in any::<bool>(),
                     per_channel in any::<bool>(), seed in any::<u64>()) {
        check_int8(m, n, k, unsigned, per_channel, seed);
    }
}

#[test]
fn edge_shapes() {
    for (m, n, k) in [
        (1, 1, 1),
        (1, 1, 17),
        (2, 3, 1),
        (5, 65, 33),
        (1, 129, 16),
        (9, 64, 600),
    ] {
        for format in [WeightFormat::F32, WeightFormat::F16, WeightFormat::Bf16] {
            check_float(format, m, n, k, true, 42);
        }
        check_int8(m, n, k, true, true, 42);
        check_int8(m, n, k, false, false, 43);
    }
    check_float(WeightFormat::Q8_0, 7, 70, 32 * 20, true, 42);
    check_float(WeightFormat::Q4_0, 7, 70, 32 * 20, true, 42);
    check_float(WeightFormat::Q8_0Act16, 7, 70, 32 * 20, true, 42);
    // Many rows (a batch call): the same bits on every route.
    check_float(WeightFormat::Q8_0Act16, 37, 70, 32 * 20, true, 43);
    check_float(WeightFormat::Q8_0Act16, 16, 33, 32, false, 44);
    check_float(WeightFormat::Q4_0Act16, 7, 70, 32 * 20, true, 42);
    check_float(WeightFormat::Q4_0Act16, 37, 70, 32 * 20, true, 43);
    check_float(WeightFormat::Q4_0Act16, 16, 33, 32, false, 44);
    // Zero and huge blocks: the scale of an all-zero block is 0, not NaN.
    for format in [WeightFormat::Q8_0Act16, WeightFormat::Q4_0Act16] {
        let (w, dense) = float_weights(format, 5, 20, 64);
        let mut a = vec![0.0f32; 64];
        a[40] = 3.0e30;
        let want = reference::matmul_f32(&a, 1, 64, &dense, 20, None).unwrap();
        let mut got = vec![f32::NAN; 20];
        matmul(&a, 1, 64, &w, None, &mut got, &LanePool::new(1).unwrap()).unwrap();
        for (g, w) in got.iter().zip(&want) {
            assert!(
                (g - w).abs() <= 1e-4 * w.abs() + 1e-6,
                "{format:?}: {g} vs {w}"
            );
        }
    }
}

#[test]
fn identical_for_every_budget() {
    let (n, k) = (300, 96);
    for m in [1, 3, 9] {
        let a = rnd_vec(m as u64, m * k);
        let mut weights: Vec<Weights> = FLOATS
            .iter()
            .map(|&f| float_weights(f, 11, n, k).0)
            .collect();
        let raw = rnd_bytes(12, n * k);
        weights.push(Weights::int8(IntWeights::U8(&raw), n, k, &[0.02], &[128]).unwrap());
        for w in &weights {
            let mut first: Option<Vec<f32>> = None;
            for threads in 1..=4 {
                let pool = LanePool::new(threads).unwrap();
                let mut out = vec![0.0; m * n];
                matmul(&a, m, k, w, None, &mut out, &pool).unwrap();
                match &first {
                    None => first = Some(out),
                    Some(f) => {
                        assert_eq!(bits(f), bits(&out), "{:?} m={m} t={threads}", w.format())
                    }
                }
            }
        }
    }
}

#[test]
fn onnx_dynamic_quantize_linear_example() {
    // The example from the ONNX operator documentation.
    let x = [0.0, 2.0, -3.0, -2.5, 1.34, 0.5];
    let mut q = [0u8; 6];
    let p = quantize_activations(&x, &mut q).unwrap();
    assert_eq!(p.zero_point, 153);
    assert!((p.scale - 0.019_607_844).abs() < 1e-9);
    assert_eq!(q, [153, 255, 0, 26, 221, 179]);
}

#[test]
fn q8_0_quantizer_matches_ggml_rules() {
    let mut row = vec![0.0f32; 32];
    row[0] = 1.27;
    row[1] = -0.635;
    row[2] = 0.005;
    let bytes = quantize_q8_0(&row, 32).unwrap();
    assert_eq!(bytes.len(), Q8_0_BLOCK_BYTES);
    let d = f16::from_le_bytes([bytes[0], bytes[1]]);
    assert_eq!(d, f16::from_f32(0.01));
    // roundf: 127, -63.5 -> -64 (away from zero), 0.5 -> 1.
    assert_eq!(&bytes[2..5], &[127u8, (-64i8) as u8, 1]);
}

#[test]
fn q4_0_quantizer_matches_ggml_rules() {
    let mut row = vec![0.0f32; 32];
    row[0] = 0.5;
    row[1] = -0.8; // largest magnitude: d = −0.8 / −8 = 0.1
    row[16] = 0.24;
    row[17] = -0.06;
    let bytes = quantize_q4_0(&row, 32).unwrap();
    assert_eq!(bytes.len(), Q4_0_BLOCK_BYTES);
    let d = f16::from_le_bytes([bytes[0], bytes[1]]);
    assert_eq!(d, f16::from_f32(0.1));
    // trunc(x/d + 8.5), at most 15: 0.5 → 13, −0.8 → 0, 0 → 8; 0.24 → 10, −0.06 → 7.
    assert_eq!(bytes[2], 13 | (10 << 4));
    assert_eq!(bytes[3], (7 << 4));
    assert_eq!(bytes[4], 8 | (8 << 4));
    let back = reference::dequantize_q4_0(&bytes).unwrap();
    assert_eq!(back[0], 5.0 * d.to_f32());
    assert_eq!(back[1], -8.0 * d.to_f32());
    assert_eq!(back[17], -d.to_f32());
}

#[test]
fn transpose_roundtrip() {
    let src: Vec<u8> = (0..12).collect();
    let t = transpose(&src, 3, 4).unwrap();
    assert_eq!(t, [0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11]);
    assert_eq!(transpose(&t, 4, 3).unwrap(), src);
}

#[test]
fn errors_are_reported() {
    let pool = LanePool::new(1).unwrap();
    let w = Weights::f32(vec![0.0; 6], 2, 3).unwrap();
    let mut out = vec![0.0; 2];
    assert!(matches!(
        matmul(&[0.0; 4], 1, 4, &w, None, &mut out, &pool),
        Err(KernelError::Param { what: "k", .. })
    ));
    assert!(matches!(
        matmul(&[0.0; 3], 1, 3, &w, Some(&[0.0]), &mut out, &pool),
        Err(KernelError::Shape { .. })
    ));
    assert!(Weights::q8_0_from_f32(&[0.0; 20], 1, 20).is_err());
    assert!(Weights::q4_0_act16_from_f32(&[0.0; 20], 1, 20).is_err());
    assert!(Weights::q4_0_act16_from_ggml(&[0; 17], 1, 32).is_err());
    assert!(Weights::q4_0_act16_from_ggml(&[0; 18], 0, 32).is_err());
    assert!(Weights::f32(vec![], 0, 3).is_err());
    assert!(Weights::int8(IntWeights::I8(&[0; 4]), 2, 2, &[1.0], &[200]).is_err());
    assert!(Weights::int8(IntWeights::U8(&[0; 4]), 2, 2, &[1.0; 3], &[0]).is_err());
}

/// Rough single-thread throughput of the bench shapes; run with `--ignored --nocapture`.
///
/// 4096×4096 streams the weights from memory; 256×4096 stays in L2 (compute rate).
#[test]
#[ignore]
fn bench_matvec_4096() {
    for n in [4096, 256] {
        bench_matvec(n, 4096);
    }
}

fn bench_matvec(n: usize, k: usize) {
    use std::time::Instant;
    let src = rnd_vec(1, n * k);
    let a = rnd_vec(2, k);
    let h: Vec<bf16> = src.iter().map(|&v| bf16::from_f32(v)).collect();
    let f: Vec<f16> = src.iter().map(|&v| f16::from_f32(v)).collect();
    let raw = rnd_bytes(3, n * k);
    let all = [
        ("f32", Weights::f32(src.clone(), n, k).unwrap()),
        ("f16", Weights::f16(&f, n, k).unwrap()),
        ("bf16", Weights::bf16(&h, n, k).unwrap()),
        ("q8_0", Weights::q8_0_from_f32(&src, n, k).unwrap()),
        ("q4_0", Weights::q4_0_from_f32(&src, n, k).unwrap()),
        (
            "int8",
            Weights::int8(IntWeights::U8(&raw), n, k, &[0.01], &[128]).unwrap(),
        ),
    ];
    let pool = LanePool::new(1).unwrap();
    let mut out = vec![0.0; n];
    for (name, w) in &all {
        for level in cpu::available_levels() {
            let mut ws = MatmulWorkspace::new(1, k);
            let iters = 20 * 4096 / n;
            matmul_with(level, &a, 1, k, w, None, &mut out, &mut ws, &pool).unwrap();
            let t = Instant::now();
            for _ in 0..iters {
                matmul_with(level, &a, 1, k, w, None, &mut out, &mut ws, &pool).unwrap();
            }
            let s = t.elapsed().as_secs_f64() / iters as f64;
            println!(
                "{n}x{k} {name:5} {level:?}: {:.3} ms, {:.1} GB/s of weights",
                s * 1e3,
                w.bytes() as f64 / s / 1e9
            );
        }
    }
}

/// Read bandwidth (GB/s) of `pool`'s lanes summing a 512 MiB buffer in
/// 64 KiB chunks (as `xtask bench`'s `bandwidth.rs`).
fn read_gbps(pool: &LanePool) -> f64 {
    use std::time::Instant;
    let data: Vec<f32> = (0..(512usize << 20) / 4).map(|i| (i % 7) as f32).collect();
    let sink = std::sync::atomic::AtomicU32::new(0);
    let mut best = f64::MAX;
    for _ in 0..5 {
        let t = Instant::now();
        pool.for_each_chunk(data.len(), 1 << 14, |r| {
            let mut acc = [0.0f32; 32];
            for c in data[r].chunks_exact(32) {
                for j in 0..32 {
                    acc[j] += c[j];
                }
            }
            let s: f32 = acc.iter().sum();
            sink.fetch_add(s.to_bits() & 1, std::sync::atomic::Ordering::Relaxed);
        })
        .unwrap();
        best = best.min(t.elapsed().as_secs_f64());
    }
    std::hint::black_box(sink.into_inner());
    (512usize << 20) as f64 / best / 1e9
}

/// Memory-bound M = 1 matvecs on q4_0 (f32 route, i16 route) and q8_0 × i16:
/// each format cycles through copies of its weight totalling ≥ 256 MB (past
/// the L3), formats alternate round by round, medians are printed as GB/s
/// of packed weights. `cargo test -p voxlane-actors --lib --release
/// bench_q4_0_act16 -- --ignored --nocapture`.
#[test]
#[ignore]
fn bench_q4_0_act16_matvec() {
    use std::time::Instant;
    let threads: Vec<usize> = std::env::var("VOXLANE_BENCH_THREADS")
        .ok()
        .map(|s| s.split(',').filter_map(|t| t.parse().ok()).collect())
        .unwrap_or(vec![1, 2]);
    let shapes: Vec<(usize, usize)> = std::env::var("VOXLANE_BENCH_SHAPES")
        .ok()
        .map(|s| {
            s.split(',')
                .filter_map(|t| t.split_once('x'))
                .map(|(n, k)| (n.parse().unwrap(), k.parse().unwrap()))
                .collect()
        })
        .unwrap_or(vec![(4096, 4096), (11264, 4096), (4096, 11264)]);
    for &t in &threads {
        let pool = LanePool::new(t).unwrap();
        println!("threads {t}: read bandwidth {:.1} GB/s", read_gbps(&pool));
    }
    for &(n, k) in &shapes {
        let src = rnd_vec(1, n * k);
        let one = [
            ("q4_0 f32", Weights::q4_0_from_f32(&src, n, k).unwrap()),
            (
                "q4_0 × i16",
                Weights::q4_0_act16_from_f32(&src, n, k).unwrap(),
            ),
            (
                "q8_0 × i16",
                Weights::q8_0_act16_from_f32(&src, n, k).unwrap(),
            ),
        ];
        drop(src);
        let sets: Vec<(&str, Vec<Weights>)> = one
            .into_iter()
            .map(|(name, w)| {
                let copies = (256usize << 20).div_ceil(w.bytes());
                (name, vec![w; copies])
            })
            .collect();
        let a = rnd_vec(2, k);
        let mut out = vec![0.0; n];
        let mut ws = MatmulWorkspace::new(1, k);
        for &t in &threads {
            let pool = LanePool::new(t).unwrap();
            let mut secs = vec![Vec::new(); sets.len()];
            for _round in 0..9 {
                for (i, (_, ws_set)) in sets.iter().enumerate() {
                    let t0 = Instant::now();
                    for w in ws_set {
                        matmul_ws(&a, 1, k, w, None, &mut out, &mut ws, &pool).unwrap();
                    }
                    secs[i].push(t0.elapsed().as_secs_f64() / ws_set.len() as f64);
                }
            }
            for ((name, set), s) in sets.iter().zip(&mut secs) {
                s.sort_by(f64::total_cmp);
                let (med, best) = (s[s.len() / 2], s[0]);
                println!(
                    "{n}x{k} t={t} {name:11}: median {:7.3} ms {:5.1} GB/s, best {:5.1} GB/s ({} MB)",
                    med * 1e3,
                    set[0].bytes() as f64 / med / 1e9,
                    set[0].bytes() as f64 / best / 1e9,
                    set[0].bytes() >> 20
                );
            }
        }
    }
}

/// In-cache (L2) compute rate of the q4_0 routes at M = 1..16, one lane.
#[test]
#[ignore]
fn bench_q4_0_act16_compute() {
    use std::time::Instant;
    let (n, k) = (256, 4096);
    let src = rnd_vec(1, n * k);
    let all = [
        ("q4_0 f32", Weights::q4_0_from_f32(&src, n, k).unwrap()),
        (
            "q4_0 × i16",
            Weights::q4_0_act16_from_f32(&src, n, k).unwrap(),
        ),
        (
            "q8_0 × i16",
            Weights::q8_0_act16_from_f32(&src, n, k).unwrap(),
        ),
    ];
    let pool = LanePool::new(1).unwrap();
    for m in [1, 2, 4, 8, 16] {
        let a = rnd_vec(2, m * k);
        let mut out = vec![0.0; m * n];
        let mut ws = MatmulWorkspace::new(m, k);
        for (name, w) in &all {
            for level in cpu::available_levels().into_iter().rev().take(2) {
                // The best of many short calls: the machine may be shared.
                let mut s = f64::MAX;
                for _ in 0..1000 / m {
                    let t0 = Instant::now();
                    matmul_with(level, &a, m, k, w, None, &mut out, &mut ws, &pool).unwrap();
                    s = s.min(t0.elapsed().as_secs_f64());
                }
                println!(
                    "M={m:2} {name:11} {level:?}: {:7.1} µs, {:6.1} GB/s of weights",
                    s * 1e6,
                    w.bytes() as f64 / s / 1e9
                );
            }
        }
    }
}
