#!/usr/bin/python3
"""Write a tiny random Llama (or Qwen2 with --bias, or Mixtral with --experts) model: config.json,
model.safetensors, tokenizer.json (byte-level BPE).  Needs only python3 + numpy.

usage: make_tiny_model.py OUT_DIR [--dtype f32|f16|bf16] [--hidden 64] [--intermediate 160]
         [--layers 2] [--heads 4] [--kv-heads 2] [--head-dim N] [--vocab 300] [--max-pos 2048]
         [--rope-theta 10000] [--tie] [--bias] [--seed 0] [--rope-scaling JSON]
         [--reach-attention JSON] [--std S] [--merges N] [--experts E --experts-per-tok K]

--experts E: a Mixtral-style mixture of experts (block_sparse_moe: a router and E experts of
--intermediate each per layer, K chosen per token), e.g. OLMoE-1B-7B's shapes with fewer layers:
  --hidden 2048 --heads 16 --kv-heads 16 --intermediate 1024 --experts 64 --experts-per-tok 8

Weights: linear layers N(0, (std or 1/sqrt(fan_in))^2); embedding N(0,1) (untied) or
N(0, (3/sqrt(H))^2) (tied); lm_head N(0, (3/sqrt(H))^2) so logits are O(1-10); norm weights
1 + 0.1 N(0,1); q/k/v biases N(0, 0.2^2).  --std S forces every matrix to std S.
"""
import argparse
import json
import os
import re
import sys
from collections import Counter

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from refmodel.safetensors_io import write_safetensors  # noqa: E402

SAMPLE = (
    "The quick brown fox jumps over the lazy dog. There is an important info hidden inside a lot "
    "of irrelevant text. Find it and memorize them. I will quiz you about the important "
    "information there. The grass is green. The sky is blue. The sun is yellow. Here we go. "
    "There and back again. The pass key is 12345. Remember it. 12345 is the pass key. "
    "What is the pass key? The pass key is 12345. Once upon a time, there was a little girl "
    "who lived in a village near the forest. Whenever she went out, the little girl wore a red "
    "riding cloak, so everyone in the village called her Little Red Riding Hood. hello world! "
    "Hello, world. In the beginning the engine computed the attention of every token with "
    "every other token, and then the model predicted the next token of the text.")

