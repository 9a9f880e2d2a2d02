#!/usr/bin/python3
"""Write a random f16 Llama of a real model's shape, fast: config.json, model.safetensors and
tokenizer.json as tools/make_tiny_model.py writes them, but every matrix is a window of one shared
pool of random values, streamed to disk tensor by tensor.  Llama-3.1-8B's shape (16 GB) takes about
as long as the disk needs to take the bytes, with no float64 copy in memory: for speed checks
(tools/gpu_check.sh), where the values do not matter, never for numerics.

usage: make_shape_model.py OUT_DIR --hidden H --intermediate I --layers L --heads N --kv-heads K
         --vocab V [--head-dim D] [--max-pos P] [--rope-theta T] [--tie] [--seed S]
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_tiny_model import tokenizer_json  # noqa: E402

POOL = (1 << 24) + 4093   # values; not a power of two, so windows of equal rows start out of step


def tensor_specs(a, hd):
    """(name, shape, std): std None for a norm weight (1 + 0.1 N(0, 1))."""
    H, I = a.hidden, a.intermediate
    specs = [("model.embed_tokens.weight", (a.vocab, H), 3.0 / np.sqrt(H) if a.tie else 1.0)]
    for i in range(a.layers):
        p = "model.layers.%d." % i
        specs += [(p + "input_layernorm.weight", (H,), None),
                  (p + "self_attn.q_proj.weight", (a.heads * hd, H), 1 / np.sqrt(H)),
                  (p + "self_attn.k_proj.weight", (a.kv_heads * hd, H), 1 / np.sqrt(H)),
                  (p + "self_attn.v_proj.weight", (a.kv_heads * hd, H), 1 / np.sqrt(H)),
                  (p + "self_attn.o_proj.weight", (H, a.heads * hd), 1 / np.sqrt(a.heads * hd)),
                  (p + "post_attention_layernorm.weight", (H,), None),
                  (p + "mlp.gate_proj.weight", (I, H), 1 / np.sqrt(H)),
                  (p + "mlp.up_proj.weight", (I, H), 1 / np.sqrt(H)),
                  (p + "mlp.down_proj.weight", (H, I), 1 / np.sqrt(I))]
    specs.append(("model.norm.weight", (H,), None))
    if not a.tie:
        specs.append(("lm_head.weight", (a.vocab, H), 3.0 / np.sqrt(H)))
    return specs


def write_streamed(path, specs, rng):
    base = rng.standard_normal(POOL).astype(np.float32)
    pools = {}
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, shape, _ in sorted(specs):
        n = int(np.prod(shape)) * 2
        header[name] = {"dtype": "F16", "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    hj = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hj += b" " * (-len(hj) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for name, shape, std in sorted(specs):
            n = int(np.prod(shape))
            if std is None:
                f.write((1.0 + 0.1 * rng.standard_normal(n)).astype(np.float16).tobytes())
                continue
            if std not in pools:
                pools[std] = (base * np.float32(std)).astype(np.float16)
            pool = pools[std]
            at = int(rng.integers(POOL))
            while n:   # windows of the pool, wrapping, written without a copy
                k = min(n, POOL - at)
                f.write(memoryview(pool[at:at + k]))
                n -= k
                at = 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out_dir")
    for flag in ("--hidden", "--intermediate", "--layers", "--heads", "--kv-heads", "--vocab"):
        p.add_argument(flag, type=int, required=True)
    p.add_argument("--head-dim", type=int)
    p.add_argument("--max-pos", type=int, default=8192)
    p.add_argument("--rope-theta", type=float, default=10000.0)
    p.add_argument("--tie", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    if a.vocab < 258:
        p.error("--vocab must be >= 258 (256 bytes + bos + eos)")
    if a.heads % a.kv_heads:
        p.error("--heads must be a multiple of --kv-heads")
    hd = a.head_dim or a.hidden // a.heads
    os.makedirs(a.out_dir, exist_ok=True)
    tok, bos, eos = tokenizer_json(a.vocab, 256)
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
           "hidden_size": a.hidden, "intermediate_size": a.intermediate,
           "num_hidden_layers": a.layers, "num_attention_heads": a.heads,
           "num_key_value_heads": a.kv_heads, "head_dim": hd, "hidden_act": "silu",
           "rms_norm_eps": 1e-5, "rope_theta": a.rope_theta, "max_position_embeddings": a.max_pos,
           "vocab_size": a.vocab, "tie_word_embeddings": bool(a.tie), "bos_token_id": bos,
           "eos_token_id": eos, "attention_bias": False, "torch_dtype": "float16"}
    specs = tensor_specs(a, hd)
    write_streamed(os.path.join(a.out_dir, "model.safetensors"), specs, np.random.default_rng(a.seed))
    with open(os.path.join(a.out_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    with open(os.path.join(a.out_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False, indent=1)
    params = sum(int(np.prod(s)) for _, s, _ in specs)
    print("wrote %s: %d tensors, %.2f B parameters, f16" % (a.out_dir, len(specs), params / 1e9))
    return 0


if __name__ == "__main__":
    sys.exit(main())
