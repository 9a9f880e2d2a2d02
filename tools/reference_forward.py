#!/usr/bin/python3
"""Independent float64 NumPy reference forward of a (tiny) HF Llama/Qwen2 safetensors model, or of a
llama.cpp GGUF file.

usage: reference_forward.py MODEL_DIR|FILE.gguf --ids 1,2,3 [--generate N] [--logits-out F.npy|F.bin]
         [--last-only] [--json]
         [--rope-scaling default|linear|ntk|dynamic|yarn|llama3|rerope|leaky_rerope|self_extend]
         [--rope-factor S] [--original-ctx N] [--rerope-window W] [--leaky-k K]
         [--self-extend-group G] [--self-extend-window W] [--logn L]
         [--qk-norm key|query|cos] [--cos-n N] [--attn-window W] [--attn-sinks S]

Schemes come from config.json (rope_scaling, reach_attention) and are overridden by the flags.
--rope-scaling replaces config's rope_scaling ({"rope_type": TYPE, "factor": S,
"original_max_position_embeddings": N, ...}; llama3 keeps low/high_freq_factor from config or
uses 1/4).  --rerope-window alone implies rerope (leaky_rerope with --leaky-k), and
--self-extend-group implies self_extend.
--json adds generated_margins (top1 - top2 logit per step): compare greedy chains with an
engine only up to the first step whose margin is below your logit tolerance.
Logits (float32, row-major [rows, vocab]): rows are every fed position; with --generate N the
fed sequence is prompt + generated[:-1] (row t predicts token t+1, n+N-1 rows); --last-only keeps
only the last row.  Dynamic NTK uses L_test = len(ids) + N for the whole request.
The math lives in tools/refmodel (rope.py, attention.py, model.py).

A GGUF (a .gguf file, or a directory holding one and no config.json) needs the PyPI `gguf` package
(run it with the python3 that has it, e.g. pyenv's): every tensor is dequantized with
gguf.quants.dequantize (the package's own reading of the block formats), q/k rows (weights and
biases) go back from llama.cpp's interleaved rotary pairs to the half-split order, and the llama.*
metadata becomes the config, so the float64 forward runs on exactly the weights the file holds.
"""
import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from refmodel.model import forward, generate, layer_schemes, load_config, load_weights  # noqa: E402


def apply_overrides(cfg, a):
    cfg = json.loads(json.dumps(cfg))
    rs = dict(cfg.get("rope_scaling") or {})
    kind = a.rope_scaling
    if kind is None and a.rerope_window is not None:
        kind = "leaky_rerope" if a.leaky_k is not None else "rerope"
    if kind is None and a.self_extend_group is not None:
        kind = "self_extend"
    if kind is not None:
        old = rs
        rs = {"rope_type": kind}
        if kind == "llama3":
            rs.update(low_freq_factor=old.get("low_freq_factor", 1.0),
                      high_freq_factor=old.get("high_freq_factor", 4.0),
                      original_max_position_embeddings=old.get(
                          "original_max_position_embeddings", cfg.get("max_position_embeddings")))
        if kind in ("default", "none"):
            rs = None
    if rs is not None:
        if a.rope_factor is not None:
            rs["factor"] = a.rope_factor
        if a.original_ctx is not None:
            rs["original_max_position_embeddings"] = a.original_ctx
        if kind in ("rerope", "leaky_rerope"):
            rs["window"] = a.rerope_window if a.rerope_window is not None else rs.get("window")
            if kind == "leaky_rerope":
                rs["factor"] = a.leaky_k if a.leaky_k is not None else rs.get("factor")
        if kind == "self_extend":
            rs["group"] = a.self_extend_group if a.self_extend_group is not None else rs.get("group")
            rs["window"] = (a.self_extend_window if a.self_extend_window is not None
                            else rs.get("window"))
        for key in ("window", "group", "factor"):
            if key in rs and rs[key] is None:
                raise SystemExit("rope scheme %s needs %s (see --help)" % (kind, key))
    cfg["rope_scaling"] = rs or None
    ra = dict(cfg.get("reach_attention") or {})
    for flag, key in (("logn", "logn_train_len"), ("qk_norm", "qk_norm"), ("cos_n", "cos_n"),
                      ("attn_window", "window"), ("attn_sinks", "sinks")):
        if getattr(a, flag) is not None:
            ra[key] = getattr(a, flag)
    cfg["reach_attention"] = ra
    return cfg


