#!/usr/bin/env python3
"""Independent float64 NumPy reference forward of a Gemma 3 text model: a llama.cpp GGUF file
(general.architecture gemma3; every tensor dequantized with the PyPI gguf package's
gguf.quants.dequantize) or a Hugging Face directory (config.json of Gemma3ForCausalLM / gemma3_text and
*.safetensors), and a maker of tiny random Gemma 3 models for the tests.

usage: reference_gemma3.py MODEL --ids 1,2,3 [--logits-out F.bin] [--logprobs-out F.bin] [--json]
       reference_gemma3.py --make-tiny DIR [--seed S]

--logits-out writes float32 logits [rows, vocab] (every fed position); --logprobs-out writes, for
t < n-1, float64 log softmax(logits[t])[ids[t+1]] followed by the argmax of every row (int64), which
is what a per-token comparison of a large-vocabulary model needs without 300 x 262144 logits.
--json prints {"rows", "vocab"} on stdout.

The semantics are Hugging Face's modeling_gemma3 (and llama.cpp's gemma3 graph, which matches it):
embeddings x sqrt(hidden) (f32 for GGUF as llama.cpp does; the checkpoint's dtype for config.json);
RMSNorm x * (1 + w) in config.json form, x * w for GGUF (its converter stored 1 + w); a norm before and
after attention and before and after the MLP, each post norm before its residual add; per-head RMSNorm
of q and k before the half-split (NeoX) rotation; logits scale query_pre_attn_scalar^-0.5; local layers
(sliding_attention) see keys m with i - m < sliding_window and rotate with rope_local_base_freq; global
layers rotate with rope_theta and the config's rope_scaling (linear only); GELU(tanh)-gated MLP;
final norm; tied output.
"""
import argparse
import json
import math
import os
import struct
import sys

import numpy as np


# ----------------------------------------------------------------------------- loading

