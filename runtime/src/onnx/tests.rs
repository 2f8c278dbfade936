//! Reader tests on a model encoded here, fuzzing, and the real Kokoro model if cached.

use super::*;
use proptest::prelude::*;

/// A minimal protobuf writer for building test models.
#[derive(Default, Clone)]
struct Msg(Vec<u8>);

impl Msg {
    fn varint(&mut self, mut v: u64) {
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                self.0.push(b);
                return;
            }
            self.0.push(b | 0x80);
        }
    }
    fn tag(&mut self, n: u32, wt: u8) {
        self.varint(u64::from(n) << 3 | u64::from(wt));
    }
    fn int(mut self, n: u32, v: i64) -> Self {
        self.tag(n, 0);
        self.varint(v as u64);
        self
    }
    fn bytes(mut self, n: u32, b: &[u8]) -> Self {
        self.tag(n, 2);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
        self
    }
    fn str(self, n: u32, s: &str) -> Self {
        self.bytes(n, s.as_bytes())
    }
    fn msg(self, n: u32, m: &Msg) -> Self {
        self.bytes(n, &m.0)
    }
    fn f32(mut self, n: u32, v: f32) -> Self {
        self.tag(n, 5);
        self.0.extend(v.to_le_bytes());
        self
    }
    fn packed_ints(self, n: u32, vs: &[i64]) -> Self {
        let mut p = Msg::default();
        for &v in vs {
            p.varint(v as u64);
        }
        self.bytes(n, &p.0)
    }
    fn packed_f32(self, n: u32, vs: &[f32]) -> Self {
        let b: Vec<u8> = vs.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.bytes(n, &b)
    }
}

fn tensor(name: &str, dims: &[i64], dt: i64) -> Msg {
    Msg::default().packed_ints(1, dims).int(2, dt).str(8, name)
}

fn value_info(name: &str, elem: i64, dims: &[Result<i64, &str>]) -> Msg {
    let mut shape = Msg::default();
    for d in dims {
        let dim = match d {
            Ok(v) => Msg::default().int(1, *v),
            Err(p) => Msg::default().str(2, p),
        };
        shape = shape.msg(1, &dim);
    }
    let tt = Msg::default().int(1, elem).msg(2, &shape);
    Msg::default()
        .str(1, name)
        .msg(2, &Msg::default().msg(1, &tt))
}

/// A small quantized-conv model in the shape of the Kokoro export.
fn small_model() -> Vec<u8> {
    let w = tensor("conv.weight_quantized", &[2, 1, 3], 3).bytes(9, &[1, 255, 3, 4, 5, 128]);
    let zp = tensor("conv.weight_zero_point", &[], 2).packed_ints(5, &[128]);
    let scale = tensor("conv.weight_scale", &[2], 1).packed_f32(4, &[0.5, 0.25]);
    let shape = tensor("shape", &[3], 7).packed_ints(7, &[1, -1, 4]);
    let half = tensor("h", &[2], 10).bytes(9, &[0x00, 0x3c, 0x00, 0xc0]);
    let attr_t = Msg::default()
        .str(1, "value")
        .msg(5, &tensor("", &[1], 1).bytes(9, &2.0f32.to_le_bytes()))
        .int(20, 4);
    let node = Msg::default()
        .str(1, "x_quantized")
        .str(1, "conv.weight_quantized")
        .str(1, "x_zero_point")
        .str(1, "conv.weight_zero_point")
        .str(2, "y_int")
        .str(3, "/decoder/conv/Conv_quant")
        .str(4, "ConvInteger")
        .msg(
            5,
            &Msg::default()
                .str(1, "pads")
                .packed_ints(8, &[1, 1])
                .int(20, 7),
        )
        .msg(5, &Msg::default().str(1, "group").int(3, 1).int(20, 2))
        .msg(5, &Msg::default().str(1, "alpha").f32(2, 0.2).int(20, 1))
        .msg(
            5,
            &Msg::default().str(1, "mode").str(4, "reflect").int(20, 3),
        );
    let konst = Msg::default()
        .str(2, "two")
        .str(3, "Constant_0")
        .str(4, "Constant")
        .msg(5, &attr_t);
    let lstm = Msg::default()
        .str(1, "y_int")
        .str(2, "out")
        .str(3, "lstm")
        .str(4, "DynamicQuantizeLSTM")
        .str(7, "com.microsoft")
        // Unpacked repeated ints and an unknown field must be accepted.
        .msg(
            5,
            &Msg::default()
                .str(1, "activations_idx")
                .int(8, 3)
                .int(8, 4)
                .int(20, 7),
        )
        .str(99, "future field");
    let graph = Msg::default()
        .msg(1, &node)
        .msg(1, &konst)
        .msg(1, &lstm)
        .str(2, "main_graph")
        .msg(5, &w)
        .msg(5, &zp)
        .msg(5, &scale)
        .msg(5, &shape)
        .msg(5, &half)
        .msg(
            11,
            &value_info("tokens", 7, &[Ok(1), Err("sequence_length")]),
        )
        .msg(12, &value_info("audio", 1, &[Err("audio_length")]));
    Msg::default()
        .int(1, 8)
        .str(2, "voxlane-test")
        .str(3, "0.1")
        .msg(7, &graph)
        .msg(8, &Msg::default().str(1, "").int(2, 20))
        .msg(8, &Msg::default().str(1, "com.microsoft").int(2, 1))
        .0
}

