#!/usr/bin/python3
"""Checks tools/refmodel against EXTRAPOLATION.md §9 (T0-T11) plus self-consistency and a tiny
end-to-end run.  Plain asserts; run: /usr/bin/python3 tests/python/test_reference_vectors.py"""
import math
import os
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from refmodel import rope as R  # noqa: E402
from refmodel.attention import (Scheme, attention_logits, attention_reference,  # noqa: E402
                                classify_tile, relative_positions)

RTOL = 1e-5
PASSED = []


def close(got, want, rtol=RTOL, atol=1e-9, what=""):
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, "%s: shape %s vs %s" % (what, got.shape, want.shape)
    ok = np.abs(got - want) <= atol + rtol * np.abs(want)
    assert ok.all(), "%s:\n got  %s\n want %s" % (what, got, want)


def test(fn):
    fn()
    PASSED.append(fn.__name__)
    return fn


@test
def t0_layout():
    x = np.zeros((1, 8)); x[0, 0] = 1
    inv = R.default_inv_freq(8, 1e4)
    h = R.rotate_half_split(x, [1], inv)[0]
    close(h, [0.540302, 0, 0, 0, 0.841471, 0, 0, 0], 1e-6, what="T0 half-split")
    il = R.rotate_interleaved(x, [1], inv)[0]
    close(il, [0.540302, 0.841471, 0, 0, 0, 0, 0, 0], 1e-6, what="T0 interleaved")
    p = 7
    h = R.rotate_half_split(x, [p], inv)[0]
    close(h[[0, 4]], [math.cos(p), math.sin(p)], what="T0 p=7")


@test
def t1_default_linear():
    close(R.default_inv_freq(8, 1e4), [1, 0.1, 0.01, 0.001], what="T1 default")
    close(R.linear_inv_freq(8, 1e4, 4), [0.25, 0.025, 0.0025, 0.00025], what="T1 linear")
    inv, af = R.rope_parameters({"type": "linear", "factor": 4}, 8, 1e4, 2048)
    close(inv, [0.25, 0.025, 0.0025, 0.00025], what="T1 dispatch"); assert af == 1.0


@test
def t2_static_ntk():
    close(1e4 * 4 ** (4 / 3), 63496.04, 1e-7, what="T2 base")
    close(R.ntk_inv_freq(8, 1e4, 4), [1, 0.0629961, 0.00396850, 0.00025], what="T2 inv")
    inv, _ = R.rope_parameters({"rope_type": "ntk", "factor": 4}, 8, 1e4, 2048)
    close(inv, [1, 0.0629961, 0.00396850, 0.00025], what="T2 dispatch")


@test
def t3_dynamic_ntk():
    close(R.dynamic_ntk_inv_freq(8, 1e4, 2, 2048, 2048), [1, 0.1, 0.01, 0.001], what="T3 2048")
    close(R.dynamic_ntk_inv_freq(8, 1e4, 2, 2048, 100), [1, 0.1, 0.01, 0.001], what="T3 short")
    want = [1, 0.0693361, 0.00480750, 0.000333333]
    close(R.dynamic_ntk_inv_freq(8, 1e4, 2, 2048, 4096), want, what="T3 4096")
    close(1e4 * 3 ** (4 / 3), 43267.49, 1e-7, what="T3 base")
    # vLLM static table at max_len = Lo*s = same numbers
    inv, _ = R.rope_parameters({"rope_type": "dynamic", "factor": 2}, 8, 1e4, 2048, seq_len=4096)
    close(inv, want, what="T3 dispatch")


