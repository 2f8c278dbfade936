//! The tts family (`machines/src/tts/`): the Kokoro machines obey their
//! tables and speak bit-identically to the data plane, the `Tts` library
//! works on the real model, and the data plane behind them (text frontend,
//! the network's front and back halves, fp32 and voxlane weight files)
//! matches onnxruntime and the fixtures.

mod kokoro_back_parity;
mod kokoro_fp32_model;
mod kokoro_front_parity;
mod kokoro_weights_file;
mod machine_kokoro;
mod tts_frontend;
