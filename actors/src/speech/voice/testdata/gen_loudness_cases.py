"""Expected values for `loudness.rs`'s tests: pyloudnorm (0.2.0, numpy, scipy)
on synthetic signals that the Rust tests rebuild bit for bit.

    pip install pyloudnorm numpy scipy
    python3 gen_loudness_cases.py

Signals are made in float64 and rounded to float32 (as the Rust side does);
the meter is fed float64 so that it computes in float64 throughout, as
`loudness.rs` does. Prints one Rust tuple per case: (name, loudness).
"""

import numpy as np
import pyloudnorm as pyln

MASK = (1 << 64) - 1


def sine(rate, seconds, freq, amp):
    n = int(round(rate * seconds))
    i = np.arange(n, dtype=np.float64)
    return (amp * np.sin(2.0 * np.pi * freq * i / rate)).astype(np.float32)


def noise(rate, seconds, amp, seed):
    """A 64-bit LCG (Knuth's MMIX constants), top 53 bits -> [-1, 1)."""
    n = int(round(rate * seconds))
    out = np.empty(n, dtype=np.float64)
    s = seed
    for k in range(n):
        s = (s * 6364136223846793005 + 1442695040888963407) & MASK
        out[k] = (s >> 11) / float(1 << 53) * 2.0 - 1.0
    return (amp * out).astype(np.float32)


def cases():
    yield "sine_1k_48k", 48000, sine(48000, 2.0, 1000.0, 0.5)
    yield "sine_100_16k", 16000, sine(16000, 1.3, 100.0, 0.1)
    yield "sine_5k_44k1_one_block", 44100, sine(44100, 0.4, 5000.0, 0.25)
    yield "sine_440_8k_half_even", 8000, sine(8000, 0.65, 440.0, 0.7)
    yield "sine_60_22k05", 22050, sine(22050, 1.77, 60.0, 0.9)
    yield "noise_24k", 24000, noise(24000, 3.0, 0.3, 7)
    gated = np.concatenate(
        [
            sine(24000, 1.0, 1000.0, 0.5),
            sine(24000, 2.0, 300.0, 0.005),
            np.zeros(24000, dtype=np.float32),
        ]
    )
    yield "relative_gate_24k", 24000, gated
    yield "below_absolute_gate", 24000, sine(24000, 1.0, 1000.0, 1e-4)


for name, rate, x in cases():
    lufs = pyln.Meter(rate).integrated_loudness(x.astype(np.float64))
    print(f'("{name}", {float(lufs)!r}),')
