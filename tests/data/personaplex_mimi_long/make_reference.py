"""NVIDIA PersonaPlex's Mimi (its fork of moshi) on the personaplex-tiny fixture,
streaming, on user.wav tiled 3x (11.6 s: past the transformer's 250-step ring),
frame by frame as offline.py does. Saves codes [1, 8, T] and the streaming
decode of those codes [T*1920]."""
import json, os, sys
import numpy as np
import torch
HERE = "/work/ppref"
sys.path.insert(0, os.path.join(HERE, "src", "moshi"))
from moshi.modules import SEANetEncoder, SEANetDecoder, transformer
from moshi.quantization import SplitResidualVectorQuantizer
from moshi.models.compression import MimiModel
from safetensors.torch import load_file
import sphn

torch.set_num_threads(1)
FIX = "/work/shared/fixtures/personaplex-tiny"
cfg = json.load(open(os.path.join(FIX, "config.json")))["mimi_config"]
enc = SEANetEncoder(**cfg["seanet"]); dec = SEANetDecoder(**cfg["seanet"])
et = transformer.ProjectedTransformer(device="cpu", **cfg["transformer"])
dt = transformer.ProjectedTransformer(device="cpu", **cfg["transformer"])
q = SplitResidualVectorQuantizer(**cfg["quantizer"])
m = MimiModel(enc, dec, q, channels=1, sample_rate=cfg["sample_rate"], frame_rate=cfg["frame_rate"],
              encoder_frame_rate=cfg["sample_rate"] / enc.hop_length, causal=True, resample_method="conv",
              encoder_transformer=et, decoder_transformer=dt)
m.eval()
sd = load_file(os.path.join(FIX, "mimi.safetensors"))
missing, unexpected = m.load_state_dict(sd, strict=False)
print("missing", missing[:5], "unexpected", unexpected[:5])
m.set_num_codebooks(8)
pcm, sr = sphn.read(os.path.join(FIX, "user.wav"))
pcm = np.tile(pcm[0], 3).astype(np.float32)
n = (len(pcm) + 1919) // 1920
pcm = np.concatenate([pcm, np.zeros(n * 1920 - len(pcm), np.float32)])
codes = []
with torch.no_grad(), m.streaming(1):
    for i in range(n):
        c = m.encode(torch.from_numpy(pcm[i*1920:(i+1)*1920]).view(1, 1, -1))
        codes.append(c)
codes = torch.cat(codes, dim=-1)
out = []
with torch.no_grad(), m.streaming(1):
    for i in range(n):
        out.append(m.decode(codes[:, :, i:i+1])[0, 0].numpy())
np.save(os.path.join(HERE, "mimi", "long_codes.npy"), codes.numpy().astype(np.int64))
np.save(os.path.join(HERE, "mimi", "long_decoded.npy"), np.concatenate(out).astype(np.float32))
print(codes.shape, n)
