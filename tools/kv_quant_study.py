#!/usr/bin/env python3
"""Perplexity of a Llama-family model under candidate K/V cache rounding rules, simulated in NumPy.

Before a cache rule is built into the kernels, measure what it buys: this runs the model's forward in
float32 (the weights as stored, activations f32, K and V rounded as the rule says right after RoPE,
where the engine writes them) over chunks of a text and prints the perplexity per rule, beside f16.
The protocol is `reach eval --mode ppl`'s: consecutive chunks of --ctx tokens, token 0 replaced by
BOS where the tokenizer adds one (tokenizer_config.json's add_bos_token), the second half of each chunk
scored.

usage: "$(bash tools/venv.sh numpy tokenizers)" tools/kv_quant_study.py MODEL_DIR --text FILE
         [--calib FILE | --calib-file SAVED.kvc] [--chunks 20] [--ctx 512] [--k RULE,RULE...] [--v RULE]

RULE is a block format, optionally followed by transforms, applied per 32-value block of a row:
  f16      f16 rounding only (the reference every other rule is compared with)
  q8_0     ggml's q8_0: d = amax/127 (stored f16), q = round(x/d)
  q4_0     ggml's q4_0: d = max/-8 (max: the value of largest magnitude), q = min(15, floor(x/d + 8.5))
  ...h     the block Walsh-Hadamard rotated before rounding (orthonormal H of 32; reach's q4_0 rule)
  +mean    keys only: subtract a per (layer, kv head, channel) constant mu first.  Exact: q.(k - mu)
           differs from q.k by q.mu, the same for every key of a query, which softmax ignores.
           mu = the mean post-RoPE key over the --calib text.
  +rmean   keys only, instead of +mean: the mean raw key over --calib, turned by RoPE's average rotation
           over positions [0, --ctx) (the offset the rotated keys keep on average over a whole context,
           where +mean is that of the calibration's own positions)
  +smooth  keys only: divide channel j by s_j (and the query would be multiplied by s_j: q.k unchanged)
           with s_j = sqrt(std(k_j) / rms(q_j)) over --calib (minimises E[(q.e)^2] for a rounding
           error e of even size across the smoothed channels: SmoothQuant's alpha = 1/2).
  +wsmooth keys only: the same balance from the weights alone (no calibration): per rotary pair, the
           row norms of W_k and W_q (input norm folded in) stand for std(k) and rms(q).
  +pow2    with +smooth / +wsmooth: s rounded to the nearest power of two (a scale that multiplies
           f16 / f32 weights and activations exactly, so it can be folded into W_q and W_k)
  +mse     per block, the scale of least squared error among 17 from 0.6 to 1 times the rule's own
  +sink    the chunk's first 4 rows (positions 0-3, where a model's attention sink sits) kept in f16
e.g. --k f16,q4_0,q4_0h,q4_0h+mean,q4_0h+mean+smooth --v q4_0h.  --calib must be a different text
from --text (the calibration is then not fitted to what is scored).

Supports Hugging Face Llama / Mistral / Qwen2 / SmolLM folders (RMSNorm, SiLU MLP, plain RoPE, GQA,
optional q/k/v biases); anything else is refused by name.  SmolLM2-135M: about 80 s per rule for 20
chunks of 512 on 2 cores.
"""
import argparse
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from refmodel.model import head_dim, load_config, rms_norm, silu  # noqa: E402
from refmodel.rope import default_inv_freq  # noqa: E402
from refmodel.safetensors_io import read_model_tensors  # noqa: E402

BLOCK = 32
SINK_ROWS = 4


def hadamard(n=BLOCK):
    h = np.array([[1.0]])
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return (h / math.sqrt(n)).astype(np.float32)


H32 = hadamard()


def f16(x):
    return x.astype(np.float16).astype(np.float32)


def _inverse(d):
    return np.where(d != 0, np.float32(1.0) / np.where(d != 0, d, np.float32(1.0)), np.float32(0.0)).astype(np.float32)


# As ggml (and reach's kv codec): the quants come from the f32 scale, the block stores it as f16.
def q8_0(x, factor=1.0):
    b = x.reshape(-1, BLOCK).astype(np.float32)
    d = np.float32(factor) * np.abs(b).max(1) / np.float32(127.0)
    v = b * _inverse(d)[:, None]
    q = np.clip(np.sign(v) * np.floor(np.abs(v) + 0.5), -127, 127)   # roundf: ties away from zero
    return (q * f16(d)[:, None]).reshape(x.shape)


