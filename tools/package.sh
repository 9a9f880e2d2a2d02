#!/usr/bin/env bash
# Packs one cross build (tools/cross_build.sh TARGET) into one archive:
#   build-cross/reach-VERSION-TARGET.zip     (windows)
#   build-cross/reach-VERSION-TARGET.tar.gz  (the others)
# holding bin/ (reach, the examples), lib/ (the C API: libreach.dll + libreach.dll.a and libreach.a;
# libreach.dylib; libreach.so*), include/reach.h with include/reach/, README.md and the licence file when the
# repository has one (it says so when it has none).
#
# usage: tools/package.sh windows|macos-arm64|macos-x86_64|linux-aarch64
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
target="${1:-}"
case "$target" in
  windows|macos-arm64|macos-x86_64|linux-aarch64) ;;
  *) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
build="build-cross/$target/build"
if [ ! -f "$build/build.ninja" ]; then
  echo "package: no $build: run tools/cross_build.sh $target first" >&2
  exit 1
fi
version="$(sed -n "s/^ *version : '\([^']*\)'.*/\1/p" meson.build | head -n 1)"
name="reach-$version-$target"
stage="$root/build-cross/$target/$name"
rm -rf "$stage"
mkdir -p "$stage/bin" "$stage/lib" "$stage/include"

exe=""
[ "$target" = windows ] && exe=.exe
missing=()
put() {  # put DEST FILE...: copy the files that exist, note the ones that do not
  local dest="$1"; shift
  for f in "$@"; do
    # -s follows links: a failed link leaves an empty library and a dangling libreach.dylib link
    if [ -s "$f" ]; then cp -P "$f" "$stage/$dest/"; else missing+=("${f#"$root/"}"); fi
  done
}
put bin "$build/cli/reach$exe" "$build/examples/reach-example-complete$exe" "$build/examples/reach-example-host-app$exe"
case "$target" in
  # On Windows the DLL goes beside the programs that load it.
  windows) put bin "$build/capi/libreach.dll"; put lib "$build/capi/libreach.dll.a" "$build/capi/libreach.a" ;;
  macos-*) put lib "$build"/capi/libreach*.dylib "$build/capi/libreach.a" ;;
  *)       put lib "$build"/capi/libreach.so* "$build/capi/libreach.a" ;;
esac
cp -r include/reach.h include/reach "$stage/include/"
cp README.md "$stage/"
licence=""
for f in LICENSE LICENSE.md LICENSE.txt COPYING; do
  [ -f "$f" ] && { cp "$f" "$stage/"; licence="$f"; break; }
done
[ -n "$licence" ] || echo "package: the repository has no LICENSE file (meson.build says MIT): the archive has none" >&2

if [ ${#missing[@]} -gt 0 ]; then
  echo "package: $target: not built, left out: ${missing[*]}" >&2
fi
cd "build-cross/$target"
if [ "$target" = windows ]; then
  archive="$root/build-cross/$name.zip"
  rm -f "$archive"
  zip -qr "$archive" "$name"
else
  archive="$root/build-cross/$name.tar.gz"
  tar czf "$archive" "$name"
fi
echo "package: $archive ($(stat -c %s "$archive") bytes)" >&2
[ ${#missing[@]} -eq 0 ]
