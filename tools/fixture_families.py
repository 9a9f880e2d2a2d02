"""The family fixtures' tables (tools/family_fixtures.py): which families, their chat templates and turn tokens."""
from __future__ import annotations

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
