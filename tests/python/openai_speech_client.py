"""OpenAI's own Python client against `voxlane serve`'s speech routes.

Asks for the same text in every response format, decodes each with ffmpeg,
streams a WAV, sends bad requests, and prints one JSON report line for the
Rust test to check (tests/tests/serve/speech.rs).
"""
import argparse
import json
import subprocess

import numpy as np
import openai

TEXT = "Hello there. This is a test of the speech server."


def decode(data: bytes, fmt: str) -> np.ndarray:
    raw = ["-f", "s16le", "-ar", "24000", "-ac", "1"] if fmt == "pcm" else []
    p = subprocess.run(
        ["ffmpeg", "-v", "error", *raw, "-i", "pipe:0", "-f", "s16le", "-ac", "1", "-ar", "24000", "pipe:1"],
        input=data, capture_output=True, check=True)
    if p.stderr:
        raise SystemExit(f"ffmpeg complained about {fmt}: {p.stderr.decode()}")
    return np.frombuffer(p.stdout, dtype="<i2").astype(np.float64) / 32768.0


def best_correlation(a: np.ndarray, b: np.ndarray, max_lag: int = 3000) -> float:
    """Largest normalised correlation of b against a over lags 0..max_lag (codec delay)."""
    best = -1.0
    n = min(len(a), len(b)) - max_lag
    x = a[:n]
    for lag in range(0, max_lag, 8):
        y = b[lag:lag + n]
        c = float(np.dot(x, y) / (np.linalg.norm(x) * np.linalg.norm(y) + 1e-12))
        best = max(best, c)
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base-url", required=True)
    args = ap.parse_args()
    client = openai.OpenAI(base_url=args.base_url, api_key="not-needed")
    report = {"formats": {}}
    pcm = {}
    for fmt in ["mp3", "opus", "flac", "wav", "pcm"]:
        r = client.audio.speech.create(model="tts-1", voice="alloy", input=TEXT, response_format=fmt)
        audio = decode(r.content, fmt)
        pcm[fmt] = audio
        report["formats"][fmt] = {
            "bytes": len(r.content),
            "content_type": r.response.headers.get("content-type"),
            "seconds": len(audio) / 24000,
            "rms": float(np.sqrt(np.mean(audio ** 2))),
        }
    # Lossless formats carry the same samples; lossy ones the same sound.
    report["wav_equals_pcm"] = bool(np.array_equal(pcm["wav"], pcm["pcm"]))
    report["flac_equals_wav"] = bool(np.array_equal(pcm["flac"], pcm["wav"]))
    report["mp3_correlation"] = best_correlation(pcm["wav"], pcm["mp3"])
    report["opus_correlation"] = best_correlation(pcm["wav"], pcm["opus"])

    # A streamed WAV (Kokoro-FastAPI's `stream` extra): OpenAI's unknown sizes.
    with client.audio.speech.with_streaming_response.create(
            model="kokoro", voice="jf_alpha(2)+jm_kumo", input=TEXT, response_format="wav",
            extra_body={"stream": True}) as r:
        parts = [b for b in r.iter_bytes()]
        streamed = b"".join(parts)
        report["stream_transfer_encoding"] = r.headers.get("transfer-encoding")
    report["stream_riff_size"] = int.from_bytes(streamed[4:8], "little")
    report["stream_data_size"] = int.from_bytes(streamed[40:44], "little")
    report["stream_seconds"] = len(decode(streamed, "wav")) / 24000

    errors = {}
    for name, kwargs in {
        "voice": dict(model="kokoro", voice="nobody", input=TEXT),
        "format": dict(model="kokoro", voice="alloy", input=TEXT, response_format="aac"),
        "speed": dict(model="kokoro", voice="alloy", input=TEXT, speed=4.0),
        "model": dict(model="gpt-4o-mini-tts", voice="alloy", input=TEXT),
        "empty": dict(model="kokoro", voice="alloy", input="   "),
    }.items():
        try:
            client.audio.speech.create(**kwargs)
            errors[name] = None
        except openai.APIStatusError as e:
            errors[name] = {"status": e.status_code, "code": getattr(e, "code", None)}
    report["errors"] = errors
    report["models"] = [m.id for m in client.models.list()]
    print(json.dumps(report))


if __name__ == "__main__":
    main()
