"""A load generator for `voxlane serve`'s `/v1/audio/speech` (Python's own
HTTP client, a process apart from the server): `--requests` POSTs kept
`--concurrency` at a time, each on its own connection (after a 503 a
client waits `--backoff-ms`). Every answer is read
to its end; a refused or dropped connection is counted, not hidden. Prints one
JSON line: statuses, latency and first-byte percentiles of the 200s, audio
seconds, wall seconds, throughput and each 503's Retry-After.

Used by the load test (tests/tests/serve/load.rs) and `cargo xtask bench serve`.
"""
import argparse
import http.client
import json
import threading
import time


def percentile(values: list, p: float) -> float:
    """The nearest-rank percentile (`p` in 0..100) of `values`, or None."""
    if not values:
        return None
    v = sorted(values)
    return v[min(len(v) - 1, max(0, int(round(p / 100.0 * len(v) + 0.5)) - 1))]


def one(host: str, port: int, body: bytes, path: str) -> dict:
    """One request on a fresh connection: status, seconds to the head, to the
    first body byte and to the end, body bytes and Retry-After."""
    t0 = time.perf_counter()
    conn = http.client.HTTPConnection(host, port, timeout=600)
    try:
        conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        head = time.perf_counter() - t0
        first = resp.read1(65536) if hasattr(resp, "read1") else resp.read(1)
        first_s = time.perf_counter() - t0
        rest = resp.read()
        return {
            "status": resp.status,
            "head_s": head,
            "first_s": first_s,
            "total_s": time.perf_counter() - t0,
            "bytes": len(first) + len(rest),
            "retry_after": resp.getheader("Retry-After"),
        }
    except (OSError, http.client.HTTPException) as e:
        return {"status": "error", "error": f"{type(e).__name__}: {e}", "total_s": time.perf_counter() - t0}
    finally:
        conn.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True, help="http://host:port")
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--input", default="Hello there, how are you today?")
    ap.add_argument("--voice", default="jf_alpha")
    ap.add_argument("--format", default="pcm")
    ap.add_argument("--stream", action="store_true")
    ap.add_argument("--path", default="/v1/audio/speech")
    ap.add_argument("--backoff-ms", type=float, default=0.0,
                    help="wait this long after a 503 (a client honouring a short Retry-After)")
    a = ap.parse_args()
    hostport = a.url.split("://", 1)[-1].rstrip("/")
    host, port = hostport.rsplit(":", 1)
    body = json.dumps({"model": "kokoro", "input": a.input, "voice": a.voice,
                       "response_format": a.format, "stream": a.stream}).encode()

    results, lock, next_i = [], threading.Lock(), [0]

    def worker() -> None:
        while True:
            with lock:
                if next_i[0] >= a.requests:
                    return
                next_i[0] += 1
            r = one(host, int(port), body, a.path)
            with lock:
                results.append(r)
            if r["status"] == 503 and a.backoff_ms > 0:
                time.sleep(a.backoff_ms / 1e3)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(a.concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0

    statuses = {}
    for r in results:
        statuses[str(r["status"])] = statuses.get(str(r["status"]), 0) + 1
    ok = [r for r in results if r["status"] == 200]
    busy = [r for r in results if r["status"] == 503]
    # pcm: s16le mono 24 kHz, so the bytes are the audio's length.
    audio_s = sum(r["bytes"] for r in ok) / 48000.0 if a.format == "pcm" else None
    ms = lambda v: None if v is None else round(v * 1e3, 1)
    print(json.dumps({
        "requests": len(results),
        "concurrency": a.concurrency,
        "statuses": statuses,
        "errors": [r["error"] for r in results if r["status"] == "error"][:5],
        "ok": len(ok),
        "latency_p50_ms": ms(percentile([r["total_s"] for r in ok], 50)),
        "latency_p99_ms": ms(percentile([r["total_s"] for r in ok], 99)),
        "first_byte_p50_ms": ms(percentile([r["first_s"] for r in ok], 50)),
        "first_byte_p99_ms": ms(percentile([r["first_s"] for r in ok], 99)),
        "busy_p99_ms": ms(percentile([r["total_s"] for r in busy], 99)),
        "retry_after": sorted({r["retry_after"] for r in busy}, key=str),
        "ok_sizes": sorted({r["bytes"] for r in ok}),
        "audio_s": audio_s,
        "wall_s": wall,
        "audio_per_wall": None if audio_s is None else audio_s / wall,
    }))


if __name__ == "__main__":
    main()