#[test]
fn decodes_a_small_model() {
    let m = OnnxModel::from_bytes(small_model(), "small.onnx").unwrap();
    assert_eq!(m.info().ir_version, 8);
    assert_eq!(m.info().producer_name, "voxlane-test");
    assert_eq!(m.info().opset_import.len(), 2);
    assert_eq!(m.info().opset_import[1].domain, "com.microsoft");
    let g = m.graph();
    assert_eq!(g.name, "main_graph");
    assert_eq!(g.nodes.len(), 3);
    assert_eq!(
        g.inputs[0].shape,
        Some(vec![Dim::Value(1), Dim::Param("sequence_length".into())])
    );
    assert_eq!(g.inputs[0].elem_type, Some(DataType::Int64));
    assert_eq!(g.outputs[0].name, "audio");

    let conv = g.node("/decoder/conv/Conv_quant").unwrap();
    assert_eq!(conv.op_type, "ConvInteger");
    assert_eq!(conv.inputs[1], "conv.weight_quantized");
    assert_eq!(conv.attr_ints("pads"), Some(&[1, 1][..]));
    assert_eq!(conv.attr_int("group"), Some(1));
    assert_eq!(conv.attr_float("alpha"), Some(0.2));
    assert_eq!(
        conv.attr("mode"),
        Some(&AttrValue::String(b"reflect".to_vec()))
    );
    assert_eq!(
        g.producer("y_int").map(|n| n.name.as_str()),
        Some(conv.name.as_str())
    );
    assert_eq!(g.consumers("y_int").count(), 1);
    let lstm = g.node("lstm").unwrap();
    assert_eq!(lstm.domain, "com.microsoft");
    assert_eq!(lstm.attr_ints("activations_idx"), Some(&[3, 4][..]));
    match g.node("Constant_0").unwrap().attr("value") {
        Some(AttrValue::Tensor(t)) => assert_eq!(m.view(t).to_f32().unwrap(), vec![2.0]),
        other => panic!("{other:?}"),
    }

    let w = m.require("conv.weight_quantized").unwrap();
    assert_eq!((w.data_type, w.shape()), (DataType::Int8, vec![2, 1, 3]));
    assert_eq!(w.as_i8().unwrap(), &[1, -1, 3, 4, 5, -128]);
    assert_eq!(w.to_f32().unwrap(), vec![1.0, -1.0, 3.0, 4.0, 5.0, -128.0]);
    assert!(w.as_u8().is_none());
    let zp = m.require("conv.weight_zero_point").unwrap();
    assert_eq!((zp.numel(), zp.to_i64().unwrap()), (1, vec![128]));
    assert_eq!(
        m.require("conv.weight_scale").unwrap().to_f32().unwrap(),
        vec![0.5, 0.25]
    );
    assert_eq!(
        m.require("shape").unwrap().to_i64().unwrap(),
        vec![1, -1, 4]
    );
    assert_eq!(m.require("h").unwrap().to_f32().unwrap(), vec![1.0, -2.0]);
    assert!(m.require("conv.weight_scale").unwrap().to_i64().is_err());
    assert!(matches!(
        m.require("nope"),
        Err(OnnxError::MissingTensor(_))
    ));
    assert_eq!(m.initializers().count(), 5);
    assert_eq!(DataType::Int8.to_weights(), Some(crate::weights::DType::I8));
}

