#!/usr/bin/env bash
# README command (a): install, build, run the main job.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
./build/tools/reach info
./build/tools/reach selftest
