//! What each fuzz target does with one input: parse it with the reader
//! under test, then use the parsed value as a caller would (element
//! conversion, shape products, lookups, a tiny matmul). Shared by the
//! `cargo fuzz` targets (`tests/fuzz/fuzz_targets/`) and, through a
//! `#[path]` module, by the stable regression test
//! (`tests/tests/fuzz_regressions.rs`), so a committed crasher replays
//! exactly what the fuzzer ran.
//!
//! Every function returns `Ok(())` or the reader's typed error as text; a
//! panic (or a failed invariant below) is the bug.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::Path;

use voxlane_actors::kernels::matmul::{matmul, StoredWeights};
use voxlane_actors::speech::mimi::MimiConfig;
use voxlane_actors::speech::moshi::MoshiConfig;
use voxlane_actors::speech::voice::VoicePrompt;
use voxlane_actors::text::sentencepiece::SentencePiece;
use voxlane_actors::tts::frontend::{Frontend, FrontendError, Phonemizer, Vocab};
use voxlane_actors::tts::voices::{VoiceSpec, Voices};
use voxlane_machines::serve::speech::request::SPEED_RANGE;
use voxlane_machines::serve::speech::voices::{openai_aliases, to_voice_spec};
use voxlane_machines::serve::speech::{parse_request, AudioFormat};
use voxlane_runtime::io::npy::{parse_npy, NpyData};
use voxlane_runtime::io::ogg::{parse_opus_head, PageReader, PageWriter, MAX_PACKET_LEN};
use voxlane_runtime::io::pickle;
use voxlane_runtime::io::torch_pt::TorchFile;
use voxlane_runtime::io::wav::parse_wav;
use voxlane_runtime::lane_pool::{Fork, LaneError};
use voxlane_runtime::onnx::{AttrValue, OnnxModel};
use voxlane_runtime::weights::{PackedFile, WeightFile};

/// `Ok(())`, or the typed error the reader returned, as text.
pub type Outcome = Result<(), String>;

/// One target's harness.
pub type Target = fn(&[u8]) -> Outcome;

/// Every target, by name: what `tests/fuzz/corpus/<name>/` and
/// `tests/fuzz/regressions/<name>/` hold inputs for.
pub const TARGETS: &[(&str, Target)] = &[
    ("npy", npy),
    ("wav", wav),
    ("onnx", onnx),
    ("safetensors", safetensors),
    ("vxlpack", vxlpack),
    ("voices", voices),
    ("vocab_json", vocab_json),
    ("mimi_config", mimi_config),
    ("moshi_config", moshi_config),
    ("sentencepiece", sentencepiece),
    ("torch_pt", torch_pt),
    ("pickle", pickle),
    ("voice_prompt", voice_prompt),
    ("ogg_opus", ogg_opus),
    ("speech_request", speech_request),
];

fn text<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// Shape product, checked (a parsed shape must never overflow it).
fn numel(shape: &[usize]) -> usize {
    shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .expect("a parsed shape's product overflows")
}

/// `.npy`: parse, then convert as the fixtures' readers do.
pub fn npy(data: &[u8]) -> Outcome {
    let a = parse_npy(data, Path::new("fuzz.npy")).map_err(text)?;
    let n = numel(&a.shape);
    let len = match &a.data {
        NpyData::F32(v) => v.len(),
        NpyData::F64(v) => v.len(),
        NpyData::I64(v) => v.len(),
        NpyData::I32(v) => v.len(),
    };
    assert_eq!(len, n, "elements vs shape {:?}", a.shape);
    assert_eq!(a.to_f32().len(), n);
    assert_eq!(a.to_i64().len(), n);
    Ok(())
}

/// WAV: parse, then take the first channel.
pub fn wav(data: &[u8]) -> Outcome {
    let w = parse_wav(data, Path::new("fuzz.wav")).map_err(text)?;
    assert!(w.channels > 0);
    let mono = w.mono();
    assert_eq!(
        mono.len(),
        w.samples.len().div_ceil(usize::from(w.channels))
    );
    Ok(())
}

