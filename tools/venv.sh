#!/usr/bin/env bash
# The Python that reach's tools install PyPI packages into, and print its path.
#
# usage: tools/venv.sh [PIP_SPEC...]
#
# Prints $REACH_PYTHON when that is set (any interpreter whose pip may install packages).
# Otherwise a virtual environment at ${REACH_VENV:-$HOME/.cache/reach/venv}, made once with
# `python3 -m venv` (Debian needs the apt package python3-venv; tools/setup.sh installs it), so that
# nothing is installed into Debian's own /usr/bin/python3, whose pip refuses to
# (externally-managed-environment).  The PIP_SPECs given are installed into it when `pip` does not
# list them yet.  stdout is only the interpreter's path; what is fetched is said on stderr.
#
# tools/get_smollm2.sh, tools/get_gemma3.sh and tools/setup.sh --test use it; the test suites put
# the venv's bin/ first on PATH (tests/meson.build; the venv, not $REACH_PYTHON), so their `python3`
# finds gguf, tokenizers, jinja2 and openai there.  By hand:  "$(bash tools/venv.sh openai)" client.py
set -euo pipefail

case "${1:-}" in
  -h|--help) sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac

if [[ -n "${REACH_PYTHON:-}" ]]; then
  py="$REACH_PYTHON"
else
  venv="${REACH_VENV:-$HOME/.cache/reach/venv}"
  py="$venv/bin/python3"
  if [[ ! -x "$py" ]]; then
    mkdir -p "$(dirname "$venv")"
    exec 8>"$(dirname "$venv")/.venv.lock"
    flock 8
    if [[ ! -x "$py" ]]; then
      echo "reach venv: making a Python virtual environment for PyPI packages in $venv (python3 -m venv, a few seconds)" >&2
      log="$(mktemp)"
      if ! python3 -m venv "$venv" >"$log" 2>&1; then
        cat "$log" >&2
        rm -f "$log"
        rm -rf "$venv"
        echo "reach venv: python3 -m venv failed: on Debian install python3-venv (sudo apt-get install python3-venv;" \
             "tools/setup.sh does), or set REACH_PYTHON to a Python whose pip may install packages" >&2
        exit 1
      fi
      rm -f "$log"
    fi
  fi
fi

if (( $# )); then
  missing=()
  for spec in "$@"; do
    name="${spec%%[<>=!~ ]*}"
    "$py" -m pip show --quiet "$name" >/dev/null 2>&1 || missing+=("$spec")
  done
  if (( ${#missing[@]} )); then
    echo "reach venv: installing ${missing[*]} from PyPI into $py" >&2
    PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore "$py" -m pip install --quiet "${missing[@]}" >&2
  fi
fi
printf '%s\n' "$py"
