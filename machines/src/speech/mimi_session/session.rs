//! The sessions `mimi_init` opens and the session machines run: a bound
//! model plus one side's streaming state, allocated once at bind time.

use std::sync::Arc;
use voxlane_actors::speech::mimi::{DecoderState, EncoderState, MimiError, MimiModel};
use voxlane_runtime::Fork;

/// Which direction a session codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// PCM in, codes out.
    Encode,
    /// Codes in, PCM out.
    Decode,
}

impl Side {
    /// The side's name in errors and replies.
    pub fn name(self) -> &'static str {
        match self {
            Self::Encode => "encode",
            Self::Decode => "decode",
        }
    }
}

/// An encode session: the model and an encoder state for steps of up to `max_frames` frames.
#[derive(Debug)]
pub struct EncodeSession {
    model: Arc<MimiModel>,
    state: EncoderState,
    max_frames: usize,
}

/// A decode session: the model and a decoder state for steps of up to `max_frames` frames.
#[derive(Debug)]
pub struct DecodeSession {
    model: Arc<MimiModel>,
    state: DecoderState,
    max_frames: usize,
}

/// A session of either side, as `bind_session` produces it.
#[derive(Debug)]
pub enum MimiSession {
    /// See [`EncodeSession`].
    Encode(EncodeSession),
    /// See [`DecodeSession`].
    Decode(DecodeSession),
}

impl MimiSession {
    /// Which side it codes.
    pub fn side(&self) -> Side {
        match self {
            Self::Encode(_) => Side::Encode,
            Self::Decode(_) => Side::Decode,
        }
    }

    /// Bytes of streaming state it holds.
    pub fn bytes(&self) -> usize {
        match self {
            Self::Encode(s) => s.bytes(),
            Self::Decode(s) => s.bytes(),
        }
    }
}

impl EncodeSession {
    /// Allocate the encoder state of `model` for steps of up to `max_frames` frames.
    pub fn open(model: &Arc<MimiModel>, max_frames: usize) -> Result<Self, MimiError> {
        Ok(Self {
            state: model.encoder_state(max_frames)?,
            model: model.clone(),
            max_frames: max_frames.max(1),
        })
    }

    /// The model.
    pub fn model(&self) -> &Arc<MimiModel> {
        &self.model
    }

    /// The most code frames one step may carry.
    pub fn max_frames(&self) -> usize {
        self.max_frames
    }

    /// Bytes of streaming state held.
    pub fn bytes(&self) -> usize {
        4 * self.state.floats()
    }

    /// Encode `pcm` (whole frames) into `codes: [K, frames]`; returns the frames.
    pub fn step(
        &mut self,
        pool: &impl Fork,
        pcm: &[f32],
        codes: &mut [u32],
    ) -> Result<usize, MimiError> {
        self.model.encode_step(pool, &mut self.state, pcm, codes)
    }

    /// Back to the start of a stream.
    pub fn reset(&mut self) {
        self.state.reset();
    }
}

impl DecodeSession {
    /// Allocate the decoder state of `model` for steps of up to `max_frames` frames.
    pub fn open(model: &Arc<MimiModel>, max_frames: usize) -> Result<Self, MimiError> {
        Ok(Self {
            state: model.decoder_state(max_frames)?,
            model: model.clone(),
            max_frames: max_frames.max(1),
        })
    }

    /// The model.
    pub fn model(&self) -> &Arc<MimiModel> {
        &self.model
    }

    /// The most code frames one step may carry.
    pub fn max_frames(&self) -> usize {
        self.max_frames
    }

    /// Bytes of streaming state held.
    pub fn bytes(&self) -> usize {
        4 * self.state.floats()
    }

    /// Decode `codes: [K, frames]` into `pcm` (`frames · frame_size` samples).
    pub fn step(
        &mut self,
        pool: &impl Fork,
        codes: &[u32],
        frames: usize,
        pcm: &mut [f32],
    ) -> Result<(), MimiError> {
        self.model
            .decode_step(pool, &mut self.state, codes, frames, pcm)
    }

    /// Back to the start of a stream.
    pub fn reset(&mut self) {
        self.state.reset();
    }
}