/// ONNX (protobuf or voxlane's converted form): decode, then read every
/// tensor (initializers and attribute tensors) and walk the graph.
pub fn onnx(data: &[u8]) -> Outcome {
    let model = OnnxModel::from_bytes(data.to_vec(), "fuzz.onnx").map_err(text)?;
    let g = model.graph();
    for t in model.initializers() {
        let n = t.numel();
        assert_eq!(t.shape().len(), t.dims.len());
        let _ = t.as_i8();
        let _ = t.as_u8();
        if let (Ok(v), Some(size)) = (t.to_f32(), t.data_type.size()) {
            if t.raw().is_some() {
                assert_eq!(v.len() * size, n * size, "`{}`", t.name);
            }
        }
        let _ = t.to_i64();
        assert!(model.initializer(t.name).is_some());
    }
    for node in &g.nodes {
        for a in &node.attributes {
            match &a.value {
                AttrValue::Tensor(info) => {
                    let t = model.view(info);
                    let _ = (t.numel(), t.to_f32(), t.to_i64());
                }
                AttrValue::Tensors(list) => {
                    for info in list {
                        let t = model.view(info);
                        let _ = (t.numel(), t.to_f32(), t.to_i64());
                    }
                }
                _ => {}
            }
        }
        let _ = (node.attr_int("axis"), node.attr_float("alpha"));
        let _ = node.attr_ints("pads");
        if let Some(out) = node.outputs.first() {
            let _ = g.producer(out);
            let _ = g.consumers(out).count();
        }
        if !node.name.is_empty() {
            assert!(g.node(&node.name).is_some());
        }
    }
    Ok(())
}

/// safetensors: validate, then read every tensor each way a loader does.
pub fn safetensors(data: &[u8]) -> Outcome {
    let w = WeightFile::from_bytes(data, "fuzz.safetensors").map_err(text)?;
    let _ = w.metadata().len();
    let names: Vec<String> = w.names().map(str::to_string).collect();
    for name in &names {
        let t = w.require(name).map_err(text)?;
        let n = numel(t.shape);
        assert_eq!(n * t.dtype.size(), t.bytes.len(), "`{name}`");
        assert_eq!(t.to_f32().len(), n);
        assert_eq!(t.to_i64().len(), n);
        let _ = t.to_u16();
        let _ = t.as_i8();
        let _ = w.require_shape(name, t.shape).map_err(text)?;
        // In place: alignment or element size may refuse, as a typed error.
        let _ = w.buf::<f32>(name).map(|b| b.len());
        let _ = w.buf::<u16>(name).map(|b| b.len());
        let _ = w.buf::<u8>(name).map(|b| b.len());
        w.release(name);
    }
    Ok(())
}

/// A one-thread [`Fork`] for the matmul a loader's caller runs.
struct Serial;

impl Fork for Serial {
    fn threads(&self) -> usize {
        1
    }

