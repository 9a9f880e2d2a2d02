#!/usr/bin/env bash
# Runs test suites at several subgroup widths on lavapipe and prints a table
# suite x width -> pass/fail and time.  lavapipe's subgroup size follows
# LP_NATIVE_VECTOR_WIDTH (bits): 128 -> 4 lanes, 256 (its default) -> 8, 512 -> 16;
# GPUs ignore it, so on any other device the script says so and stops.
#
#   tools/width_matrix.sh                      every kernel and model suite x widths 4, 8, 16
#   tools/width_matrix.sh --widths "4 16" --suites "kernels_norm families"
#   tools/width_matrix.sh --timeout-multiplier 3 -j 2   (passed to meson test)
#   tools/width_matrix.sh --no-validation ...     without the validation layer: a suite's Vulkan calls do
#                                              not change with the width (the default run validates them)
#   tools/width_matrix.sh --no-build ...          without `ninja -C build` first (the caller built it)
#   tools/width_matrix.sh --mesa26 ...            on Mesa 26's lavapipe (tools/coopmat_check.sh exec; fetched
#                                              with tools/coopmat_check.sh fetch), whose LLVM 19 compiles the
#                                              cold variants several times faster than Debian 12's
#
# Each width is one `meson test -C build` run of the suites (their own environments
# and timeouts; -j of them at a time, 1 by default; log: build/meson-logs/width<N>-*,
# or <NAME><N>-* with --log NAME),
# wrapped by this script's --exec
# mode, which sets the width and gives each width its own Mesa shader cache
# (<the suite's cache>-w<N>: Mesa 22.3's llvmpipe keys its cache by the shader and
# the CPU's features, not by the vector width, so code compiled at 8 lanes could be
# found at 16).  Width 8
# keeps the suites' own cache, the one the default runs fill.  Exit status 1 if
# any suite failed.
set -uo pipefail

if [ "${1:-}" = "--exec" ]; then
  # Wrapper mode (meson test --wrapper): --exec LANES command...
  lanes=$2
  shift 2
  export LP_NATIVE_VECTOR_WIDTH=$((lanes * 32))
  if [ "$lanes" != 8 ] && [ -n "${MESA_SHADER_CACHE_DIR:-}" ]; then
    export MESA_SHADER_CACHE_DIR="$MESA_SHADER_CACHE_DIR-w$lanes"
  fi
  # --no-validation: the suites' Vulkan calls do not change with the width (the main run validates them).
  [ "${WIDTH_MATRIX_NO_VALIDATION:-}" = 1 ] && export REACH_VALIDATION=0
  exec "$@"
fi

cd "$(dirname "$0")/.."
root=$PWD
widths="4 8 16"
suites=""
mult=1
jobs=1
prefix=width
no_build=0
driver=""
while [ $# -gt 0 ]; do
  case $1 in
    --widths) widths=$2; shift 2 ;;
    --suites) suites=$2; shift 2 ;;
    -t|--timeout-multiplier) mult=$2; shift 2 ;;
    -j|--jobs) jobs=$2; shift 2 ;;
    --log) prefix=$2; shift 2 ;;
    --no-validation) export WIDTH_MATRIX_NO_VALIDATION=1; shift ;;
    --no-build) no_build=1; shift ;;
    --mesa26) driver="bash $(pwd)/tools/coopmat_check.sh exec"; shift ;;
    -h|--help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "width_matrix: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ -f build/build.ninja ] || { echo "width_matrix: no build/ here; run tools/setup.sh first" >&2; exit 2; }
# --no-build: the caller built it (two of these may run side by side, and two ninjas must not).
[ $no_build = 1 ] || ninja -C build >/dev/null || { echo "width_matrix: the build failed (ninja -C build)" >&2; exit 2; }

if [ -z "$suites" ]; then
  # Every kernel suite (kernels_*, the fused ones) and the model suites, as meson lists them.
  all=$(meson test -C build --no-rebuild --list 2>/dev/null)
  suites=$(printf '%s\n' $all | grep -E '^(kernels_.*|attention_fused|forward_fused)$' | sort | tr '\n' ' ')
  for s in model families smollm2 model_gemma3 model_gguf trained_models; do
    printf '%s\n' $all | grep -qx "$s" && suites+="$s "
  done
fi

# The device must follow LP_NATIVE_VECTOR_WIDTH, or the table would claim widths that never ran.
for w in $widths; do
  got=$("$0" --exec "$w" $driver build/cli/reach info --json 2>/dev/null |
        /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["subgroup_size"])' 2>/dev/null)
  if [ "$got" != "$w" ]; then
    echo "width_matrix: asked for subgroups of $w lanes, the device reports ${got:-nothing} (not lavapipe?)" >&2
    exit 2
  fi
done

declare -A res=()
status=0
for w in $widths; do
  log=$prefix$w
  rm -f build/meson-logs/"$log"-*.json
  t0=$SECONDS
  # One meson test run per width, $jobs suites at a time, each in its own environment and timeout.
  nice meson test -C build --no-rebuild --print-errorlogs -t "$mult" --num-processes "$jobs" --logbase "$log" \
    --wrapper "$root/tools/width_matrix.sh --exec $w $driver" $suites >"build/meson-logs/$log.out" 2>&1 || status=1
  # meson names the log after the wrapper too: <log>-width_matrix.sh.json, one line per suite.
  while read -r name r dt; do
    res[$name,$w]="$r ${dt}s"
    printf 'width_matrix: %-26s width %2s  %s %ss\n' "$name" "$w" "$r" "$dt"
  done < <(/usr/bin/python3 -c '
import json, sys
for line in open(sys.argv[1]):
    t = json.loads(line)
    print(t["name"].split(" / ")[-1], t["result"], round(t["duration"]))   # "reach:SUITES / name"' build/meson-logs/"$log"-*.json 2>/dev/null)
  echo "width_matrix: width $w took $((SECONDS - t0)) s (build/meson-logs/$log.out)"
done

echo
printf '| %-26s |' suite
for w in $widths; do printf ' %-14s |' "width $w"; done
echo
printf '|%s|' "$(printf -- '-%.0s' $(seq 28))"
for w in $widths; do printf '%s|' "$(printf -- '-%.0s' $(seq 16))"; done
echo
for s in $suites; do
  printf '| %-26s |' "$s"
  for w in $widths; do printf ' %-14s |' "${res[$s,$w]:-not run}"; done
  echo
done
exit $status
