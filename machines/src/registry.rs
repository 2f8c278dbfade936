//! Every machine's spec, in diagram order.

use crate::core::MachineSpec;

/// All machines voxlane ships.
pub fn all_specs() -> Vec<&'static MachineSpec> {
    vec![
        &crate::lane_dispatch::SPEC,
        &crate::kernel_f32_matvec::SPEC,
        &crate::kernel_matmul::SPEC,
        &crate::kernel_attention::SPEC,
        &crate::conv1d::SPEC,
        &crate::conv_transpose1d::SPEC,
        &crate::lstm::SPEC,
        &crate::mimi_init::SPEC,
        &crate::mimi_encode_session::SPEC,
        &crate::mimi_decode_session::SPEC,
        &crate::kokoro_frontend::SPEC,
        &crate::kokoro_front::SPEC,
        &crate::kokoro_back::SPEC,
        &crate::kokoro_tts::SPEC,
    ]
}
