"""RoPE frequency tables, rotations and scalar scales (float64, written from EXTRAPOLATION.md §2-§4).

All inv_freq functions return a float64 array of length d/2 (d = rotary dim); j indexes pairs.
  default_inv_freq(d, base)                         θ_j = base^(-2j/d)
  linear_inv_freq(d, base, factor)                  θ_j / s
  ntk_inv_freq(d, base, factor)                     static NTK: base' = base·s^(d/(d-2))
  dynamic_ntk_inv_freq(d, base, factor, orig_len, seq_len)
        HF: L = max(seq_len, orig); base' = base·(s·L/orig − (s−1))^(d/(d−2))
  yarn_parameters(d, base, factor, orig_len, beta_fast=32, beta_slow=1, truncate=True,
                  attention_factor=None, mscale=None, mscale_all_dim=None) -> (inv_freq, af)
  yarn_correction_range(...) -> (low, high)
  llama3_inv_freq(d, base, factor, low_freq_factor, high_freq_factor, orig_len)
  rope_parameters(rope_scaling: dict|None, d, base, max_pos, seq_len=None) -> (inv_freq, af)
        dispatch on rope_type/type: default|linear|ntk|dynamic|yarn|llama3; the reach-only
        position-remapping types rerope|leaky_rerope|self_extend use the default table.
        original length = rope_scaling["original_max_position_embeddings"] or max_pos.
  rotate_half_split(x[..., d], pos[n] (broadcast over leading axis 0), inv_freq, af=1.0)
        HF layout: pair j = (x[j], x[j+rot/2]); out = x·cos + rotate_half(x)·sin, cos/sin × af.
        If len(inv_freq)*2 < d only the first 2·len(inv_freq) dims rotate (partial rotary).
  rotate_interleaved(x, pos, inv_freq, af=1.0)       Meta/GGUF layout, pair j = (x[2j], x[2j+1]).
  logn_factor(pos, train_len)     max(1, ln(pos+1)/ln(train_len)); 1 if train_len <= 0.
  alibi_slopes(H); alibi_slopes_ggml(H, max_bias=8)
"""
import math

import numpy as np


def default_inv_freq(d, base):
    return 1.0 / (float(base) ** (np.arange(0, d, 2, dtype=np.float64) / d))


def linear_inv_freq(d, base, factor):
    return default_inv_freq(d, base) / float(factor)


def ntk_inv_freq(d, base, factor):
    return default_inv_freq(d, float(base) * float(factor) ** (d / (d - 2.0)))


def dynamic_ntk_inv_freq(d, base, factor, orig_len, seq_len):
    s = float(factor)
    L = max(int(seq_len), int(orig_len))
    b = float(base) * ((s * L / orig_len) - (s - 1.0)) ** (d / (d - 2.0))
    return default_inv_freq(d, b)


def _get_mscale(s, m=1.0):
    return 1.0 if s <= 1 else 0.1 * m * math.log(s) + 1.0


