#!/usr/bin/env bash
# Builds the libraries reach links for a cross target into build-cross/TARGET/sysroot, with .pc files
# that meson's dependency() finds there (tools/cross_build.sh points pkg-config at it):
#   libpcre2-8  static, 8-bit, Unicode, no JIT (the tokenizer's regexes)
#   zlib        static (gzip / deflate request bodies of `reach serve`)
#   nlohmann_json, doctest, Vulkan headers: header-only, copied from the host's /usr/include;
#               vulkan.pc names no library: reach loads the Vulkan loader itself at run time.
# Sources are Debian's (apt-get source: the same pcre2 and zlib as the Linux build), downloaded
# once into ~/.cache/reach/cross/src.  The .c files are compiled directly with the compiler of
# tools/cross/TARGET.txt (its list of upstream sources), which needs no CMake toolchain file.
#
# usage: tools/cross_deps.sh windows|macos-arm64|macos-x86_64|linux-aarch64
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
target="${1:-}"
case "$target" in
  windows)        cc=(x86_64-w64-mingw32-gcc-posix); ar=(x86_64-w64-mingw32-gcc-ar-posix) ;;
  macos-arm64)    cc=("$root/tools/cross/zig" cc -target aarch64-macos); ar=("$root/tools/cross/zig" ar) ;;
  macos-x86_64)   cc=("$root/tools/cross/zig" cc -target x86_64-macos); ar=("$root/tools/cross/zig" ar) ;;
  linux-aarch64)  cc=("$root/tools/cross/zig" cc -target aarch64-linux-gnu); ar=("$root/tools/cross/zig" ar) ;;
  *) echo "usage: tools/cross_deps.sh windows|macos-arm64|macos-x86_64|linux-aarch64" >&2; exit 2 ;;
esac
if ! command -v "${cc[0]}" >/dev/null; then
  echo "cross_deps: no ${cc[0]} for $target: run tools/setup.sh --cross" >&2
  exit 1
fi

cache="$HOME/.cache/reach/cross"
src="$cache/src"
sysroot="$root/build-cross/$target/sysroot"
work="$root/build-cross/$target/deps"
mkdir -p "$src" "$sysroot/include" "$sysroot/lib/pkgconfig" "$work"

# Debian's source packages need a deb-src entry; a machine without one gets ours (the same
# suites and mirror as its deb entries are assumed: Debian 12, bookworm).
ensure_deb_src() {
  if grep -rqs '^\(deb-src\|Types:.*deb-src\)' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    return
  fi
  local SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "cross_deps: adding /etc/apt/sources.list.d/reach-deb-src.sources (Debian 12 source packages)" >&2
  $SUDO tee /etc/apt/sources.list.d/reach-deb-src.sources >/dev/null <<'EOF'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  $SUDO apt-get update -qq
}

# The upstream tarball of Debian source package $1 (the .orig tarball is all we need; the
# security pocket's .dsc may be gone from the mirror while the tarball is not).
fetch() {
  local pkg="$1" tarball
  tarball="$(ls "$src/${pkg}"_*.orig.tar.* 2>/dev/null | head -n 1 || true)"
  if [ -z "$tarball" ]; then
    ensure_deb_src
    echo "cross_deps: downloading Debian's $pkg source into $src (apt-get source, once)" >&2
    (cd "$src" && apt-get source --download-only -qq "$pkg" >/dev/null 2>&1) || true
    tarball="$(ls "$src/${pkg}"_*.orig.tar.* 2>/dev/null | head -n 1 || true)"
    if [ -z "$tarball" ]; then
      echo "cross_deps: apt-get source $pkg fetched no ${pkg}_*.orig.tar.*: check the deb-src entries in" \
           "/etc/apt/sources.list.d and run apt-get update" >&2
      exit 1
    fi
  fi
  rm -rf "$work/$pkg"
  mkdir -p "$work/$pkg"
  tar xf "$tarball" -C "$work/$pkg" --strip-components=1
  echo "$tarball" | sed 's/.*_\([0-9][0-9.]*\).*/\1/; s/\.$//'
}

# Compiles the .c files named after $1 (a folder) into $2 (a static library).
compile_lib() {
  local dir="$1" lib="$2"; shift 2
  local flags=() files=() objs=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do flags+=("$1"); shift; done
  shift
  files=("$@")
  rm -f "$lib"
  for f in "${files[@]}"; do objs+=("$dir/$f.o"); done
  # two at a time (the machine's two cores); xargs fails when any compile does
  printf '%s\n' "${files[@]}" | xargs -P 2 -I{} "${cc[@]}" -O2 -fPIC "${flags[@]}" -c "$dir/{}" -o "$dir/{}.o"
  "${ar[@]}" rcs "$lib" "${objs[@]}"
}

start=$(date +%s)

