"""onnxruntime reference for `cargo xtask bench kokoro`.

Runs the same ONNX model on the same token chunks and style rows voxlane
used (read from a JSON file), with `threads` intra-op threads and one
inter-op thread, and prints one JSON line: synthesis seconds per text,
audio seconds, first-audio seconds, peak RSS.
"""

import json
import resource
import sys
import time

import numpy as np
import onnxruntime as ort


def main() -> None:
    model, job_path, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
    job = json.load(open(job_path))
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.add_session_config_entry("session.intra_op.allow_spinning", "1")
    sess = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])

    def run(chunks):
        """Synthesize every chunk; returns (total s, first-chunk s, samples)."""
        t0 = time.perf_counter()
        first, samples = None, 0
        for c in chunks:
            audio = sess.run(
                None,
                {
                    "tokens": np.array([c["tokens"]], dtype=np.int64),
                    "style": np.array([c["style"]], dtype=np.float32),
                    "speed": np.array([1.0], dtype=np.float32),
                },
            )[0]
            samples += audio.shape[-1]
            if first is None:
                first = time.perf_counter() - t0
        return time.perf_counter() - t0, first, samples

    out = {}
    for name in ("long", "short"):
        run(job[name])  # warm-up
        # Best of the runs, each measure on its own (as voxlane's side does).
        runs = [run(job[name]) for _ in range(job["reps"])]
        out[name] = {
            "secs": min(r[0] for r in runs),
            "first_secs": min(r[1] for r in runs),
            "samples": runs[-1][2],
        }
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    out["onnxruntime"] = ort.__version__
    print(json.dumps(out))


if __name__ == "__main__":
    main()
