#!/usr/bin/env bash
# Runs the cooperative-matrix GEMM suite (tests/test_kernels_linear_coopmat.cpp) on a lavapipe that has
# VK_KHR_cooperative_matrix, without installing anything system-wide.
#
# usage: tools/coopmat_check.sh [fetch | suite | info | bench MODEL [PROMPT_TOKENS]]   (default: suite)
#   fetch   only fetch and unpack the driver (cached), and say which coop-matrix shapes it lists
#   suite   fetch, then run ./build/tests/test_kernels_linear_coopmat on that driver, and
#           ./build/tests/test_families with REACH_COOPMAT=1 (every prefill GEMM on the matrices)
#   families  as suite, without the GEMM suite (tools/run_tests.sh ran it on this driver already)
#   info    fetch, then `reach info` on that driver
#   bench   fetch, then `reach bench -m MODEL -p 512 -n 0 -r 1` on it with REACH_COOPMAT=0, then =1 (on a
#           CPU device the variant is used only when asked for)
#   ready   exit 0 if the driver and its validation layer are unpacked, 77 if not (fetches nothing)
#   exec CMD [ARGS...]
#           run CMD on that driver and layer, fetching nothing (tools/run_tests.sh runs the in-process
#           suites so, as `meson test --wrapper`, and width_matrix.sh / profile_matrix.sh --mesa26 too)
#
# Debian 12's lavapipe (Mesa 22.3) has no cooperative matrices, and bookworm-backports' Mesa 25.0
# does not list the extension either; Mesa 26.1 (trixie-backports) does, with one 8x8x8 shape per
# type pair.  That build needs trixie's glibc (2.38+) and LLVM 19, so the packages below are unpacked
# into $REACH_COOPMAT_DIR (default ~/.cache/reach/mesa-coopmat; 70 MB fetched once, 340 MB unpacked; each .deb
# checked against the SHA256 of its Packages index) and the programs run under that glibc's dynamic
# loader with a private ICD file (VK_ICD_FILENAMES / VK_DRIVER_FILES): the machine's own driver, and
# every other suite, stay as they are.
#
# Exit status: 0 passed; 1 the suite (or bench) failed; 77 the driver could not be fetched, does not
# list the extension, or this build lacks the shaders (tools/run_tests.sh reports the stage skipped).
# Validation: the suite runs with the Khronos validation layer of the same release (trixie's 1.4.309,
# unpacked beside the driver with its loader; VK_LAYER_PATH points there).  Debian 12's layer (1.3.239)
# predates VK_KHR_cooperative_matrix and rejects its structures, so it cannot check this device; the newer
# one can, and is what caught the memory model enabled without its Device scope (VUID 06265), which every
# GPU with cooperative matrices would have reported on the decode kernels' atomics.
set -euo pipefail
cd "$(dirname "$0")/.."

mode="${1:-suite}"
dir="${REACH_COOPMAT_DIR:-$HOME/.cache/reach/mesa-coopmat}"
mirror="${REACH_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
# Mesa's lavapipe and what it links that Debian 12 lacks or has too old (from trixie-backports / trixie).
packages=(mesa-vulkan-drivers libc6 libstdc++6 libgcc-s1 libllvm19 libdisplay-info2 libdrm2 libdrm-amdgpu1
          libelf1t64 libzstd1 libz3-4 libxml2 libffi8 libedit2 libtinfo6 zlib1g liblzma5 libbsd0 libmd0
          libexpat1 libicu76 vulkan-validationlayers libvulkan1)

skip() { echo "coopmat_check: SKIP: $*" >&2; exit 77; }

fetch() {
  mkdir -p "$dir/debs" "$dir/root"
  [ -f "$dir/.complete-2" ] && return 0   # -2: with the validation layer and loader
  command -v curl >/dev/null || skip "curl is not installed"
  for d in trixie-backports trixie; do
    if [ ! -s "$dir/Packages.$d" ]; then
      echo "coopmat_check: fetching the $d package index (a few MB, once)" >&2
      curl -sSfL "$mirror/dists/$d/main/binary-amd64/Packages.xz" | xz -dc > "$dir/Packages.$d.tmp" \
        || skip "could not fetch $mirror/dists/$d (offline?)"
      mv "$dir/Packages.$d.tmp" "$dir/Packages.$d"
    fi
  done
  echo "coopmat_check: fetching ${#packages[@]} packages into $dir (about 70 MB, once)" >&2
  for p in "${packages[@]}"; do
    local file="" sha=""
    for d in trixie-backports trixie; do
      read -r file sha < <(awk -v p="$p" '$0 == "Package: " p {x = 1} x && /^Filename:/ {f = $2}
                               x && /^SHA256:/ {print f, $2; exit}' "$dir/Packages.$d") || true
      [ -n "$file" ] && break
    done
    [ -n "$file" ] || skip "no package $p in trixie-backports or trixie"
    local deb="$dir/debs/$(basename "$file")"
    if [ ! -s "$deb" ]; then
      curl -sSfL -o "$deb.tmp" "$mirror/$file" || skip "could not fetch $mirror/$file"
      mv "$deb.tmp" "$deb"
    fi
    echo "$sha  $deb" | sha256sum -c --quiet - || { rm -f "$deb"; echo "coopmat_check: $deb: bad SHA256" >&2; exit 1; }
    dpkg -x "$deb" "$dir/root"
  done
  touch "$dir/.complete-2"
}

case "$mode" in
  ready|exec) [ -f "$dir/.complete-2" ] || skip "not fetched (tools/coopmat_check.sh fetch)" ;;
  *) fetch ;;
