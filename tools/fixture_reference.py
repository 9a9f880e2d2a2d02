"""The family fixtures' reference (tools/family_fixtures.py): transformers' forward in float64 throughout, the
log-probs, greedy continuation and router choices written to reference.json, and the reload check of hf/."""
from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

from fixture_families import MOE, MXFP4


# ---------------------------------------------------------------------------------------------------------------
# float64 throughout

@contextlib.contextmanager
def float64_everywhere():
    """Promote transformers' explicit float32 requests (RMSNorm's .to(float32), softmax(dtype=float32), the rotary
    tables' .float() and torch.tensor(..., dtype=float32)) to float64 while the reference model is built and run."""
    import torch
    import torch.nn.functional as F

    def fix(d):
        return torch.float64 if d is torch.float32 else d

    orig_to, orig_float, orig_softmax, orig_tensor = torch.Tensor.to, torch.Tensor.float, F.softmax, torch.tensor

    def to(self, *args, **kw):
        args = tuple(fix(a) for a in args)
        if "dtype" in kw:
            kw["dtype"] = fix(kw["dtype"])
        return orig_to(self, *args, **kw)

    def flt(self, *args, **kw):
        return orig_to(self, torch.float64)

    def softmax(x, *args, **kw):
        if "dtype" in kw:
            kw["dtype"] = fix(kw["dtype"])
        return orig_softmax(x, *args, **kw)

    def tensor(*args, **kw):
        if "dtype" in kw:
            kw["dtype"] = fix(kw["dtype"])
        return orig_tensor(*args, **kw)

    torch.Tensor.to, torch.Tensor.float, F.softmax, torch.tensor = to, flt, softmax, tensor
    try:
        yield
    finally:
        torch.Tensor.to, torch.Tensor.float, F.softmax, torch.tensor = orig_to, orig_float, orig_softmax, orig_tensor



def log_softmax64(logits):
    import torch
    return torch.log_softmax(logits.to(torch.float64), dim=-1)


def forward_logprobs(model, ids):
    import torch
    with torch.no_grad(), float64_everywhere():
        out = model(input_ids=torch.tensor([ids], dtype=torch.long), use_cache=False)
    assert out.logits.dtype == torch.float64
    return log_softmax64(out.logits[0])


def outputs(model, ids, positions, n_greedy):
    """logprobs_next, full_logprobs at positions, greedy continuation and its margins; and the log-prob rows."""
    import torch
    L = len(ids)
    lp = forward_logprobs(model, ids)
    o = {"logprobs_next": [f17(lp[t, ids[t + 1]].item()) for t in range(L - 1)],
         "full_logprobs": [[f17(v) for v in lp[p].tolist()] for p in positions],
         "greedy": [], "greedy_margins": []}
    seq = list(ids)
    for _ in range(n_greedy):
        row = forward_logprobs(model, seq)[-1]
        top = torch.topk(row, 2)
        o["greedy"].append(int(top.indices[0]))
        o["greedy_margins"].append(f17((top.values[0] - top.values[1]).item()))
        seq.append(o["greedy"][-1])
    return o, lp


def router_choices(model, ids) -> dict:
    """The experts transformers' router picks for every token of `ids` in one forward: "experts"[layer][token] is
    the top-k list in torch.topk's order (larger probability first, the lower index first on ties), null for a
    dense layer; "expert_weights" the matching routing weights.  Read from a forward hook on each router."""
    chosen, weights = {}, {}

    def hook(layer):
        def f(module, args, out):
            _, w, idx = out
            chosen[layer] = idx.tolist()
            weights[layer] = [[f17(v) for v in row] for row in w.tolist()]
        return f

    hooks = []
    for i, layer in enumerate(model.model.layers):
        router = getattr(layer.mlp, "gate", None) or getattr(layer.mlp, "router", None)   # gpt-oss: router
        if router is not None and hasattr(router, "top_k"):
            hooks.append(router.register_forward_hook(hook(i)))
    forward_logprobs(model, ids)
    for h in hooks:
        h.remove()
    n = len(model.model.layers)
    return {"moe": {"experts": [chosen.get(i) for i in range(n)], "expert_weights": [weights.get(i) for i in range(n)],
                    "n_experts": model.config.num_local_experts if hasattr(model.config, "num_local_experts")
                    else model.config.num_experts, "top_k": model.config.num_experts_per_tok}}


def check_saved(out: Path, ids, lp):
    """hf/ reloaded by transformers, with its config.json and with hf_v4_config.json, gives the reference again
    (up to the rotary tables, which from_pretrained computes in float32)."""
    import tempfile
    import torch
    from transformers import AutoModelForCausalLM

    for config in ("hf/config.json", "hf_v4_config.json"):
        with tempfile.TemporaryDirectory() as tmp:
            d = Path(tmp) / "m"
            shutil.copytree(out / "hf", d)
            shutil.copy(out / config, d / "config.json")
            extra = {"experts_implementation": "eager"} if out.name in MOE else {}
            if out.name in MXFP4:   # transformers unpacks the blocks itself (on a CPU it can only dequantize)
                from transformers import Mxfp4Config
                extra["quantization_config"] = Mxfp4Config(dequantize=True)
            m = AutoModelForCausalLM.from_pretrained(str(d), dtype=torch.float64, attn_implementation="eager",
                                                     **extra).eval()
            d_max = (forward_logprobs(m, ids) - lp).abs().max().item()
            assert d_max < 1e-5, f"{out.name}: {config} reloaded differs from the reference by {d_max}"



def f17(x: float) -> float:
    return float(f"{x:.17g}")
