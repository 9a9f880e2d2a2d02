#!/usr/bin/python3
"""Writes the seed corpora of the fuzz targets into tests/fuzz/corpus/<target>/.

The committed files are this script's output; run it again after changing it
(it rewrites the corpus folders it owns).  Seeds are small valid inputs and a
few edge cases; the input layout of each target is described at the top of
tests/fuzz/fuzz_<target>.cpp.
"""
import json
import pathlib
import shutil
import struct

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CORPUS = HERE / 'corpus'


def write(target: str, name: str, data: bytes | str) -> None:
    path = CORPUS / target / name
    path.write_bytes(data.encode() if isinstance(data, str) else data)


# --------------------------------------------------------------------------- safetensors
DTYPE_SIZE = {'F32': 4, 'F16': 2, 'BF16': 2, 'F64': 8, 'I64': 8, 'I32': 4, 'I16': 2, 'I8': 1, 'U8': 1,
              'BOOL': 1, 'F8_E4M3': 1, 'F8_E5M2': 1}


def safetensors(tensors: list[tuple[str, str, list[int]]], metadata=None, pad=True) -> tuple[bytes, bytes]:
    """(header JSON, data section) of a valid file; tensor bytes avoid '}' for the split layout."""
    header, data = {}, b''
    if metadata is not None:
        header['__metadata__'] = metadata
    for name, dtype, shape in tensors:
        n = DTYPE_SIZE[dtype]
        for d in shape:
            n *= d
        blob = bytes((i * 7 + 1) % 120 for i in range(n))
        header[name] = {'dtype': dtype, 'shape': shape, 'data_offsets': [len(data), len(data) + n]}
        data += blob
    text = json.dumps(header, separators=(',', ':')).encode()
    if pad:   # the reference writer pads the header with spaces to a multiple of 8
        text += b' ' * (-len(text) % 8)
    return text, data


def safetensors_seeds() -> None:
    def raw(name, header, data):
        write('safetensors', name, b'\x00' + struct.pack('<Q', len(header)) + header + data)

    def split(name, header, data):   # odd byte 0: the target writes the length itself
        write('safetensors', name, b'\x01' + header.rstrip() + data)

    two = safetensors([('model.embed_tokens.weight', 'F32', [2, 3]), ('lm_head.weight', 'F16', [4])],
                      metadata={'format': 'pt'})
    raw('two_tensors', *two)
    split('two_tensors_split', *two)
    raw('dtypes', *safetensors([('a', 'BF16', [2, 2]), ('b', 'I8', [3]), ('c', 'BOOL', [1]), ('d', 'F64', [1]),
                                ('e', 'I64', [1]), ('f', 'U8', [2]), ('g', 'F8_E4M3', [1]), ('h', 'I32', [1])]))
    raw('empty_header', b'{}', b'')
    raw('zero_size_and_scalar', *safetensors([('empty', 'F32', [0, 4]), ('scalar', 'F32', []),
                                              ('row', 'F16', [1, 1, 2])]))
    raw('metadata_only', *safetensors([], metadata={'format': 'pt', 'note': 'x'}))
    # Edge: a header length past the end, and overlapping ranges.
    write('safetensors', 'length_past_end', b'\x00' + struct.pack('<Q', 1 << 20) + b'{}')
    bad = b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}'
    raw('overlap', bad, bytes(8))


# --------------------------------------------------------------------------- config.json
BASE = {'architectures': ['LlamaForCausalLM'], 'hidden_size': 64, 'intermediate_size': 128,
        'num_hidden_layers': 4, 'num_attention_heads': 4, 'num_key_value_heads': 2, 'rms_norm_eps': 1e-5,
        'rope_theta': 10000.0, 'max_position_embeddings': 256, 'vocab_size': 100, 'bos_token_id': 1,
        'eos_token_id': 2, 'tie_word_embeddings': True, 'torch_dtype': 'float32'}


