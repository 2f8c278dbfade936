#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = voxlane_fuzz::speech_request(data);
});