def q4_0(x, factor=1.0):
    b = x.reshape(-1, BLOCK).astype(np.float32)
    mx = b[np.arange(len(b)), np.argmax(np.abs(b), 1)]
    d = np.float32(factor) * mx / np.float32(-8.0)
    q = np.minimum(np.floor(b * _inverse(d)[:, None] + np.float32(8.5)), 15)
    return ((q - 8) * f16(d)[:, None]).reshape(x.shape)


def least_squares(fmt, x):
    """fmt's rounding with the block scale of least squared error among 17 candidates."""
    b = x.reshape(-1, BLOCK)
    best, err = None, None
    for f in np.linspace(0.6, 1.0, 17):
        r = fmt(b, f).reshape(-1, BLOCK)
        e = ((r - b) ** 2).sum(1)
        if best is None:
            best, err = r, e
        else:
            m = e < err
            best[m], err = r[m], np.minimum(e, err)
    return best.reshape(x.shape)


def rotate_blocks(x):
    return (x.reshape(-1, BLOCK) @ H32.T).reshape(x.shape)   # H is symmetric and its own inverse


class Rule:
    def __init__(self, text):
        parts = text.split("+")
        base, self.transforms = parts[0], set(parts[1:])
        self.text = text
        unknown = self.transforms - {"mean", "rmean", "smooth", "wsmooth", "pow2", "mse", "sink"}
        if unknown or base.rstrip("h") not in ("f16", "q8_0", "q4_0") or base == "f16h":
            raise SystemExit("kv_quant_study: unknown rule %r (see --help)" % text)
        if base == "f16" and self.transforms:
            raise SystemExit("kv_quant_study: %r: f16 takes no transforms (it is the reference)" % text)
        if "smooth" in self.transforms and "wsmooth" in self.transforms:
            raise SystemExit("kv_quant_study: %r: +smooth and +wsmooth are alternatives" % text)
        self.fmt = {"f16": None, "q8_0": q8_0, "q4_0": q4_0}[base.rstrip("h")]
        self.hadamard = base.endswith("h")

    @property
    def needs_calibration(self):
        return bool(self.transforms & {"mean", "rmean", "smooth"})

    def apply(self, x, layer, stats):
        """x [n, kv_heads, d] post-RoPE -> x as the cache would give it back (in the original basis)."""
        x = f16(x)
        if self.fmt is None:
            return x
        mu = stats["mean"][layer] if "mean" in self.transforms else 0.0
        if "rmean" in self.transforms:
            mu = stats["rmean"][layer]
        s = 1.0
        if "smooth" in self.transforms:
            s = stats["smooth"][layer]
        elif "wsmooth" in self.transforms:
            s = stats["wsmooth"][layer]
        if "pow2" in self.transforms:
            s = np.exp2(np.round(np.log2(s))).astype(np.float32)
        y = (x - mu) / s
        if self.hadamard:
            y = rotate_blocks(y)
        y = least_squares(self.fmt, y) if "mse" in self.transforms else self.fmt(y)
        if self.hadamard:
            y = rotate_blocks(y)
        y = y * s + mu
        if "sink" in self.transforms:
            y[:SINK_ROWS] = x[:SINK_ROWS]
        return y


def adds_bos(folder):
    import json
    try:
        with open(os.path.join(folder, "tokenizer_config.json"), encoding="utf-8") as f:
            return bool(json.load(f).get("add_bos_token", False))
    except (OSError, ValueError):
        return False