def config_seeds() -> None:
    def cfg(name, **extra):
        j = dict(BASE)
        for k, v in extra.items():
            if v is None:
                j.pop(k, None)
            else:
                j[k] = v
        write('config', name + '.json', json.dumps(j, indent=1))

    cfg('llama')
    cfg('mistral', architectures=['MistralForCausalLM'], sliding_window=64, head_dim=16)
    cfg('qwen2', architectures=None, model_type='qwen2', attention_bias=True, use_sliding_window=False,
        sliding_window=128, eos_token_id=[2, 3], partial_rotary_factor=0.5)
    cfg('linear', rope_scaling={'type': 'linear', 'factor': 2.0})
    cfg('dynamic', rope_scaling={'rope_type': 'dynamic', 'factor': 2.0})
    cfg('yarn', rope_scaling={'rope_type': 'yarn', 'factor': 4.0, 'original_max_position_embeddings': 64,
                              'beta_fast': 32, 'beta_slow': 1, 'mscale': 0.707, 'mscale_all_dim': 1.0,
                              'truncate': False})
    cfg('llama3', rope_scaling={'rope_type': 'llama3', 'factor': 8.0, 'low_freq_factor': 1.0,
                                'high_freq_factor': 4.0, 'original_max_position_embeddings': 64})
    cfg('rope_parameters_v5', rope_theta=None,
        rope_parameters={'rope_type': 'ntk', 'factor': 2.0, 'rope_theta': 500000.0})
    cfg('rerope', rope_scaling={'rope_type': 'rerope', 'window': 32})
    cfg('leaky_rerope', rope_scaling={'rope_type': 'leaky_rerope', 'window': 32, 'factor': 2.0})
    cfg('self_extend', rope_scaling={'rope_type': 'self_extend', 'group': 4, 'window': 32})
    cfg('hwfa', reach_attention={'logn_train_len': 256, 'qk_norm': 'cos', 'cos_n': 256.0, 'window': 32, 'sinks': 4,
                                 'layers': {'3': {'window': 0, 'rope': False, 'logn': True}}})
    cfg('alibi', reach_attention={'alibi_max_bias': 8.0, 'qk_norm': 'key'})
    write('config', 'not_an_object.json', '[1, 2, 3]')
    write('config', 'truncated.json', json.dumps(BASE)[:60])


# --------------------------------------------------------------------------- tokenizer.json
def small_tokenizer(src: str, keep: int) -> str:
    """tests/data/tokenizer/<src>.json cut to ids < keep (merges whose parts stay), all else as it is."""
    j = json.loads((ROOT / 'tests/data/tokenizer' / f'{src}.json').read_text())
    m = j['model']
    m['vocab'] = {t: i for t, i in m['vocab'].items() if i < keep}
    merges = []
    for mg in m['merges']:
        a, b = mg.split(' ', 1) if isinstance(mg, str) else mg
        if a in m['vocab'] and b in m['vocab'] and a + b in m['vocab']:
            merges.append(mg)
    m['merges'] = merges
    return json.dumps(j, ensure_ascii=False, separators=(',', ':'))


TOKENIZERS = ['gpt2_bpe', 'roberta_bpe', 'llama3_bpe', 'smollm_bpe', 'edge_bpe', 'llama2_sp', 'mistral_sp',
              'edge_sp']


def tokenizer_json_seeds() -> None:
    for name in TOKENIZERS:
        keep = 300 if name.endswith('_sp') else 290   # SentencePiece: the <0xNN> byte tokens are ids 3..258
        write('tokenizer_json', name + '.json', small_tokenizer(name, keep))
    minimal = {'model': {'type': 'BPE', 'vocab': {'a': 0, 'b': 1, 'ab': 2}, 'merges': ['a b']}}
    write('tokenizer_json', 'minimal.json', json.dumps(minimal))
    write('tokenizer_json', 'wordpiece.json', json.dumps({'model': {'type': 'WordPiece', 'vocab': {'a': 0}}}))


def tokenizer_codec_seeds() -> None:
    # byte 0: the tokenizer (TOKENIZERS order = fuzz_tokenizer_codec.cpp kTokenizers), byte 1: flags.
    texts = [t.encode() for t in ['Hello, world!', ' leading and  double  spaces\n\ttabs\r\n',
                                  '1234567 numbers 3.14159', 'ünïcödé 日本語テキスト 🙂👍🏽',
                                  "it's they're we've I'm you'll he'd", '<s>special</s><|endoftext|>', '']]
    texts.append(b'\xff\xfe\xc3 bad utf8 \xe2\x82')
    for k, name in enumerate(TOKENIZERS):
        for t in (k % len(texts), (k + 3) % len(texts)):
            write('tokenizer_codec', f'{name}_{t}', bytes([k, (t * 5) & 0x1f]) + texts[t])
    ids = struct.pack('<8i', 0, 1, 2, 3, 100, 258, -1, 2**31 - 1)
    for k, name in enumerate(TOKENIZERS):
        write('tokenizer_codec', f'{name}_ids', bytes([k, 0x08 | 0x10]) + ids)


