"""Naive float64 attention for every reach position scheme (EXTRAPOLATION.md §1.2, §3, §4).

  Scheme(inv_freq=None, attention_factor=1.0, method="rope", window=0, leaky_k=1.0, group=1,
         logn_train_len=0, qk_norm=None, cos_n=0, attn_window=0, attn_sinks=0, scale=None)
      inv_freq       float64 [rot/2] rotary table (rope.rope_parameters); None = no rotation (NoPE)
      method         "rope" | "rerope" | "leaky_rerope" | "self_extend"
      window         branch threshold W on r = i - m (ReRoPE/Leaky: w; Self-Extend: W_n)
      leaky_k        Leaky ReRoPE slope divisor k (branch 2 uses inv_freq / k)
      group          Self-Extend group size G (G must divide window)
      logn_train_len q *= max(1, ln(i+1)/ln L) (0 = off)
      qk_norm        None (logit = scale·q·k, scale default 1/sqrt(d)) | "key": q·k/|k| |
                     "query": (q/|q|)·k | "cos": 4·ln(n)·cos(q,k), n = cos_n or i+1
                     (norms of the un-rotated vectors; logn multiplies after normalising)
      attn_window    key m visible from query i iff i-m < attn_window or m < attn_sinks (0 = all)
  branch_positions(scheme, q_pos, k_pos) -> list of (inv_freq, af, qp, kp) for branch 1 [, 2]
  relative_positions(scheme, i, m) -> effective relative position(s) in units of inv_freq
  attention_logits(q, k, q_pos, k_pos, scheme) -> [H, n_q, n_k] float64, -inf where masked
      q [n_q, H, d], k [n_k, Hkv, d] raw (un-rotated) projections, positions absolute ints
      (so chunked prefill / decode is expressed by q_pos = k_pos[-n_q:]); GQA: head h uses
      kv head h // (H // Hkv).  Dual-branch methods use the explicit two-matrix form:
      S = where(i - m < W, S1, S2).
  attention_reference(q, k, v, q_pos, k_pos, scheme) -> out [n_q, H, d] float64
      softmax(attention_logits) @ v (rows with no visible key give 0).
  classify_tile(q_lo, q_hi, k_lo, k_hi, W) -> "skip" | "window" | "outside" | "mixed"
      §5.1 rule with real inclusive bounds: r_min = max(0, q_lo-k_hi), r_max = q_hi-k_lo.
"""
import math
from dataclasses import dataclass

import numpy as np

from .rope import logn_factor, rotate_half_split


@dataclass
class Scheme:
    inv_freq: object = None
    attention_factor: float = 1.0
    method: str = "rope"
    window: int = 0
    leaky_k: float = 1.0
    group: int = 1
    logn_train_len: int = 0
    qk_norm: object = None
    cos_n: int = 0
    attn_window: int = 0
    attn_sinks: int = 0
    scale: object = None


