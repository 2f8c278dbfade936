//! voxlane's own Kokoro weight file: converted from the int8 ONNX export it
//! speaks bit-identically, and a truncated or corrupt file is a typed error
//! naming what is wrong.

use std::time::Instant;
use voxlane_actors::tts::kokoro::bind_cache::cache_path;
use voxlane_actors::tts::kokoro::graph::KokoroError;
use voxlane_actors::tts::kokoro::pipeline::KokoroTts;
use voxlane_runtime::fetch::catalog::KOKORO_INT8;
use voxlane_runtime::fetch::fetcher::Fetcher;
use voxlane_runtime::io::read_npy;
use voxlane_runtime::onnx::{convert, OnnxError, OnnxModel};
use voxlane_runtime::weights::{PackedFile, PackedWriter, PartRef};
use voxlane_runtime::LanePool;

fn onnx_path() -> std::path::PathBuf {
    let fetcher = Fetcher::new().expect("no cache directory (set VOXLANE_HOME or HOME)");
    fetcher
        .cached(&KOKORO_INT8)
        .expect("the Kokoro model is not cached: run `cargo xtask fetch-models`")
}

#[test]
fn converted_weights_speak_bit_identically_and_damage_is_typed() {
    let onnx = onnx_path();
    let dir = std::env::temp_dir().join(format!("voxlane-vxw-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let vxw = dir.join("kokoro.vxw");
    let done = convert(&OnnxModel::open(&onnx).unwrap(), &vxw, &[]).unwrap();
    assert_eq!(done.nodes, 3614);

    let case =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/kokoro/case0");
    let tokens = read_npy(case.join("tokens.npy")).unwrap().to_i64();
    let style = read_npy(case.join("style.npy")).unwrap().to_f32();
    let pool = LanePool::new(2).unwrap();
    let t0 = Instant::now();
    let mut a = KokoroTts::open(&onnx).unwrap();
    let t_onnx = t0.elapsed();
    let t0 = Instant::now();
    let mut b = KokoroTts::open(&vxw).unwrap();
    let t_vxw = t0.elapsed();
    eprintln!("open: onnx {t_onnx:?}, voxlane weights {t_vxw:?}");
    let wa = a.synthesize(&tokens, &style, 1.0, &pool).unwrap().to_vec();
    let wb = b.synthesize(&tokens, &style, 1.0, &pool).unwrap().to_vec();
    assert!(wa.len() > 24_000);
    assert_eq!(
        wa.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        wb.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
    );

    // The bind cache: that open packed the int8 convs, the int8 GEMMs
    // (where this route has a packed kernel) and the transposed convs for
    // this route into a file beside the weights; the next open maps them
    // and speaks the same bits.
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    let cache = cache_path(&vxw);
    let written = PackedFile::open(&cache).expect("the first open writes the bind cache");
    let kinds = |prefix: &str| {
        written
            .entries()
            .iter()
            .filter(|e| e.format.starts_with(prefix))
            .count()
    };
    let (convs, gemms, phases) = (
        kinds("voxlane.conv1d_int8/"),
        kinds("voxlane.qgemm/"),
        kinds("voxlane.conv_transpose1d/"),
    );
    assert!(convs > 50, "{convs} convs");
    // ALBERT's (q, k, v fused), each LSTM's input projection and
    // per-direction recurrence, every AdaIN's style projection: 98.
    if voxlane_actors::tts::kokoro::qgemm::available() {
        assert_eq!(gemms, 98, "int8 GEMMs");
    } else {
        assert_eq!(gemms, 0, "no packed int8 GEMM on this route");
    }
    assert_eq!(phases, 2, "ups.0 and ups.1");
    assert_eq!(written.entries().len(), convs + gemms + phases);
    // One entry of each kind, to leave out below.
    let first_of: Vec<String> = [
        "voxlane.conv1d_int8/",
        "voxlane.qgemm/",
        "voxlane.conv_transpose1d/",
    ]
    .iter()
    .filter_map(|k| written.entries().iter().find(|e| e.format.starts_with(k)))
    .map(|e| e.name.clone())
    .collect();
    drop(written);
    let t0 = Instant::now();
    let mut c = KokoroTts::open(&vxw).unwrap();
    eprintln!("open with the bind cache: {:?}", t0.elapsed());
    assert_eq!(
        bits(&wa),
        bits(c.synthesize(&tokens, &style, 1.0, &pool).unwrap())
    );
    // A damaged cache is not trusted: the convs are packed again, the same
    // bits come out, and a whole cache replaces it.
    let cache_bytes = std::fs::read(&cache).unwrap();
    std::fs::write(&cache, &cache_bytes[..cache_bytes.len() / 2]).unwrap();
    let mut d = KokoroTts::open(&vxw).unwrap();
    assert_eq!(
        bits(&wa),
        bits(d.synthesize(&tokens, &style, 1.0, &pool).unwrap())
    );
    assert_eq!(std::fs::read(&cache).unwrap().len(), cache_bytes.len());
    // A cache written for another file (its stamp differs) is not used either.
    let f = std::fs::OpenOptions::new().append(true).open(&vxw).unwrap();
    f.set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(5))
        .unwrap();
    drop(f);
    let stale = PackedFile::open(&cache).unwrap().metadata().clone();
    let _ = KokoroTts::open(&vxw).unwrap();
    let fresh = PackedFile::open(&cache).unwrap().metadata().clone();
    assert_ne!(
        stale.get("voxlane.model_mtime_ns"),
        fresh.get("voxlane.model_mtime_ns")
    );
    // A cache whose stamp matches but that cannot bind every weight (here
    // an entry of each kind is missing, as after a packing change) still
    // speaks the same bits, is removed after that load, and the next load
    // writes it whole.
    let whole = PackedFile::open(&cache).unwrap();
    let entries = whole.entries().len();
    let meta: Vec<(String, String)> = whole
        .metadata()
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut w = PackedWriter::create(&cache).unwrap();
    for e in whole
        .entries()
        .iter()
        .filter(|e| !first_of.contains(&e.name))
    {
        let parts: Vec<PartRef<'_>> = e
            .parts
            .iter()
            .map(|p| PartRef {
                name: &p.name,
                dtype: p.dtype,
                bytes: &p.data,
            })
            .collect();
        w.push(&e.name, &e.format, &e.shape, &parts).unwrap();
    }
    let meta_ref: Vec<(&str, &str)> = meta.iter().map(|(k, v)| (&k[..], &v[..])).collect();
    w.finish(&meta_ref).unwrap();
    drop(whole);
    let mut e = KokoroTts::open(&vxw).unwrap();
    assert_eq!(
        bits(&wa),
        bits(e.synthesize(&tokens, &style, 1.0, &pool).unwrap())
    );
    assert!(!cache.exists(), "a cache missing an entry is removed");
    let _ = KokoroTts::open(&vxw).unwrap();
    assert_eq!(PackedFile::open(&cache).unwrap().entries().len(), entries);
    assert_eq!(std::fs::read(&cache).unwrap().len(), cache_bytes.len());
    drop((c, d, e));

    // A truncated copy: the header survives, the tensors do not.
    let bytes = std::fs::read(&vxw).unwrap();
    let cut = dir.join("cut.vxw");
    std::fs::write(&cut, &bytes[..bytes.len() / 3]).unwrap();
    match KokoroTts::open(&cut) {
        Err(KokoroError::Onnx(OnnxError::Truncated { detail, .. })) => {
            assert!(detail.contains("tensor"), "{detail}")
        }
        other => panic!("expected a truncation error, got {other:?}"),
    }
    // A header cut short.
    std::fs::write(&cut, &bytes[..100]).unwrap();
    assert!(matches!(
        KokoroTts::open(&cut),
        Err(KokoroError::Onnx(OnnxError::Truncated { .. }))
    ));
    // A corrupt graph description.
    let mut bad = bytes.clone();
    let at = bad
        .windows(5)
        .position(|w| w == b"\"op\":")
        .expect("graph JSON in the file");
    bad[at + 1] = b'X';
    std::fs::write(&cut, &bad).unwrap();
    match KokoroTts::open(&cut) {
        Err(KokoroError::Onnx(OnnxError::Malformed { detail, .. })) => {
            assert!(detail.contains("op"), "{detail}")
        }
        other => panic!("expected a malformed-file error, got {other:?}"),
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Load time of the cached voxlane weight file with its bind cache (the
/// default model as `voxlane speak` opens it): median of 7 opens, wall and
/// this thread's CPU time. Run with `--ignored --nocapture`.
#[test]
#[ignore = "measurement: run explicitly"]
fn time_kokoro_open() {
    let fetcher = Fetcher::new().expect("cache directory");
    let vxw = std::fs::read_dir(fetcher.path_of(&KOKORO_INT8).parent().unwrap())
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|e| e == "vxw"))
        .expect("a converted .vxw in the model cache: run `voxlane speak` once");
    let cpu = || -> f64 {
        let s = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
        s.split_whitespace()
            .next()
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
            / 1e6
    };
    drop(KokoroTts::open(&vxw).unwrap());
    let mut runs: Vec<(f64, f64)> = (0..7)
        .map(|_| {
            let (t0, c0) = (Instant::now(), cpu());
            let tts = KokoroTts::open(&vxw).unwrap();
            let r = (t0.elapsed().as_secs_f64() * 1e3, cpu() - c0);
            drop(tts);
            r
        })
        .collect();
    runs.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (wall, cpu_ms) = runs[3];
    println!(
        "KokoroTts::open({}): median {wall:.1} ms wall, {cpu_ms:.1} ms CPU",
        vxw.display()
    );
}
