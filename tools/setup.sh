#!/usr/bin/env bash
# Installs what reach needs on Debian 12 and configures the build in ./build.
# Idempotent: packages already present are skipped.
#   --test  also the test-only tools tools/run_tests.sh needs: clang and its
#           libFuzzer / sanitizer runtimes for the fuzz targets (tests/fuzz;
#           about 45 MB to download, 270 MB installed, so not for a plain build), and
#           jinja2 for the PATH python3 (tests/python/chat_template_ref.py renders the
#           reference chat templates with it), and openai for the PATH python3 (tests/python/test_serve.py
#           drives `reach serve` with the OpenAI client)
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential pkg-config meson ninja-build python3 glslc glslang-tools
          libvulkan-dev mesa-vulkan-drivers vulkan-validationlayers vulkan-tools
          doctest-dev nlohmann-json3-dev libpcre2-dev python3-numpy
          libcpp-httplib-dev   # the HTTP server of `reach serve`
          bible-kjv-text bible-kjv)  # public-domain long text for `reach eval` (read with `bible`)
if [ "${1:-}" = --test ]; then
  packages+=(clang libclang-rt-14-dev python3-jinja2)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "reach setup: installing ${missing[*]}" >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The PATH python3 may be another interpreter than Debian's (pyenv): give it jinja2 through pip.
if [ "${1:-}" = --test ] && ! python3 -c 'import jinja2' >/dev/null 2>&1; then
  PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet jinja2 >&2 \
    || echo "reach setup: could not install jinja2; the chat_template comparisons will SKIP" >&2
fi

if [ "${1:-}" = --test ] && ! python3 -c 'import openai' >/dev/null 2>&1; then
  PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet openai >&2 \
    || echo "reach setup: could not install openai; the serve suite will SKIP" >&2
fi

if [ ! -f build/build.ninja ]; then
  meson setup build --buildtype=release >/dev/null
fi
ninja -C build >/dev/null
echo "reach setup: built ./build/cli/reach" >&2
