# Regenerates the seed corpora under tests/fuzz/corpus/ (python3 with numpy and onnx;
# fixtures from $VOXLANE_FIXTURES, default /work/shared/fixtures). The voxlane-format
# ONNX (*.vxonnx), VXLPACK (*.vxw) and all_dtypes.safetensors seeds were written by
# voxlane itself (onnx::convert, kernels::matmul::write_weights, write_safetensors)
# and are kept as committed; this script leaves them in place.
import io, os, sys, json, struct, wave, zipfile, shutil, pickle, types
import numpy as np
import onnx
from onnx import helper, TensorProto, numpy_helper

FX = os.environ.get('VOXLANE_FIXTURES', '/work/shared/fixtures')
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
C = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), 'corpus')
def out(t, name, data):
    d = os.path.join(C, t); os.makedirs(d, exist_ok=True)
    open(os.path.join(d, name), 'wb').write(data)
def cp(t, src, name=None):
    out(t, name or os.path.basename(src).replace('/', '_'), open(src, 'rb').read())

# npy
for f in ['kokoro/case0/durations.npy','kokoro/case0/tokens.npy','kokoro/case0/style.npy','kokoro/case0/f0.npy','personaplex-tiny/voice_prompt_codes.npy']:
    cp('npy', f'{FX}/{f}', f.replace('/', '_'))
for dt in ['<f4','<f8','<i4','<i8']:
    b = io.BytesIO(); np.save(b, (np.arange(6).reshape(2,3)*1.5).astype(dt)); out('npy', f'gen_{dt[1:]}.npy', b.getvalue())
b = io.BytesIO(); np.lib.format.write_array(b, np.zeros((2,2),'<f4'), version=(2,0)); out('npy','gen_v2.npy',b.getvalue())
b = io.BytesIO(); np.save(b, np.zeros((0,),'<f4')); out('npy','gen_empty.npy',b.getvalue())
b = io.BytesIO(); np.save(b, np.float32(3.0)); out('npy','gen_scalar.npy',b.getvalue())

# wav
def wavbytes(rate, ch, sampw, frames):
    b = io.BytesIO(); w = wave.open(b,'wb'); w.setnchannels(ch); w.setsampwidth(sampw); w.setframerate(rate)
    w.writeframes(frames); w.close(); return b.getvalue()
t = np.arange(400)/16000.0
tone = (np.sin(2*np.pi*440*t)*12000).astype('<i2')
out('wav','mono16k.wav', wavbytes(16000,1,2,tone.tobytes()))
out('wav','stereo24k.wav', wavbytes(24000,2,2,np.repeat(tone[:200],2).tobytes()))
# float32 WAV (format 3) and extensible (0xFFFE) by hand
def riff(fmt_tag, ch, rate, bits, data, extra=b''):
    ba = ch*bits//8
    fmt = struct.pack('<HHIIHH', fmt_tag, ch, rate, rate*ba, ba, bits) + extra
    body = b'WAVE' + b'fmt ' + struct.pack('<I', len(fmt)) + fmt + b'LIST' + struct.pack('<I',4) + b'INFO' + b'data' + struct.pack('<I', len(data)) + data
    return b'RIFF' + struct.pack('<I', len(body)) + body
out('wav','float32.wav', riff(3,1,8000,32,(np.sin(np.arange(300)/7)*0.5).astype('<f4').tobytes()))
out('wav','extensible.wav', riff(0xFFFE,1,48000,16,tone[:300].tobytes(), struct.pack('<HHI16s',22,16,4,b'\x01\x00\x00\x00\x00\x00\x10\x00\x80\x00\x00\xaa\x00\x38\x9b\x71')))
streamed = bytearray(wavbytes(8000,1,2,tone[:100].tobytes())); streamed[40:44]=b'\xff\xff\xff\xff'; out('wav','streamed.wav', bytes(streamed))

