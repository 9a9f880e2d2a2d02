#!/usr/bin/python3
"""`reach bench --parallel` on models/rope (4 layers, a few MB): which KV cache the streams use, and its
--profile.

  * by default the streams share one pool of their whole contexts, as `reach serve` does: each stream's
    context (-p + -n + 1 tokens) in whole blocks, times the most streams;
  * --no-kv-pool gives each stream a cache of its own; --kv-size N a pool of N tokens;
  * --no-kv-pool without --parallel, or beside --kv-size, is refused by name;
  * --profile prints, per stream count, the GPU time of one step per kernel: within the step's wall time,
    an attention kernel and a mat-vec among them.

usage: /usr/bin/python3 tests/python/test_cli_bench.py [REACH]   (default build/cli/reach; stdlib only)
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = os.path.join(ROOT, "models", "rope")
failures = []


def check(cond, what, detail=""):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what + (": " + detail[-2000:] if detail else ""))


def bench(reach, extra, p=4, n=2):
    args = [reach, "bench", "-m", MODEL, "-p", str(p), "-n", str(n), "-r", "1"] + extra
    r = subprocess.run(args, capture_output=True, text=True, timeout=300, env=dict(os.environ, REACH_PROGRESS="0"))
    return r.returncode, r.stdout, r.stderr


def pool_line(text):
    """(tokens, block rows) of the "KV pool ...: B blocks of R rows (T tokens)" line, or None."""
    m = re.search(r"KV pool [^:]*: (\d+) blocks of (\d+) rows \((\d+) tokens\)", text)
    return (int(m.group(3)), int(m.group(2))) if m else None


def stream_rows(text):
    """{streams: aggregate tokens/s} from the markdown table."""
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 8 and cells[2].isdigit():
            rows[int(cells[2])] = float(cells[3])
    return rows


def profiles(text):
    """{streams: (wall ms per step, {kernel: GPU ms per step})} from the --profile tables on stderr."""
    out, cur = {}, None
    for line in text.splitlines():
        m = re.match(r"GPU time per kernel, (\d+) streams? \(one step; wall ([0-9.]+) ms\)", line)
        if m:
            cur = {}
            out[int(m.group(1))] = (float(m.group(2)), cur)
            continue
        m = re.match(r"\| (\S+) \| ([0-9.]+) \| ([0-9.]+)% \|$", line.strip())
        if m and cur is not None:
            cur[m.group(1)] = float(m.group(2))
    return out


def main():
    reach = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "cli", "reach")
    p, n = 4, 2
    context = p + n + 1

    rc, out, err = bench(reach, ["--parallel", "1,2"], p, n)
    got = pool_line(out)
    ok = rc == 0 and got is not None
    check(ok, "bench --parallel 1,2: the streams share a KV pool by default", out + err)
    if ok:
        tokens, block = got
        want = 2 * -(-context // block) * block
        check(tokens == want, f"the pool holds 2 streams' contexts of {context} in whole blocks of {block}: "
              f"{want} tokens (got {tokens})")
    rows = stream_rows(out)
    check(sorted(rows) == [1, 2] and all(v > 0 for v in rows.values()),
          f"one row per stream count, tokens/s above 0 (got {rows})", out)

    rc, out, err = bench(reach, ["--parallel", "2", "--no-kv-pool"], p, n)
    check(rc == 0 and re.search(r"KV caches 2 x \d+ KiB", out) and pool_line(out) is None,
          "--no-kv-pool: a cache per stream", out + err)

    rc, out, err = bench(reach, ["--parallel", "2", "--kv-size", "64"], p, n)
    got = pool_line(out)
    check(rc == 0 and got is not None and got[0] == 64, f"--kv-size 64: a pool of 64 tokens (got {got})", out + err)

    for extra, needle in [(["--no-kv-pool"], "give --parallel too"),
                          (["--parallel", "2", "--no-kv-pool", "--kv-size", "64"], "contradict")]:
        rc, out, err = bench(reach, extra, p, n)
        check(rc != 0 and "--no-kv-pool" in err and needle in err,
              f"bench {' '.join(extra)}: refused, naming --no-kv-pool ({needle})", out + err)

    rc, out, err = bench(reach, ["--parallel", "1,2", "--profile"], p, n)
    prof = profiles(err)
    check(rc == 0 and sorted(prof) == [1, 2], f"--profile: a table per stream count (got {sorted(prof)})", err)
    for streams, (wall, ms) in sorted(prof.items()):
        # Per step, not per repetition or per run: the kernels' GPU time fits in the step's wall time (a
        # device runs one step's dispatches one after another; 5 % for timestamp rounding).
        total = sum(ms.values())
        check(0 < total <= wall * 1.05 + 0.05,
              f"{streams} stream(s): one step's GPU time {total:.3f} ms within its wall time {wall:.3f} ms", err)
        check(any(k.startswith("attention_") for k in ms) and any(k.startswith("linear_matvec") for k in ms),
              f"{streams} stream(s): an attention kernel and a mat-vec are timed (got {sorted(ms)})", err)

    if failures:
        print(f"\n{len(failures)} failed:", *failures, sep="\n")
        return 1
    print("all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