# pcre2: the file list and steps of its NON-AUTOTOOLS-BUILD (pcre2_ucptables.c is #included by
# pcre2_tables.c, not compiled on its own).  pcre2_jit_compile.c without SUPPORT_JIT is the stub
# that answers "no JIT": reach asks for JIT and falls back to the interpreter.
ver="$(fetch pcre2)"
p="$work/pcre2/src"
cp "$p/config.h.generic" "$p/config.h"
cp "$p/pcre2.h.generic" "$p/pcre2.h"
cp "$p/pcre2_chartables.c.dist" "$p/pcre2_chartables.c"
compile_lib "$p" "$sysroot/lib/libpcre2-8.a" \
  -DHAVE_CONFIG_H -DPCRE2_CODE_UNIT_WIDTH=8 -DPCRE2_STATIC -DSUPPORT_UNICODE -DHAVE_STDINT_H -DHAVE_INTTYPES_H -I"$p" -- \
  pcre2_auto_possess.c pcre2_chartables.c pcre2_compile.c pcre2_config.c pcre2_context.c pcre2_convert.c \
  pcre2_dfa_match.c pcre2_error.c pcre2_extuni.c pcre2_find_bracket.c pcre2_jit_compile.c pcre2_maketables.c pcre2_match.c \
  pcre2_match_data.c pcre2_newline.c pcre2_ord2utf.c pcre2_pattern_info.c pcre2_script_run.c \
  pcre2_serialize.c pcre2_string_utils.c pcre2_study.c pcre2_substitute.c pcre2_substring.c pcre2_tables.c \
  pcre2_ucd.c pcre2_valid_utf.c pcre2_xclass.c
cp "$p/pcre2.h" "$sysroot/include/"
# PCRE2_STATIC: on Windows pcre2.h would otherwise declare the functions dllimport.
cat > "$sysroot/lib/pkgconfig/libpcre2-8.pc" <<EOF
prefix=$sysroot
Name: libpcre2-8
Description: PCRE2 8-bit (static, no JIT), built by tools/cross_deps.sh
Version: $ver
Libs: -L\${prefix}/lib -lpcre2-8
Cflags: -I\${prefix}/include -DPCRE2_STATIC
EOF

# zlib: its static library's sources (Makefile.in's OBJZ + OBJG).
ver="$(fetch zlib)"
z="$work/zlib"
zflags=()
[ "$target" = windows ] || zflags=(-DHAVE_UNISTD_H)
# zlib 1.2.13's zutil.h takes macOS's TARGET_OS_MAC for classic Mac OS and defines fdopen away,
# which breaks <stdio.h>; fdopen defined as itself skips that (fixed upstream in 1.2.14).
case "$target" in macos-*) zflags+=(-Dfdopen=fdopen) ;; esac
compile_lib "$z" "$sysroot/lib/libz.a" "${zflags[@]}" -I"$z" -- \
  adler32.c crc32.c deflate.c infback.c inffast.c inflate.c inftrees.c trees.c zutil.c \
  compress.c uncompr.c gzclose.c gzlib.c gzread.c gzwrite.c
cp "$z/zlib.h" "$z/zconf.h" "$sysroot/include/"
cat > "$sysroot/lib/pkgconfig/zlib.pc" <<EOF
prefix=$sysroot
Name: zlib
Description: zlib (static), built by tools/cross_deps.sh
Version: $ver
Libs: -L\${prefix}/lib -lz
Cflags: -I\${prefix}/include
EOF

# Header-only libraries, the host's (Debian's) versions.
for h in nlohmann doctest vulkan vk_video; do
  if [ ! -d "/usr/include/$h" ]; then
    echo "cross_deps: /usr/include/$h is missing: run tools/setup.sh (nlohmann-json3-dev, doctest-dev," \
         "libvulkan-dev)" >&2
    exit 1
  fi
  rm -rf "${sysroot:?}/include/$h"
  cp -r "/usr/include/$h" "$sysroot/include/"
done
pcver() { pkg-config --modversion "$1" 2>/dev/null || echo 0; }
cat > "$sysroot/lib/pkgconfig/nlohmann_json.pc" <<EOF
prefix=$sysroot
Name: nlohmann_json
Description: JSON for Modern C++ (header-only; the host's headers)
Version: $(pcver nlohmann_json)
Cflags: -I\${prefix}/include
EOF
doctest_ver="$(awk '/^#define DOCTEST_VERSION_(MAJOR|MINOR|PATCH) /{v=v (v?".":"") $3} END{print v}' /usr/include/doctest/doctest.h)"
cat > "$sysroot/lib/pkgconfig/doctest.pc" <<EOF
prefix=$sysroot
Name: doctest
Description: doctest (header-only; the host's headers)
Version: ${doctest_ver:-0}
Cflags: -I\${prefix}/include
EOF
# No Libs: reach opens the Vulkan loader (vulkan-1.dll, libvulkan.1.dylib / MoltenVK,
# libvulkan.so.1) at run time.
cat > "$sysroot/lib/pkgconfig/vulkan.pc" <<EOF
prefix=$sysroot
Name: Vulkan-Loader
Description: Vulkan headers only (the loader is opened at run time)
Version: $(pcver vulkan)
Cflags: -I\${prefix}/include
EOF
echo "cross_deps: $target sysroot ready in $sysroot ($(( $(date +%s) - start )) s)" >&2
