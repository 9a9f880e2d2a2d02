#!/usr/bin/env bash
# The extended test stages, after tools/run_tests.sh (CI runs both; .ci/run): the builds that compile
# reach again in another form, and what runs on them:
#   - the parser, tokenizer, generation and C API suites under AddressSanitizer + UBSan with leak checks
#     (build-asan, gcc -O0);
#   - each libFuzzer target of tests/fuzz for 10 s (build-fuzz, clang);
#   - the Windows build (MinGW-w64, tools/cross_build.sh windows) under Wine (tools/wine_check.sh);
#   - the Python wheel as users get it (python -m build, installed into a fresh venv);
#   - every family's forward pass at subgroup width 16 (tools/run_tests.sh runs 4).
# They are kept out of tools/run_tests.sh because their four builds cost more CPU than all of its suites
# (measured on 2 cores without a compiler cache: the sanitizer build 20 CPU-minutes, the Windows build
# about 25); tools/run_tests.sh stays a newcomer's ~20 minutes.  Prints the stages as tools/run_tests.sh
# does and closes with "N passed, N failed" over these stages' suites.  Needs ./build (builds it when
# missing, through tools/setup.sh --test).
set -uo pipefail
cd "$(dirname "$0")/.."

times_file=build/.run_tests_extended-times   # "stage seconds" of the previous run, for the estimates
stage_tool=run_tests_extended
source tools/test_stages.sh

stage_begin setup "apt packages (MinGW-w64, Wine) and the main build if missing (tools/setup.sh --test --wine)" 60
bash tools/setup.sh --test --wine || exit 1
stage_end setup

status=0
logs=()

# Sanitizer job: the suites that run in seconds, built with gcc's ASan + UBSan
# at -O0 (a fifth of -O2's compile time; these suites are not compute-bound)
# with line tables only (-g1: reports keep file:line, a sixth less compile
# time and a third smaller objects to link than -g).  Only the targets these
# suites run are built.  Leaks fail a test, except those inside the Vulkan
# loader, Mesa and the validation layer (tests/lsan.supp); any UBSan report
# aborts it.  (-Dunity=on does not build: runtime/'s files share internal names.)
asan_suites=(safetensors config tokenizer schemes model_files engine model model_schemes trained_models
             kernels_norm kernels_embed kernels_elementwise eval capi capi_c hostile_api gguf tokenizer_gguf
             generation device_lost kv_block_pool kv_pool_session)
asan_log=build-asan/meson-logs/testlog.json
rm -f "$asan_log"
logs+=("$asan_log")
asan_targets=(cli/reach)   # the eval suite runs the CLI
for s in "${asan_suites[@]}"; do asan_targets+=("tests/test_$s"); done

# Fuzz targets (tests/fuzz), 10 s each over their seed corpus: needs clang and
# libFuzzer (tools/setup.sh --test installs them); skipped, with a note, without.
fuzz_log=build-fuzz/meson-logs/testlog.json
rm -f "$fuzz_log"
have_fuzz=0
if command -v clang++ >/dev/null && [ -n "$(clang++ -print-file-name=libclang_rt.fuzzer-$(uname -m).a | grep /)" ]; then
  have_fuzz=1
  logs+=("$fuzz_log")
else
  echo "run_tests_extended: clang++ with libFuzzer not found; the fuzz targets will not run" >&2
fi

# The sanitizer and fuzz builds, in the background beside the Windows build and the wheel.
mkdir -p build-asan build-fuzz
rm -f build-asan/.run_tests-ok build-asan/.run_tests-suites-rc build-fuzz/.run_tests-ok
(
  stage_begin asan-build "gcc ASan+UBSan -O0 build of ${#asan_targets[@]} targets in build-asan, in the background" 400
  ok=1
  if [ ! -f build-asan/build.ninja ]; then
    meson setup build-asan --buildtype=debug -Db_sanitize=address,undefined -Dc_args=-g1 -Dcpp_args=-g1 \
      -Dtest_shader_cache="$PWD/build/test-shader-cache" >/dev/null \
      || ok=0
  elif ! grep -qs "test_shader_cache.*$PWD/build/test-shader-cache" build-asan/meson-info/intro-buildoptions.json; then
    meson configure build-asan -Dtest_shader_cache="$PWD/build/test-shader-cache" >/dev/null || ok=0
  fi
  [ $ok = 1 ] && nice ninja -C build-asan "${asan_targets[@]}" >build-asan/ninja.log 2>&1 || ok=0
  echo $ok >build-asan/.run_tests-ok
  stage_end asan-build "$([ $ok = 1 ] && echo built || echo FAILED)"
  if [ $have_fuzz = 1 ]; then
    stage_begin fuzz-build "clang libFuzzer+ASan+UBSan build of the 6 fuzz targets in build-fuzz, in the background" 85
    ok=1
    if [ ! -f build-fuzz/build.ninja ]; then
      CC=clang CXX=clang++ meson setup build-fuzz -Dfuzz=true --buildtype=debugoptimized >/dev/null || ok=0
    fi
    [ $ok = 1 ] && nice ninja -C build-fuzz >build-fuzz/ninja.log 2>&1 || ok=0
    echo $ok >build-fuzz/.run_tests-ok
    stage_end fuzz-build "$([ $ok = 1 ] && echo built || echo FAILED)"
  fi
  # The sanitizer suites, as soon as their build is done;
  # their output goes to a log printed when the wheel is done.
  if [ "$(cat build-asan/.run_tests-ok 2>/dev/null)" = 1 ]; then
    stage_begin asan-suites "${#asan_suites[@]} suites under ASan+UBSan (build-asan), in the background" 75
    rc=0
    ASAN_OPTIONS=detect_leaks=1:allow_addr2line=1 \
    LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0" \
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
      meson test -C build-asan --no-rebuild --print-errorlogs --num-processes 1 "${asan_suites[@]}" \
        >build-asan/suites.log 2>&1 || rc=1
    echo $rc >build-asan/.run_tests-suites-rc
    stage_end asan-suites "$([ $rc = 0 ] && echo passed || echo FAILED)"
  fi
) &
bg_builds=$!