def branch_positions(s, q_pos, k_pos):
    q_pos = np.asarray(q_pos, dtype=np.int64)
    k_pos = np.asarray(k_pos, dtype=np.int64)
    inv, af = s.inv_freq, s.attention_factor
    b1 = (inv, af, q_pos.astype(np.float64), k_pos.astype(np.float64))
    if s.method == "rope":
        return [b1]
    W = int(s.window)
    if s.method == "rerope":
        return [b1, (inv, af, np.full(len(q_pos), float(W)), np.zeros(len(k_pos)))]
    if s.method == "leaky_rerope":
        k = float(s.leaky_k)
        inv2 = None if inv is None else np.asarray(inv) / k
        return [b1, (inv2, af, q_pos + W * (k - 1.0), k_pos.astype(np.float64))]
    if s.method == "self_extend":
        G = int(s.group)
        if G < 1 or W % G:
            raise ValueError("self_extend: group %d must divide window %d" % (G, W))
        return [b1, (inv, af, (q_pos // G + W - W // G).astype(np.float64),
                     (k_pos // G).astype(np.float64))]
    raise ValueError("unknown method %r" % s.method)


def relative_positions(s, i, m):
    """Effective relative position (rotation angle / inv_freq) used for score (i, m)."""
    i = np.atleast_1d(np.asarray(i, dtype=np.int64))
    m = np.atleast_1d(np.asarray(m, dtype=np.int64))
    br = branch_positions(s, i, m)
    rel1 = br[0][2][:, None] - br[0][3][None, :]
    if len(br) == 1:
        return rel1
    div = float(s.leaky_k) if s.method == "leaky_rerope" else 1.0
    rel2 = (br[1][2][:, None] - br[1][3][None, :]) / div
    r = i[:, None] - m[None, :]
    return np.where(r < int(s.window), rel1, rel2)


def _unit(x):
    n = np.linalg.norm(x, axis=-1, keepdims=True)
    return x / np.maximum(n, 1e-30)


def _rot(x, pos, inv, af):
    if inv is None:
        return x
    return rotate_half_split(x, pos, inv, af)


def attention_logits(q, k, q_pos, k_pos, s):
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    n_q, H, d = q.shape
    n_k, Hkv, _ = k.shape
    if H % Hkv:
        raise ValueError("heads %d not a multiple of kv heads %d" % (H, Hkv))
    qp = np.asarray(q_pos, dtype=np.int64)
    kp = np.asarray(k_pos, dtype=np.int64)
    if s.qk_norm in ("query", "cos"):
        q = _unit(q)
    if s.qk_norm in ("key", "cos"):
        k = _unit(k)
    elif s.qk_norm not in (None, "query"):
        raise ValueError("unknown qk_norm %r" % s.qk_norm)
    q = q * logn_factor(qp, s.logn_train_len)[:, None, None]
    if s.qk_norm == "cos":
        n = np.full(n_q, float(s.cos_n)) if s.cos_n else qp + 1.0
        q = q * (4.0 * np.log(n))[:, None, None]
        scale = 1.0
    elif s.qk_norm in ("key", "query"):
        scale = 1.0
    else:
        scale = 1.0 / math.sqrt(d) if s.scale is None else float(s.scale)
    rep = H // Hkv
    mats = []
    for inv, af, pq, pk in branch_positions(s, qp, kp):
        qb = _rot(q, pq, inv, af)
        kb = np.repeat(_rot(k, pk, inv, af), rep, axis=1)   # repeat_kv: head h -> kv h // rep
        mats.append(np.einsum("qhd,khd->hqk", qb, kb) * scale)
    r = qp[:, None] - kp[None, :]
    S = mats[0] if len(mats) == 1 else np.where((r < int(s.window))[None], mats[0], mats[1])
    vis = r >= 0
    if s.attn_window:
        vis &= (r < int(s.attn_window)) | (kp[None, :] < int(s.attn_sinks))
    return np.where(vis[None], S, -np.inf)


def attention_reference(q, k, v, q_pos, k_pos, s):
    S = attention_logits(q, k, q_pos, k_pos, s)
    mx = np.max(S, axis=-1, keepdims=True)
    mx = np.where(np.isfinite(mx), mx, 0.0)
    P = np.exp(S - mx)
    den = P.sum(axis=-1, keepdims=True)
    P = P / np.where(den > 0, den, 1.0)
    v = np.asarray(v, dtype=np.float64)
    rep = q.shape[1] // v.shape[1]
    vv = np.repeat(v, rep, axis=1)
    return np.einsum("hqk,khd->qhd", P, vv)


def classify_tile(q_lo, q_hi, k_lo, k_hi, W):
    r_max = q_hi - k_lo
    if r_max < 0:
        return "skip"
    r_min = max(0, q_lo - k_hi)
    if r_max < W:
        return "window"
    if r_min >= W:
        return "outside"
    return "mixed"