@test
def t4_yarn_small():
    d, base, s = 8, 1e4, 4
    lo, hi = R.yarn_correction_range(d, base, 2048, 32, 1, truncate=False)
    close([lo, hi], [1.00800, 2.51315], 1e-5, what="T4 cd")
    for Lo in (2048, 4096):
        assert R.yarn_correction_range(d, base, Lo, 32, 1) == (1, 3), Lo
    inv, af = R.yarn_parameters(d, base, s, 2048)
    close(inv, [1, 0.1, 0.00625, 0.00025], what="T4 inv")
    close(af, 1.1386294, 1e-7, what="T4 af")
    ang = 1000 * inv
    close(ang, [1000, 100, 6.25, 0.25], what="T4 angles")
    close(np.cos(ang) * af, [0.640341, 0.981862, 1.138003, 1.103232], 1e-5, what="T4 cos")
    close(np.sin(ang) * af, [0.941509, -0.576563, -0.037779, 0.281701], 1e-5, 1e-6, what="T4 sin")
    # through rotate_half_split: e_j rotated at p=1000
    x = np.eye(8)[:4][:, None, :]          # 4 vectors, treat as [n=4 (all pos 1000), 1, 8]
    out = R.rotate_half_split(x, [1000] * 4, inv, af)[:, 0, :]
    close([out[j, j] for j in range(4)], np.cos(ang) * af, what="T4 rotate cos")
    close([out[j, j + 4] for j in range(4)], np.sin(ang) * af, atol=1e-9, what="T4 rotate sin")
    inv2, _ = R.rope_parameters({"rope_type": "yarn", "factor": 4, "truncate": False,
                                 "original_max_position_embeddings": 2048}, 8, 1e4, 8192)
    th2 = 0.01
    close((inv2[2] / th2 - 0.25) / 0.75, 0.340930, 1e-5, what="T4 truncate=False ext2")
    close(inv2[2], 0.00505697, 1e-5, what="T4 truncate=False inv2")


@test
def t5_yarn_large():
    lo, hi = R.yarn_correction_range(128, 1e4, 4096, 32, 1, truncate=False)
    close([lo, hi], [20.944, 45.027], 1e-4, what="T5 raw")
    assert R.yarn_correction_range(128, 1e4, 4096) == (20, 46)
    inv, af = R.yarn_parameters(128, 1e4, 4, 4096)
    th = R.default_inv_freq(128, 1e4)
    close(inv[:21], th[:21], what="T5 unchanged")
    close(inv[[20, 21, 33, 45, 63]], [0.0562341, 0.0472920, 0.00541228, 4.29403e-4, 2.88695e-5],
          what="T5 inv")
    close(inv[46:], th[46:] / 4, what="T5 interp")
    close(1 - (21 - 20) / 26, 0.961538, 1e-6, what="T5 ext21")
    assert R.yarn_correction_range(128, 1e6, 32768) == (23, 40)


@test
def t6_mscale():
    table = {2: 1.069315, 4: 1.138629, 8: 1.207944, 16: 1.277259, 32: 1.346574, 40: 1.368888,
             64: 1.415888}
    for s, want in table.items():
        _, af = R.yarn_parameters(8, 1e4, s, 2048)
        close(af, want, 1e-6, what="T6 s=%d" % s)
    for s, sq in {2: 1.143434, 4: 1.296477, 8: 1.459129, 16: 1.631390, 32: 1.813260}.items():
        close(R.yarn_parameters(8, 1e4, s, 2048)[1] ** 2, sq, 1e-6, what="T6 sq s=%d" % s)
    for m in (1.0, 0.707):
        assert R.yarn_parameters(8, 1e4, 40, 4096, mscale=m, mscale_all_dim=m)[1] == 1.0
    assert R.yarn_parameters(8, 1e4, 40, 4096, attention_factor=0.5)[1] == 0.5
    close(math.sqrt(1 + math.log(32) / math.log(4096)), 1.190238, 1e-6, what="T6 longrope")


@test
def t7_llama3():
    th = R.default_inv_freq(8, 5e5)
    close(th, [1, 0.0376060, 1.41421e-3, 5.31830e-5], what="T7 theta")
    close(2 * math.pi / th, [6.283, 167.08, 4442.88, 118142.8], 1e-4, what="T7 lambda")
    close((8192 / (2 * math.pi / th[2]) - 1) / 3, 0.281283, 1e-5, what="T7 sm")
    close(R.llama3_inv_freq(8, 5e5, 8, 1, 4, 8192), [1, 0.0376060, 5.24846e-4, 6.64787e-6],
          what="T7 d=8")
    want16 = [1, 0.193923, 0.0376060, 0.00729266, 5.24846e-4, 3.42810e-5, 6.64787e-6, 1.28917e-6]
    rs = {"rope_type": "llama3", "factor": 8, "low_freq_factor": 1, "high_freq_factor": 4,
          "original_max_position_embeddings": 8192}
    inv, af = R.rope_parameters(rs, 16, 5e5, 131072)
    close(inv, want16, what="T7 d=16"); assert af == 1.0