# The Windows build (MinGW-w64; tools/cross_build.sh), in the background beside the other builds;
# tools/wine_check.sh runs it under Wine once they are done.
rm -f build-cross/windows/.run_tests-ok
(
  stage_begin windows-build "the Windows build of the CLI, the C API and its suites (tools/cross_build.sh windows), in the background" 480
  ok=1
  mkdir -p build-cross/windows
  nice bash tools/cross_build.sh windows >build-cross/windows/run_tests.log 2>&1 || ok=0
  echo $ok >build-cross/windows/.run_tests-ok
  stage_end windows-build "$([ $ok = 1 ] && echo built || echo FAILED)"
) &
windows_build=$!

# The Python wheel as users get it: python -m build (sdist, then the wheel from it: the whole project built
# again, ccache warm after the main build) installed into a fresh venv and run there.
stage_begin wheel "python -m build and the wheel in a fresh venv (tests/python/test_python_wheel.py; about 2 min)" 120
REACH_TEST_WHEEL=1 meson test -C build --no-rebuild --print-errorlogs --logbase wheel python_wheel || status=1
stage_end wheel

logs+=(build/meson-logs/wheel.json)

# Every family's forward pass at 16 lanes (tools/run_tests.sh runs it at 4): lavapipe emulates 512-bit
# vectors on 256-bit hardware, which makes it the costliest width (283 s cold).
stage_begin families16 "families at subgroup width 16 (tools/width_matrix.sh)" 300
rm -f build/meson-logs/familieswidth16-*.json
bash tools/width_matrix.sh --widths 16 --suites families --log familieswidth --no-validation -t 2 \
  >build/width_matrix_extended.log 2>&1 || status=1
grep -E '^\|' build/width_matrix_extended.log
for f in build/meson-logs/familieswidth16-*.json; do [ -f "$f" ] && logs+=("$f"); done
stage_end families16

# The background job (sanitizer build and suites, fuzz build) may still be running;
# then the fuzz runs: one core per target, so two at a time with nothing else beside
# them (each target gets a whole core for its 10 s).
wait $bg_builds
if [ "$(cat build-asan/.run_tests-ok 2>/dev/null)" = 1 ]; then
  echo "run_tests_extended: the sanitizer suites' output (build-asan/suites.log):"
  cat build-asan/suites.log
  [ "$(cat build-asan/.run_tests-suites-rc 2>/dev/null)" = 0 ] || status=1
else
  tail -n 40 build-asan/ninja.log >&2
  echo "run_tests_extended: the sanitizer build failed (build-asan/ninja.log)" >&2
  status=1
fi

if [ $have_fuzz = 1 ]; then
  if [ "$(cat build-fuzz/.run_tests-ok 2>/dev/null)" = 1 ]; then
    stage_begin fuzz-runs "6 fuzz targets for 10 s each, 2 at a time (build-fuzz)" 35
    meson test -C build-fuzz --no-rebuild --print-errorlogs --num-processes 2 --suite fuzz || status=1
    stage_end fuzz-runs
  else
    tail -n 40 build-fuzz/ninja.log >&2
    echo "run_tests_extended: the fuzz build failed (build-fuzz/ninja.log)" >&2
    status=1
  fi
fi

# Windows under Wine: the build above, run once the other stages are done (its suites are two-core bound).
wait $windows_build
if [ "$(cat build-cross/windows/.run_tests-ok 2>/dev/null)" = 1 ]; then
  stage_begin wine "the Windows build under Wine (tools/wine_check.sh): info, selftest, C API and families suites, greedy run and serve against Linux" 90
  bash tools/wine_check.sh || status=1
  stage_end wine
else
  tail -n 40 build-cross/windows/run_tests.log >&2
  echo "run_tests_extended: the Windows build failed (build-cross/windows/run_tests.log, build-cross/windows/build.log)" >&2
  status=1
fi

stages_done
/usr/bin/python3 tools/test_summary.py "${logs[@]}" || status=1
exit $status
