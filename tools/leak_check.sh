#!/usr/bin/env bash
# Runs the doctest suites under LeakSanitizer:  bash tools/leak_check.sh [SUITE...]
#
# Configures a second build, build-lsan (-Db_sanitize=leak, debugoptimized), builds the
# suites' executables and runs each one with validation on and LSAN_OPTIONS pointing at
# tests/lsan.supp, which silences only allocations made inside the Vulkan loader, Mesa
# (lavapipe / llvmpipe / LLVM) and the Khronos validation layer.  Any other leak fails,
# and so does one whose frames lie in a library already unloaded (LeakSanitizer cannot
# name it): Vulkan objects still alive when the loader unloads the driver show up that way,
# so the shared fixtures are released before main returns (tests/support/fixtures.hpp).
# Without arguments it runs the fast suites; name suites (tests/meson.build) to choose
# others.  Exits non-zero when a suite leaks or fails.  REACH_LSAN_BUILD names another
# build directory, REACH_JOBS the ninja job count (default 2).
set -uo pipefail
cd "$(dirname "$0")/.."

suites=("$@")
if [ ${#suites[@]} -eq 0 ]; then
  suites=(engine kernels_norm kernels_embed kernels_elementwise model config safetensors tokenizer capi)
fi

build=${REACH_LSAN_BUILD:-build-lsan}
if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" -Db_sanitize=leak --buildtype=debugoptimized >/dev/null || exit 1
fi
targets=()
for s in "${suites[@]}"; do
  targets+=("tests/test_$s")
  case $s in eval | smollm2) targets+=(tools/reach) ;; esac   # these suites run the CLI
done
ninja -C "$build" -j"${REACH_JOBS:-2}" "${targets[@]}" || exit 1

export REACH_VALIDATION=1 REACH_SOURCE_ROOT="$PWD" REACH_BUILD_ROOT="$PWD/$build"
export LSAN_OPTIONS="detect_leaks=1:exitcode=23:print_suppressions=0:suppressions=$PWD/tests/lsan.supp"
failed=()
for s in "${suites[@]}"; do
  # (grep without -q: it would exit at the first match and ldd, under pipefail, fail on SIGPIPE)
  if ! ldd "$build/tests/test_$s" | grep liblsan >/dev/null; then
    echo "leak_check: $build/tests/test_$s is not linked with LeakSanitizer" >&2
    exit 1
  fi
  log="$build/meson-logs/leak_check_$s.txt"
  mkdir -p "$(dirname "$log")"
  "$build/tests/test_$s" >"$log" 2>&1
  rc=$?
  if [ $rc -eq 0 ]; then
    echo "leak_check: $s: clean"
  else
    if [ $rc -eq 23 ]; then why="leaks"; else why="exit $rc"; fi
    echo "leak_check: $s: $why (log $log)"
    sed -n '/^\(Direct\|Indirect\) leak/,/^$/p; /^SUMMARY/p' "$log" | head -60
    failed+=("$s")
  fi
done
if [ ${#failed[@]} -ne 0 ]; then
  echo "leak_check: ${#failed[@]} of ${#suites[@]} suites failed: ${failed[*]}"
  exit 1
fi
echo "leak_check: ${#suites[@]} suites clean"