class Model:
    def __init__(self, folder):
        try:
            c = load_config(folder)
        except (OSError, ValueError) as e:
            raise SystemExit("kv_quant_study: %s: no readable config.json (%s); give a Hugging Face model folder"
                             % (folder, e))
        arch = (c.get("architectures") or ["?"])[0]
        if c.get("model_type") not in ("llama", "mistral", "qwen2"):
            raise SystemExit("kv_quant_study: %s: model_type %r is not a plain Llama-family decoder "
                             "(llama, mistral, qwen2)" % (folder, c.get("model_type")))
        if c.get("rope_scaling"):
            raise SystemExit("kv_quant_study: %s: rope_scaling %r is not simulated (plain RoPE only)"
                             % (folder, c["rope_scaling"]))
        if c.get("sliding_window") and c.get("use_sliding_window", True) and c.get("model_type") == "mistral":
            print("kv_quant_study: note: %s's sliding window is ignored (chunks are short)" % arch, file=sys.stderr)
        self.c = c
        self.H, self.Hkv = int(c["num_attention_heads"]), int(c["num_key_value_heads"])
        self.d = head_dim(c)
        self.L = int(c["num_hidden_layers"])
        self.eps = float(c.get("rms_norm_eps", 1e-5))
        if self.d % BLOCK:
            raise SystemExit("kv_quant_study: head_dim %d is not a multiple of %d" % (self.d, BLOCK))
        self.W = {k: np.asarray(v, dtype=np.float32) for k, v in read_model_tensors(folder).items()}
        self.head = self.W.get("lm_head.weight", self.W["model.embed_tokens.weight"])
        self.theta = float(c.get("rope_theta", 10000.0))
        # As reach eval --mode ppl (and llama-perplexity): BOS replaces token 0 only when the tokenizer adds one.
        self.bos = c.get("bos_token_id") if adds_bos(folder) else None

    def rope_tables(self, n):
        inv = default_inv_freq(self.d, self.theta)
        ang = np.arange(n)[:, None] * inv[None, :]
        return (np.concatenate([np.cos(ang)] * 2, 1).astype(np.float32),
                np.concatenate([np.sin(ang)] * 2, 1).astype(np.float32))

    def proj(self, layer, t, h, heads):
        p = "model.layers.%d.self_attn.%s_proj." % (layer, t)
        y = h @ self.W[p + "weight"].T
        if p + "bias" in self.W:
            y = y + self.W[p + "bias"]
        return y.reshape(len(h), heads, self.d)

    def weight_smoothing(self):
        """Per layer [kv_heads, d]: sqrt(sqrt(|W_k pair|^2 / mean |W_q pair|^2)), one value per rotary pair."""
        out, half, g = [], self.d // 2, self.H // self.Hkv
        for layer in range(self.L):
            p = "model.layers.%d." % layer
            n = self.W[p + "input_layernorm.weight"]
            wk = (self.W[p + "self_attn.k_proj.weight"] * n).reshape(self.Hkv, self.d, -1)
            wq = (self.W[p + "self_attn.q_proj.weight"] * n).reshape(self.Hkv, g, self.d, -1)
            nk, nq = (wk ** 2).sum(-1), (wq ** 2).sum(-1).mean(1)
            r = ((nk[:, :half] + nk[:, half:]) / (nq[:, :half] + nq[:, half:])) ** 0.25
            out.append(np.concatenate([r, r], -1))
        return np.stack(out).astype(np.float32)

    def chunk_nll(self, ids, k_rule, v_rule, stats, collect=None):
        """Sum of -log p over the second half of the chunk, and the count scored."""
        n = len(ids)
        cos, sin = self.rope_tables(n)
        half = self.d // 2

        def rope(x):   # in float32, as the engine rotates (refmodel's rotation is float64)
            rot = np.concatenate([-x[..., half:], x[..., :half]], -1)
            return x * cos[:, None, :] + rot * sin[:, None, :]

        def rms(x, w):
            return rms_norm(x, w, self.eps)

        mask = np.triu(np.full((n, n), -np.inf, np.float32), 1)
        x = self.W["model.embed_tokens.weight"][ids]
        for layer in range(self.L):
            p = "model.layers.%d." % layer
            h = rms(x, self.W[p + "input_layernorm.weight"])
            q = rope(self.proj(layer, "q", h, self.H))
            k_raw = self.proj(layer, "k", h, self.Hkv)
            k = rope(k_raw)
            v = self.proj(layer, "v", h, self.Hkv)
            if collect is not None:
                collect(layer, q, k, k_raw)
            k, v = k_rule.apply(k, layer, stats), v_rule.apply(v, layer, stats)
            rep = self.H // self.Hkv
            s = np.einsum("qhd,khd->hqk", q, np.repeat(k, rep, 1)) / math.sqrt(self.d) + mask
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            a = np.einsum("hqk,khd->qhd", s, np.repeat(v, rep, 1)).reshape(n, self.H * self.d)
            o = a @ self.W[p + "self_attn.o_proj.weight"].T
            x = x + (o + self.W[p + "self_attn.o_proj.bias"] if p + "self_attn.o_proj.bias" in self.W else o)
            h = rms(x, self.W[p + "post_attention_layernorm.weight"])
            gate, up = h @ self.W[p + "mlp.gate_proj.weight"].T, h @ self.W[p + "mlp.up_proj.weight"].T
            x = x + (silu(gate) * up) @ self.W[p + "mlp.down_proj.weight"].T
        first = n // 2
        logits = rms(x[first:n - 1], self.W["model.norm.weight"]) @ self.head.T
        logits -= logits.max(-1, keepdims=True)
        lp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        targets = ids[first + 1:]
        return -float(lp[np.arange(len(targets)), targets].sum()), len(targets)


