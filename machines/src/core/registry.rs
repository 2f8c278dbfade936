//! Every machine's spec, by family, in diagram order. A new machine is
//! listed here once: `voxlane machines`, `voxlane diagram NAME`, the
//! generated `diagrams/` and the snapshot test all read this list.

use crate::core::MachineSpec;

/// One family of machines: a folder of `machines/src/`, of `diagrams/` and
/// of `snapshots/`, and one integration-test target in `tests/tests/`.
#[derive(Debug, Clone, Copy)]
pub struct Family {
    /// The folder name (`kernels`, `tts`, ...).
    pub name: &'static str,
    /// One sentence on what the family holds.
    pub doc: &'static str,
    /// Its machines, in diagram order.
    pub specs: &'static [&'static MachineSpec],
}

/// Every family voxlane ships, in diagram order.
pub const FAMILIES: &[Family] = &[
    Family {
        name: "pool",
        doc: "The lane pool's dispatcher.",
        specs: &[&crate::pool::lane_dispatch::SPEC],
    },
    Family {
        name: "kernels",
        doc: "The compute kernels: one shared kernel machine, specialised per kernel.",
        specs: &[
            &crate::kernels::f32_matvec::SPEC,
            &crate::kernels::matmul::SPEC,
            &crate::kernels::attention::SPEC,
            &crate::kernels::conv1d::SPEC,
            &crate::kernels::conv_transpose1d::SPEC,
            &crate::kernels::lstm::SPEC,
        ],
    },
    Family {
        name: "speech",
        doc: "The Mimi codec (setup, streaming encode/decode sessions), the Moshi/PersonaPlex LM (executor, sampler) and the conversation wavefront that pipelines them.",
        specs: &[
            &crate::speech::mimi_init::SPEC,
            &crate::speech::mimi_session::encode::SPEC,
            &crate::speech::mimi_session::decode::SPEC,
            &crate::speech::moshi_executor::SPEC,
            &crate::speech::logits_sampler::SPEC,
            &crate::speech::wavefront::SPEC,
        ],
    },
    Family {
        name: "tts",
        doc: "Kokoro text to speech: the text, acoustic and vocoder stages and the utterance that drives them.",
        specs: &[
            &crate::tts::text::SPEC,
            &crate::tts::acoustic::SPEC,
            &crate::tts::vocoder::SPEC,
            &crate::tts::utterance::SPEC,
        ],
    },
];

/// All machines voxlane ships, family by family.
pub fn all_specs() -> Vec<&'static MachineSpec> {
    FAMILIES
        .iter()
        .flat_map(|f| f.specs.iter().copied())
        .collect()
}