def _scheme1(method, **kw):
    return Scheme(inv_freq=np.array([1.0]), method=method, scale=1.0, **kw)


@test
def t8_relative_positions():
    rr = relative_positions(_scheme1("rerope", window=4), 7, range(8))[0]
    close(rr, [4, 4, 4, 4, 3, 2, 1, 0], what="T8 rerope")
    lk = relative_positions(_scheme1("leaky_rerope", window=4, leaky_k=2), 7, range(8))[0]
    close(lk, [5.5, 5, 4.5, 4, 3, 2, 1, 0], what="T8 leaky")
    se = relative_positions(_scheme1("self_extend", window=4, group=2), 9, range(10))[0]
    close(se, [6, 6, 5, 5, 4, 4, 3, 2, 1, 0], what="T8 self-extend")
    # scalar d=2 check through the two-matrix logits: q=k=(1,0), theta=1, score = cos(rel)
    n = 6
    q = np.tile([1.0, 0.0], (n, 1, 1)); k = q.copy()
    want = {"rope": [1, .5403, -.4161, -.9900, -.6536, .2837],
            "rerope": [1, .5403, -.4161, -.4161, -.4161, -.4161],
            "leaky_rerope": [1, .5403, -.4161, -.8011, -.9900, -.9365]}
    for method, w in want.items():
        s = _scheme1(method, window=2, leaky_k=2)
        S = attention_logits(q[:1], k, [5], range(n), s)
        close(S[0, 0, ::-1], w, 0, 6e-5, what="T8 scalar " + method)


@test
def t9_logn():
    L = 4096
    close(R.logn_factor([0, 1, 4094, 4095], L), [1, 1, 1, 1], what="T9 <=4095")
    close(R.logn_factor([8191, 16383], L), [1.083333, 1.166667], 1e-6, what="T9")
    close(R.logn_factor([100000], 0), [1], what="T9 off")