def chunks(tokenizer, path, ctx, count, bos):
    try:
        with open(path, encoding="utf-8") as f:
            ids = tokenizer.encode(f.read(), add_special_tokens=False).ids
    except (OSError, UnicodeDecodeError) as e:
        raise SystemExit("kv_quant_study: cannot read the text %s (%s)" % (path, e))
    if len(ids) < ctx * count:
        raise SystemExit("kv_quant_study: %s has %d tokens, %d chunks of %d need %d"
                         % (path, len(ids), count, ctx, ctx * count))
    out = []
    for c in range(count):
        a = np.array(ids[c * ctx:(c + 1) * ctx], dtype=np.int64)
        if bos is not None:
            a[0] = int(bos)
        out.append(a)
    return out


def calibrate(model, ids_list, clamp=0.0, positions=512):
    """Per layer [kv_heads, d]: mean post-RoPE key, and s = sqrt(std(k) / rms(q)) (q averaged over the
    query heads that share the kv head), normalised to geometric mean 1 per head."""
    g = model.H // model.Hkv
    acc = [dict(n=0, k=0.0, kk=0.0, qq=0.0, kr=0.0) for _ in range(model.L)]

    def collect(layer, q, k, k_raw):
        a = acc[layer]
        a["kr"] = a["kr"] + k_raw.astype(np.float64).sum(0)
        a["n"] += len(k)
        a["k"] = a["k"] + k.astype(np.float64).sum(0)
        a["kk"] = a["kk"] + (k.astype(np.float64) ** 2).sum(0)
        a["qq"] = a["qq"] + (q.astype(np.float64) ** 2).sum(0).reshape(model.Hkv, g, model.d).mean(1)

    f16_rule = Rule("f16")
    for ids in ids_list:
        model.chunk_nll(ids, f16_rule, f16_rule, {}, collect)
    return finish_stats(acc, model.theta, model.d, clamp, positions)


def finish_stats(acc, theta, d, clamp, positions):
    """mu (post-RoPE mean), s and the turned raw mean per layer from accumulated sums (see calibrate)."""
    mean, smooth, rmean = [], [], []
    half = d // 2
    ang = np.arange(positions)[:, None] * default_inv_freq(d, theta)[None, :]
    c_avg, s_avg = np.cos(ang).mean(0), np.sin(ang).mean(0)
    for a in acc:
        m = a["kr"] / a["n"]
        lo, hi = m[:, :half], m[:, half:]
        rmean.append(np.concatenate([lo * c_avg - hi * s_avg, hi * c_avg + lo * s_avg], -1))
        mu = a["k"] / a["n"]
        std = np.sqrt(np.maximum(a["kk"] / a["n"] - mu * mu, 0.0))
        s = np.sqrt(np.maximum(std, 1e-12) / np.maximum(np.sqrt(a["qq"] / a["n"]), 1e-12))
        mean.append(mu)
        s = s / np.exp(np.log(s).mean(-1, keepdims=True))
        smooth.append(np.clip(s, 1.0 / clamp, clamp) if clamp > 0 else s)
    return np.stack(mean).astype(np.float32), np.stack(smooth).astype(np.float32), np.stack(rmean).astype(np.float32)