# onnx
X = helper.make_tensor_value_info('x', TensorProto.FLOAT, ['n', 4])
Y = helper.make_tensor_value_info('y', TensorProto.FLOAT, [None, 2])
W = numpy_helper.from_array(np.arange(8, dtype=np.float32).reshape(4,2), 'w')
Wq = numpy_helper.from_array(np.arange(-4,4, dtype=np.int8).reshape(4,2), 'wq')
B = helper.make_tensor('b', TensorProto.FLOAT, [2], [0.5, -0.5])  # float_data
I = helper.make_tensor('shape', TensorProto.INT64, [2], [1, -1])  # int64_data
H = helper.make_tensor('h', TensorProto.FLOAT16, [2], np.array([1.0, 2.0], np.float16).view(np.uint16).astype(np.int32).tolist())
D = helper.make_tensor('d', TensorProto.DOUBLE, [1], [3.0])
n1 = helper.make_node('MatMul', ['x','w'], ['m'], name='mm')
n2 = helper.make_node('Add', ['m','b'], ['a'], name='add')
n3 = helper.make_node('Reshape', ['a','shape'], ['r'], name='reshape')
cst = helper.make_node('Constant', [], ['c'], name='const', value=helper.make_tensor('cv', TensorProto.FLOAT, [1], [2.0]))
n4 = helper.make_node('LeakyRelu', ['r'], ['y'], name='act', alpha=0.1)
n5 = helper.make_node('Pad', ['x'], ['p'], name='pad', pads=[0,1,0,1], mode='constant', axis=0)
then_g = helper.make_graph([helper.make_node('Identity',['c'],['t'])], 'then', [], [helper.make_tensor_value_info('t', TensorProto.FLOAT, [1])])
n6 = helper.make_node('If', ['cond'], ['z'], name='if', then_branch=then_g, else_branch=then_g)
g = helper.make_graph([n1,n2,n3,cst,n4,n5,n6], 'g', [X], [Y], [W,Wq,B,I,H,D], value_info=[helper.make_tensor_value_info('m', TensorProto.FLOAT, ['n',2])])
m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 17), helper.make_opsetid('com.microsoft', 1)], producer_name='voxlane-seed')
m.ir_version = 8
out('onnx','tiny.onnx', m.SerializeToString())
g3 = helper.make_graph([n1,n2,n3,cst,n4,n5], 'g3', [X], [Y], [W,Wq,B,I,H])
m3 = helper.make_model(g3, opset_imports=[helper.make_opsetid('', 17)]); m3.ir_version = 8
out('onnx','rich.onnx', m3.SerializeToString())
g2 = helper.make_graph([n1], 'g2', [X], [helper.make_tensor_value_info('m', TensorProto.FLOAT, [None,2])], [W])
m2 = helper.make_model(g2, opset_imports=[helper.make_opsetid('', 13)]); m2.ir_version = 7
out('onnx','matmul.onnx', m2.SerializeToString())

# voices npz
rng = np.random.default_rng(0)
b = io.BytesIO(); np.savez(b, af_a=rng.standard_normal((3,1,256)).astype('<f4'), am_b=rng.standard_normal((3,1,256)).astype('<f4')); out('voices','stored.npz', b.getvalue())
b = io.BytesIO(); np.savez_compressed(b, jf_c=np.zeros((2,256),'<f4'), jm_d=np.ones((2,1,256),'<f4')); out('voices','deflate.npz', b.getvalue())

# json
cp('vocab_json', os.path.expanduser('~/.cache/voxlane/kokoro-vocab.json'), 'kokoro-vocab.json')
out('vocab_json','small.json', json.dumps({"vocab": {"a": 1, "b": 2, "ˈ": 3, " ": 16}}).encode())
cp('mimi_config', f'{FX}/mimi-tiny/config.json', 'mimi-tiny.json')
cp('moshi_config', f'{FX}/moshi-tiny/config.json', 'moshi-tiny.json')
cp('moshi_config', f'{FX}/personaplex-tiny/config.json', 'personaplex-tiny.json')
out('mimi_config','default.json', b'{}')
out('moshi_config','default.json', b'{"lm_config": {}}')

# sentencepiece
cp('sentencepiece', os.path.join(REPO, 'actors/src/text/testdata/spm_byte_fallback.model'))

# torch .pt: the fixture, and synthetic ones pickled through stand-in torch modules
cp('torch_pt', f'{FX}/personaplex-tiny/voice_prompt.pt')
cp('voice_prompt', f'{FX}/personaplex-tiny/voice_prompt.pt')
cp('voice_prompt', f'{FX}/personaplex-tiny/voice_prompt_embeddings.safetensors')
cp('safetensors', f'{FX}/personaplex-tiny/voice_prompt_embeddings.safetensors')
z = zipfile.ZipFile(f'{FX}/personaplex-tiny/voice_prompt.pt')
out('pickle','voice_prompt.pkl', z.read('voice_prompt/data.pkl'))

tu = types.ModuleType('torch._utils'); tm = types.ModuleType('torch'); col = __import__('collections')
sys.modules['torch._utils'] = tu; sys.modules['torch'] = tm
def _rebuild_tensor_v2(*a): pass
def _rebuild_parameter(*a): pass
_rebuild_tensor_v2.__module__ = 'torch._utils'; _rebuild_parameter.__module__ = 'torch._utils'
tu._rebuild_tensor_v2 = _rebuild_tensor_v2; tu._rebuild_parameter = _rebuild_parameter
for cls in ['FloatStorage','HalfStorage','BFloat16Storage','LongStorage','IntStorage','ShortStorage','CharStorage','ByteStorage','BoolStorage','DoubleStorage']:
    c = type(cls, (), {}); c.__module__ = 'torch'; setattr(tm, cls, c)
class Storage:
    def __init__(s, cls, key, numel): s.cls, s.key, s.numel = cls, key, numel
class T:
    def __init__(s, st, off, size, stride): s.a = (st, off, size, stride, False, col.OrderedDict())
    def __reduce__(s): return (_rebuild_tensor_v2, s.a)
class P:
    def __init__(s, t): s.t = t
    def __reduce__(s): return (_rebuild_parameter, (s.t, False, col.OrderedDict()))
