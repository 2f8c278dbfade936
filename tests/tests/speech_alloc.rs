// Its own test target, never a module of a family target: its `#[global_allocator]` counts allocations for the whole process.
//! Mimi streaming steps and Moshi executor frames allocate nothing once a
//! session exists (thread budget 1, so every byte a step touches is
//! allocated on this thread).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;
use voxlane_actors::speech::mimi::{MimiConfig, MimiDecoder, MimiEncoder, MimiModel, MimiOptions};
use voxlane_runtime::LanePool;

struct Counting;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCS: Cell<usize> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.with(Cell::get) {
            ALLOCS.with(|a| a.set(a.get() + 1));
        }
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNTING.with(Cell::get) {
            ALLOCS.with(|a| a.set(a.get() + 1));
        }
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn streaming_steps_do_not_allocate() {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/mimi-tiny");
    let cfg = MimiConfig::from_file(dir.join("config.json")).unwrap();
    // The counter sees this thread's allocations.
    COUNTING.with(|c| c.set(true));
    drop(std::hint::black_box(vec![1u8; 64]));
    COUNTING.with(|c| c.set(false));
    assert_eq!(ALLOCS.with(|a| a.replace(0)), 1);
    // The default routes, and the q8/bf16 ones (their activation and
    // packing scratch is sized at bind too).
    let fast = MimiOptions {
        q8_transformer: true,
        q8_convs: true,
        bf16_convs: true,
        nvidia_ring: false,
    };
    for options in [MimiOptions::default(), fast] {
        let model = MimiModel::load_with(cfg.clone(), dir.join("model.safetensors"), options);
        steady_state_allocations(Arc::new(model.unwrap()), options);
    }
}

fn steady_state_allocations(model: Arc<MimiModel>, options: MimiOptions) {
    let pool = LanePool::new(1).unwrap();
    let fs = model.frame_size();
    let pcm: Vec<f32> = (0..4 * fs)
        .map(|i| 0.2 * (i as f32 * 0.013).sin())
        .collect();
    let mut enc = MimiEncoder::new(model.clone()).unwrap();
    let mut dec = MimiDecoder::new(model.clone()).unwrap();
    let mut codes = vec![0; model.num_codebooks()];
    let mut out = vec![0.0; fs];
    for (i, frame) in pcm.chunks_exact(fs).enumerate() {
        COUNTING.with(|c| c.set(i > 0));
        enc.step(&pool, frame, &mut codes).unwrap();
        dec.step(&pool, &codes, &mut out).unwrap();
        COUNTING.with(|c| c.set(false));
    }
    let n = ALLOCS.with(|a| a.replace(0));
    assert_eq!(
        n, 0,
        "{n} allocations in 3 steady-state frames ({options:?})"
    );
}

#[test]
fn moshi_frames_do_not_allocate() {
    use voxlane_actors::speech::moshi::{LmWeights, MoshiConfig, StreamSampling};
    use voxlane_machines::speech::moshi_executor::{
        BindSession, Initialize, MoshiExecutor, Step, WeightsSource,
    };
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/moshi-tiny");
    let cfg = MoshiConfig::from_file(&dir.join("config.json")).unwrap();
    // Greedy and sampled, as stored and q8_0 (its activation scratch is sized at bind).
    for (route, sampling) in [
        (LmWeights::AsStored, StreamSampling::GREEDY),
        (LmWeights::Q8_0, StreamSampling::default()),
    ] {
        let mut ex = MoshiExecutor::new();
        ex.initialize(Initialize {
            config: cfg.clone(),
            weights: WeightsSource::File(dir.join("model.safetensors")),
            route,
            pool: std::sync::Arc::new(LanePool::new(1).unwrap()),
            cache_dir: None,
        })
        .unwrap();
        ex.bind_session(BindSession {
            sampling,
            seed: 3,
            capacity_bytes: None,
        })
        .unwrap();
        let mut frames = 0;
        for i in 0..6u32 {
            let codes: Vec<u32> = (0..8).map(|c| (i * 31 + c * 7) % 256).collect();
            let forced: Vec<u32> = (0..8).map(|c| (i + c) % 256).collect();
            let step = Step {
                other_codes: &codes,
                forced_text: (i == 4).then_some(3),
                forced_audio: (i == 5).then_some(&forced[..]),
            };
            COUNTING.with(|c| c.set(i > 1));
            frames += usize::from(ex.frame(step).unwrap().is_some());
            COUNTING.with(|c| c.set(false));
        }
        assert_eq!(frames, 5);
        let n = ALLOCS.with(|a| a.replace(0));
        assert_eq!(n, 0, "{n} allocations in 4 steady-state frames ({route:?})");
    }
}

#[test]
fn wavefront_frames_do_not_allocate() {
    use voxlane_actors::speech::moshi::StreamSampling;
    use voxlane_machines::speech::converse::{ConverseOptions, ConversePaths, Converser};
    use voxlane_machines::speech::moshi_executor::WeightsSource;
    let f = |n: &str| {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../shared/fixtures/personaplex-tiny")
            .join(n)
    };
    let paths = ConversePaths {
        lm: WeightsSource::File(f("lm.safetensors")),
        mimi: f("mimi.safetensors"),
        tokenizer: f("tokenizer.model"),
        config: Some(f("config.json")),
        mimi_config: None,
    };
    // Serial (every byte on this thread) and as stage jobs (this thread's share).
    for threads in [1, 2] {
        let opts = ConverseOptions {
            threads,
            ..ConverseOptions::default()
        };
        let mut c = Converser::load(&paths, &opts).unwrap();
        let persona = c
            .persona(Some(&f("voice_prompt.wav")), Some("Be brief."))
            .unwrap();
        c.start(&persona, StreamSampling::default(), 5).unwrap();
        let frame: Vec<f32> = (0..c.frame_size())
            .map(|i| (i as f32 * 0.021).sin() * 0.3)
            .collect();
        let mut out = 0;
        for i in 0..8 {
            COUNTING.with(|c| c.set(i > 3));
            out += usize::from(c.push(&frame).unwrap().is_some());
            COUNTING.with(|c| c.set(false));
        }
        assert_eq!(out, 6);
        let n = ALLOCS.with(|a| a.replace(0));
        assert_eq!(
            n, 0,
            "{n} allocations in 4 steady-state wavefront ticks at {threads} threads"
        );
    }
}