# --------------------------------------------------------------------------- scheme flags
def schemes_seeds() -> None:
    # byte 0: base config (fuzz_schemes.cpp kExtras), bytes 1-2: context - 1.
    cases = [
        (0, 511, ''),
        (0, 1023, '--rope-scaling yarn --rope-factor 4 --original-ctx 64'),
        (0, 1023, '--rope-scaling=dynamic --rope-factor=2'),
        (0, 2047, '--rope-scaling llama3 --rope-factor 8 --original-ctx 128'),
        (0, 1023, '--rerope-window 64'),
        (0, 1023, '--rerope-window 64 --leaky-k 2'),
        (0, 1023, '--self-extend-group 4 --self-extend-window 64'),
        (0, 255, '--logn 256 --qk-norm cos --cos-n 128 --attn-window 32 --attn-sinks 4'),
        (1, 511, '--rope-factor 8'),
        (2, 511, '--rope-scaling none'),
        (3, 511, '--leaky-k 4 --rerope-window 16'),
        (4, 511, '--self-extend-window 64'),
        (5, 127, '--attn-window 0 --qk-norm key'),
        (6, 127, '--rope-scaling ntk --rope-factor 1.5'),
        (0, 0, '--rope-factor -1 --original-ctx 0x10 --logn 1'),
    ]
    for k, (config, context, flags) in enumerate(cases):
        write('schemes', f'case{k:02d}', bytes([config]) + struct.pack('<H', context) + flags.encode())


# --------------------------------------------------------------------------- gguf
GGUF_U32, GGUF_I32, GGUF_F32, GGUF_BOOL, GGUF_STRING, GGUF_ARRAY = 4, 5, 6, 7, 8, 9


def gguf_value(kind: int, value) -> bytes:
    if kind == GGUF_STRING:
        b = value.encode()
        return struct.pack('<Q', len(b)) + b
    if kind == GGUF_ARRAY:
        elem, items = value
        return struct.pack('<IQ', elem, len(items)) + b''.join(gguf_value(elem, v) for v in items)
    return struct.pack({GGUF_U32: '<I', GGUF_I32: '<i', GGUF_F32: '<f', GGUF_BOOL: '<?'}[kind], value)


def gguf_file(kvs: list, tensors: list = (), version: int = 3, align: int = 32) -> bytes:
    """kvs: (key, type, value); tensors: (name, ne, ggml type, data bytes), data packed in order."""
    out = b'GGUF' + struct.pack('<IQQ', version, len(tensors), len(kvs))
    for key, kind, value in kvs:
        # bytes: the value's encoding as given (for malformed values)
        out += gguf_value(GGUF_STRING, key) + struct.pack('<I', kind)
        out += value if isinstance(value, bytes) else gguf_value(kind, value)
    offset, blobs = 0, b''
    for name, ne, kind, data in tensors:
        out += gguf_value(GGUF_STRING, name) + struct.pack('<I', len(ne)) + struct.pack(f'<{len(ne)}Q', *ne)
        out += struct.pack('<IQ', kind, offset)
        pad = (-len(data)) % align
        blobs += data + b'\0' * pad
        offset += len(data) + pad
    return out + b'\0' * ((-len(out)) % align) + blobs


def gguf_llama_config(vocab: int) -> list:
    return [('general.architecture', GGUF_STRING, 'llama'), ('llama.context_length', GGUF_U32, 64),
            ('llama.embedding_length', GGUF_U32, 32), ('llama.block_count', GGUF_U32, 1),
            ('llama.feed_forward_length', GGUF_U32, 48), ('llama.attention.head_count', GGUF_U32, 4),
            ('llama.attention.head_count_kv', GGUF_U32, 2),
            ('llama.attention.layer_norm_rms_epsilon', GGUF_F32, 1e-5), ('llama.rope.freq_base', GGUF_F32, 1e4),
            ('llama.vocab_size', GGUF_U32, vocab)]


