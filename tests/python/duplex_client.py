#!/usr/bin/env python3
"""A Kyutai-protocol client for `voxlane serve --duplex`, built on Kyutai's
own stack: `websockets` and `sphn`'s OpusStreamWriter / OpusStreamReader
(pip install websockets sphn).

It connects to /api/chat, waits for the handshake (kind 0), sends a WAV
(resampled to 24 kHz mono) as Ogg/Opus pages (kind 1) one 80 ms frame at a
time followed by a little silence, and reads back audio (kind 1, decoded
with sphn) and text (kind 2) until it has at least one audio message per
80 ms of input. A kind-5 error or a missing handshake fails. The last line
printed is a JSON report; the exit status is 0 only if every check passed.

    python3 tests/python/duplex_client.py --url 'ws://127.0.0.1:8998/api/chat?text_prompt=Hi' --wav user.wav
"""

import argparse
import asyncio
import json
import sys

import numpy as np
import sphn
import websockets

RATE = 24000
FRAME = 1920  # 80 ms at 24 kHz


def best_correlation(a, b, max_lag):
    """The highest normalised correlation of b lagging a by 0..max_lag samples."""
    best = -1.0
    for lag in range(0, max_lag):
        n = min(len(a), len(b) - lag)
        if n < FRAME:
            break
        x, y = a[:n], b[lag:lag + n]
        d = float(np.dot(x, y)) / (float(np.linalg.norm(x) * np.linalg.norm(y)) + 1e-9)
        best = max(best, d)
    return best


async def converse(args):
    data, sr = sphn.read(args.wav, sample_rate=RATE)
    pcm = np.asarray(data, dtype=np.float32).mean(axis=0)
    frames = -(-len(pcm) // FRAME)
    padded = np.zeros((frames + args.tail) * FRAME, dtype=np.float32)
    padded[: len(pcm)] = pcm

    report = {"handshake": False, "audio_messages": 0, "decoded_samples": 0,
              "text_messages": 0, "texts": [], "input_frames": frames}
    reader = sphn.OpusStreamReader(RATE)
    decoded = []

    async with websockets.connect(args.url, max_size=None) as ws:
        first = await asyncio.wait_for(ws.recv(), args.timeout)
        if not isinstance(first, bytes) or len(first) == 0 or first[0] != 0:
            kind = first[0] if isinstance(first, bytes) and first else None
            detail = first[1:].decode("utf-8", "replace") if kind == 5 else repr(first[:16])
            raise SystemExit(f"expected the handshake (kind 0), got kind {kind}: {detail}")
        report["handshake"] = True

        async def send():
            writer = sphn.OpusStreamWriter(RATE)
            for i in range(0, len(padded), FRAME):
                # sphn >= 0.2 returns the pages; 0.1 queues them for read_bytes().
                pages = writer.append_pcm(padded[i:i + FRAME])
                if pages is not None and len(pages) > 0:
                    await ws.send(b"\x01" + bytes(pages))
                while hasattr(writer, "read_bytes"):
                    chunk = writer.read_bytes()
                    if len(chunk) == 0:
                        break
                    await ws.send(b"\x01" + chunk)

        sender = asyncio.create_task(send())
        loop = asyncio.get_running_loop()
        deadline = loop.time() + args.timeout
        # The header message plus one page per answered frame.
        while report["audio_messages"] < frames + 1:
            left = deadline - loop.time()
            if left <= 0:
                break
            try:
                msg = await asyncio.wait_for(ws.recv(), left)
            except (asyncio.TimeoutError, websockets.ConnectionClosed):
                break
            if not isinstance(msg, bytes) or len(msg) == 0:
                continue
            kind, payload = msg[0], msg[1:]
            if kind == 1:
                report["audio_messages"] += 1
                # sphn >= 0.2 decodes here; 0.1 decodes on a thread (read_pcm below).
                pcm = reader.append_bytes(payload)
                if pcm is not None and len(pcm) > 0:
                    decoded.append(np.asarray(pcm, dtype=np.float32))
            elif kind == 2:
                report["text_messages"] += 1
                report["texts"].append(payload.decode("utf-8"))
            elif kind == 5:
                raise SystemExit(f"server error (kind 5): {payload.decode('utf-8', 'replace')}")
        await sender

    # sphn decodes on its own thread: collect what it has.
    for _ in range(200 if hasattr(reader, "read_pcm") else 0):
        out = reader.read_pcm()
        if out is not None and out.shape[-1] > 0:
            decoded.append(out)
        elif sum(len(d) for d in decoded) >= (frames - 1) * FRAME:
            break
        else:
            await asyncio.sleep(0.01)
    out = np.concatenate(decoded) if decoded else np.zeros(0, dtype=np.float32)
    report["decoded_samples"] = int(len(out))
    report["correlation"] = best_correlation(padded[: frames * FRAME], out, 3 * FRAME) if len(out) else 0.0

    failures = []
    if report["audio_messages"] < frames:
        failures.append(f"{report['audio_messages']} audio messages for {frames} frames of input")
    if report["decoded_samples"] < (frames - 1) * FRAME:
        failures.append(f"only {report['decoded_samples']} samples decoded")
    if report["text_messages"] < args.min_text:
        failures.append(f"{report['text_messages']} text messages, expected at least {args.min_text}")
    if not np.all(np.isfinite(out)):
        failures.append("non-finite audio")
    report["failures"] = failures
    return report


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--url", required=True, help="ws://HOST:PORT/api/chat?QUERY")
    p.add_argument("--wav", required=True, help="the user's audio (any rate; resampled to 24 kHz)")
    p.add_argument("--tail", type=int, default=2, help="frames of silence after the WAV (flush the model's delay)")
    p.add_argument("--min-text", type=int, default=0, help="text messages required")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for answers")
    args = p.parse_args()
    report = asyncio.run(converse(args))
    print(json.dumps(report))
    sys.exit(1 if report["failures"] else 0)


if __name__ == "__main__":
    main()