#[test]
fn bad_files_are_named() {
    let err = |b: Vec<u8>| OnnxModel::from_bytes(b, "x.onnx").unwrap_err();
    assert!(matches!(err(vec![]), OnnxError::Truncated { .. }));
    let e = err(b"RIFF\x24\x00\x00\x00WAVEfmt this is a wav file".to_vec());
    assert!(matches!(e, OnnxError::NotOnnx { .. }), "{e}");
    // A safetensors file: 8-byte header length, then JSON.
    let head = br#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}"#;
    let mut st = (head.len() as u64).to_le_bytes().to_vec();
    st.extend(head);
    st.extend([0u8; 4]);
    let e = err(st);
    assert!(matches!(e, OnnxError::NotOnnx { .. }), "{e}");
    assert!(e.to_string().contains("not an ONNX model"), "{e}");

    let full = small_model();
    let e = err(full[..full.len() / 2].to_vec());
    assert!(matches!(e, OnnxError::Truncated { .. }), "{e}");
    assert!(e.to_string().contains("graph (field 7)"), "{e}");

    // A raw_data length that disagrees with dims names the tensor.
    let t = tensor("w", &[4], 1).bytes(9, &[0; 12]);
    let g = Msg::default().msg(5, &t);
    let bad = Msg::default()
        .int(1, 8)
        .msg(7, &g)
        .msg(8, &Msg::default().int(2, 20))
        .0;
    let e = err(bad);
    assert!(matches!(e, OnnxError::Malformed { .. }), "{e}");
    assert!(
        e.to_string().contains("`w`") && e.to_string().contains("12 bytes"),
        "{e}"
    );

    let p = std::env::temp_dir().join(format!("voxlane-onnx-missing-{}", std::process::id()));
    assert!(matches!(OnnxModel::open(&p), Err(OnnxError::Io { .. })));
}

#[test]
fn every_truncation_is_an_error() {
    let full = small_model();
    assert!(OnnxModel::from_bytes(full.clone(), "full").is_ok());
    // Cutting exactly before the last (second) opset entry leaves a valid model.
    let last_opset = Msg::default()
        .msg(8, &Msg::default().str(1, "com.microsoft").int(2, 1))
        .0
        .len();
    for cut in 0..full.len() {
        match OnnxModel::from_bytes(full[..cut].to_vec(), "cut") {
            Ok(_) if cut == full.len() - last_opset => {}
            Ok(_) => panic!("prefix of {cut} bytes parsed"),
            Err(OnnxError::Truncated { .. }) => {}
            // One byte is half a tag: nothing says it is ONNX yet.
            Err(OnnxError::NotOnnx { .. }) if cut == 1 => {}
            Err(e) => panic!("cut {cut} gave {e} instead of Truncated"),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = OnnxModel::from_bytes(bytes, "fuzz");
    }

    #[test]
    fn mutated_models_never_panic(
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8),
    ) {
        let mut b = small_model();
        let n = b.len();
        for (i, v) in flips {
            b[i % n] = v;
        }
        if let Ok(m) = OnnxModel::from_bytes(b, "mutated") {
            // Whatever decoded must also be readable without panics.
            for t in m.initializers() {
                let _ = t.to_f32();
                let _ = t.to_i64();
            }
        }
    }
}

/// The real int8 export, when `fetch` has put it in the cache.
#[test]
fn reads_the_cached_kokoro_model() {
    let Ok(home) = crate::fetch::voxlane_home() else {
        eprintln!("note: no cache directory; skipping the real-model test");
        return;
    };
    let path = home.join(crate::fetch::catalog::KOKORO_INT8.file);
    if !path.is_file() {
        eprintln!(
            "note: {} absent (run the ignored fetch test); skipping",
            path.display()
        );
        return;
    }
    let m = OnnxModel::open(&path).unwrap();
    let g = m.graph();
    let names: Vec<&str> = g.inputs.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["tokens", "style", "speed"]);
    assert_eq!(g.outputs[0].name, "audio");
    assert_eq!(g.nodes.len(), 3614);
    assert_eq!(g.initializers.len(), 775);
    let w = m
        .require("encoder.bert.embeddings.word_embeddings.weight_quantized")
        .unwrap();
    assert_eq!((w.data_type, w.shape()), (DataType::Int8, vec![178, 128]));
    assert_eq!(w.as_i8().map(<[i8]>::len), Some(178 * 128));
    let mut raw_bytes = 0usize;
    for t in m.initializers() {
        if let Some(r) = t.raw() {
            raw_bytes += r.len();
        }
    }
    assert!(raw_bytes > 80_000_000, "{raw_bytes}");
    let n = g
        .nodes
        .iter()
        .filter(|n| n.op_type == "ConvInteger")
        .count();
    assert_eq!(n, 87);
}