esac
lib="$dir/root/usr/lib/x86_64-linux-gnu"
[ -x "$lib/ld-linux-x86-64.so.2" ] && [ -f "$lib/libvulkan_lvp.so" ] || skip "the unpacked driver is incomplete ($dir)"
# Written once, atomically: every exec'd program (two suites at a time, two widths side by side) reads it,
# and a loader that reads it half-written finds no driver.
icd='{ "file_format_version": "1.0.0", "ICD": { "api_version": "1.4.0", "library_path": "'"$lib"'/libvulkan_lvp.so" } }'
if [ "$(cat "$dir/lvp_icd.json" 2>/dev/null)" != "$icd" ]; then
  printf '%s\n' "$icd" >"$dir/lvp_icd.json.$$" && mv -f "$dir/lvp_icd.json.$$" "$dir/lvp_icd.json"
fi
export VK_ICD_FILENAMES="$dir/lvp_icd.json" VK_DRIVER_FILES="$dir/lvp_icd.json"
layers="$dir/root/usr/share/vulkan/explicit_layer.d"
[ -f "$layers/VkLayer_khronos_validation.json" ] || skip "the unpacked validation layer is missing ($dir)"
export VK_LAYER_PATH="$layers"
# Run a program under the unpacked glibc, its libraries first, then the machine's.
loader=("$lib/ld-linux-x86-64.so.2" --library-path "$lib:/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu")
private() { "${loader[@]}" "$@"; }
case "$mode" in
  ready) exit 0 ;;
  exec) shift
        exec "${loader[@]}" "$@" ;;
esac

reach=./build/cli/reach
[ -x "$reach" ] || { echo "coopmat_check: build reach first (ninja -C build)" >&2; exit 1; }
info="$(REACH_VALIDATION=0 private "$reach" info)" || skip "reach info fails on the unpacked driver"
line="$(grep -m1 'cooperative-matrix GEMM:' <<<"$info" || true)"
echo "coopmat_check: $(head -n1 <<<"$info" | cut -c1-100)..." >&2
echo "coopmat_check: $line" >&2
case "$line" in
  *"not built"*) skip "this build has no cooperative-matrix shaders (tools/setup.sh installs the glslang they need)" ;;
  *x*x*" f16 x f16 -> f32"*) ;;
  *) skip "the unpacked lavapipe does not offer cooperative matrices" ;;
esac

case "$mode" in
  fetch) ;;
  info) echo "$info" ;;
  suite|families)
    for exe in ./build/tests/test_kernels_linear_coopmat ./build/tests/test_families; do
      [ -x "$exe" ] || { echo "coopmat_check: $exe is not built (ninja -C build)" >&2; exit 1; }
    done
    export REACH_VALIDATION=1 REACH_SOURCE_ROOT="$PWD" REACH_BUILD_ROOT="$PWD/build"
    [ "$mode" = families ] || private ./build/tests/test_kernels_linear_coopmat
    # Every family's prefill GEMMs on cooperative matrices against transformers' float64 forward:
    # X rounded to one f16 put them 2e-3..9e-3 off in log-prob and flipped gpt-oss's MXFP4 router.
    echo "coopmat_check: test_families with REACH_COOPMAT=1" >&2
    REACH_COOPMAT=1 REACH_TUNING_FILE="$PWD/build/tests-tuning.json" private ./build/tests/test_families ;;
  bench)
    model="${2:?usage: tools/coopmat_check.sh bench MODEL [PROMPT_TOKENS]}"
    pp="${3:-512}"
    for cm in 0 1; do
      echo "coopmat_check: REACH_COOPMAT=$cm" >&2
      REACH_COOPMAT=$cm REACH_VALIDATION=0 private "$reach" bench -m "$model" -p "$pp" -n 0 -r 1
    done ;;
  *) echo "coopmat_check: unknown mode '$mode' (fetch, suite, families, info, bench MODEL, ready, exec)" >&2; exit 2 ;;
esac
