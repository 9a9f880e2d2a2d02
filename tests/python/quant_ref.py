#!/usr/bin/env python3
"""Block quantization and GGUF reading through the PyPI `gguf` package, for tests/test_quantize.cpp.

usage: quant_ref.py quantize TYPE ROWS COLS IN OUT     f32 matrix (raw, row-major) -> GGML blocks
       quant_ref.py dequantize TYPE ROWS COLS IN OUT   GGML blocks -> f32 (gguf.quants.dequantize)
       quant_ref.py f16 IN OUT                         f32 values -> numpy float16 bits
       quant_ref.py dump GGUF OUTDIR [--unpermute NQ NKV]
                                                       what gguf.GGUFReader sees: OUTDIR/meta.json, the bytes
                                                       of tensor i in OUTDIR/i.bin and its values in OUTDIR/i.f32;
                                                       --unpermute: the values of blk.*.attn_q.* / attn_k.* go
                                                       through tools/convert_smollm2.py's unpermute (NQ / NKV heads)

TYPE: q8_0, q4_0 (gguf.quants.quantize) or q4_k.  gguf.quants has no Q4_K quantizer (it raises
NotImplementedError), so q4_k follows ggml's quantize_row_q4_K_ref (ggml-quants.c, the path llama.cpp's
llama-quantize takes without an importance matrix) in float32 NumPy, one rounding per operation in
the C order, vectorised over sub-blocks; it prints which implementation ran on stderr.

Exits 3 when `gguf` (or numpy) cannot be imported, so the caller can skip.
"""
import json
import os
import sys
import warnings

# Huge test magnitudes overflow f16 scales to inf, as they should: not worth a warning.
warnings.simplefilter("ignore", RuntimeWarning)

try:
    import numpy as np
    import gguf
    import gguf.quants
except ImportError as e:  # the C++ test prints a SKIP line
    print("quant_ref: %s" % e, file=sys.stderr)
    sys.exit(3)

F = np.float32
QT = {"q8_0": gguf.GGMLQuantizationType.Q8_0, "q4_0": gguf.GGMLQuantizationType.Q4_0,
      "q4_k": gguf.GGMLQuantizationType.Q4_K}


def nearest_int(v):
    """ggml's nearest_int: the mantissa of v + 1.5 * 2^23 (round half to even)."""
    s = (v.astype(F) + F(12582912.0)).astype(F)
    return (s.view(np.int32) & 0x007FFFFF) - 0x00400000