def _tile_counts(L, B, W, brute):
    n = -(-L // B)
    c = {"window": 0, "mixed": 0, "outside": 0, "skip": 0}
    for a in range(n):
        for b in range(n):
            qlo, qhi, klo, khi = a * B, min(L, a * B + B) - 1, b * B, min(L, b * B + B) - 1
            cls = classify_tile(qlo, qhi, klo, khi, W)
            if brute:
                r = np.arange(qlo, qhi + 1)[:, None] - np.arange(klo, khi + 1)[None, :]
                r = r[r >= 0]
                bf = "skip" if r.size == 0 else ("window" if (r < W).all() else
                                                 "outside" if (r >= W).all() else "mixed")
                assert bf == cls, (L, B, W, a, b, bf, cls)
            c[cls] += 1
    return c


def _formula_counts(n, B, W):
    m, t = divmod(W, B)
    win = m * n - m * (m - 1) // 2
    if t in (0, 1):
        mixed, out = n - m, (n - m - 1) * (n - m) // 2
    else:
        mixed, out = (n - m) + (n - m - 1), (n - m - 2) * (n - m - 1) // 2
    return {"window": win, "mixed": mixed, "outside": out}


@test
def t10_tiles():
    c = _tile_counts(4096, 64, 512, brute=True)
    assert (c["window"], c["mixed"], c["outside"]) == (484, 56, 1540), c
    assert c["window"] + c["mixed"] + c["outside"] == 2080
    for L, B, W in [(64, 8, 5), (64, 8, 16), (64, 8, 17), (64, 8, 18), (128, 16, 40),
                    (256, 16, 47), (256, 16, 48), (256, 16, 49), (256, 16, 50)]:
        c = _tile_counts(L, B, W, brute=True)
        if W >= B:
            f = _formula_counts(L // B, B, W)
            assert all(c[k] == f[k] for k in f), (L, B, W, c, f)
    _tile_counts(100, 16, 37, brute=True)                  # ragged last tile
    assert classify_tile(0, 7, 0, 7, 5) == "mixed"          # W < B: diagonal tile mixed
    assert classify_tile(10, 17, 3, 9, 100) == "window"
    assert classify_tile(5, 6, 7, 9, 1) == "skip"


@test
def t11_alibi():
    want = [2.0 ** -(i + 1) for i in range(8)]
    close(R.alibi_slopes(8), want, what="T11"); close(R.alibi_slopes_ggml(8, 8.0), want, what="T11 ggml")
    close(R.alibi_slopes(12), R.alibi_slopes_ggml(12, 8.0), what="T11 H=12")


def _plain_attention(q, k, v, inv):
    """Independent plain causal RoPE attention via complex multiplication (half-split pairs)."""
    n, H, d = q.shape
    h = d // 2
    ph = np.exp(1j * np.arange(n)[:, None] * inv[None, :])[:, None, :]
    qc = (q[..., :h] + 1j * q[..., h:]) * ph
    kc = (k[..., :h] + 1j * k[..., h:]) * ph
    kc = np.repeat(kc, H // k.shape[1], axis=1); vv = np.repeat(v, H // v.shape[1], axis=1)
    out = np.zeros_like(q)
    for hh in range(H):
        S = (qc[:, hh] @ kc[:, hh].conj().T).real / math.sqrt(d)
        S[np.triu_indices(n, 1)] = -np.inf
        P = np.exp(S - S.max(1, keepdims=True)); P /= P.sum(1, keepdims=True)
        out[:, hh] = P @ vv[:, hh]
    return out


@test
def self_consistency():
    rng = np.random.default_rng(1)
    n, H, Hkv, d = 23, 4, 2, 16
    q, k, v = (rng.standard_normal((n, hh, d)) for hh in (H, Hkv, Hkv))
    inv = R.default_inv_freq(d, 1e4)
    pos = np.arange(n)
    ref = _plain_attention(q, k, v, inv)
    base = attention_reference(q, k, v, pos, pos, Scheme(inv_freq=inv))
    close(base, ref, 1e-10, 1e-12, what="default vs plain")
    for s in (Scheme(inv_freq=inv, method="rerope", window=n),
              Scheme(inv_freq=inv, method="rerope", window=n + 50),
              Scheme(inv_freq=inv, method="leaky_rerope", window=3, leaky_k=1.0),
              Scheme(inv_freq=inv, method="self_extend", window=4, group=1),
              Scheme(inv_freq=inv, logn_train_len=n + 1),
              Scheme(inv_freq=inv, attn_window=n)):
        close(attention_reference(q, k, v, pos, pos, s), ref, 1e-10, 1e-12, what=str(s.method))
    # dual-branch logits == q . R(-rel) k for generic d (rel from relative_positions)
    for s in (Scheme(inv_freq=inv, method="rerope", window=5),
              Scheme(inv_freq=inv, method="leaky_rerope", window=5, leaky_k=4.0),
              Scheme(inv_freq=inv, method="self_extend", window=6, group=3)):
        S = attention_logits(q, k, pos, pos, s)
        rel = relative_positions(s, pos, pos)
        for i in (0, 7, n - 1):
            kr = R.rotate_half_split(k[:i + 1], -rel[i, :i + 1], inv)
            want = np.einsum("hd,khd->hk", q[i], np.repeat(kr, H // Hkv, axis=1)) / math.sqrt(d)
            close(S[:, i, :i + 1], want, 1e-10, 1e-12, what="rel " + s.method)
    # chunked prefill: later query rows against all keys == rows of the one-shot result
    for s in (Scheme(inv_freq=inv, method="leaky_rerope", window=5, leaky_k=4.0, logn_train_len=4),
              Scheme(inv_freq=inv, method="self_extend", window=6, group=3),
              Scheme(inv_freq=inv, attn_window=4, attn_sinks=2, qk_norm="cos")):
        full = attention_reference(q, k, v, pos, pos, s)
        part = attention_reference(q[15:], k, v, pos[15:], pos, s)
        close(part, full[15:], 1e-12, 1e-13, what="chunk " + s.method)
    # KeyNorm / QNA / CosA logits
    i, m = 9, 4
    qr = R.rotate_half_split(q[i:i + 1], [i], inv)[0]; kr = R.rotate_half_split(k[m:m + 1], [m], inv)[0]
    kr2, rep = np.repeat(kr, 2, axis=0), 2
    nq, nk = np.linalg.norm(q[i], axis=-1), np.repeat(np.linalg.norm(k[m], axis=-1), rep)
    dots = (qr * kr2).sum(-1)
    for mode, want in (("key", dots / nk), ("query", dots / nq),
                       ("cos", 4 * math.log(i + 1) * dots / nq / nk)):
        S = attention_logits(q, k, pos, pos, Scheme(inv_freq=inv, qk_norm=mode))
        close(S[:, i, m], want, 1e-10, what="qk_norm " + mode)
    S = attention_logits(q, k, pos, pos, Scheme(inv_freq=inv, qk_norm="cos", cos_n=64))
    close(S[:, i, m], 4 * math.log(64) * dots / nq / nk, 1e-10, what="cos_n")
    # window + sinks mask
    S = attention_logits(q, k, pos, pos, Scheme(inv_freq=inv, attn_window=3, attn_sinks=2))
    vis = np.isfinite(S[0])
    for i in range(n):
        assert [m for m in range(n) if vis[i, m]] == sorted(set(range(min(2, i + 1))) |
                                                          set(range(max(0, i - 2), i + 1))), i


@test
def safetensors_roundtrip():
    import json, struct
    from refmodel.safetensors_io import f32_to_bf16_bits, read_safetensors, write_safetensors
    bits = np.array([0x3F808000, 0x3F818000, 0x3F808001, 0x3F80FFFF, 0xBF7FFFFF], dtype=np.uint32)
    got = f32_to_bf16_bits(bits.view(np.float32))
    assert list(got) == [0x3F80, 0x3F82, 0x3F81, 0x3F81, 0xBF80], [hex(x) for x in got]
    t = {"b": np.arange(6, dtype=np.float32).reshape(2, 3) / 7, "a": np.ones(3, np.float32)}
    with tempfile.TemporaryDirectory() as tmp:
        for dt, tol in (("f32", 0), ("f16", 1e-3), ("bf16", 4e-3)):
            path = os.path.join(tmp, dt + ".safetensors")
            write_safetensors(path, t, dt)
            raw = open(path, "rb").read()
            n = struct.unpack("<Q", raw[:8])[0]
            h = json.loads(raw[8:8 + n])
            assert n % 8 == 0 and list(h) == ["__metadata__", "a", "b"], h
            assert h["__metadata__"] == {"format": "pt"} and h["a"]["data_offsets"][0] == 0
            assert h["b"]["data_offsets"][0] == h["a"]["data_offsets"][1]
            assert 8 + n + h["b"]["data_offsets"][1] == len(raw)
            back = read_safetensors(path)
            for k in t:
                close(back[k], t[k], tol, 0, what="roundtrip " + dt)


@test
def end_to_end_tiny_model():
    import make_tiny_model as mk
    from refmodel.model import forward, generate, layer_schemes, load_config, load_weights
    with tempfile.TemporaryDirectory() as tmp:
        logits = {}
        for dt in ("f32", "bf16", "f16"):
            mk.main([os.path.join(tmp, dt), "--dtype", dt])
        for dt in ("f32", "bf16", "f16"):
            cfg, W = load_config(os.path.join(tmp, dt)), load_weights(os.path.join(tmp, dt))
            ids = [298, 5, 17, 100, 250, 3, 42]
            sch = layer_schemes(cfg, seq_len=len(ids) + 8)
            logits[dt] = forward(cfg, W, ids, sch)
            assert np.isfinite(logits[dt]).all() and logits[dt].shape == (7, 300)
            gen = generate(cfg, W, ids, 8, sch)
            assert len(gen) == 8 and all(0 <= t < 300 for t in gen)
            full = forward(cfg, W, ids + gen[:-1], sch)
            assert [int(t) for t in np.argmax(full[6:], -1)] == gen
        spread = np.abs(logits["f32"]).max()
        assert 1.0 < spread < 50.0, spread
        for dt, tol in (("bf16", 0.05), ("f16", 0.005)):
            err = np.abs(logits[dt] - logits["f32"]).max() / spread
            assert 0 < err < tol, (dt, err)


if __name__ == "__main__":
    print("%d passed: %s" % (len(PASSED), ", ".join(PASSED)))
