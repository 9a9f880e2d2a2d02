"""The family fixtures' weights (tools/family_fixtures.py): random values rounded to float16, and gpt-oss's
experts as openai's MXFP4 blocks."""
from __future__ import annotations

import json
import math
from pathlib import Path

from fixture_families import FAMILIES


def randomize(model, family: str, seed: int):
    """Every weight random: matrices N(0, gain^2 / fan_in) (embeddings and the head scaled so next-token
    distributions are peaked), biases N(0, 0.1^2), norms 1 + N(0, 0.15^2) (Gemma's x*(1+w): N(0, 0.15^2)).
    Everything is rounded to float16 so the float64 model holds exactly the stored values."""
    import torch

    g = torch.Generator().manual_seed(seed * 1000 + FAMILIES.index(family))
    hidden = model.config.hidden_size
    with torch.no_grad():
        for name, p in model.named_parameters():
            shape = p.shape
            if name.endswith("bias"):
                v = 0.1 * torch.randn(shape, generator=g, dtype=torch.float64)
            elif name.endswith("sinks"):   # gpt-oss: a sink logit per head, as large as the scores
                v = 1.5 * torch.randn(shape, generator=g, dtype=torch.float64)
            elif family.startswith("gpt_oss") and ".experts." in name:
                # [experts, in, out] (transposed); gate_up wide enough that the clamp at swiglu_limit bites
                gain = 3.5 if "gate_up" in name else 1.0
                v = gain / math.sqrt(shape[-2]) * torch.randn(shape, generator=g, dtype=torch.float64)
            elif p.ndim == 1:   # norm weights
                v = 0.15 * torch.randn(shape, generator=g, dtype=torch.float64)
                if family != "gemma2":
                    v += 1.0
            elif "embed_tokens" in name:
                # Tied heads: logits = norm(h) . E, std ~ 0.4 * sqrt(hidden)
                std = 0.4 if model.config.tie_word_embeddings else 1.0
                v = std * torch.randn(shape, generator=g, dtype=torch.float64)
            elif "lm_head" in name:
                v = 3.0 / math.sqrt(hidden) * torch.randn(shape, generator=g, dtype=torch.float64)
            else:
                # fan_in is the last dimension (transformers 5 may hold the experts as one 3-D tensor)
                v = 1.0 / math.sqrt(shape[-1]) * torch.randn(shape, generator=g, dtype=torch.float64)
            p.copy_(v.to(torch.float16).to(torch.float64))


# MXFP4 (the OCP microscaling format openai ships gpt-oss's experts in): blocks of 32 values along a matrix's
# input dimension share one E8M0 scale byte s (2^(s-127)); each value is an E2M1 code (a sign bit and one of
# 0, 0.5, 1, 1.5, 2, 3, 4, 6).  openai's checkpoint keeps, per expert matrix [out, in], "<name>_blocks"
# [E, out, in/32, 16] (byte j of a block: value 2j in the low nibble, 2j+1 in the high one) and "<name>_scales"
# [E, out, in/32]; its config.json says quantization_config {"quant_method": "mxfp4"}.

E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def mxfp4_round(w):
    """w [..., n*32] float64 -> (codes uint8 [..., n*32], scales uint8 [..., n]) and the values they stand for.
    The scale makes the block's largest magnitude at most 6 (2^(floor(log2 amax) - 2)); each value takes the
    nearest code (ties to the smaller magnitude)."""
    import torch
    *lead, k = w.shape
    b = w.reshape(*lead, k // 32, 32)
    amax = b.abs().amax(dim=-1)
    e = torch.where(amax > 0, torch.floor(torch.log2(amax.clamp_min(1e-300))) - 2, torch.zeros_like(amax))
    e = e.clamp(-127, 127)
    scale = torch.pow(2.0, e).unsqueeze(-1)
    mags = torch.tensor(E2M1, dtype=torch.float64)
    r = (b.abs() / scale).unsqueeze(-1)
    idx = (r - mags).abs().argmin(dim=-1)                    # first (smaller) magnitude on ties
    codes = idx + torch.where(b < 0, 8, 0)
    values = torch.where(b < 0, -1.0, 1.0) * mags[idx] * scale
    return codes.reshape(*lead, k).to(torch.uint8), (e + 127).to(torch.uint8), values.reshape(*lead, k)


def mxfp4_experts(model) -> dict:
    """Rounds every expert matrix of the float64 model to its MXFP4 values in place (the reference is then
    computed with exactly what the checkpoint holds) and returns the packed tensors by safetensors name."""
    import torch
    packed = {}
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".experts." not in name or name.endswith("_bias"):
                continue
            w = p.detach().transpose(1, 2)                      # transformers keeps [E, in, out]; openai [E, out, in]
            codes, scales, values = mxfp4_round(w)
            p.copy_(values.transpose(1, 2))
            lo, hi = codes[..., 0::2], codes[..., 1::2]
            blocks = (lo | (hi << 4)).reshape(*codes.shape[:-1], codes.shape[-1] // 32, 16)
            packed[name + "_blocks"] = blocks.contiguous()
            packed[name + "_scales"] = scales.contiguous()
    return packed


def save_mxfp4(hf: Path, packed: dict):
    """hf/: the experts as openai's MXFP4 blocks and scales in place of the float tensors, and the
    quantization_config saying so.  transformers' own unpacking (integrations/mxfp4.py) must give back the
    rounded float values, which checks the layout written here."""
    import torch
    from safetensors.torch import load_file, save_file
    from transformers.integrations.mxfp4 import convert_moe_packed_tensors
    f = hf / "model.safetensors"
    t = load_file(str(f))
    for name in list(t):
        if name + "_blocks" in packed:
            want = t.pop(name).to(torch.float64)
            got = convert_moe_packed_tensors(packed[name + "_blocks"], packed[name + "_scales"], dtype=torch.float64)
            assert got.shape == want.shape and torch.equal(got, want), f"{name}: MXFP4 packing does not round-trip"
            t[name + "_blocks"] = packed[name + "_blocks"]
            t[name + "_scales"] = packed[name + "_scales"]
    save_file(t, str(f), metadata={"format": "pt"})
    cfg = json.loads((hf / "config.json").read_text())
    cfg["quantization_config"] = {"quant_method": "mxfp4",
                                  "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                                             "model.embed_tokens", "lm_head"]}
    (hf / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
