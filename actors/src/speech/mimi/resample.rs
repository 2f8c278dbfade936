//! Learnt conv resampling between the encoder rate (25 Hz) and the code rate
//! (12.5 Hz): moshi `ConvDownsample1d(learnt=True)` is a causal stride-`s`
//! conv of kernel `2s` without bias whose history starts as the first sample
//! repeated (`pad_mode="replicate"`); `ConvTrUpsample1d` is a causal
//! channel-wise (`groups = dim`, moshi's `upsample_channel_wise_bug`)
//! transposed conv of kernel `2s` without bias.

use super::contract::BindContract;
use super::conv::{CausalConv, CausalConvTr, ConvRoute};
use super::error::MimiError;
use super::weights::MimiWeights;

/// Name of the downsampling conv's weight.
pub const DOWNSAMPLE_WEIGHT: &str = "downsample.conv.conv.conv.weight";

/// The downsampling conv `downsample.conv.conv.conv.weight` `[dim, dim, 2s]`
/// (q8_0 when `contract` says so).
pub fn downsample(
    dim: usize,
    stride: usize,
    w: &mut MimiWeights,
    contract: &BindContract,
) -> Result<CausalConv, MimiError> {
    let weight = w.take(DOWNSAMPLE_WEIGHT)?;
    // Streaming steps produce one code frame: the matmul route.
    let route = ConvRoute::Matmul.with_format(contract.format_of(DOWNSAMPLE_WEIGHT));
    CausalConv::new(
        dim,
        dim,
        2 * stride,
        stride,
        1,
        1,
        &weight,
        None,
        true,
        route,
    )
}

/// The upsampling transposed conv `upsample.convtr.convtr.convtr.weight` `[dim, 1, 2s]`.
pub fn upsample(dim: usize, stride: usize, w: &mut MimiWeights) -> Result<CausalConvTr, MimiError> {
    let weight = w.take("upsample.convtr.convtr.convtr.weight")?;
    // Channel-wise: the kernel's depthwise route (the matmul route needs groups 1).
    CausalConvTr::new(
        dim,
        dim,
        2 * stride,
        stride,
        dim,
        &weight,
        None,
        ConvRoute::Kernel,
    )
}