class Pk(pickle.Pickler):
    def persistent_id(s, o):
        if isinstance(o, Storage): return ('storage', o.cls, o.key, 'cpu', o.numel)
        return None
def pkl(obj, proto=2):
    b = io.BytesIO(); Pk(b, protocol=proto).dump(obj); return b.getvalue()
def ptzip(obj, storages, proto=2, compress=zipfile.ZIP_STORED, big=False):
    b = io.BytesIO(); zz = zipfile.ZipFile(b, 'w', compress)
    zz.writestr('archive/data.pkl', pkl(obj, proto)); zz.writestr('archive/byteorder', 'big' if big else 'little'); zz.writestr('archive/version', '3\n')
    for k, v in storages.items(): zz.writestr(f'archive/data/{k}', v)
    zz.close(); return b.getvalue()
f32 = Storage(tm.FloatStorage, '0', 12); i64 = Storage(tm.LongStorage, '1', 6); bf = Storage(tm.BFloat16Storage, '2', 4)
objs = {
 'dict': (col.OrderedDict([('embeddings', T(f32, 0, (3,1,1,4), (4,4,4,1))), ('cache', T(i64, 0, (1,3,2), (6,2,1)))]), 2),
 'strided': ({'t': T(f32, 1, (2,3), (1,4)), 'p': P(T(bf, 0, (2,2), (2,1))), 'nested': [T(i64, 2, (2,), (2,)), {'x': 1.5, 'y': 'z'}]}, 4),
}
sto = {'0': np.arange(12, dtype='<f4').tobytes(), '1': np.arange(6, dtype='<i8').tobytes(), '2': np.arange(4, dtype='<u2').tobytes()}
for name, (o, proto) in objs.items():
    out('torch_pt', f'{name}.pt', ptzip(o, sto, proto))
    out('pickle', f'{name}.pkl', pkl(o, proto))
out('torch_pt', 'deflate_big_endian.pt', ptzip(objs['dict'][0], {k: v[::-1] for k, v in sto.items()}, 2, zipfile.ZIP_DEFLATED, True))
# pickle seeds whose storages match the synthetic zip's (keys 0..5, sizes 544, 8448, 64, 1, 0, 4096)
s0 = Storage(tm.LongStorage, '1', 68); s1 = Storage(tm.FloatStorage, '0', 2112); s5 = Storage(tm.HalfStorage, '5', 2048)
out('pickle', 'synthetic_fit.pkl', pkl({'cache': T(s0, 0, (1,17,4), (68,4,1)), 'embeddings': T(s1, 0, (33,1,1,64), (64,64,64,1)), 'h': T(s5, 8, (4,8), (1,16))}, 2))

# voice prompt WAVs
out('voice_prompt','mono16k.wav', wavbytes(16000,1,2,(np.sin(2*np.pi*440*np.arange(8000)/16000)*12000).astype('<i2').tobytes()))
out('voice_prompt','stereo24k.wav', wavbytes(24000,2,2,np.repeat((np.sin(np.arange(10000)/5)*9000).astype('<i2'),2).tobytes()))

# ogg_opus: Kyutai's sphn streams (what the duplex client sends) and a hand-made
# packet continued across pages; the first byte picks the reader's chunk size.
def ogg_crc(b):
    crc = 0
    for x in b:
        crc ^= x << 24
        for _ in range(8):
            crc = ((crc << 1) ^ 0x04c11db7) & 0xffffffff if crc & 0x80000000 else (crc << 1) & 0xffffffff
    return crc
def ogg_page(seq, flags, segs, body):
    h = b'OggS' + bytes([0, flags]) + struct.pack('<QII', 0, 7, seq) + b'\0\0\0\0' + bytes([len(segs)]) + bytes(segs)
    p = bytearray(h + body); p[22:26] = struct.pack('<I', ogg_crc(p)); return bytes(p)
head = b'OpusHead' + bytes([1, 2]) + struct.pack('<HIh', 312, 48000, 0) + b'\0'
out('ogg_opus', 'continued.ogg', b'\x02' + ogg_page(0, 2, [19], head)
    + ogg_page(1, 0, [255, 255], bytes(510)) + ogg_page(2, 1, [255, 10], bytes(265)))
try:
    import sphn
    def sphn_stream(rate, frames):
        w = sphn.OpusStreamWriter(rate); n = rate * 80 // 1000
        pcm = (0.3 * np.sin(2 * np.pi * 440 * np.arange(n * frames) / rate)).astype(np.float32)
        return b''.join(bytes(w.append_pcm(pcm[i * n:(i + 1) * n])) for i in range(frames))
    out('ogg_opus', 'sphn_24k_3frames.ogg', b'\x00' + sphn_stream(24000, 3))
    out('ogg_opus', 'sphn_24k_chunked.ogg', b'\x05' + sphn_stream(24000, 2))
    out('ogg_opus', 'sphn_48k_1frame.ogg', b'\x01' + sphn_stream(48000, 1))
except ImportError:
    print('sphn missing: the ogg_opus sphn seeds were left as committed')