/// Every tensor of `a` (initializers and attribute tensors) equals `b`'s, bytes and type.
fn same_tensors(a: &OnnxModel, b: &OnnxModel) {
    assert_eq!(a.info(), b.info());
    let (ga, gb) = (a.graph(), b.graph());
    assert_eq!(ga.name, gb.name);
    assert_eq!(ga.inputs, gb.inputs);
    assert_eq!(ga.outputs, gb.outputs);
    assert_eq!(ga.nodes.len(), gb.nodes.len());
    for (na, nb) in ga.nodes.iter().zip(&gb.nodes) {
        assert_eq!(
            (&na.name, &na.op_type, &na.domain, &na.inputs, &na.outputs),
            (&nb.name, &nb.op_type, &nb.domain, &nb.inputs, &nb.outputs)
        );
        assert_eq!(na.attributes.len(), nb.attributes.len());
        for (x, y) in na.attributes.iter().zip(&nb.attributes) {
            match (&x.value, &y.value) {
                (AttrValue::Tensor(tx), AttrValue::Tensor(ty)) => {
                    let (vx, vy) = (a.view(tx), b.view(ty));
                    assert_eq!((vx.dims, vx.data_type), (vy.dims, vy.data_type));
                    assert_eq!(vx.to_f32().unwrap(), vy.to_f32().unwrap());
                }
                (vx, vy) => assert_eq!(vx, vy, "attribute {} of {}", x.name, na.name),
            }
        }
    }
    assert_eq!(ga.initializers.len(), gb.initializers.len());
    for (ta, tb) in a.initializers().zip(b.initializers()) {
        assert_eq!(
            (ta.name, ta.dims, ta.data_type),
            (tb.name, tb.dims, tb.data_type)
        );
        // Converted payloads are always raw little-endian bytes.
        assert!(tb.raw().is_some(), "{}", tb.name);
        match ta.raw() {
            Some(r) => assert_eq!(r, tb.raw().unwrap(), "{}", ta.name),
            None => assert_eq!(ta.to_f32().unwrap(), tb.to_f32().unwrap(), "{}", ta.name),
        }
    }
}

#[test]
fn voxlane_conversion_round_trips_and_rejects_bad_files() {
    let dir = std::env::temp_dir().join(format!("voxlane-onnx-convert-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let m = OnnxModel::from_bytes(small_model(), "small.onnx").unwrap();
    let out = dir.join("small.vxw");
    let done = crate::onnx::convert(&m, &out, &[("voxlane.source", "small.onnx")]).unwrap();
    assert_eq!(done.nodes, 3);
    assert_eq!(
        done.tensors,
        5 + 1,
        "5 initializers and the Constant's value"
    );
    let c = OnnxModel::open(&out).unwrap();
    same_tensors(&m, &c);
    assert_eq!(
        c.require("conv.weight_quantized").unwrap().as_i8().unwrap(),
        &[1, -1, 3, 4, 5, -128]
    );

    // Truncated: every cut is a typed error, never a panic.
    let full = std::fs::read(&out).unwrap();
    for cut in [9, full.len() / 2, full.len() - 1] {
        let e = OnnxModel::from_bytes(full[..cut].to_vec(), "cut.vxw").unwrap_err();
        assert!(
            matches!(e, OnnxError::Truncated { .. } | OnnxError::Malformed { .. }),
            "cut {cut}: {e}"
        );
    }
    // A safetensors file that is not a voxlane graph (e.g. a Mimi checkpoint).
    let foreign = dir.join("foreign.safetensors");
    crate::weights::write_safetensors(
        &foreign,
        &[("w", crate::weights::TensorData::F32(vec![1.0]), vec![1])],
        &[],
    )
    .unwrap();
    let e = OnnxModel::open(&foreign).unwrap_err();
    assert!(matches!(e, OnnxError::NotOnnx { .. }), "{e}");
    assert!(e.to_string().contains("voxlane.format"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The real export converts losslessly.
#[test]
fn converts_the_cached_kokoro_model() {
    let Ok(home) = crate::fetch::voxlane_home() else {
        return;
    };
    let path = home.join(crate::fetch::catalog::KOKORO_INT8.file);
    if !path.is_file() {
        eprintln!("note: {} absent; skipping", path.display());
        return;
    }
    let m = OnnxModel::open(&path).unwrap();
    let out = std::env::temp_dir().join(format!("voxlane-kokoro-{}.vxw", std::process::id()));
    crate::onnx::convert(&m, &out, &[]).unwrap();
    let c = OnnxModel::open(&out).unwrap();
    same_tensors(&m, &c);
    std::fs::remove_file(&out).unwrap();
}