def make_qkx2_quants(x, w, nmax, rmin, rdelta, nstep):
    """x, w: (N, n) float32.  Returns scale (N,), the_min (N,), L (N, n) as ggml's make_qkx2_quants."""
    n = x.shape[1]
    mn = x[:, 0].copy()
    mx = x[:, 0].copy()
    sum_w = w[:, 0].copy()
    sum_x = sum_w * x[:, 0]
    for i in range(1, n):
        mn = np.where(x[:, i] < mn, x[:, i], mn)
        mx = np.where(x[:, i] > mx, x[:, i], mx)
        sum_w = sum_w + w[:, i]
        sum_x = sum_x + w[:, i] * x[:, i]
    mn = np.where(mn > 0, F(0), mn)
    flat = mx == mn
    rng = np.where(flat, F(1), mx - mn)   # flat rows are answered at the end
    iscale = F(nmax) / rng
    scale = F(1) / iscale
    L = np.clip(nearest_int(iscale[:, None] * (x - mn[:, None])), 0, nmax)
    best = np.zeros_like(mn)
    for i in range(n):
        diff = scale * L[:, i].astype(F) + mn - x[:, i]
        best = best + w[:, i] * (diff * diff)
    for step in range(nstep + 1):
        rng = np.where(flat, F(1), mx - mn)   # ggml moves `min` to each better fit: later steps use it
        iscale = (F(rmin) + F(rdelta) * F(step) + F(nmax)) / rng
        la = np.clip(nearest_int(iscale[:, None] * (x - mn[:, None])), 0, nmax)
        sum_l = np.zeros_like(mn)
        sum_l2 = np.zeros_like(mn)
        sum_xl = np.zeros_like(mn)
        for i in range(n):
            fl = la[:, i].astype(F)
            sum_l = sum_l + w[:, i] * fl
            sum_l2 = sum_l2 + w[:, i] * fl * fl
            sum_xl = sum_xl + w[:, i] * fl * x[:, i]
        D = sum_w * sum_l2 - sum_l * sum_l
        ok = D > 0
        Ds = np.where(ok, D, F(1))
        this_scale = (sum_w * sum_xl - sum_x * sum_l) / Ds
        this_min = (sum_l2 * sum_x - sum_l * sum_xl) / Ds
        pos = this_min > 0
        this_min = np.where(pos, F(0), this_min)
        this_scale = np.where(pos, sum_xl / np.where(pos, sum_l2, F(1)), this_scale)
        cur = np.zeros_like(mn)
        for i in range(n):
            diff = this_scale * la[:, i].astype(F) + this_min - x[:, i]
            cur = cur + w[:, i] * (diff * diff)
        upd = ok & (cur < best) & ~flat
        L = np.where(upd[:, None], la, L)
        best = np.where(upd, cur, best)
        scale = np.where(upd, this_scale, scale)
        mn = np.where(upd, this_min, mn)
    L = np.where(flat[:, None], 0, L)
    scale = np.where(flat, F(0), scale)
    return scale.astype(F), (-mn).astype(F), L


def q4_k(data):
    with np.errstate(all="ignore"):
        x = data.astype(F).reshape(-1, 8, 32)
        nb = x.shape[0]
        sum_x2 = np.zeros((nb, 8), F)
        for l in range(32):
            sum_x2 = sum_x2 + x[:, :, l] * x[:, :, l]
        av_x = np.sqrt(sum_x2 / F(32))
        weights = av_x[:, :, None] + np.abs(x)
        scales, mins, L = make_qkx2_quants(x.reshape(-1, 32), weights.reshape(-1, 32), 15, -1.0, 0.1, 20)
        scales = scales.reshape(nb, 8)
        mins = mins.reshape(nb, 8)
        L = L.reshape(nb, 8, 32)
        max_scale = np.maximum(scales.max(axis=1), F(0))
        max_min = np.maximum(mins.max(axis=1), F(0))
        inv_scale = np.where(max_scale > 0, F(63) / np.where(max_scale > 0, max_scale, F(1)), F(0))
        inv_min = np.where(max_min > 0, F(63) / np.where(max_min > 0, max_min, F(1)), F(0))
        ls = np.minimum(nearest_int(inv_scale[:, None] * scales) & 0xFF, 63).astype(np.uint8)
        lm = np.minimum(nearest_int(inv_min[:, None] * mins) & 0xFF, 63).astype(np.uint8)
        sc = np.zeros((nb, 12), np.uint8)
        sc[:, 0:4] = ls[:, 0:4]
        sc[:, 4:8] = lm[:, 0:4]
        sc[:, 8:12] = (ls[:, 4:8] & 0xF) | ((lm[:, 4:8] & 0xF) << 4)
        sc[:, 0:4] |= (ls[:, 4:8] >> 4) << 6
        sc[:, 4:8] |= (lm[:, 4:8] >> 4) << 6
        d = (max_scale / F(63)).astype(np.float16)
        dmin = (max_min / F(63)).astype(np.float16)
        dj = d.astype(F)[:, None] * ls.astype(F)        # the 6-bit values unpacked from sc are ls, lm
        dm = dmin.astype(F)[:, None] * lm.astype(F)
        nz = dj != 0
        q = np.clip(nearest_int((x + dm[:, :, None]) / np.where(nz, dj, F(1))[:, :, None]), 0, 15)
        L = np.where(nz[:, :, None], q, L).astype(np.uint8).reshape(nb, 4, 2, 32)
        qs = (L[:, :, 0, :] | (L[:, :, 1, :] << 4)).reshape(nb, 128)
        return np.concatenate([d.reshape(nb, 1).view(np.uint8), dmin.reshape(nb, 1).view(np.uint8), sc, qs],
                              axis=1).reshape(-1)


