#!/usr/bin/env bash
# Cross-builds reach on this Linux machine: the CLI, the C API library and the examples, and for
# Windows the test programs tools/wine_stage.sh runs under Wine (test_capi, test_capi_c,
# test_families).
#
# usage: tools/cross_build.sh windows|macos-arm64|macos-x86_64|linux-aarch64|all
#
# Per target: tools/cross_deps.sh (pcre2, zlib and the header-only libraries into
# build-cross/TARGET/sysroot, once), `meson setup build-cross/TARGET/build` with
# build-cross/TARGET/paths.txt (the sysroot, tools/cross/zig) and tools/cross/TARGET.txt, then a build of those targets that
# goes on past errors (ninja -k 0).  Prints per target the time, each binary's size and, when the
# build fails, the distinct compiler/linker errors (the whole log: build-cross/TARGET/build.log).
# Needs tools/setup.sh --cross (--wine for windows alone).  Exit status: the number of targets that failed.
set -uo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

all=(windows macos-arm64 macos-x86_64 linux-aarch64)
case "${1:-}" in
  all) targets=("${all[@]}") ;;
  windows|macos-arm64|macos-x86_64|linux-aarch64) targets=("$1") ;;
  *) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac

cross_file() {
  case "$1" in
    windows) echo "$root/tools/cross/windows-x86_64.txt" ;;
    *) echo "$root/tools/cross/$1.txt" ;;
  esac
}

# Meson target names ([dir/]name:type) built for TARGET.
build_targets() {
  local t=(cli/reach:executable capi/reach:shared_library capi/reach:static_library
           examples/reach-example-complete examples/reach-example-host-app)
  if [ "$1" = windows ]; then
    t+=(tests/test_capi tests/test_capi_c tests/test_families)
  fi
  printf '%s\n' "${t[@]}"
}

failed=0
summary=()
for target in "${targets[@]}"; do
  start=$SECONDS
  dir="build-cross/$target"
  sysroot="$root/$dir/sysroot"
  mkdir -p "$dir"
  log="$root/$dir/build.log"
  : >"$log"
  echo "cross_build: $target: target libraries (tools/cross_deps.sh; about 20 s, once)" >&2
  if [ ! -f "$sysroot/lib/pkgconfig/vulkan.pc" ] && ! bash tools/cross_deps.sh "$target" >>"$log" 2>&1; then
    tail -n 20 "$log" >&2
    echo "cross_build: $target: tools/cross_deps.sh failed ($log)" >&2
    failed=$((failed + 1)); summary+=("$target: target libraries failed"); continue
  fi
  # The paths the cross files need (Meson 1.0 has none relative to a cross file): zig's wrapper, and
  # the sysroot's .pc files, nothing of the build machine's.
  cat >"$dir/paths.txt" <<EOF
[constants]
zig = '$root/tools/cross/zig'

[properties]
pkg_config_libdir = '$sysroot/lib/pkgconfig'
EOF
  # The test programs only where they run (Windows, under Wine).
  tests=false
  [ "$target" = windows ] && tests=true
  if [ ! -f "$dir/build/build.ninja" ]; then
    echo "cross_build: $target: meson setup $dir/build" >&2
    if ! meson setup "$dir/build" --cross-file "$root/$dir/paths.txt" --cross-file "$(cross_file "$target")" \
         -Dbuildtype=release -Dtests=$tests >>"$log" 2>&1; then
      grep -E 'ERROR|error' "$log" | tail -n 10 >&2
      echo "cross_build: $target: meson setup failed ($log; $dir/build/meson-logs/meson-log.txt)" >&2
      rm -rf "$dir/build"
      failed=$((failed + 1)); summary+=("$target: meson setup failed"); continue
    fi
  fi
  mapfile -t names < <(build_targets "$target")
  echo "cross_build: $target: building ${names[*]} (a Linux build's time or more: minutes on 2 cores)" >&2
  if nice meson compile -C "$dir/build" --ninja-args=-k0 "${names[@]}" >>"$log" 2>&1; then
    result=ok
  else
    result=FAILED
    failed=$((failed + 1))
  fi
  elapsed=$((SECONDS - start))
  echo "cross_build: $target: $result in ${elapsed} s" >&2
  # Every binary that came out, with its size.
  find "$dir/build" -maxdepth 2 -type f \( -name 'reach' -o -name 'reach.exe' -o -name '*.dll' -o -name '*.dll.a' \
       -o -name '*.dylib' -o -name 'libreach.so*' -o -name 'libreach.a' -o -name 'reach-example-*' \
       -o -name 'test_capi*' -o -name 'test_families*' \) -printf '  %-48P %10s bytes\n' | sort >&2
  if [ $result = FAILED ]; then
    echo "cross_build: $target: distinct errors (first 30; the whole log: $log):" >&2
    grep -E '(error:|undefined reference|undefined symbol)' "$log" \
      | sed -E 's|^[./]*([^ ]*):[0-9]+:[0-9]+: |\1: |' \
      | sed -E "s/(undefined (symbol: |reference to .))_?vk[A-Za-z0-9]*.*/\\1vk* (the Vulkan loader is not linked)/" \
      | sort | uniq -c | sort -rn | head -n 30 >&2
  fi
  summary+=("$target: $result, ${elapsed} s")
done
printf 'cross_build: %s\n' "${summary[@]}" >&2
exit $failed
