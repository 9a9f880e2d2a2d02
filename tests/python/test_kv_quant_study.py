#!/usr/bin/env python3
"""tools/kv_quant_study.py's rounding rules against independent references: q8_0 / q4_0 against the
gguf package's own quantize + dequantize (llama.cpp's block formats), the block Walsh-Hadamard matrix
against its definition (H[i][j] = (-1)^popcount(i & j) / sqrt(32)), and the +mean / +smooth key
transforms on keys built to need them."""
import os
import sys

try:
    import numpy as np
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize, quantize
except ImportError:
    print("SKIP: numpy and gguf are not installed for this python3 (tools/venv.sh gguf)")
    sys.exit(0)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import kv_quant_study as kq  # noqa: E402

rng = np.random.default_rng(7)
failures = []


def check(name, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + name + (": " + detail if detail else ""))
    if not ok:
        failures.append(name)


# Rows with an outlier channel (the case the rotation is for) and plain Gaussian rows; an all-zero block.
x = rng.standard_normal((64, 128)).astype(np.float32)
x[::3, 5] *= 40.0
x[7, :32] = 0.0
for fmt, qtype in ((kq.q8_0, GGMLQuantizationType.Q8_0), (kq.q4_0, GGMLQuantizationType.Q4_0)):
    ref = dequantize(quantize(x, qtype), qtype).astype(np.float32)
    got = fmt(x)
    # Exact but for a value that lands on a rounding tie, which numpy's half-to-even and ggml's
    # roundf may break differently (q8_0): one step of that block's scale at most.
    diff = np.abs(got - ref)
    step = np.repeat(np.abs(ref.reshape(-1, 32)).max(1) / 7.0, 32).reshape(x.shape) + 1e-30
    check("%s matches gguf's quantize/dequantize" % qtype.name,
          np.mean(diff == 0) > 0.999 and np.all(diff <= step), "%d of %d values differ" % (np.sum(diff != 0), diff.size))

i = np.arange(32)
pop = np.vectorize(lambda v: bin(v).count("1"))(i[:, None] & i[None, :])
check("H32 is the orthonormal Walsh-Hadamard matrix", np.allclose(kq.H32, (-1.0) ** pop / np.sqrt(32), atol=1e-7))
check("rotate_blocks is its own inverse", np.allclose(kq.rotate_blocks(kq.rotate_blocks(x)), x, atol=1e-4))
# The rotation spreads an outlier: the rotated q4_0 rule rounds the outlier rows with less error.
plain = np.abs(kq.q4_0(x) - x)[::3].mean()
rotated = np.abs(kq.rotate_blocks(kq.q4_0(kq.rotate_blocks(x))) - x)[::3].mean()
check("rotated q4_0 has less error on outlier rows", rotated < 0.75 * plain, "%.4f vs %.4f" % (rotated, plain))

# +mean / +smooth: keys sharing a large per-channel offset, with one channel far wider than the rest
# ([n, kv_heads, d], stats per layer [kv_heads, d]).  The rule hands back keys in the original basis:
# centred on the offset and balanced they round with less error, and +mean with mu = the true offset
# is the same as rounding the centred keys and adding mu back.
keys = rng.standard_normal((256, 2, 64)).astype(np.float32)
keys[..., 3] *= 20.0
offset = (4.0 * rng.standard_normal((2, 64))).astype(np.float32)
stats = {"mean": offset[None], "smooth": np.where(np.arange(64) == 3, 20.0, 1.0).astype(np.float32)[None, None, :]}
# Smoothing moves error from the wide channel (where the queries are small) to the rest: compare there.
narrow = np.arange(64) != 3
err = {}
for text in ("q4_0h", "q4_0h+mean", "q4_0h+mean+smooth"):
    e = (kq.Rule(text).apply(keys + offset, 0, stats) - (keys + offset))[..., narrow]
    err[text] = np.sqrt(np.mean(e ** 2))
check("+mean rounds offset keys with less error", err["q4_0h+mean"] < 0.8 * err["q4_0h"],
      "%.4f vs %.4f" % (err["q4_0h+mean"], err["q4_0h"]))
check("+smooth rounds the narrow channels with less error", err["q4_0h+mean+smooth"] < err["q4_0h+mean"],
      "%.4f vs %.4f" % (err["q4_0h+mean+smooth"], err["q4_0h+mean"]))
centred = kq.rotate_blocks(kq.q4_0(kq.rotate_blocks(kq.f16(keys + offset) - offset))) + offset
check("+mean is centre, round, add back", np.allclose(kq.Rule("q4_0h+mean").apply(keys + offset, 0, stats), centred))
for bad in ("q5_0", "q4_0+foo", "f16h", "f16+mean", "q4_0+smooth+wsmooth"):
    try:
        kq.Rule(bad)
        check("rule %r is refused" % bad, False)
    except SystemExit:
        check("rule %r is refused" % bad, True)
r = kq.Rule("q4_0h+mean+smooth")
check("rule parsing", r.hadamard and r.fmt is kq.q4_0 and r.needs_calibration)
sys.exit(1 if failures else 0)
