#!/usr/bin/env bash
# The Windows stage of tools/run_tests_extended.sh: the Windows build (tools/cross_build.sh windows) run under
# Wine, whose vulkan-1.dll hands Vulkan to this machine's driver (lavapipe), held to the Linux build:
#   1. reach.exe info lists the device; reach.exe selftest passes;
#   2. the C API suites and the families suite (test_capi.exe, test_capi_c.exe, test_families.exe);
#   3. reach.exe run --chat, greedy: the same text and token ids as build/cli/reach;
#   4. the same run from a copy of the model folder whose path has spaces and non-ASCII characters and
#      whose text files (config.json, the tokenizer files) have CRLF line endings, on both builds;
#   5. reach.exe serve answers /v1/chat/completions from the Linux openai client with Linux's greedy text.
#
# usage: tools/wine_check.sh [--build]   (--build: tools/cross_build.sh windows first)
# Needs tools/setup.sh --wine (MinGW-w64, wine64, xvfb), the Linux build in ./build and SmolLM2-135M
# (tools/get_smollm2.sh; without it checks 3-5 SKIP).  Prints one line per check and
# "wine_check: N passed, N failed, N skipped"; exit status 1 when any failed.
set -uo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

if [ "${1:-}" = --build ]; then
  bash tools/cross_build.sh windows >&2 || { echo "wine_check: the Windows build failed" >&2; exit 1; }
fi
win="$root/build-cross/windows/build"
linux_reach="$root/build/cli/reach"
stage=(bash "$root/tools/wine_stage.sh")
model="${REACH_MODELS:-$HOME/.cache/reach/models}/smollm2-135m-instruct"
for f in "$win/cli/reach.exe" "$linux_reach"; do
  [ -f "$f" ] || { echo "wine_check: no $f: build it first (tools/cross_build.sh windows; tools/setup.sh)" >&2; exit 2; }
done