    fn fork(&self, n: usize, f: &(dyn Fn(usize) + Sync)) -> Result<(), LaneError> {
        (0..n).for_each(f);
        Ok(())
    }
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// `data` with the VXLPACK preamble's header length and hash made to fit
/// (header from its offset to the end): mutations of the JSON header then
/// reach its checks instead of stopping at the hash.
pub fn vxlpack_fixed(data: &[u8]) -> Option<Vec<u8>> {
    if data.len() < 64 || !data.starts_with(b"VXLPACK\0") {
        return None;
    }
    let mut off = [0u8; 8];
    off.copy_from_slice(&data[16..24]);
    let h_off = usize::try_from(u64::from_le_bytes(off)).ok()?;
    if !(64..=data.len()).contains(&h_off) {
        return None;
    }
    let mut out = data.to_vec();
    let h_len = (data.len() - h_off) as u64;
    out[24..32].copy_from_slice(&h_len.to_le_bytes());
    let hash = fnv1a(&out[h_off..]);
    out[32..40].copy_from_slice(&hash.to_le_bytes());
    Some(out)
}

fn vxlpack_once(data: &[u8]) -> Outcome {
    let file = PackedFile::from_bytes(data, "fuzz.vxw").map_err(text)?;
    for e in file.entries() {
        let _ = numel(&e.shape);
        for p in &e.parts {
            assert_eq!(p.data.len() % p.dtype.size(), 0);
        }
    }
    let stored = StoredWeights::from_packed(file).map_err(text)?;
    for w in stored.weights.values() {
        let (n, k) = (w.n(), w.k());
        let _ = (w.format(), w.bytes(), w.is_mapped());
        // What a loader's caller does next: one row through the weight.
        if n.checked_mul(k).is_some_and(|nk| nk <= 1 << 16) {
            let a = vec![0.25f32; k];
            let mut out = vec![0f32; n];
            matmul(&a, 1, k, w, None, &mut out, &Serial).map_err(text)?;
        }
    }
    Ok(())
}

/// The voxlane converted-weights file (VXLPACK): the container
/// (`PackedFile`), then the matmul store's weights (`read_weights`), as
/// given and with the header hash fixed up.
pub fn vxlpack(data: &[u8]) -> Outcome {
    let raw = vxlpack_once(data);
    if let Some(fixed) = vxlpack_fixed(data) {
        vxlpack_once(&fixed)?;
    }
    raw
}

/// A voices pack (npz; kokoro-onnx's `voices-v1.0.bin` is one too): list,
/// load a few voices, take styles, blend two.
pub fn voices(data: &[u8]) -> Outcome {
    let v = Voices::from_bytes(data.to_vec(), "fuzz.npz").map_err(text)?;
    let names: Vec<String> = v.names().iter().take(4).cloned().collect();
    let mut first = None;
    for name in &names {
        let pack = v.load(name).map_err(text)?;
        let rows = pack.rows();
        assert!(rows > 0);
        assert_eq!(pack.as_slice().len(), rows * 256);
        let s = pack.style(rows).map_err(text)?;
        assert_eq!(s.decoder().len() + s.prosody().len(), 256);
        assert!(pack.style(rows + 1).is_err());
        first.get_or_insert(name.clone());
    }
    if let (Some(a), Some(b)) = (first, names.last()) {
        let _ = v.select(&format!("{a}:0.7,{b}:0.3"));
    }
    Ok(())
}

/// Kokoro's `vocab.json`: parse, then map a phoneme string to ids.
pub fn vocab_json(data: &[u8]) -> Outcome {
    let Ok(s) = std::str::from_utf8(data) else {
        return Err("not UTF-8 (read_to_string refuses it)".into());
    };
    let v = Vocab::from_json(s, Path::new("vocab.json")).map_err(text)?;
    assert!(!v.is_empty());
    let mut dropped = BTreeSet::new();
    let kept = v.keep_known("həlˈoʊ wˈɜːld, 日本!", &mut dropped);
    let _ = v.encode(&kept);
    let _ = (v.id('a'), v.len());
    Ok(())
}

/// Mimi's `config.json`: parse and validate, then the derived sizes.
pub fn mimi_config(data: &[u8]) -> Outcome {
    let s = std::str::from_utf8(data).map_err(text)?;
    let c = MimiConfig::from_json(s).map_err(text)?;
    let _ = (c.hop_length(), c.frame_size(), c.resample_stride());
    c.validate().map_err(text)?;
    Ok(())
}

/// Moshi's (and PersonaPlex's) `config.json`: parse and validate, then the
/// derived sizes.
pub fn moshi_config(data: &[u8]) -> Outcome {
    let s = std::str::from_utf8(data).map_err(text)?;
    let c = MoshiConfig::from_json(s).map_err(text)?;
    let _ = (c.hidden(), c.depformer_hidden(), c.num_codebooks());
    let _ = (c.user_codebooks(), c.max_delay());
    let _ = (c.text_initial_token(), c.audio_initial_token());
    c.validate().map_err(text)?;
    Ok(())
}

/// A SentencePiece `.model`: parse, then encode and decode a few strings.
pub fn sentencepiece(data: &[u8]) -> Outcome {
    let sp = SentencePiece::from_bytes(data).map_err(text)?;
    for t in ["Hello, world!", "  two  spaces ", "日本語 ½ ﬁ\u{301}", ""] {
        let ids = sp.encode(t);
        let pieces = sp.encode_pieces(t);
        let _ = sp.normalize(t);
        let _ = sp.decode(&ids).map_err(text)?;
        let _ = sp.decode_pieces(&pieces);
    }
    let n = sp.vocab_size();
    let ids: Vec<u32> = (0..n.min(64) as u32).collect();
    let _ = sp.decode(&ids);
    let _ = sp.decode(&[n as u32]);
    for &id in &ids {
        if let Some(p) = sp.id_to_piece(id) {
            let _ = sp.piece_to_id(p);
        }
        let _ = sp.is_control(id);
    }
    let _ = (sp.unk_id(), sp.bos_id(), sp.eos_id(), sp.pad_id());
    Ok(())
}

fn torch_tensors(file: &TorchFile) {
    for t in file.tensors() {
        let n = numel(&t.shape);
        assert_eq!(t.data.len(), n * t.dtype.size(), "`{}`", t.name);
        if let Some(v) = t.to_f32() {
            assert_eq!(v.len(), n);
        }
        if let Some(v) = t.to_i64() {
            assert_eq!(v.len(), n);
        }
        assert!(file.get(&t.name).is_some());
    }
}

/// A torch `.pt` file (zip + pickle): decode, then convert every tensor.
pub fn torch_pt(data: &[u8]) -> Outcome {
    let file = TorchFile::parse(data, Path::new("fuzz.pt")).map_err(text)?;
    torch_tensors(&file);
    Ok(())
}

/// Storages the synthetic `.pt` of [`pickle`] holds, keys `0`..: sizes
/// that a fuzzed pickle's views may fit or overrun.
const STORAGES: &[usize] = &[8448, 544, 64, 1, 0, 4096];

/// `data` as the `data.pkl` of a `.pt` zip (storages [`STORAGES`], sized as
/// the PersonaPlex voice file's two).
pub fn synthetic_pt(data: &[u8]) -> Vec<u8> {
    let mut z = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let opts =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    let mut add = |name: &str, bytes: &[u8]| {
        z.start_file(name, opts).expect("zip in memory");
        z.write_all(bytes).expect("zip in memory");
    };
    add("archive/data.pkl", data);
    add("archive/byteorder", b"little");
    for (i, &len) in STORAGES.iter().enumerate() {
        let bytes: Vec<u8> = (0..len).map(|j| (j * 31 + i) as u8).collect();
        add(&format!("archive/data/{i}"), &bytes);
    }
    z.finish().expect("zip in memory").into_inner()
}

/// The pickle machine, alone and as the `data.pkl` of a `.pt` (whose zip
/// CRCs keep mutated pickles out of reach of the [`torch_pt`] target).
pub fn pickle(data: &[u8]) -> Outcome {
    let v = pickle::load(data).map_err(text);
    if let Ok(v) = &v {
        let _ = (v.depth(), v.type_name());
    }
    let file = TorchFile::parse(&synthetic_pt(data), Path::new("fuzz.pt")).map_err(text)?;
    torch_tensors(&file);
    v.map(|_| ())
}

/// A PersonaPlex voice prompt (WAV, `.pt` or safetensors, by content) for
/// the tiny fixture model's sizes: load, then what `LMGen` asks of it.
pub fn voice_prompt(data: &[u8]) -> Outcome {
    let p = VoicePrompt::from_bytes(data, Path::new("fuzz-voice"), 64, 8).map_err(text)?;
    let frames = p.frames();
    match &p {
        VoicePrompt::Audio(a) => assert_eq!(frames, a.len().div_ceil(1920)),
        VoicePrompt::Embeddings {
            embeddings,
            frames,
            dim,
            cache,
            cache_shape,
        } => {
            assert_eq!(embeddings.len(), frames * dim);
            assert_eq!(cache.len(), numel(cache_shape));
        }
    }
    let _ = p.check_cache_width(1);
    Ok(())
}

/// An Ogg/Opus stream as the duplex server reads it from a client: bytes in
/// chunks (the first byte picks the chunk size), packets out, `OpusHead`
/// parsed; every packet read must survive a write/read round trip.
pub fn ogg_opus(data: &[u8]) -> Outcome {
    let Some((&chunk, stream)) = data.split_first() else {
        return Ok(());
    };
    let mut reader = PageReader::new();
    let mut packets = Vec::new();
    let mut result = Ok(());
    for c in stream.chunks(usize::from(chunk) * 61 + 1) {
        if let Err(e) = reader.push(c) {
            result = Err(text(e));
            break;
        }
        while let Some(p) = reader.next_packet() {
            packets.push(p);
        }
    }
    let mut writer = PageWriter::new(42);
    for (i, p) in packets.iter().enumerate() {
        assert!(p.len() <= MAX_PACKET_LEN, "packet of {} bytes", p.len());
        if p.starts_with(b"OpusHead") {
            if let Ok(head) = parse_opus_head(p) {
                assert!(matches!(head.channels, 1 | 2));
            }
        }
        if let Ok(page) = writer.page(p, i as u64) {
            let mut again = PageReader::new();
            again.push(&page).expect("a page we wrote reads back");
            assert_eq!(again.next_packet().as_deref(), Some(p.as_slice()));
        }
    }
    result
}

/// Stands in for espeak-ng: each clause's lower-cased letters as its
/// "phonemes", so the whole frontend after it (vocab filter, chunking) runs.
struct LettersPhonemizer;

impl Phonemizer for LettersPhonemizer {
    fn phonemize(&self, clauses: &[&str]) -> Result<Vec<String>, FrontendError> {
        Ok(clauses.iter().map(|c| c.to_lowercase()).collect())
    }
}

/// The body of `POST /v1/audio/speech`: parse and check it as the server
/// does, then resolve its voice (OpenAI names, Kokoro-FastAPI's `a(2)+b`
/// blends) to a voice spec and parse that, and run its text through the
/// frontend (normalise, split, phonemes, vocab, chunks).
pub fn speech_request(data: &[u8]) -> Outcome {
    let request = parse_request(data, "jf_alpha").map_err(|e| format!("{}: {e}", e.code()))?;
    assert!(SPEED_RANGE.contains(&f64::from(request.speed)));
    assert!(!request.input.trim().is_empty());
    assert_eq!(
        AudioFormat::parse(request.format.name()),
        Some(request.format)
    );
    let pack: Vec<String> = ["jf_alpha", "jm_kumo", "af_heart"]
        .map(String::from)
        .to_vec();
    let spec = to_voice_spec(&request.voice, &openai_aliases(&pack))?;
    let parsed = VoiceSpec::parse(&spec).map_err(text)?;
    assert!(!parsed.parts.is_empty());
    let vocab_json: String = {
        let letters = " abcdefghijklmnopqrstuvwxyz.,!?;:'—";
        let pairs: Vec<String> = letters
            .chars()
            .enumerate()
            .map(|(i, c)| format!("{:?}: {}", c.to_string(), i + 1))
            .collect();
        format!("{{\"vocab\": {{{}}}}}", pairs.join(", "))
    };
    let vocab = Vocab::from_json(&vocab_json, Path::new("vocab.json")).map_err(text)?;
    let frontend = Frontend::with_phonemizer(vocab, LettersPhonemizer);
    let tokenized = frontend.tokenize(&request.input).map_err(text)?;
    assert!(!tokenized.chunks.is_empty());
    for chunk in &tokenized.chunks {
        assert!(chunk.tokens.len() >= 2);
    }
    Ok(())
}