def gguf_seeds() -> None:
    # byte-level BPE ("gpt2", pre "smollm"): specials, the bytes of "hello world" and a few merges
    g = 'Ġ'
    tokens = ['<|endoftext|>', '<|im_start|>', '<|im_end|>'] + list('hel o wrd1') + [g, 'he', 'll', 'hell', 'hello',
                                                                                       g + 'w', 'or']
    tokens = [t for t in tokens if t != ' ']
    merges = ['h e', 'l l', 'he ll', 'hell o', g + ' w', 'o r']
    types = [3, 3, 3] + [1] * (len(tokens) - 3)
    gpt2 = [('tokenizer.ggml.model', GGUF_STRING, 'gpt2'), ('tokenizer.ggml.pre', GGUF_STRING, 'smollm'),
            ('tokenizer.ggml.tokens', GGUF_ARRAY, (GGUF_STRING, tokens)),
            ('tokenizer.ggml.token_type', GGUF_ARRAY, (GGUF_I32, types)),
            ('tokenizer.ggml.merges', GGUF_ARRAY, (GGUF_STRING, merges)),
            ('tokenizer.ggml.bos_token_id', GGUF_U32, 1), ('tokenizer.ggml.eos_token_id', GGUF_U32, 2),
            ('tokenizer.ggml.add_bos_token', GGUF_BOOL, False),
            ('tokenizer.chat_template', GGUF_STRING, '{% for m in messages %}{{ m.content }}{% endfor %}')]
    q8 = struct.pack('<e', 0.5) + bytes(range(32))   # one Q8_0 block (32 values)
    tensors = [('token_embd.weight', [32, len(tokens)], 8, q8 * len(tokens)),
               ('output_norm.weight', [32], 0, struct.pack('<32f', *([1.0] * 32)))]
    write('gguf', 'tiny_gpt2.gguf', gguf_file(gguf_llama_config(len(tokens)) + gpt2, tensors))
    write('gguf', 'tokenizer_only_v2.gguf', gguf_file(gpt2, version=2))
    # SentencePiece ("llama"): <unk> <s> </s>, the 256 byte tokens, pieces with scores
    pieces = ['▁', 'h', 'e', 'l', 'o', '▁h', 'he', 'll', '▁he', '▁hell', '▁hello', 'w', 'r', 'd']
    tokens = ['<unk>', '<s>', '</s>'] + [f'<0x{b:02X}>' for b in range(256)] + pieces
    types = [2, 3, 3] + [6] * 256 + [1] * len(pieces)
    scores = [0.0] * 259 + [-float(i) for i in range(len(pieces))]
    spm = [('tokenizer.ggml.model', GGUF_STRING, 'llama'),
           ('tokenizer.ggml.tokens', GGUF_ARRAY, (GGUF_STRING, tokens)),
           ('tokenizer.ggml.scores', GGUF_ARRAY, (GGUF_F32, scores)),
           ('tokenizer.ggml.token_type', GGUF_ARRAY, (GGUF_I32, types)),
           ('tokenizer.ggml.bos_token_id', GGUF_U32, 1), ('tokenizer.ggml.eos_token_id', GGUF_U32, 2),
           ('tokenizer.ggml.unknown_token_id', GGUF_U32, 0), ('tokenizer.ggml.add_bos_token', GGUF_BOOL, True)]
    write('gguf', 'tiny_spm.gguf', gguf_file(gguf_llama_config(len(tokens)) + spm))
    write('gguf', 'empty.gguf', gguf_file([]))
    # A fuzz finding: a string length of 2^64 - 1 wrapped the reader's bounds check.
    write('gguf', 'string_length_2p64_minus_1.gguf',
          gguf_file(gpt2[:-1] + [('tokenizer.chat_template', GGUF_STRING, struct.pack('<Q', 2**64 - 1) + b'{{ x }}')]))
    write('gguf', 'truncated.gguf', gguf_file(gguf_llama_config(len(tokens)) + spm)[:300])


def main() -> None:
    for target, make in [('safetensors', safetensors_seeds), ('config', config_seeds),
                         ('tokenizer_json', tokenizer_json_seeds), ('tokenizer_codec', tokenizer_codec_seeds),
                         ('schemes', schemes_seeds), ('gguf', gguf_seeds)]:
        shutil.rmtree(CORPUS / target, ignore_errors=True)
        (CORPUS / target).mkdir(parents=True)
        make()


if __name__ == '__main__':
    main()
