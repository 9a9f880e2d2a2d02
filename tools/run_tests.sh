#!/usr/bin/env bash
# Runs the whole test suite on the default Vulkan device (lavapipe on a
# CPU-only machine) with the Khronos validation layer on, then prints the
# closing line "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh || exit 1

status=0
meson test -C build --print-errorlogs --num-processes 1 || status=$?

/usr/bin/python3 tools/test_summary.py build/meson-logs/testlog.json || status=1
exit $status