PRETOK = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+""")


def bytes_to_unicode():
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
          + list(range(ord("®"), ord("ÿ") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


def learn_bpe(text, n_tokens):
    """Greedy BPE on the pre-tokenized sample; returns (vocab dict token->id, merges list)."""
    b2u = bytes_to_unicode()
    vocab = {b2u[b]: b for b in range(256)}
    words = Counter(tuple(b2u[b] for b in w.encode("utf-8")) for w in PRETOK.findall(text))
    merges = []
    while len(vocab) < n_tokens:
        pairs = Counter()
        for w, c in words.items():
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] += c
        if not pairs:
            break
        best = max(pairs.items(), key=lambda kv: (kv[1], [-ord(ch) for ch in kv[0][0] + " " + kv[0][1]]))
        if best[1] < 2:
            break
        (a, b), _ = best
        merges.append(a + " " + b)
        if a + b not in vocab:
            vocab[a + b] = len(vocab)
        nw = Counter()
        for w, c in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and w[i] == a and w[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            nw[tuple(out)] += c
        words = nw
    return vocab, merges


def tokenizer_json(vocab_size, n_merges):
    vocab, merges = learn_bpe(SAMPLE, min(vocab_size - 2, 256 + n_merges))
    bos, eos = len(vocab), len(vocab) + 1
    specials = [("<|begin_of_text|>", bos), ("<|end_of_text|>", eos)]
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for t, i in specials]
    bt = "<|begin_of_text|>"
    tok = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                          "use_regex": True},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": bt, "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": bt, "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": bt, "type_id": 1}},
                     {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {bt: {"id": bt, "ids": [bos], "tokens": [bt]}}},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": merges}}
    return tok, bos, eos


def make_weights(a, hd, rng):
    H, I, V = a.hidden, a.intermediate, a.vocab

    def lin(out_f, in_f):
        s = a.std if a.std else 1.0 / np.sqrt(in_f)
        return rng.standard_normal((out_f, in_f)) * s

    def norm():
        return 1.0 + 0.1 * rng.standard_normal(H)

    head_std = a.std if a.std else 3.0 / np.sqrt(H)
    emb_std = a.std if a.std else (head_std if a.tie else 1.0)
    w = {"model.embed_tokens.weight": rng.standard_normal((V, H)) * emb_std}
    for i in range(a.layers):
        p = "model.layers.%d." % i
        w[p + "input_layernorm.weight"] = norm()
        w[p + "self_attn.q_proj.weight"] = lin(a.heads * hd, H)
        w[p + "self_attn.k_proj.weight"] = lin(a.kv_heads * hd, H)
        w[p + "self_attn.v_proj.weight"] = lin(a.kv_heads * hd, H)
        w[p + "self_attn.o_proj.weight"] = lin(H, a.heads * hd)
        if a.bias:
            for t, n in (("q", a.heads), ("k", a.kv_heads), ("v", a.kv_heads)):
                w[p + "self_attn.%s_proj.bias" % t] = 0.2 * rng.standard_normal(n * hd)
        w[p + "post_attention_layernorm.weight"] = norm()
        if a.experts:
            # float32 straight away: the experts are most of the model (float64 would double the memory)
            def lin32(out_f, in_f):
                s = a.std if a.std else 1.0 / np.sqrt(in_f)
                return rng.standard_normal((out_f, in_f), dtype=np.float32) * np.float32(s)
            w[p + "block_sparse_moe.gate.weight"] = lin32(a.experts, H)
            for e in range(a.experts):
                q = p + "block_sparse_moe.experts.%d." % e
                w[q + "w1.weight"] = lin32(I, H)
                w[q + "w3.weight"] = lin32(I, H)
                w[q + "w2.weight"] = lin32(H, I)
            continue
        w[p + "mlp.gate_proj.weight"] = lin(I, H)
        w[p + "mlp.up_proj.weight"] = lin(I, H)
        w[p + "mlp.down_proj.weight"] = lin(H, I)
    w["model.norm.weight"] = norm()
    if not a.tie:
        w["lm_head.weight"] = rng.standard_normal((V, H)) * head_std
    return {k: v.astype(np.float32, copy=False) for k, v in w.items()}


def main(argv=None):
    p = argparse.ArgumentParser(description="Write a tiny random Llama model.")
    p.add_argument("out_dir")
    p.add_argument("--dtype", choices=["f32", "f16", "bf16"], default="f32")
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--intermediate", type=int, default=160)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--head-dim", type=int)
    p.add_argument("--vocab", type=int, default=300)
    p.add_argument("--max-pos", type=int, default=2048)
    p.add_argument("--rope-theta", type=float, default=10000.0)
    p.add_argument("--tie", action="store_true")
    p.add_argument("--bias", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rope-scaling", type=json.loads, metavar="JSON")
    p.add_argument("--reach-attention", type=json.loads, metavar="JSON")
    p.add_argument("--std", type=float, help="force this std on every weight matrix")
    p.add_argument("--merges", type=int, default=256, help="max BPE merges (vocab caps it)")
    p.add_argument("--experts", type=int, default=0, help="a Mixtral mixture of this many experts per layer")
    p.add_argument("--experts-per-tok", type=int, default=2, help="experts chosen per token (with --experts)")
    a = p.parse_args(argv)
    if a.vocab < 258:
        p.error("--vocab must be >= 258 (256 bytes + bos + eos)")
    if a.heads % a.kv_heads:
        p.error("--heads must be a multiple of --kv-heads")
    hd = a.head_dim or a.hidden // a.heads
    if hd % 2 or hd < 2:
        p.error("head dim must be even")
    os.makedirs(a.out_dir, exist_ok=True)
    tok, bos, eos = tokenizer_json(a.vocab, a.merges)
    cfg = {"architectures": ["Qwen2ForCausalLM" if a.bias else "LlamaForCausalLM"],
           "model_type": "qwen2" if a.bias else "llama",
           "hidden_size": a.hidden, "intermediate_size": a.intermediate,
           "num_hidden_layers": a.layers, "num_attention_heads": a.heads,
           "num_key_value_heads": a.kv_heads, "head_dim": hd, "hidden_act": "silu",
           "rms_norm_eps": 1e-5, "rope_theta": a.rope_theta, "max_position_embeddings": a.max_pos,
           "vocab_size": a.vocab, "tie_word_embeddings": bool(a.tie), "bos_token_id": bos,
           "eos_token_id": eos, "attention_bias": bool(a.bias), "rope_scaling": a.rope_scaling,
           "torch_dtype": {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}[a.dtype]}
    if a.reach_attention is not None:
        cfg["reach_attention"] = a.reach_attention
    if a.experts:
        if a.bias:
            p.error("--experts makes a Mixtral model, which has no attention bias")
        cfg.update({"architectures": ["MixtralForCausalLM"], "model_type": "mixtral",
                    "num_local_experts": a.experts, "num_experts_per_tok": a.experts_per_tok})
    w = make_weights(a, hd, np.random.default_rng(a.seed))
    write_safetensors(os.path.join(a.out_dir, "model.safetensors"), w, a.dtype)
    with open(os.path.join(a.out_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    with open(os.path.join(a.out_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False, indent=1)
    print("wrote %s: %d tensors, vocab %d (bpe %d, bos %d, eos %d), dtype %s" % (
        a.out_dir, len(w), a.vocab, bos, bos, eos, a.dtype))
    return 0


if __name__ == "__main__":
    sys.exit(main())
