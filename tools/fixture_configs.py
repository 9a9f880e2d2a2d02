"""The family fixtures' configs (tools/family_fixtures.py): transformers' config of each family at the fixture's
shapes, config.json as transformers 4 wrote it, and the config as llama.cpp reads the converter's GGUF."""
from __future__ import annotations

import copy
import random


def make_config(family: str, a, tok):
    import transformers as T

    h, heads, kv = a.hidden, a.heads, a.kv_heads
    hd = a.head_dim or (h // heads + (8 if family == "qwen3" else 0))
    common = dict(vocab_size=a.vocab, hidden_size=h, intermediate_size=a.intermediate or 2 * h,
                  num_hidden_layers=a.layers, num_attention_heads=heads, num_key_value_heads=kv,
                  max_position_embeddings=256, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                  pad_token_id=tok.pad_token_id, rms_norm_eps=1e-5)
    if family == "llama3":
        # orig 64: wavelengths above 64 are divided by 8, those between 16 and 64 blended, shorter ones kept; with
        # head_dim 16 and theta 500000 (wavelengths 6.3, 32.5, 168, ...) each of the three cases occurs.
        return T.LlamaConfig(**common, head_dim=hd, tie_word_embeddings=False, rope_parameters=dict(
            rope_type="llama3", rope_theta=500000.0, factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
            original_max_position_embeddings=64))
    if family == "qwen2":
        return T.Qwen2Config(**common, tie_word_embeddings=False, rope_parameters=dict(rope_type="default",
                                                                                       rope_theta=1000000.0))
    if family == "mistral":
        return T.MistralConfig(**common, head_dim=hd, sliding_window=16, tie_word_embeddings=False,
                               rope_parameters=dict(rope_type="default", rope_theta=10000.0))
    if family == "qwen3":
        return T.Qwen3Config(**common, head_dim=hd, tie_word_embeddings=True,
                             rope_parameters=dict(rope_type="default", rope_theta=1000000.0))
    if family == "phi3":
        rot = int(h // heads * 0.75)
        rng = random.Random(a.seed * 31 + 5)
        # Factors on a 1/64 grid: exact in float32 (transformers' and the GGUF's type) and float64.
        short = [1.0 + round(rng.uniform(0, 0.5) * 64) / 64 for _ in range(rot // 2)]
        long = [1.0 + round(rng.uniform(0, 1) * i / max(rot // 2 - 1, 1) * 8 * 64) / 64 for i in range(rot // 2)]
        return T.Phi3Config(**common, tie_word_embeddings=False, original_max_position_embeddings=32,
                            rope_parameters=dict(rope_type="longrope", rope_theta=10000.0, partial_rotary_factor=0.75,
                                                 short_factor=short, long_factor=long,
                                                 original_max_position_embeddings=32))
    if family == "gemma2":
        return T.Gemma2Config(**common, head_dim=hd, query_pre_attn_scalar=hd + 8, sliding_window=16,
                              attn_logit_softcapping=2.0, final_logit_softcapping=6.0, tie_word_embeddings=True,
                              hidden_activation="gelu_pytorch_tanh",
                              rope_parameters=dict(rope_type="default", rope_theta=10000.0))
    if family == "olmo2":
        return T.Olmo2Config(**common, tie_word_embeddings=False,
                             rope_parameters=dict(rope_type="default", rope_theta=500000.0))
    if family == "smollm3":
        # Every fourth layer without rotary embedding (layer 3 of 4), as SmolLM3 ships; with fewer than 4 layers
        # the last one, so that one layer is NoPE.
        no_rope = [int((i + 1) % 4 != 0) for i in range(a.layers)]
        if all(no_rope):
            no_rope[-1] = 0
        return T.SmolLM3Config(**common, tie_word_embeddings=True, no_rope_layers=no_rope,
                               rope_parameters=dict(rope_type="default", rope_theta=1000000.0))
    # Mixture-of-experts: two layers, experts narrower than the dense MLP; every expert random, so they differ.
    moe = dict(common, num_hidden_layers=min(a.layers, 2))
    if family == "qwen3_moe":
        # 8 experts, top-2, the chosen weights renormalised; every layer sparse (llama.cpp's converter maps no
        # dense MLP in a qwen3moe file, so mlp_only_layers would leave no GGUF).
        return T.Qwen3MoeConfig(**moe, head_dim=hd, num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32,
                                norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[],
                                tie_word_embeddings=False,
                                rope_parameters=dict(rope_type="default", rope_theta=1000000.0))
    if family == "mixtral":
        return T.MixtralConfig(**dict(moe, intermediate_size=48), head_dim=hd, num_local_experts=4,
                               num_experts_per_tok=2, tie_word_embeddings=False,
                               rope_parameters=dict(rope_type="default", rope_theta=1000000.0))
    if family == "olmoe":
        # OLMoE: the top-k weights are not renormalised; q/k RMSNorm over the whole projections (like OLMo 2).
        return T.OlmoeConfig(**dict(moe, intermediate_size=32), num_experts=8, num_experts_per_tok=3,
                             norm_topk_prob=False, tie_word_embeddings=False,
                             rope_parameters=dict(rope_type="default", rope_theta=10000.0))
    if family == "gpt_oss_mxfp4":
        # MXFP4 blocks run along each expert matrix's input: hidden 96 and ffn 32 are multiples of 32, and
        # every expert dimension differs (gate_up [4, 96, 64], down [4, 32, 96]) so a transposed read fails.
        return T.GptOssConfig(**dict(moe, hidden_size=96, intermediate_size=32, max_position_embeddings=128),
                              head_dim=16, num_local_experts=4, num_experts_per_tok=2, sliding_window=16,
                              attention_bias=True, tie_word_embeddings=False, swiglu_alpha=1.702, swiglu_limit=7.0,
                              rope_parameters=dict(rope_type="yarn", rope_theta=150000.0, factor=4.0, beta_fast=32.0,
                                                   beta_slow=1.0, truncate=False,
                                                   original_max_position_embeddings=32))
    if family == "gpt_oss":
        # Layer 0 slides (16 keys), layer 1 sees everything; YaRN (not truncated, as gpt-oss ships) stretches a
        # trained context of 32 by 4 on both; top-2 of 4 biased experts with the clamped SwiGLU.
        return T.GptOssConfig(**dict(moe, intermediate_size=24, max_position_embeddings=128), head_dim=hd, num_local_experts=4,
                              num_experts_per_tok=2, sliding_window=16, attention_bias=True,
                              tie_word_embeddings=False, swiglu_alpha=1.702, swiglu_limit=7.0,
                              rope_parameters=dict(rope_type="yarn", rope_theta=150000.0, factor=4.0, beta_fast=32.0,
                                                   beta_slow=1.0, truncate=False,
                                                   original_max_position_embeddings=32))
    raise ValueError(family)


def v4_config(cfg: dict) -> dict:
    """config.json as transformers 4.x wrote it: rope_theta and rope_scaling (with "type" and "rope_type"),
    partial_rotary_factor and original_max_position_embeddings at the top level, torch_dtype."""
    c = copy.deepcopy(cfg)
    rp = c.pop("rope_parameters")
    c["rope_theta"] = rp.pop("rope_theta")
    if "partial_rotary_factor" in rp:
        prf = rp.pop("partial_rotary_factor")
        if prf != 1.0:
            c["partial_rotary_factor"] = prf
    t = rp.pop("rope_type", "default")
    if t == "default":
        c["rope_scaling"] = None
    else:
        if t == "longrope":
            c["original_max_position_embeddings"] = rp.pop("original_max_position_embeddings")
        c["rope_scaling"] = {"type": t, "rope_type": t, **rp}
    if "dtype" in c:
        c["torch_dtype"] = c.pop("dtype")
    c["transformers_version"] = "4.57.1"
    return c



def _mistral_as_gguf(cfg):
    # The converter maps MistralForCausalLM to the llama architecture and writes no sliding window; llama.cpp's
    # llama attends to every position.
    cfg.sliding_window = None
    return "no sliding window (the converter writes none for the llama architecture)"


def _gemma2_as_gguf(cfg):
    # The converter writes no query_pre_attn_scalar; llama.cpp scales Gemma 2's queries by 1/sqrt(head_dim)
    # (1/sqrt(hidden/heads) only for the 27B model, recognised by its layer count).
    cfg.query_pre_attn_scalar = cfg.head_dim
    return (f"query_pre_attn_scalar = head_dim = {cfg.head_dim} (the converter writes no query_pre_attn_scalar; "
            "llama.cpp scales queries by 1/sqrt(key_length) except for the 27B model)")


def _gemma2_gguf_norms(model):
    # The converter stores Gemma's norm weights as 1 + w, added in float16 (the safetensors' type) before they
    # are written as float32: the GGUF holds f16(1 + w), not 1 + w.
    import torch
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_((p.to(torch.float16) + 1).to(torch.float64) - 1)
    return "norm weights f16(1 + w) - 1 (the converter adds 1 in float16)"


def _smollm3_as_gguf(cfg):
    # The converter writes no NoPE layers; llama.cpp's smollm3 leaves out rotary embedding in every fourth layer.
    step4 = [int((i + 1) % 4 != 0) for i in range(cfg.num_hidden_layers)]
    if list(cfg.no_rope_layers) == step4:
        return None
    cfg.no_rope_layers = step4
    return "NoPE layers every fourth layer (the converter writes none; llama.cpp's smollm3 fixes the step at 4)"


# Families whose GGUF, as llama.cpp reads it, can be a different model from hf/ (see gguf_reference.json); each
# function changes the config to what the GGUF says and returns why, or None where nothing changes.
GGUF_READS_AS = {"mistral": _mistral_as_gguf, "gemma2": _gemma2_as_gguf, "smollm3": _smollm3_as_gguf}
# And whose GGUF weights differ from hf/'s: a function that changes the model's weights to the GGUF's.
GGUF_WEIGHTS = {"gemma2": _gemma2_gguf_norms}
