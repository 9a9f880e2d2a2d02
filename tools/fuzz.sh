#!/usr/bin/env bash
# Runs a libFuzzer target of tests/fuzz for long:
#   tools/fuzz.sh TARGET [SECONDS] [libFuzzer options...]
#   tools/fuzz.sh all [SECONDS]      # each target in turn
#   tools/fuzz.sh list
# Targets: safetensors, config, tokenizer_json, tokenizer_codec, schemes, gguf.
# SECONDS defaults to 600.  Builds ./build-fuzz with clang first (Debian: clang,
# libclang-rt-14-dev).  The corpus grows in build-fuzz/fuzz-long/TARGET/corpus
# and is kept between runs; a crash, hang or leak leaves its input in
# build-fuzz/fuzz-long/TARGET/artifacts: replay it with
# `build-fuzz/tests/fuzz/fuzz_TARGET FILE` and keep it under tests/fuzz/crashes/TARGET/.
# Options such as -jobs=2 -workers=2 or -max_len=65536 are passed on.
set -euo pipefail
cd "$(dirname "$0")/.."
targets=(safetensors config tokenizer_json tokenizer_codec schemes gguf)
target=${1:-}
case "$target" in
  list) printf '%s\n' "${targets[@]}"; exit 0 ;;
  ''|-h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
if [ "$target" != all ] && ! printf '%s\n' "${targets[@]}" | grep -qx "$target"; then
  echo "fuzz: unknown target '$target' (tools/fuzz.sh list)" >&2
  exit 2
fi
seconds=${2:-600}
shift $(( $# >= 2 ? 2 : 1 ))

if [ ! -f build-fuzz/build.ninja ]; then
  if ! command -v clang++ >/dev/null; then
    echo "fuzz: needs clang++ and libFuzzer (bash tools/setup.sh --test)" >&2
    exit 1
  fi
  CC=clang CXX=clang++ meson setup build-fuzz -Dfuzz=true --buildtype=debugoptimized >/dev/null
fi
ninja -C build-fuzz >/dev/null

run() {   # run TARGET [libFuzzer options...]
  local t=$1
  shift
  echo "fuzz: $t for ${seconds}s" >&2
  REACH_FUZZ_WORK="$PWD/build-fuzz/fuzz-long/$t" REACH_FUZZ_KEEP=1 \
    bash tests/fuzz/run.sh "build-fuzz/tests/fuzz/fuzz_$t" "$t" "$seconds" "$@"
}
if [ "$target" = all ]; then
  status=0
  for t in "${targets[@]}"; do run "$t" "$@" || status=1; done
  exit $status
fi
run "$target" "$@"