def gguf_path(path):
    """The GGUF a model path names, or None for a safetensors directory."""
    if os.path.isfile(path):
        return path
    if os.path.exists(os.path.join(path, "config.json")):
        return None
    found = sorted(f for f in os.listdir(path) if f.lower().endswith(".gguf"))
    if len(found) > 1:
        raise ValueError("%s holds several .gguf files (%s): pass one" % (path, ", ".join(found)))
    return os.path.join(path, found[0]) if found else None


GGUF_LAYER = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
              "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
              "ffn_down": "mlp.down_proj", "attn_norm": "input_layernorm",
              "ffn_norm": "post_attention_layernorm"}
GGUF_GLOBAL = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
               "output.weight": "lm_head.weight"}


def unpermute(w, n_head):
    """Inverse of llama.cpp convert_hf_to_gguf's permute: interleaved rotary pairs -> half-split rows."""
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def load_gguf(path):
    """(config dict in config.json's terms, float64 weights by HF name) of a llama GGUF."""
    try:
        import gguf
        from gguf.quants import dequantize
    except ImportError as e:
        raise SystemExit("reference_forward.py: reading a GGUF needs the PyPI gguf package (%s); run it with "
                         "the python3 that has it (tools/get_smollm2.sh installs it)" % e)
    r = gguf.GGUFReader(path)

    def field(key, default=None):
        f = r.fields.get(key)
        return default if f is None else f.contents()

    if field("general.architecture") != "llama":
        raise ValueError("%s: architecture %r, the reference reads llama GGUFs" % (path, field("general.architecture")))

    def g(key, default=None):
        return field("llama." + key, default)

    def f32(v):  # GGUF stores float32: the shortest decimal gives config.json's double back
        return float(str(np.float32(v)))

    hidden, heads = int(g("embedding_length")), int(g("attention.head_count"))
    kv_heads = int(g("attention.head_count_kv", heads))
    head_dim = int(g("attention.key_length", hidden // heads))
    if int(g("rope.dimension_count", head_dim)) != head_dim:
        raise ValueError("%s: partial rotary is not handled by the GGUF reader" % path)
    names = {t.name for t in r.tensors}
    tokens = field("tokenizer.ggml.tokens")
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": hidden,
           "intermediate_size": int(g("feed_forward_length")), "num_hidden_layers": int(g("block_count")),
           "num_attention_heads": heads, "num_key_value_heads": kv_heads, "head_dim": head_dim,
           "max_position_embeddings": int(g("context_length")),
           "rms_norm_eps": f32(g("attention.layer_norm_rms_epsilon")),
           "rope_theta": f32(g("rope.freq_base", 10000.0)), "rope_scaling": None,
           "vocab_size": int(g("vocab_size", len(tokens) if tokens is not None else 0)),
           "tie_word_embeddings": "output.weight" not in names}
    kind = g("rope.scaling.type")
    if kind in ("linear", "yarn"):
        rs = {"rope_type": kind, "factor": f32(g("rope.scaling.factor"))}
        if g("rope.scaling.original_context_length") is not None:
            rs["original_max_position_embeddings"] = int(g("rope.scaling.original_context_length"))
        cfg["rope_scaling"] = rs
    elif kind not in (None, "none"):
        raise ValueError("%s: rope scaling %r is not handled by the GGUF reader" % (path, kind))
    W = {}
    for t in r.tensors:
        shape = [int(d) for d in reversed(t.shape.tolist())]   # ne order -> row-major
        a = np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float64).reshape(shape)
        parts = t.name.split(".")
        if t.name in GGUF_GLOBAL:
            name = GGUF_GLOBAL[t.name]
        elif len(parts) == 4 and parts[0] == "blk" and parts[2] in GGUF_LAYER:
            name = "model.layers.%s.%s.%s" % (parts[1], GGUF_LAYER[parts[2]], parts[3])
        else:
            continue   # rope tables and other extras the llama forward does not read
        if len(parts) == 4 and parts[2] == "attn_q":
            a = unpermute(a, heads)
        elif len(parts) == 4 and parts[2] == "attn_k":
            a = unpermute(a, kv_heads)
        W[name] = a
    cfg["attention_bias"] = "model.layers.0.self_attn.q_proj.bias" in W
    return cfg, W


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model_dir")
    p.add_argument("--ids", required=True, help="comma-separated token ids")
    p.add_argument("--generate", type=int, default=0, metavar="N")
    p.add_argument("--logits-out", metavar="FILE")
    p.add_argument("--last-only", action="store_true")
    p.add_argument("--json", action="store_true")
    p.add_argument("--rope-scaling", metavar="TYPE")
    p.add_argument("--rope-factor", type=float)
    p.add_argument("--original-ctx", type=int)
    p.add_argument("--rerope-window", type=int)
    p.add_argument("--leaky-k", type=float)
    p.add_argument("--self-extend-group", type=int)
    p.add_argument("--self-extend-window", type=int)
    p.add_argument("--logn", type=int, metavar="L")
    p.add_argument("--qk-norm", choices=["key", "query", "cos"])
    p.add_argument("--cos-n", type=int)
    p.add_argument("--attn-window", type=int)
    p.add_argument("--attn-sinks", type=int)
    a = p.parse_args(argv)
    try:
        ids = [int(t) for t in a.ids.replace(" ", "").split(",") if t != ""]
    except ValueError:
        raise SystemExit("--ids must be comma-separated integers, got %r" % a.ids)
    if a.generate < 0:
        raise SystemExit("--generate must be >= 0")
    t0 = time.time()
    gguf_file = gguf_path(a.model_dir)
    if gguf_file:
        raw_cfg, W = load_gguf(gguf_file)
    else:
        raw_cfg, W = load_config(a.model_dir), load_weights(a.model_dir)
    cfg = apply_overrides(raw_cfg, a)
    schemes = layer_schemes(cfg, seq_len=len(ids) + a.generate)
    margins = []
    gen = generate(cfg, W, ids, a.generate, schemes, margins) if a.generate else []
    fed = ids + gen[:-1] if gen else ids
    logits = forward(cfg, W, fed, schemes, last_only=a.last_only)
    if a.logits_out:
        arr = np.ascontiguousarray(logits, dtype=np.float32)
        if a.logits_out.endswith(".npy"):
            np.save(a.logits_out, arr)
        else:
            arr.tofile(a.logits_out)
    argmax = [int(t) for t in np.argmax(logits, axis=-1)]
    if gen and not a.last_only and argmax[len(ids) - 1:] != gen:
        print("warning: one-shot argmax %s != cached greedy chain %s (near-tie?)"
              % (argmax[len(ids) - 1:], gen), file=sys.stderr)
    if a.json:
        print(json.dumps({"ids": ids, "generated": gen,
                          "generated_margins": [round(m, 6) for m in margins], "rows": int(logits.shape[0]),
                          "vocab": int(logits.shape[1]), "argmax": argmax,
                          "last_logits_head": [float(x) for x in logits[-1, :8]],
                          "finite": bool(np.isfinite(logits).all()),
                          "rope_scaling": cfg["rope_scaling"],
                          "reach_attention": cfg["reach_attention"],
                          "seconds": round(time.time() - t0, 3)}))
    else:
        print("rows %d vocab %d  argmax %s" % (logits.shape[0], logits.shape[1], argmax))
        print("last logits[:8] %s" % np.array2string(logits[-1, :8], precision=5))
        if a.generate:
            print("generated " + ",".join(str(t) for t in gen))
            print("top1-top2 margins " + " ".join("%.4g" % m for m in margins))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (ValueError, KeyError, OSError) as e:
        sys.exit("reference_forward.py: error: %s: %s" % (type(e).__name__, e))