tmp="$(mktemp -d)"
# Wine's server and any reach.exe serve still running go with the script.
cleanup() {
  [ -n "${serve_pid:-}" ] && kill -- -"$serve_pid" 2>/dev/null
  WINEPREFIX="${REACH_WINEPREFIX:-$HOME/.cache/reach/wine/prefix}" /usr/lib/wine/wineserver64 -k 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
"${stage[@]}" prefix || exit 1

passed=0 failed=0 skipped=0
# check NAME COMMAND...: runs COMMAND with its output in $tmp/NAME.log, printed when it fails.
check() {
  local name="$1" start=$SECONDS rc=0
  shift
  "$@" >"$tmp/$name.log" 2>&1 || rc=$?
  if [ $rc = 0 ]; then
    passed=$((passed + 1)); echo "wine_check: $name ok ($((SECONDS - start)) s)"
  elif [ $rc = 77 ]; then
    skipped=$((skipped + 1)); echo "wine_check: $name SKIP: $(tail -n 1 "$tmp/$name.log")"
  else
    failed=$((failed + 1)); echo "wine_check: $name FAILED ($((SECONDS - start)) s):"
    tail -n 40 "$tmp/$name.log" | sed 's/^/    /'
  fi
}

info() {
  "${stage[@]}" run "$win/cli/reach.exe" info | tee "$tmp/info.out"
  grep -q llvmpipe "$tmp/info.out" || { echo "reach.exe info names no llvmpipe device"; return 1; }
}
check info info
check selftest "${stage[@]}" run "$win/cli/reach.exe" selftest

# The suites read these as under meson test (tests/meson.build), with Windows' own tuning file; no
# validation: Wine's vulkan-1.dll shows Windows programs no layers (the Linux suites run with it).
export REACH_SOURCE_ROOT="$root" REACH_BUILD_ROOT="$win" REACH_TUNING_FILE="$tmp/tuning.json" REACH_VALIDATION=0
# Windows programs under Wine cannot start this machine's Python: the tiny model the C API suites
# load is made here first (tests/support/model_fixture.cpp reads REACH_TEST_TINY_MODEL).
"${REACH_TEST_PYTHON:-/usr/bin/python3}" tools/make_tiny_model.py "$tmp/tiny" >/dev/null || { echo "wine_check: tools/make_tiny_model.py failed" >&2; exit 1; }
export REACH_TEST_TINY_MODEL="$tmp/tiny"
for suite in test_capi "test_capi_c $tmp/tiny" test_families; do
  set -- $suite
  if [ -f "$win/tests/$1.exe" ]; then
    check "$1" "${stage[@]}" run "$win/tests/$1.exe" "${@:2}"
  else
    check "$1" sh -c "echo 'not built for Windows: $win/tests/$1.exe'; exit 1"
  fi
done

chat="Name three colours of the rainbow."
# same_run DIR_LINUX DIR_WINE: greedy 32 tokens of the chat on both builds; the text (stdout) and the
# token ids (--ids, stderr) must be equal, line ends aside.
same_run() {
  "$linux_reach" run -m "$1" --chat "$chat" --temp 0 -n 32 --ids >"$tmp/l.out" 2>"$tmp/l.err" || return 1
  "${stage[@]}" run "$win/cli/reach.exe" run -m "$2" --chat "$chat" --temp 0 -n 32 --ids \
    >"$tmp/w.raw" 2>"$tmp/w.eraw" || { cat "$tmp/w.eraw"; return 1; }
  tr -d '\r' <"$tmp/w.raw" >"$tmp/w.out"
  grep -i 'ids' "$tmp/l.err" >"$tmp/l.ids"; tr -d '\r' <"$tmp/w.eraw" | grep -i 'ids' >"$tmp/w.ids"
  [ -s "$tmp/l.ids" ] || { echo "no token ids in the Linux run's stderr:"; cat "$tmp/l.err"; return 1; }
  diff -u --label linux --label wine "$tmp/l.out" "$tmp/w.out" && diff -u --label linux --label wine "$tmp/l.ids" "$tmp/w.ids" \
    && echo "same text and ids: $(head -c 200 "$tmp/l.out")"
}
if [ -f "$model/model.safetensors" ]; then
  check run_greedy same_run "$model" "$model"
  # A folder a Windows user might have: spaces, accents and CJK in its path, CRLF in its text files.
  odd="$tmp/mödel dir/SmolLM2 ünï 文"
  mkdir -p "$odd"
  ln "$model/model.safetensors" "$odd/" 2>/dev/null || cp "$model/model.safetensors" "$odd/"
  for f in "$model"/*.json; do sed 's/$/\r/' "$f" >"$odd/$(basename "$f")"; done
  check run_odd_folder_crlf same_run "$odd" "$odd"
  check run_crlf_same_as_lf sh -c '"$1" run -m "$2" --chat "$4" --temp 0 -n 16 >"$5/a" && "$1" run -m "$3" --chat "$4" --temp 0 -n 16 >"$5/b" && cmp "$5/a" "$5/b"' \
    _ "$linux_reach" "$model" "$odd" "$chat" "$tmp"

  serve() {
    local port
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    setsid "${stage[@]}" run "$win/cli/reach.exe" serve -m "$model" --port "$port" >"$tmp/reach_serve.log" 2>&1 &
    serve_pid=$!
    for _ in $(seq 240); do
      curl -fsS "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
      kill -0 "$serve_pid" 2>/dev/null || { cat "$tmp/reach_serve.log"; return 1; }
      sleep 0.5
    done
    "$linux_reach" run -m "$model" --chat "$chat" --temp 0 -n 16 >"$tmp/serve_expected.txt" || return 1
    "${REACH_PYTHON:-$HOME/.cache/reach/venv/bin/python}" - "$port" "$chat" "$tmp/serve_expected.txt" <<'EOF' || { cat "$tmp/reach_serve.log"; return 1; }
import sys, openai
port, chat, expected = sys.argv[1], sys.argv[2], open(sys.argv[3], encoding='utf-8').read().strip()
client = openai.OpenAI(base_url=f'http://127.0.0.1:{port}/v1', api_key='none', timeout=300)
model = client.models.list().data[0].id
r = client.chat.completions.create(model=model, messages=[{'role': 'user', 'content': chat}],
                                   temperature=0, max_tokens=16)
got = r.choices[0].message.content.strip()
print('reach.exe serve answered:', repr(got), 'finish_reason', r.choices[0].finish_reason)
assert r.choices[0].finish_reason in ('stop', 'length'), r.choices[0].finish_reason
assert got == expected, f'Linux greedy text was {expected!r}'
EOF
  }
  if "${REACH_PYTHON:-$HOME/.cache/reach/venv/bin/python}" -c 'import openai' 2>/dev/null; then
    check serve serve
  else
    check serve sh -c 'echo "no openai client in the venv (tools/setup.sh --test)"; exit 77'
  fi
else
  for c in run_greedy run_odd_folder_crlf run_crlf_same_as_lf serve; do
    check "$c" sh -c "echo 'no SmolLM2-135M in $model (tools/get_smollm2.sh)'; exit 77"
  done
fi

echo "wine_check: $passed passed, $failed failed, $skipped skipped"
[ $failed = 0 ]