def read_reach_calibration(path, model):
    """A calibration reach saved (--kv-calib-save: "REACHKVC", u32 version 1, layers, kv heads, head_dim, then
    per layer u32 rows and f32 [kv heads][raw mean, rotated mean, M2, rotated q^2 mean][head_dim]) as the
    sums calibrate() accumulates, so the study can score the engine's own statistics."""
    raw = open(path, "rb").read()
    if raw[:8] != b"REACHKVC":
        raise SystemExit("kv_quant_study: %s is not a reach key calibration" % path)
    version, layers, hkv, d = np.frombuffer(raw[8:24], "<u4")
    if version != 1 or (layers, hkv, d) != (model.L, model.Hkv, model.d):
        raise SystemExit("kv_quant_study: %s: version %d, %d layers x %d kv heads x %d do not fit this model"
                         % (path, version, layers, hkv, d))
    acc, at = [], 24
    for _ in range(layers):
        n = int(np.frombuffer(raw[at:at + 4], "<u4")[0])
        f = np.frombuffer(raw[at + 4:at + 4 + 16 * hkv * d], "<f4").astype(np.float64).reshape(hkv, 4, d)
        at += 4 + 16 * hkv * d
        acc.append(dict(n=n, kr=f[:, 0] * n, k=f[:, 1] * n, kk=f[:, 2] + f[:, 1] ** 2 * n, qq=f[:, 3] * n))
    return acc


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--text", required=True)
    ap.add_argument("--calib", help="calibration text for +mean / +smooth (not the scored text)")
    ap.add_argument("--calib-file", help="instead of --calib: the statistics reach saved (--kv-calib-save FILE)")
    ap.add_argument("--chunks", type=int, default=20)
    ap.add_argument("--calib-chunks", type=int, default=8)
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--calib-ctx", type=int, default=0,
                    help="tokens per calibration chunk (default --ctx; reach calibrates on its first prefill "
                         "chunk: 256 by default)")
    ap.add_argument("--clamp", type=float, default=0,
                    help="keep s within [1/C, C] after its normalisation (reach: 16; 0: no bound)")
    ap.add_argument("--k", default="f16,q8_0,q4_0,q4_0h")
    ap.add_argument("--v", default="f16")
    a = ap.parse_args()
    from tokenizers import Tokenizer
    model = Model(a.model)
    tok = Tokenizer.from_file(os.path.join(a.model, "tokenizer.json"))
    k_rules = [Rule(r) for r in a.k.split(",")]
    v_rule = Rule(a.v)
    if v_rule.transforms - {"mse", "sink"}:
        raise SystemExit("kv_quant_study: --v %s: +mean / +smooth / +wsmooth are key transforms" % a.v)
    stats = {"wsmooth": model.weight_smoothing()}
    if any(r.needs_calibration for r in k_rules):
        if a.calib_file:
            stats["mean"], stats["smooth"], stats["rmean"] = finish_stats(
                read_reach_calibration(a.calib_file, model), model.theta, model.d, a.clamp, a.ctx)
        elif a.calib:
            t = time.time()
            stats["mean"], stats["smooth"], stats["rmean"] = calibrate(
                model, chunks(tok, a.calib, a.calib_ctx or a.ctx, a.calib_chunks, model.bos), a.clamp, a.ctx)
            print("calibrated on %d chunks of %s in %.0f s" % (a.calib_chunks, a.calib, time.time() - t), file=sys.stderr)
        else:
            raise SystemExit("kv_quant_study: +mean / +smooth need --calib FILE (a text other than --text) or --calib-file")
    data = chunks(tok, a.text, a.ctx, a.chunks, model.bos)
    ref = None
    print("| K rule | V rule | PPL | vs f16 K/V |\n|---|---|---:|---:|")
    runs = [(Rule("f16"), Rule("f16"))] + [(r, v_rule) for r in k_rules if r.text != "f16" or v_rule.text != "f16"]
    for rule, v in runs:
        t = time.time()
        nll, n = 0.0, 0
        for ids in data:
            a_nll, a_n = model.chunk_nll(ids, rule, v, stats)
            nll, n = nll + a_nll, n + a_n
        ppl = math.exp(nll / n)
        ref = ppl if ref is None else ref
        print("| %s | %s | %.4f | %+.2f %% |" % (rule.text, v.text, ppl, 100 * (ppl / ref - 1)), flush=True)
        print("  %s: %.0f s" % (rule.text, time.time() - t), file=sys.stderr)


if __name__ == "__main__":
    main()
