#!/usr/bin/env python3
"""Reference outputs of SmolLM2-135M-Instruct for tests/test_smollm2.cpp (committed test data).

Regenerate (from the repository root; ~2-10 minutes on 2 cores):

    bash tools/get_smollm2.sh --both            # converted model dirs (also installs tokenizers)
    python3 tools/gen_smollm2_reference.py      # writes tests/data/smollm2/reference_{f32,f16}.json

usage: gen_smollm2_reference.py [--models DIR] [--dtype f32|f16|both] [--out DIR] [--steps N]

The oracle is independent of reach: token ids from the Hugging Face `tokenizers` package,
logits from the float64 NumPy forward in tools/refmodel (the code behind
tools/reference_forward.py), reading the same converted safetensors as reach.  Run it with
the pyenv `python3` (it has `tokenizers` and numpy after tools/get_smollm2.sh); Debian's
/usr/bin/python3 + python3-numpy works too when `tokenizers` is importable there.

For every prompt in PROMPTS the file holds
  ids              prompt token ids (tokenizers, add_special_tokens=True)
  last_logits      the prompt's last row, full vocab, as {"scale", "i16_b64"}:
                   logit ~= scale * int16 (little-endian, base64); error <= scale / 2
                   (~1.5e-5 x max|logit|, far below the 1e-3 tolerance)
  last_max_abs     max |logit| of that row
  generated        greedy chain of --steps tokens (prefill, then one-token steps on a KV cache)
  steps            per generated step: margin (top1 - top2), max_abs (max |logit|) and top
                   [[id, logit], ...] (the 16 largest logits), for teacher-forced checks
and "heldout": mean NLL (natural log) and perplexity of tests/data/smollm2/heldout.txt
(predictions of tokens 1..n-1 from one causal pass, no BOS: SmolLM2 adds none).
"""
import argparse
import base64
import datetime
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from refmodel.model import forward, layer_schemes, load_config, load_weights  # noqa: E402

SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


def chat(user):
    return ("<|im_start|>system\n" + SYSTEM + "<|im_end|>\n<|im_start|>user\n" + user +
            "<|im_end|>\n<|im_start|>assistant\n")


PROMPTS = [
    ("chat_sky", chat("Explain in two sentences why the sky is blue.")),
    ("story", "The old lighthouse keeper climbed the stairs every evening, and"),
    ("code", 'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n'),
]
TOP = 16


def pack_row(row):
    row = np.asarray(row, dtype=np.float64)
    m = float(np.max(np.abs(row)))
    scale = m / 32767.0 if m > 0 else 1.0
    q = np.clip(np.rint(row / scale), -32767, 32767).astype("<i2")
    return {"scale": scale, "i16_b64": base64.b64encode(q.tobytes()).decode("ascii")}


def top_of(row, k=TOP):
    idx = np.argsort(-row, kind="stable")[:k]
    return [[int(i), round(float(row[i]), 6)] for i in idx]


def run_prompt(cfg, W, ids, steps):
    schemes = layer_schemes(cfg, seq_len=len(ids) + steps)
    cache = {}
    row = forward(cfg, W, ids, schemes, last_only=True, cache=cache)[0]
    out = {"ids": [int(t) for t in ids], "last_logits": pack_row(row),
           "last_max_abs": float(np.max(np.abs(row))), "generated": [], "steps": []}
    for s in range(steps):
        t = int(np.argmax(row))
        margin = float(row[t] - np.max(np.delete(row, t)))
        out["generated"].append(t)
        out["steps"].append({"margin": round(margin, 6), "max_abs": round(float(np.max(np.abs(row))), 6),
                             "top": top_of(row)})
        if s + 1 < steps:
            row = forward(cfg, W, [t], schemes, last_only=True, cache=cache)[0]
    return out


def heldout_nll(cfg, W, ids):
    schemes = layer_schemes(cfg, seq_len=len(ids))
    logits = forward(cfg, W, ids, schemes)
    lse = np.max(logits, axis=-1) + np.log(np.sum(np.exp(logits - np.max(logits, axis=-1, keepdims=True)), axis=-1))
    nll = lse[:-1] - logits[np.arange(len(ids) - 1), ids[1:]]
    return float(np.mean(nll))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default=os.environ.get("REACH_MODELS",
                                                      os.path.expanduser("~/.cache/reach/models")),
                   help="parent of smollm2-135m-instruct[-f32] (tools/get_smollm2.sh's CACHE_DIR)")
    p.add_argument("--dtype", choices=["f32", "f16", "both"], default="both")
    p.add_argument("--out", default=os.path.join(ROOT, "tests", "data", "smollm2"))
    p.add_argument("--steps", type=int, default=32)
    a = p.parse_args()
    import tokenizers  # noqa: E402  (pip install tokenizers; tools/get_smollm2.sh does)

    heldout_path = os.path.join(ROOT, "tests", "data", "smollm2", "heldout.txt")
    with open(heldout_path, encoding="utf-8") as f:
        heldout = f.read()
    for dtype in (["f32", "f16"] if a.dtype == "both" else [a.dtype]):
        model = os.path.join(a.models, "smollm2-135m-instruct" + ("-f32" if dtype == "f32" else ""))
        tok = tokenizers.Tokenizer.from_file(os.path.join(model, "tokenizer.json"))
        cfg = load_config(model)
        t0 = time.time()
        W = load_weights(model)
        res = {"generator": "tools/gen_smollm2_reference.py (float64 NumPy tools/refmodel, HF tokenizers)",
               "regenerate": "bash tools/get_smollm2.sh --both && python3 tools/gen_smollm2_reference.py",
               "date": datetime.date.today().isoformat(), "numpy": np.__version__,
               "tokenizers": tokenizers.__version__, "dtype": dtype,
               "model_dir_name": os.path.basename(model),
               "safetensors_bytes": os.path.getsize(os.path.join(model, "model.safetensors")),
               "vocab": int(cfg["vocab_size"]), "prompts": []}
        for name, text in PROMPTS:
            ids = tok.encode(text, add_special_tokens=True).ids
            r = run_prompt(cfg, W, ids, a.steps)
            r = {"name": name, "text": text, **r}
            res["prompts"].append(r)
            print("%s %s: %d prompt ids, generated %s | %r (min margin %.4g, %.0f s)"
                  % (dtype, name, len(ids), r["generated"], tok.decode(r["generated"]),
                     min(s["margin"] for s in r["steps"]), time.time() - t0), file=sys.stderr)
        hid = tok.encode(heldout, add_special_tokens=True).ids
        nll = heldout_nll(cfg, W, np.asarray(hid))
        res["heldout"] = {"file": "tests/data/smollm2/heldout.txt", "tokens": len(hid),
                          "predictions": len(hid) - 1, "ids": hid, "nll_mean": nll, "ppl": float(np.exp(nll))}
        print("%s heldout: %d tokens, nll %.6f ppl %.4f (%.0f s)" % (dtype, len(hid), nll, np.exp(nll),
                                                                      time.time() - t0), file=sys.stderr)
        os.makedirs(a.out, exist_ok=True)
        path = os.path.join(a.out, "reference_%s.json" % dtype)
        with open(path, "w") as f:
            json.dump(res, f, separators=(",", ":"))
            f.write("\n")
        print(path)
        del W


if __name__ == "__main__":
    main()
