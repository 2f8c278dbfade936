"""`voxlane serve`'s word timestamps, asked for over HTTP (Python's own
urllib client): `/v1/audio/speech/timestamps` whole (WAV)
and `/dev/captioned_speech` streamed as JSON lines (MP3). Each answer's audio
is decoded with ffmpeg; the words are checked against the audio itself: the
pause between sentences must be quiet and the words loud. Prints one JSON
report line for the Rust test (tests/tests/serve/speech.rs).
"""
import argparse
import base64
import json
import subprocess

import urllib.error
import urllib.request

import numpy as np

TEXT = "The end of the road is near. In 1999, I went to the store of the city."
WORDS = ["The", "end", "of", "the", "road", "is", "near", "In", "nineteen", "ninety-nine",
         "I", "went", "to", "the", "store", "of", "the", "city"]
RATE = 24000


def decode(data: bytes) -> np.ndarray:
    p = subprocess.run(
        ["ffmpeg", "-v", "error", "-i", "pipe:0", "-f", "s16le", "-ac", "1", "-ar", str(RATE), "pipe:1"],
        input=data, capture_output=True, check=True)
    if p.stderr:
        raise SystemExit(f"ffmpeg complained: {p.stderr.decode()}")
    return np.frombuffer(p.stdout, dtype="<i2").astype(np.float64) / 32768.0


def rms(x: np.ndarray, start: float, end: float) -> float:
    seg = x[int(start * RATE):int(end * RATE)]
    return float(np.sqrt(np.mean(seg ** 2))) if len(seg) else 0.0


def check(words: list, audio: np.ndarray, what: str) -> dict:
    got = [w["word"] for w in words]
    if got != WORDS:
        raise SystemExit(f"{what}: words {got}")
    duration = len(audio) / RATE
    for a, b in zip(words, words[1:]):
        if not (a["start"] < a["end"] <= b["start"] + 1e-9):
            raise SystemExit(f"{what}: {a} then {b} overlap or go back")
    if words[-1]["end"] > duration + 0.05:
        raise SystemExit(f"{what}: last word ends at {words[-1]['end']} of {duration:.3f} s")
    # The longest quiet stretch (25 ms frames under -40 dBFS) inside the
    # speech is the pause between the sentences: it must fall after "near"
    # starts and before "In" starts (Kokoro puts a sentence's pause on its
    # last phoneme, so "near" runs into it).
    frames = [rms(audio, i * 0.025, (i + 1) * 0.025) for i in range(int(duration / 0.025))]
    best, run, best_end = 0, 0, 0
    first, last = int(words[0]["end"] / 0.025), int(words[-1]["start"] / 0.025)
    for i in range(first, last):
        run = run + 1 if frames[i] < 0.01 else 0
        if run > best:
            best, best_end = run, i + 1
    pause = (round((best_end - best) * 0.025, 3), round(best_end * 0.025, 3))
    near, sentence = words[6], words[7]
    if not (near["start"] < pause[0] and pause[1] <= sentence["start"] + 0.1):
        raise SystemExit(f"{what}: the pause {pause} is not between {near} and {sentence}")
    spoken = min(rms(audio, w["start"], w["end"]) for w in words)
    return {"words": len(got), "duration": duration, "last_end": words[-1]["end"],
            "pause": pause, "quietest_word_rms": spoken}


def post(base: str, path: str, body: dict):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    return urllib.request.urlopen(req, timeout=120)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base-url", required=True)
    base = ap.parse_args().base_url
    report = {}
    with post(base, "/v1/audio/speech/timestamps",
              {"model": "kokoro", "input": TEXT, "response_format": "wav"}) as r:
        assert r.headers["content-type"].startswith("application/json"), r.headers
        whole = json.loads(r.read())
    audio = decode(base64.b64decode(whole["audio"]))
    report["whole"] = check(whole["timestamps"], audio, "whole")

    lines, data, words = 0, b"", []
    with post(base, "/dev/captioned_speech",
              {"model": "tts-1", "input": TEXT, "voice": "alloy",
               "response_format": "mp3", "stream": True}) as s:
        report["stream_content_type"] = s.headers["content-type"]
        for line in s:
            if not line.strip():
                continue
            obj = json.loads(line)
            lines += 1
            data += base64.b64decode(obj["audio"])
            words += obj["timestamps"]
    report["stream"] = check(words, decode(data), "stream")
    report["stream"]["lines"] = lines
    # The same text, voice and durations: the same times, whole or streamed.
    report["same_times"] = all(
        abs(a["start"] - b["start"]) < 1e-6 and abs(a["end"] - b["end"]) < 1e-6
        for a, b in zip(whole["timestamps"], words))
    try:
        post(base, "/v1/audio/speech/timestamps", {"model": "kokoro", "input": "  "})
        raise SystemExit("an empty input was accepted")
    except urllib.error.HTTPError as e:
        report["empty_status"] = e.code
        report["empty_code"] = json.loads(e.read())["error"]["code"]
    print(json.dumps(report))


if __name__ == "__main__":
    main()
