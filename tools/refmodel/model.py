"""float64 NumPy forward of the Hugging Face Llama/Qwen2 decoder (modeling_llama semantics).

  load_config(model_dir) -> dict;   load_weights(model_dir) -> dict[name, float64 array]
  layer_schemes(config, seq_len) -> list[Scheme], one per layer, from config["rope_scaling"]
      (HF default/linear/dynamic/yarn/llama3 and reach ntk/rerope/leaky_rerope/self_extend) and
      config["reach_attention"] {logn_train_len, qk_norm, cos_n, window, sinks,
      layers: {"<i>": {window, sinks, rope, logn, qk_norm}}}.  Per-layer keys overlay the global
      ones: "rope": false -> no rotation in that layer; "logn": true/false switches logn (with
      logn_train_len) for that layer; "window"/"sinks" replace the global mask.
      seq_len feeds dynamic NTK ("local static": L_test = prompt + generated, fixed per request).
  forward(config, weights, ids, schemes, last_only=False) -> logits float64 [n or 1, vocab]
      cache: optional dict for chunked prefill / one-token decode (raw k/v per layer,
      absolute positions continue from cache["n"]); None = one-shot.
  generate(config, weights, ids, n_new, schemes, margins=None) -> list of greedy ids
      (prefill + cached decode; margins: optional list receiving top1-top2 per step)
"""
import copy
import json
import os

import numpy as np

from .attention import Scheme, attention_reference
from .rope import POSITION_REMAP_TYPES, rope_parameters
from .safetensors_io import read_model_tensors


def load_config(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        return json.load(f)


def load_weights(model_dir):
    return {k: np.asarray(v, dtype=np.float64) for k, v in read_model_tensors(model_dir).items()}


def head_dim(cfg):
    return int(cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"])


def layer_schemes(cfg, seq_len=None):
    d = head_dim(cfg)
    rot = int(d * float(cfg.get("partial_rotary_factor", 1.0)))
    rot -= rot % 2
    rs = copy.deepcopy(cfg.get("rope_scaling") or {})
    kind = rs.get("rope_type", rs.get("type", "default")) or "default"
    inv, af = rope_parameters(rs, rot, float(cfg.get("rope_theta", 10000.0)),
                              int(cfg.get("max_position_embeddings", 2048)), seq_len)
    base = dict(inv_freq=inv, attention_factor=af)
    if kind == "rerope":
        base.update(method="rerope", window=int(rs["window"]))
    elif kind == "leaky_rerope":
        base.update(method="leaky_rerope", window=int(rs["window"]),
                    leaky_k=float(rs.get("factor", rs.get("leaky_k", 1.0))))
    elif kind == "self_extend":
        base.update(method="self_extend", window=int(rs["window"]), group=int(rs["group"]))
    ra = cfg.get("reach_attention") or {}
    L = int(ra.get("logn_train_len") or 0)
    glob = dict(qk_norm=ra.get("qk_norm"), cos_n=int(ra.get("cos_n") or 0),
                attn_window=int(ra.get("window") or 0), attn_sinks=int(ra.get("sinks") or 0))
    layers = ra.get("layers") or {}
    out = []
    for i in range(int(cfg["num_hidden_layers"])):
        kw = dict(base, **glob, logn_train_len=L)
        lo = layers.get(str(i)) or {}
        if "window" in lo:
            kw["attn_window"] = int(lo["window"] or 0)
        if "sinks" in lo:
            kw["attn_sinks"] = int(lo["sinks"] or 0)
        if "qk_norm" in lo:
            kw["qk_norm"] = lo["qk_norm"]
        if "logn" in lo:
            if lo["logn"] and not L:
                raise ValueError("layer %d asks for logn but logn_train_len is not set" % i)
            kw["logn_train_len"] = L if lo["logn"] else 0
        if lo.get("rope", True) is False:
            kw.update(inv_freq=None, attention_factor=1.0, method="rope")
        out.append(Scheme(**kw))
    return out


def rms_norm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def silu(x):
    return x / (1.0 + np.exp(-x))


def forward(cfg, W, ids, schemes, last_only=False, cache=None):
    """cache: None (one-shot) or a dict reused across calls (incremental decode / chunked
    prefill): it keeps per-layer raw (un-rotated) k, v and the next position."""
    ids = np.asarray(ids, dtype=np.int64)
    V = int(cfg["vocab_size"])
    if ids.size == 0 or ids.min() < 0 or ids.max() >= V:
        raise ValueError("token ids must be non-empty and in [0, %d)" % V)
    H, Hkv, d = int(cfg["num_attention_heads"]), int(cfg["num_key_value_heads"]), head_dim(cfg)
    eps = float(cfg.get("rms_norm_eps", 1e-5))
    n = len(ids)
    start = 0 if cache is None else cache.get("n", 0)
    pos = np.arange(start, start + n)
    x = W["model.embed_tokens.weight"][ids]
    for i in range(int(cfg["num_hidden_layers"])):
        p = "model.layers.%d." % i
        h = rms_norm(x, W[p + "input_layernorm.weight"], eps)
        proj = {}
        for t in ("q", "k", "v"):
            y = h @ W[p + "self_attn.%s_proj.weight" % t].T
            b = W.get(p + "self_attn.%s_proj.bias" % t)
            proj[t] = y if b is None else y + b
        q = proj["q"].reshape(n, H, d)
        k = proj["k"].reshape(n, Hkv, d)
        v = proj["v"].reshape(n, Hkv, d)
        if cache is not None:
            if i in cache:
                k = np.concatenate([cache[i][0], k])
                v = np.concatenate([cache[i][1], v])
            cache[i] = (k, v)
        a = attention_reference(q, k, v, pos, np.arange(len(k)), schemes[i]).reshape(n, H * d)
        ob = W.get(p + "self_attn.o_proj.bias")
        a = a @ W[p + "self_attn.o_proj.weight"].T + (0 if ob is None else ob)
        x = x + a
        h = rms_norm(x, W[p + "post_attention_layernorm.weight"], eps)
        g = h @ W[p + "mlp.gate_proj.weight"].T
        u = h @ W[p + "mlp.up_proj.weight"].T
        x = x + (silu(g) * u) @ W[p + "mlp.down_proj.weight"].T
    if cache is not None:
        cache["n"] = start + n
    if last_only:
        x = x[-1:]
    x = rms_norm(x, W["model.norm.weight"], eps)
    head = W.get("lm_head.weight")
    if head is None or cfg.get("tie_word_embeddings"):
        head = W["model.embed_tokens.weight"]
    return x @ head.T


def generate(cfg, W, ids, n_new, schemes, margins=None):
    """Greedy chain: one prefill of ids, then one-token steps against the raw k/v cache.
    If margins is a list, top1 - top2 logit of every step is appended (near ties flip easily)."""
    cache, out = {}, []
    feed = [int(t) for t in ids]
    for _ in range(int(n_new)):
        row = forward(cfg, W, feed, schemes, last_only=True, cache=cache)[0]
        t = int(np.argmax(row))
        if margins is not None:
            margins.append(float(row[t] - np.max(np.delete(row, t))))
        out.append(t)
        feed = [t]
    return out