def quantize(t, data):
    try:
        out = gguf.quants.quantize(data, QT[t])
        print("quant_ref: %s by gguf.quants.quantize" % t, file=sys.stderr)
        return out.reshape(-1)
    except NotImplementedError:
        if t != "q4_k":
            raise
    print("quant_ref: q4_k by the ggml reference (gguf.quants has no Q4_K quantizer)", file=sys.stderr)
    return q4_k(data)


def plain(v):
    if isinstance(v, (bytes, bytearray)):
        return list(v)
    if isinstance(v, list):
        return [plain(x) for x in v]
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.floating):
        return float(v)
    return v


def convert_smollm2():
    import importlib.util
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "..", "..", "tools", "convert_smollm2.py")
    spec = importlib.util.spec_from_file_location("convert_smollm2", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def dump(path, outdir, heads=None):
    unpermute = convert_smollm2().unpermute if heads else None
    r = gguf.GGUFReader(path)
    kv = {}
    for key, f in r.fields.items():
        if key.startswith("GGUF."):
            continue
        kv[key] = {"types": [gguf.GGUFValueType(t).name for t in f.types], "value": plain(f.contents())}
    tensors = []
    for i, t in enumerate(r.tensors):
        raw = np.asarray(t.data).view(np.uint8).reshape(-1)
        raw.tofile(os.path.join(outdir, "%d.bin" % i))
        tt = gguf.GGMLQuantizationType(int(t.tensor_type))
        if tt == gguf.GGMLQuantizationType.BF16:
            vals = (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
        else:
            vals = gguf.quants.dequantize(raw, tt)
        vals = np.asarray(vals, dtype=np.float32).reshape(list(reversed([int(d) for d in t.shape])))
        if unpermute is not None and t.name.startswith("blk.") and (".attn_q." in t.name or ".attn_k." in t.name):
            vals = unpermute(vals, heads[0] if ".attn_q." in t.name else heads[1])
        np.ascontiguousarray(vals).reshape(-1).tofile(os.path.join(outdir, "%d.f32" % i))
        tensors.append({"name": t.name, "ne": [int(d) for d in t.shape], "type": int(t.tensor_type),
                        "nbytes": int(t.n_bytes)})
    meta = {"version": int(r.fields["GGUF.version"].contents()), "alignment": int(r.alignment), "kv": kv,
            "tensors": tensors}
    with open(os.path.join(outdir, "meta.json"), "w", encoding="utf-8") as f:
        json.dump(meta, f, ensure_ascii=False)


def main(argv):
    if len(argv) == 6 and argv[0] in ("quantize", "dequantize") and argv[1] in QT:
        t, rows, cols = argv[1], int(argv[2]), int(argv[3])
        if argv[0] == "quantize":
            data = np.fromfile(argv[4], dtype=np.float32).reshape(rows, cols)
            quantize(t, data).astype(np.uint8).tofile(argv[5])
        else:
            raw = np.fromfile(argv[4], dtype=np.uint8)
            gguf.quants.dequantize(raw, QT[t]).astype(np.float32).reshape(-1).tofile(argv[5])
    elif len(argv) == 3 and argv[0] == "f16":
        np.fromfile(argv[1], dtype=np.float32).astype(np.float16).view(np.uint16).tofile(argv[2])
    elif len(argv) == 3 and argv[0] == "dump":
        dump(argv[1], argv[2])
    elif len(argv) == 6 and argv[0] == "dump" and argv[3] == "--unpermute":
        dump(argv[1], argv[2], (int(argv[4]), int(argv[5])))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
