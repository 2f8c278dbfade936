//! The README's examples (`machines/examples/`), compiled here as modules
//! and run on small inputs: a custom machine hosted on the runtime with its
//! diagram and conformance, Mimi streamed through the session machines, and
//! the TTS service answering from a worker thread.

#[allow(dead_code)]
#[path = "../../../machines/examples/custom_machine.rs"]
mod custom_machine;
#[allow(dead_code)]
#[path = "../../../machines/examples/mimi_stream.rs"]
mod mimi_stream;
#[allow(dead_code)]
#[path = "../../../machines/examples/tts_service.rs"]
mod tts_service;

use std::path::PathBuf;

#[test]
fn custom_machine_takes_every_declared_edge_and_renders() {
    let mut fired = custom_machine::run(2);
    fired.extend(custom_machine::run(1));
    let spec = &custom_machine::SPEC;
    voxlane_tests::assert_declared(spec, &fired);
    voxlane_tests::assert_all_reached(spec, &fired);
    let mmd = voxlane_machines::core::mermaid::render_mermaid(spec);
    assert!(mmd.contains("idle --> summing : sum [guard_route_lanes] / effect_sum_lanes"));
}

#[test]
fn mimi_stream_round_trips_the_fixture() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/mimi-tiny");
    let (codes, pcm) = mimi_stream::run(
        dir.join("model.safetensors"),
        Some(dir.join("config.json")),
        2,
        0.5,
    )
    .unwrap();
    assert_eq!(codes.len(), 7);
    assert_eq!(pcm.len(), 7 * 1920);
    assert!(pcm.iter().all(|x| x.is_finite()) && pcm.iter().any(|&x| x != 0.0));
    // The same stream at one thread: the same codes.
    let (again, _) = mimi_stream::run(
        dir.join("model.safetensors"),
        Some(dir.join("config.json")),
        1,
        0.5,
    )
    .unwrap();
    assert_eq!(again, codes);
}

#[test]
fn tts_service_answers_from_its_worker() {
    let paths = tts_service::default_paths()
        .expect("the Kokoro model (cargo xtask fetch-models) for the TTS service example");
    let answers = tts_service::run(paths, &["Hello there.", "", "Goodbye."]).unwrap();
    assert!(answers[0].as_ref().is_ok_and(|a| a.len() > 12_000));
    assert!(
        answers[1].as_ref().is_err_and(|e| e.contains("empty")),
        "{:?}",
        answers[1].as_ref().err()
    );
    assert!(answers[2].as_ref().is_ok_and(|a| a.len() > 8_000));
}
