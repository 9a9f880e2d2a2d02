#!/usr/bin/python3
"""Independent float64 NumPy reference forward of a (tiny) HF Llama/Qwen2 safetensors model.

usage: reference_forward.py MODEL_DIR --ids 1,2,3 [--generate N] [--logits-out F.npy|F.bin]
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
    cfg = apply_overrides(load_config(a.model_dir), a)
    W = load_weights(a.model_dir)
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
