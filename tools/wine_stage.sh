#!/usr/bin/env bash
# Runs Windows builds of reach (tools/cross_build.sh windows) under Wine on this Linux machine,
# where Wine's vulkan-1.dll hands Vulkan calls to the host's loader (Mesa's lavapipe here).
#
# usage: tools/wine_stage.sh prefix                  make the Wine prefix (once; later calls reuse it)
#        tools/wine_stage.sh probe                   build tools/cross/vk_probe.cpp, list the Vulkan devices
#        tools/wine_stage.sh run EXE [ARG...]        run one .exe; its exit status is this script's
#        tools/wine_stage.sh each EXE...             run each .exe (no arguments); fails when any does
#        tools/wine_stage.sh compare LINUX_EXE EXE [ARG...]
#                                                    run both with the ARGs; fails unless the exit
#                                                    statuses and stdout (CRLF as LF) are the same
# The prefix lives in ${REACH_WINEPREFIX:-~/.cache/reach/wine/prefix}; the first wineboot takes
# about 10 s.  Each run goes through xvfb-run (Wine wants a display, the machine has none).
# WINEDEBUG=-all unless set.  libreach.dll is found in build-cross/windows/build/capi
# (REACH_WINE_DLL_DIR moves it).  Needs wine64 and xvfb: tools/setup.sh --wine.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

wine=/usr/lib/wine/wine64
wineserver=/usr/lib/wine/wineserver64
if [ ! -x "$wine" ] || ! command -v xvfb-run >/dev/null; then
  echo "wine_stage: needs $wine and xvfb-run: run tools/setup.sh --wine (Debian: wine64 xvfb xauth)" >&2
  exit 2
fi
export WINEPREFIX="${REACH_WINEPREFIX:-$HOME/.cache/reach/wine/prefix}"
export WINEDEBUG="${WINEDEBUG:--all}"
# No Mono or Gecko: nothing here is .NET or HTML, and their installers would ask through a dialog.
export WINEDLLOVERRIDES="${WINEDLLOVERRIDES:-mscoree,mshtml=}"

# libreach.dll of the Windows build, for the test programs and examples in other folders: WINEPATH
# holds Windows paths (Wine's Z: is /), ';'-separated.
dll_dir="${REACH_WINE_DLL_DIR:-$root/build-cross/windows/build/capi}"
export WINEPATH="${WINEPATH:+$WINEPATH;}Z:${dll_dir//\//\\}"

under_wine() { xvfb-run -a "$wine" "$@"; }

prepare_prefix() {
  [ -f "$WINEPREFIX/system.reg" ] && return
  mkdir -p "$(dirname "$WINEPREFIX")"
  exec 9>"$(dirname "$WINEPREFIX")/.prefix.lock"
  flock 9
  if [ ! -f "$WINEPREFIX/system.reg" ]; then
    echo "wine_stage: making the Wine prefix $WINEPREFIX (wineboot, about 10 s, once)" >&2
    local start=$SECONDS
    under_wine wineboot --init >/dev/null 2>&1 || true
    # The registry files are written when the Wine server ends, a few seconds after wineboot does.
    "$wineserver" -w 2>/dev/null || true
    if [ ! -f "$WINEPREFIX/system.reg" ]; then
      echo "wine_stage: wineboot made no prefix in $WINEPREFIX: run it by hand to see why:" \
           "WINEPREFIX=$WINEPREFIX xvfb-run -a $wine wineboot --init" >&2
      exit 1
    fi
    echo "wine_stage: prefix ready ($(( SECONDS - start )) s)" >&2
  fi
  exec 9>&-
}

need_exe() {
  if [ ! -f "$1" ]; then
    echo "wine_stage: no $1: build it first (tools/cross_build.sh windows)" >&2
    exit 2
  fi
}

cmd="${1:-}"
[ $# -gt 0 ] && shift
case "$cmd" in
  prefix)
    prepare_prefix ;;
  probe)
    prepare_prefix
    out="$root/build-cross/windows"
    # The host's Vulkan headers only: -I/usr/include would bring glibc's headers in too.
    mkdir -p "$out/probe-include"
    ln -sfn /usr/include/vulkan "$out/probe-include/vulkan"
    ln -sfn /usr/include/vk_video "$out/probe-include/vk_video"
    x86_64-w64-mingw32-g++-posix -std=c++20 -O2 -static -I"$out/probe-include" -o "$out/vk_probe.exe" \
      tools/cross/vk_probe.cpp
    under_wine "$out/vk_probe.exe" ;;
  run)
    need_exe "${1:-}"
    prepare_prefix
    under_wine "$@" ;;
  each)
    prepare_prefix
    failed=()
    for exe in "$@"; do
      need_exe "$exe"
      start=$SECONDS
      if under_wine "$exe"; then
        echo "wine_stage: $exe passed ($(( SECONDS - start )) s)" >&2
      else
        rc=$?
        echo "wine_stage: $exe FAILED with exit status $rc ($(( SECONDS - start )) s)" >&2
        failed+=("$exe")
      fi
    done
    if [ ${#failed[@]} -gt 0 ]; then
      echo "wine_stage: ${#failed[@]} of $# failed: ${failed[*]}" >&2
      exit 1
    fi ;;
  compare)
    linux_exe="${1:-}" exe="${2:-}"
    need_exe "$linux_exe"; need_exe "$exe"
    shift 2
    prepare_prefix
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' EXIT
    set +e
    "$linux_exe" "$@" >"$tmp/linux.out"; linux_rc=$?
    under_wine "$exe" "$@" >"$tmp/wine.raw"; wine_rc=$?
    set -e
    tr -d '\r' <"$tmp/wine.raw" >"$tmp/wine.out"
    if [ $linux_rc != $wine_rc ]; then
      echo "wine_stage: exit status $linux_rc on Linux but $wine_rc under Wine: $exe $*" >&2
      exit 1
    fi
    if ! diff -u --label "Linux: $linux_exe $*" --label "Wine: $exe $*" "$tmp/linux.out" "$tmp/wine.out" >&2; then
      echo "wine_stage: outputs differ (above)" >&2
      exit 1
    fi
    echo "wine_stage: same output and exit status ($linux_rc) on Linux and under Wine: $exe $*" >&2 ;;
  *)
    sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2 ;;
esac