def _safetensors(dirname):
    out = {}
    for name in sorted(os.listdir(dirname)):
        if not name.endswith(".safetensors"):
            continue
        with open(os.path.join(dirname, name), "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            header = json.loads(f.read(n))
            data = f.read()
        for key, info in header.items():
            if key == "__metadata__":
                continue
            a, b = info["data_offsets"]
            raw = data[a:b]
            dt = info["dtype"]
            if dt == "F32":
                arr = np.frombuffer(raw, dtype="<f4")
            elif dt == "F16":
                arr = np.frombuffer(raw, dtype="<f2").astype(np.float32)
            elif dt == "BF16":
                arr = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
            else:
                raise SystemExit(f"{name}: tensor {key} has dtype {dt}; this reference reads F32/F16/BF16")
            out[key] = arr.reshape(info["shape"]).astype(np.float64)
    return out


def _round_dtype(v, dtype):
    f = np.float32(v)
    if dtype == "bfloat16":
        b = int(f.view(np.uint32))
        b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
        return float(np.uint32(b).view(np.float32))
    if dtype == "float16":
        return float(np.float16(f))
    return float(f)


def load_hf(dirname):
    with open(os.path.join(dirname, "config.json")) as f:
        cfg = json.load(f)
    if "text_config" in cfg:
        cfg = dict(cfg["text_config"], **{k: cfg[k] for k in ("tie_word_embeddings",) if k in cfg})
    t = _safetensors(dirname)
    pre = "model."
    L = cfg["num_hidden_layers"]
    if "layer_types" in cfg and cfg["layer_types"]:
        local = [lt == "sliding_attention" for lt in cfg["layer_types"]]
    else:
        pat = cfg.get("sliding_window_pattern", 6)
        local = [(i + 1) % pat != 0 for i in range(L)]
    rs = cfg.get("rope_scaling") or {}
    kind = rs.get("rope_type", rs.get("type", "default"))
    if kind not in ("default", "linear"):
        raise SystemExit(f"rope_scaling {kind} is not in this reference")
    dtype = cfg.get("torch_dtype", cfg.get("dtype", "float32"))
    m = dict(
        hidden=cfg["hidden_size"], heads=cfg["num_attention_heads"], kv_heads=cfg["num_key_value_heads"],
        head_dim=cfg["head_dim"], eps=cfg.get("rms_norm_eps", 1e-6), local=local,
        window=cfg.get("sliding_window", 4096), theta=cfg.get("rope_theta", 1e6),
        theta_local=cfg.get("rope_local_base_freq", 1e4),
        linear=rs.get("factor", 1.0) if kind == "linear" else 1.0,
        scale=cfg.get("query_pre_attn_scalar", 256) ** -0.5,
        embed_scale=_round_dtype(math.sqrt(cfg["hidden_size"]), dtype),
        embed=t[pre + "embed_tokens.weight"], norm=t[pre + "norm.weight"] + 1.0, layers=[])
    for i in range(L):
        p = f"{pre}layers.{i}."
        g = lambda k: t[p + k]  # noqa: E731
        m["layers"].append(dict(
            attn_norm=g("input_layernorm.weight") + 1, post_attn=g("post_attention_layernorm.weight") + 1,
            ffn_norm=g("pre_feedforward_layernorm.weight") + 1, post_ffn=g("post_feedforward_layernorm.weight") + 1,
            q_norm=g("self_attn.q_norm.weight") + 1, k_norm=g("self_attn.k_norm.weight") + 1,
            q=g("self_attn.q_proj.weight"), k=g("self_attn.k_proj.weight"), v=g("self_attn.v_proj.weight"),
            o=g("self_attn.o_proj.weight"), gate=g("mlp.gate_proj.weight"), up=g("mlp.up_proj.weight"),
            down=g("mlp.down_proj.weight")))
    return m


def load_gguf(path):
    from gguf import GGUFReader
    from gguf.quants import dequantize
    r = GGUFReader(path)

    def meta(key, default=None):
        f = r.fields.get(key)
        return default if f is None else f.contents()

    if meta("general.architecture") != "gemma3":
        raise SystemExit(f"{path}: general.architecture is {meta('general.architecture')}, not gemma3")
    tensors = {t.name: t for t in r.tensors}

    def get(name, dtype=np.float64):
        t = tensors[name]
        a = dequantize(t.data, t.tensor_type)
        return np.asarray(a).reshape([int(d) for d in reversed(list(t.shape))]).astype(dtype)

    H = meta("gemma3.embedding_length")
    L = meta("gemma3.block_count")
    d = meta("gemma3.attention.key_length")
    heads = meta("gemma3.attention.head_count")
    m = dict(
        hidden=H, heads=heads, kv_heads=meta("gemma3.attention.head_count_kv"), head_dim=d,
        eps=float(np.float32(meta("gemma3.attention.layer_norm_rms_epsilon"))),
        local=[(i + 1) % 6 != 0 for i in range(L)], window=meta("gemma3.attention.sliding_window"),
        theta=meta("gemma3.rope.freq_base", 1e6), theta_local=meta("gemma3.rope.freq_base_swa", 1e4), linear=1.0,
        scale=(H // heads if L == 62 else d) ** -0.5, embed_scale=float(np.float32(math.sqrt(H))),
        # The embedding stays f32 (262144 x 640): rows are gathered, and the output product runs in f64 blocks.
        embed=get("token_embd.weight", np.float32), norm=get("output_norm.weight"), layers=[])
    if meta("gemma3.rope.scaling.type") not in (None, "none"):
        raise SystemExit("rope scaling in a gemma3 GGUF is not in this reference")
    for i in range(L):
        p = f"blk.{i}."
        g = lambda k: get(p + k + ".weight")  # noqa: E731
        m["layers"].append(dict(
            attn_norm=g("attn_norm"), post_attn=g("post_attention_norm"), ffn_norm=g("ffn_norm"),
            post_ffn=g("post_ffw_norm"), q_norm=g("attn_q_norm"), k_norm=g("attn_k_norm"), q=g("attn_q"),
            k=g("attn_k"), v=g("attn_v"), o=g("attn_output"), gate=g("ffn_gate"), up=g("ffn_up"),
            down=g("ffn_down")))
    return m


# ----------------------------------------------------------------------------- forward

def rms(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rope(x, pos, base, d, factor):
    # Half-split (NeoX) pairs (j, j + d/2); linear scaling divides the frequencies.
    inv = 1.0 / base ** (np.arange(0, d, 2, dtype=np.float64) / d) / factor
    ang = pos[:, None] * inv[None, :]
    c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def forward(m, ids):
    n = len(ids)
    H, nh, nkv, d, eps = m["hidden"], m["heads"], m["kv_heads"], m["head_dim"], m["eps"]
    x = m["embed"][np.asarray(ids)].astype(np.float64) * m["embed_scale"]
    pos = np.arange(n, dtype=np.float64)
    i_idx, m_idx = np.arange(n)[:, None], np.arange(n)[None, :]
    for li, w in enumerate(m["layers"]):
        local = m["local"][li]
        h = rms(x, w["attn_norm"], eps)
        q = (h @ w["q"].T).reshape(n, nh, d)
        k = (h @ w["k"].T).reshape(n, nkv, d)
        v = (h @ w["v"].T).reshape(n, nkv, d)
        q, k = rms(q, w["q_norm"], eps), rms(k, w["k_norm"], eps)
        base, factor = (m["theta_local"], 1.0) if local else (m["theta"], m["linear"])
        q, k = rope(q, pos, base, d, factor), rope(k, pos, base, d, factor)
        mask = m_idx <= i_idx
        if local:
            mask = mask & (i_idx - m_idx < m["window"])
        o = np.empty((n, nh, d))
        for hh in range(nh):
            kv = hh // (nh // nkv)
            s = (q[:, hh, :] @ k[:, kv, :].T) * m["scale"]
            s = np.where(mask, s, -np.inf)
            s = np.exp(s - s.max(axis=1, keepdims=True))
            o[:, hh, :] = (s / s.sum(axis=1, keepdims=True)) @ v[:, kv, :]
        a = o.reshape(n, nh * d) @ w["o"].T
        x = x + rms(a, w["post_attn"], eps)
        h = rms(x, w["ffn_norm"], eps)
        f = (gelu_tanh(h @ w["gate"].T) * (h @ w["up"].T)) @ w["down"].T
        x = x + rms(f, w["post_ffn"], eps)
    x = rms(x, m["norm"], eps)
    E = m["embed"]
    logits = np.empty((n, E.shape[0]))
    for a in range(0, E.shape[0], 16384):
        logits[:, a:a + 16384] = x @ E[a:a + 16384].astype(np.float64).T
    return logits


# ----------------------------------------------------------------------------- tiny model

def make_tiny(dirname, seed, head_dim=32, kv_heads=2, window=16):
    """A random Gemma 3 in config.json + safetensors (f32): 6 layers, local:global 2:1, window 16 (or window),
    head_dim 32 != hidden / heads, query_pre_attn_scalar 24 != head_dim, linear rope scaling 2 on
    the global layers, norm weights around 0 (so 1 + w matters)."""
    rng = np.random.default_rng(seed)
    H, I, L, nh, nkv, d, V = 48, 96, 6, 4, kv_heads, head_dim, 300
    cfg = {
        "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "hidden_size": H,
        "intermediate_size": I, "num_hidden_layers": L, "num_attention_heads": nh, "num_key_value_heads": nkv,
        "head_dim": d, "vocab_size": V, "max_position_embeddings": 1024, "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0, "rope_scaling": {"rope_type": "linear",
                                                                                  "factor": 2.0},
        "sliding_window": window, "sliding_window_pattern": 3, "query_pre_attn_scalar": 24,
        "hidden_activation": "gelu_pytorch_tanh", "final_logit_softcapping": None, "attn_logit_softcapping": None,
        "tie_word_embeddings": True, "torch_dtype": "float32", "bos_token_id": 2, "eos_token_id": 1,
    }
    t = {"model.embed_tokens.weight": rng.normal(0, 1.0, (V, H)), "model.norm.weight": rng.normal(0, 0.3, H)}
    for i in range(L):
        p = f"model.layers.{i}."
        for k, shape, sd in [("input_layernorm.weight", (H,), 0.3), ("post_attention_layernorm.weight", (H,), 0.3),
                             ("pre_feedforward_layernorm.weight", (H,), 0.3),
                             ("post_feedforward_layernorm.weight", (H,), 0.3),
                             ("self_attn.q_norm.weight", (d,), 0.3), ("self_attn.k_norm.weight", (d,), 0.3),
                             ("self_attn.q_proj.weight", (nh * d, H), H ** -0.5),
                             ("self_attn.k_proj.weight", (nkv * d, H), H ** -0.5),
                             ("self_attn.v_proj.weight", (nkv * d, H), H ** -0.5),
                             ("self_attn.o_proj.weight", (H, nh * d), (nh * d) ** -0.5),
                             ("mlp.gate_proj.weight", (I, H), H ** -0.5), ("mlp.up_proj.weight", (I, H), H ** -0.5),
                             ("mlp.down_proj.weight", (H, I), I ** -0.5)]:
            t[p + k] = rng.normal(0, sd, shape)
    os.makedirs(dirname, exist_ok=True)
    header, blobs, off = {}, [], 0
    for k in sorted(t):
        b = t[k].astype("<f4").tobytes()
        header[k] = {"dtype": "F32", "shape": list(t[k].shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    hb = json.dumps(header).encode()
    hb += b" " * (-len(hb) % 8)
    with open(os.path.join(dirname, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(hb)) + hb + b"".join(blobs))
    with open(os.path.join(dirname, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model", nargs="?")
    p.add_argument("--ids")
    p.add_argument("--logits-out")
    p.add_argument("--logprobs-out")
    p.add_argument("--json", action="store_true")
    p.add_argument("--make-tiny", metavar="DIR")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--head-dim", type=int, default=32, help="with --make-tiny")
    p.add_argument("--kv-heads", type=int, default=2, help="with --make-tiny")
    p.add_argument("--window", type=int, default=16, help="with --make-tiny: the local layers' sliding window")
    a = p.parse_args(argv)
    if a.make_tiny:
        make_tiny(a.make_tiny, a.seed, a.head_dim, a.kv_heads, a.window)
        return
    if not a.model or not a.ids:
        p.error("MODEL and --ids are needed")
    ids = [int(s) for s in a.ids.split(",") if s]
    m = load_gguf(a.model) if a.model.endswith(".gguf") else load_hf(a.model)
    logits = forward(m, ids)
    if a.logits_out:
        logits.astype("<f4").tofile(a.logits_out)
    if a.logprobs_out:
        mx = logits.max(axis=1, keepdims=True)
        lse = (mx + np.log(np.exp(logits - mx).sum(axis=1, keepdims=True)))[:, 0]
        lp = np.array([logits[t, ids[t + 1]] - lse[t] for t in range(len(ids) - 1)], dtype="<f8")
        with open(a.logprobs_out, "wb") as f:
            f.write(lp.tobytes() + logits.argmax(axis=1).astype("<i8").tobytes())
    if a.json:
        print(json.dumps({"rows": len(ids), "vocab": int(logits.shape[1])}))


if __name__ == "__main__":
    sys.exit(main())
