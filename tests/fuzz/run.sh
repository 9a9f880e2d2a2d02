#!/usr/bin/env bash
# Runs one libFuzzer target over its seed corpus for a fixed time:
#   run.sh EXE TARGET SECONDS [libFuzzer options...]
# New inputs go to $REACH_FUZZ_WORK/corpus (default
# $REACH_BUILD_ROOT/fuzz-run/TARGET, emptied first unless REACH_FUZZ_KEEP=1),
# never into the committed seeds, and crashes to $REACH_FUZZ_WORK/artifacts.
# Fixed seed (REACH_FUZZ_SEED, default 1) so a short CI run repeats the same
# mutations.  Exit status: libFuzzer's (0 = nothing found).
set -uo pipefail
exe=$1 target=$2 seconds=$3
shift 3
src=${REACH_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
work=${REACH_FUZZ_WORK:-${REACH_BUILD_ROOT:-$src/build-fuzz}/fuzz-run/$target}
seeds=$src/tests/fuzz/corpus/$target
[ -d "$seeds" ] || { echo "fuzz: no seed corpus $seeds" >&2; exit 2; }
[ "${REACH_FUZZ_KEEP:-0}" = 1 ] || rm -rf "$work"
mkdir -p "$work/corpus" "$work/artifacts"

opts=(-max_total_time="$seconds" -rss_limit_mb=2048 -timeout=5 -seed="${REACH_FUZZ_SEED:-1}"
      -print_final_stats=1 -artifact_prefix="$work/artifacts/")
dict=$src/tests/fuzz/dict/$target.dict
[ -f "$dict" ] && opts+=(-dict="$dict")

# Leaks count as findings; reports are symbolized by llvm-symbolizer where it
# is installed, else by binutils' addr2line.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allow_addr2line=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1:allow_addr2line=1}
"$exe" "${opts[@]}" "$@" "$work/corpus" "$seeds"
status=$?
if [ $status -ne 0 ]; then
  echo "fuzz $target: failed (exit $status); reproducer(s) in $work/artifacts:" >&2
  ls -l "$work/artifacts" >&2
  echo "replay one with: $exe FILE   (keep it under tests/fuzz/crashes/$target/)" >&2
fi
exit $status