def yarn_correction_range(d, base, orig_len, beta_fast=32, beta_slow=1, truncate=True):
    def cd(n_rot):
        return d * math.log(orig_len / (n_rot * 2 * math.pi)) / (2 * math.log(base))
    low, high = cd(beta_fast), cd(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    return max(low, 0), min(high, d - 1)


def yarn_parameters(d, base, factor, orig_len, beta_fast=32, beta_slow=1, truncate=True,
                    attention_factor=None, mscale=None, mscale_all_dim=None):
    s = float(factor)
    if attention_factor is None:
        if mscale and mscale_all_dim:
            attention_factor = _get_mscale(s, mscale) / _get_mscale(s, mscale_all_dim)
        else:
            attention_factor = _get_mscale(s)
    low, high = yarn_correction_range(d, base, orig_len, beta_fast or 32, beta_slow or 1, truncate)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(d // 2, dtype=np.float64) - low) / (high - low), 0.0, 1.0)
    ext = 1.0 - ramp
    theta = default_inv_freq(d, base)
    inv = (theta / s) * (1.0 - ext) + theta * ext
    return inv, float(attention_factor)


def llama3_inv_freq(d, base, factor, low_freq_factor, high_freq_factor, orig_len):
    theta = default_inv_freq(d, base)
    lam = 2 * math.pi / theta
    low_wl, high_wl = orig_len / low_freq_factor, orig_len / high_freq_factor
    out = np.where(lam > low_wl, theta / factor, theta)
    sm = (orig_len / lam - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed = (1 - sm) * out / factor + sm * out
    medium = ~(lam < high_wl) & ~(lam > low_wl)
    return np.where(medium, smoothed, out)


POSITION_REMAP_TYPES = ("rerope", "leaky_rerope", "self_extend")


def rope_parameters(rope_scaling, d, base, max_pos, seq_len=None):
    rs = dict(rope_scaling or {})
    kind = rs.get("rope_type", rs.get("type", "default")) or "default"
    orig = rs.get("original_max_position_embeddings") or max_pos
    if kind in ("default", "none") or kind in POSITION_REMAP_TYPES:
        return default_inv_freq(d, base), 1.0
    s = float(rs.get("factor", 1.0))
    if kind == "linear":
        return linear_inv_freq(d, base, s), 1.0
    if kind == "ntk":
        return ntk_inv_freq(d, base, s), 1.0
    if kind == "dynamic":
        return dynamic_ntk_inv_freq(d, base, s, orig, seq_len if seq_len else orig), 1.0
    if kind == "yarn":
        return yarn_parameters(d, base, s, orig, rs.get("beta_fast"), rs.get("beta_slow"),
                               rs.get("truncate", True), rs.get("attention_factor"),
                               rs.get("mscale"), rs.get("mscale_all_dim"))
    if kind == "llama3":
        return llama3_inv_freq(d, base, s, rs["low_freq_factor"], rs["high_freq_factor"],
                               rs["original_max_position_embeddings"]), 1.0
    raise ValueError("unsupported rope_type %r" % kind)


def _cos_sin(pos, inv_freq, af):
    ang = np.asarray(pos, dtype=np.float64)[:, None] * np.asarray(inv_freq, dtype=np.float64)[None, :]
    return np.cos(ang) * af, np.sin(ang) * af


def _bcast(a, ndim):
    return a.reshape((a.shape[0],) + (1,) * (ndim - 2) + (a.shape[1],))


def rotate_half_split(x, pos, inv_freq, af=1.0):
    """x: [n, ..., d]; pos: [n]. Rotates the first 2*len(inv_freq) dims (half-split)."""
    x = np.asarray(x, dtype=np.float64)
    half = len(inv_freq)
    cos, sin = _cos_sin(pos, inv_freq, af)
    cos, sin = _bcast(cos, x.ndim), _bcast(sin, x.ndim)
    x1, x2, rest = x[..., :half], x[..., half:2 * half], x[..., 2 * half:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin, rest], axis=-1)


def rotate_interleaved(x, pos, inv_freq, af=1.0):
    x = np.asarray(x, dtype=np.float64)
    half = len(inv_freq)
    cos, sin = _cos_sin(pos, inv_freq, af)
    cos, sin = _bcast(cos, x.ndim), _bcast(sin, x.ndim)
    out = x.copy()
    a, b = x[..., 0:2 * half:2], x[..., 1:2 * half:2]
    out[..., 0:2 * half:2] = a * cos - b * sin
    out[..., 1:2 * half:2] = b * cos + a * sin
    return out


def logn_factor(pos, train_len):
    pos = np.asarray(pos, dtype=np.float64)
    if not train_len or train_len <= 1:
        return np.ones_like(pos)
    return np.maximum(1.0, np.log(pos + 1.0) / math.log(train_len))


def alibi_slopes(H):
    def pow2(n):
        start = 2.0 ** (-8.0 / n)
        return [start ** (i + 1) for i in range(n)]
    if H & (H - 1) == 0:
        return np.array(pow2(H))
    p = 2 ** int(math.floor(math.log2(H)))
    return np.array(pow2(p) + pow2(2 * p)[0::2][:H - p])


def alibi_slopes_ggml(H, max_bias=8.0):
    n_log2 = 2 ** int(math.floor(math.log2(H)))
    m0 = 2.0 ** (-max_bias / n_log2)
    m1 = 2.0 ** (-max_bias / 2.0 / n_log2)
    return np.array([m0 ** (h + 1) if h < n_log2 else m1 ** (2 * (h - n_log2) + 1) for h in range(H)])
