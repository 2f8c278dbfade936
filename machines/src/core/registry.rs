//! Every machine's spec, in diagram order.

use crate::core::MachineSpec;

/// All machines voxlane ships.
pub fn all_specs() -> Vec<&'static MachineSpec> {
    vec![
        &crate::pool::lane_dispatch::SPEC,
        &crate::kernels::f32_matvec::SPEC,
        &crate::kernels::matmul::SPEC,
        &crate::kernels::attention::SPEC,
        &crate::kernels::conv1d::SPEC,
        &crate::kernels::conv_transpose1d::SPEC,
        &crate::kernels::lstm::SPEC,
        &crate::speech::mimi_init::SPEC,
        &crate::speech::mimi_session::encode::SPEC,
        &crate::speech::mimi_session::decode::SPEC,
        &crate::tts::text::SPEC,
        &crate::tts::acoustic::SPEC,
        &crate::tts::vocoder::SPEC,
        &crate::tts::utterance::SPEC,
    ]
}
