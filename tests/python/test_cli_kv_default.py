#!/usr/bin/python3
"""The KV cache of every front end defaults to f16, and -ctk / -ctv change it, on models/rope (4 layers,
4 kv heads of 32: f16 stores 4 * 4 * 2 * 32 * 2 = 2048 bytes per token, f32 4096, q8_0 1152):

  * `reach run -v` prints "K f16 V f16, 2048 bytes per token"; with -ctk f32 -ctv f32, "K f32 V f32";
    -ctk and -ctv apart set one each;
  * `reach eval -v` prints its sessions' cache the same way;
  * `reach serve` names its slots' cache on its start line;
  * `reach info -m` marks f16 as the default among the types' bytes per token;
  * the --help of run, bench, eval and serve says f16 is the default.

usage: /usr/bin/python3 tests/python/test_cli_kv_default.py [REACH]   (default build/cli/reach; stdlib only)
"""
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = os.path.join(ROOT, "models", "rope")
failures = []


def check(cond, what, detail=""):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what + (": " + detail[-2000:] if detail else ""))


def run(reach, args, timeout=300):
    r = subprocess.run([reach] + args, capture_output=True, text=True, timeout=timeout,
                       env=dict(os.environ, REACH_PROGRESS="0"))
    return r.returncode, r.stdout, r.stderr


def kv_line(text):
    m = re.search(r"K (\S+) V (\S+), (\d+) bytes per token", text)
    return (m.group(1), m.group(2), int(m.group(3))) if m else None


def check_run(reach):
    base = ["run", "-m", MODEL, "-p", "The", "-n", "2", "--temp", "0", "-v"]
    for flags, want in [([], ("f16", "f16", 2048)),
                        (["-ctk", "f32", "-ctv", "f32"], ("f32", "f32", 4096)),
                        (["-ctk", "f16", "-ctv", "f16"], ("f16", "f16", 2048)),
                        (["-ctk", "f32"], ("f32", "f16", 3072)),
                        (["--cache-type-v", "q8_0"], ("f16", "q8_0", 1600))]:
        rc, _, err = run(reach, base + flags)
        got = kv_line(err)
        check(rc == 0 and got == want, f"reach run -v {' '.join(flags) or '(no -ctk / -ctv)'}: K {want[0]} V "
              f"{want[1]}, {want[2]} bytes per token (got {got})", err)


def check_eval(reach, tmp):
    ids = os.path.join(tmp, "ids.txt")
    with open(ids, "w") as f:
        f.write(" ".join(str(65 + i % 26) for i in range(40)))
    for flags, want in [([], ("f16", "f16")), (["-ctk", "f32", "-ctv", "f32"], ("f32", "f32"))]:
        args = ["eval", "-m", MODEL, "--tokens", ids, "--ctx", "16", "--score-last", "4", "-v"]
        rc, _, err = run(reach, args + flags)
        got = kv_line(err)
        check(rc == 0 and got is not None and got[:2] == want,
              f"reach eval -v {' '.join(flags) or '(no -ctk / -ctv)'}: K {want[0]} V {want[1]} (got {got})", err)


def check_serve(reach):
    if subprocess.run([reach, "serve", "--help"], capture_output=True).returncode != 0:
        print("note: this build has no `reach serve`: its default is not checked")
        return
    for flags, want in [([], "K f16 V f16"), (["-ctk", "f32", "-ctv", "f32"], "K f32 V f32")]:
        proc = subprocess.Popen([reach, "serve", "-m", MODEL, "--port", "0", "--parallel", "2", "--ctx", "64"] + flags,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        lines = []
        deadline = time.time() + 120
        try:
            while time.time() < deadline:
                line = proc.stderr.readline()
                if not line:
                    break
                lines.append(line)
                if "listening on" in line:
                    break
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        text = "".join(lines)
        check(re.search(r"2 slot\(s\) of 64 tokens \(KV cache " + want + r"\)", text) is not None,
              f"reach serve {' '.join(flags) or '(no -ctk / -ctv)'}: its slots' cache is {want}", text)


def check_info(reach):
    rc, out, err = run(reach, ["info", "-m", MODEL], timeout=60)
    check(rc == 0 and "f32 4096 bytes, f16 2048 bytes (default), q8_0 1152 bytes" in out,
          "reach info -m: bytes per token of each type, f16 the default", out + err)


def check_help(reach):
    for cmd in ["run", "bench", "eval", "serve"]:
        rc, out, err = run(reach, [cmd, "--help"], timeout=60)
        if rc != 0 and cmd == "serve":
            continue   # a build without the HTTP server
        check(rc == 0 and "f16 (the default)" in out and "-ctk f32 -ctv f32" in out,
              f"reach {cmd} --help: f16 is the KV cache's default; -ctk f32 -ctv f32 keeps f32", out + err)


def main():
    reach = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "cli", "reach")
    if not os.path.exists(reach):
        print(f"SKIP: {reach} is not built")
        return 77
    check_help(reach)
    check_info(reach)
    check_run(reach)
    with tempfile.TemporaryDirectory() as tmp:
        check_eval(reach, tmp)
    check_serve(reach)
    if failures:
        print(f"{len(failures)} check(s) failed:\n  " + "\n  ".join(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
