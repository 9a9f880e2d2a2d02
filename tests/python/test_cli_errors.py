#!/usr/bin/python3
"""An error of the `reach` CLI is one stderr line with its prefix once: "reach CMD: error: MESSAGE"
(an unknown command: "reach: error: ..."), never "reach run: error: reach run: unknown option".

Each case is a wrong command line (unknown options, missing or bad values, missing files); the exit
status is not 0 and exactly one stderr line says "error:".

usage: /usr/bin/python3 tests/python/test_cli_errors.py [REACH]   (default build/cli/reach; stdlib only)
"""
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def schema_file(tmp, text):
    path = os.path.join(tmp, f"schema{abs(hash(text))}.json")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


def cases(tmp):
    missing = os.path.join(tmp, "no-such-model")
    return [
        (["run", "--bogus"], "run", "unknown option"),
        (["run", "-p", "hi", "--temp"], "run", "--temp"),
        (["run", "-p", "hi", "-n", "many"], "run", "-n"),
        (["run", "-m", missing], "run", "no prompt"),
        (["run", "-p", "hi"], "run", "no model"),
        (["run", "-m", missing, "-p", "hi"], "run", "no-such-model"),
        (["run", "-p", "hi", "--json-schema", os.path.join(tmp, "none.json")], "run", "none.json"),
        (["run", "-p", "hi", "--json-schema", schema_file(tmp, '{"type": "string", "format": "date"}')], "run",
         "'format' at #"),
        (["run", "-p", "hi", "--json", "--json-schema", schema_file(tmp, "{}")], "run", "--json"),
        (["bench", "--bogus"], "bench", "unknown option"),
        (["bench", "-o", "xml"], "bench", "-o"),
        (["bench", "--kv-size", "12XB"], "bench", "--kv-size 12XB: give the pool's size in tokens"),
        (["bench", "--kv-size", "0"], "bench", "--kv-size"),
        (["bench", "--kv-size", "MiB"], "bench", "--kv-size MiB"),
        (["eval", "--bogus"], "eval", "unknown option"),
        (["eval", "-m", missing], "eval", "-f"),
        (["eval", "--mode", "nope"], "eval", "--mode"),
        (["quantize", "--bogus"], "quantize", "unknown option"),
        (["quantize", "a", "b", "c"], "quantize", "unexpected argument"),
        (["quantize", "a"], "quantize", "OUT.gguf"),
        (["quantize", "a", "b.gguf", "--type", "q9"], "quantize", "--type"),
        (["serve", "--bogus"], "serve", ""),   # unknown option, or a build without the HTTP server
        (["serve", "--no-kv-pool", "--kv-size", "64"], "serve", ""),   # they contradict (or no HTTP server)
        (["info", "--bogus"], "info", "unknown option"),
        (["selftest", "--bogus"], "selftest", "unknown option"),
        (["frobnicate"], "", "unknown command"),
    ]


def main():
    reach = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "cli", "reach")
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for args, cmd, words in cases(tmp):
            r = subprocess.run([reach] + args, capture_output=True, text=True, timeout=120)
            prefix = f"reach {cmd}: error: " if cmd else "reach: error: "
            lines = [l for l in r.stderr.splitlines() if "error:" in l]
            problems = []
            if r.returncode == 0:
                problems.append("exit status 0")
            if len(lines) != 1:
                problems.append(f"{len(lines)} lines with 'error:' (expected 1)")
            for line in lines:
                if not line.startswith(prefix):
                    problems.append(f"does not start with '{prefix}'")
                rest = line[len(prefix):] if line.startswith(prefix) else line
                if re.match(r"reach\b", rest) or "error: " in rest or re.search(r"\breach( \w+)?: ", rest):
                    problems.append("the prefix is repeated")
                if words not in line:
                    problems.append(f"does not mention '{words}'")
            shown = " ".join(args)
            if problems:
                failures += 1
                print(f"FAIL: reach {shown}: {'; '.join(problems)}\n  stderr: {r.stderr.strip()!r}")
            else:
                print(f"ok: reach {shown}: {lines[0]}")
    print(f"{failures} of {len(cases('/'))} error lines wrong")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
