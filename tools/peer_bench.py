#!/usr/bin/python3
"""reach beside llama.cpp's Vulkan server on the same GGUF files: prompt processing, decode, decode
at depth and parallel streams, one markdown row per (model, test) with both engines' tokens/s.

usage: peer_bench.py --reach build/cli/reach --peer DIR/llama-server --out DIR
         --model LABEL=FILE.gguf [--model ...] [--deep LABEL] [--parallel LABEL]
         [--copy-gbs X] [--prompt 512] [--gen 128] [--depth 8192] [--streams 8] [--reps 2]

Both engines are timed as their own tools time them:
  reach      `reach bench -p P -n G --chunk P -r R -o json` (-d 0,D for --deep models), and
             `reach bench -p 16 -n G --parallel 1,S -o csv` for --parallel models;
  the peer   `llama-server -ngl 99 -b P -ub P` (all layers on the GPU, the prompt in one
             micro-batch), after a warm-up request, through /completion's timings:
             prompt_per_second of a P-token prompt (n_predict 1), predicted_per_second of G
             tokens after a 1-token prompt (after a D-token prompt for depth), greedy,
             cache_prompt off, ignore_eos on, the 128 non-ASCII byte tokens banned.  Parallel: a second server with -np S, S requests
             of a 16-token prompt at once; aggregate t/s = all predicted tokens / the longest
             request's predicted_ms.
Prompts are random token ids, so no tokenizer takes part.  --copy-gbs (the device's copy rate,
read + written bytes per second) adds each decode row's weight reads as a share of it.
Writes OUT/peer.md and OUT/peer.json; the servers' logs go to OUT/peer-*.log.
"""
import argparse
import csv
import io
import json
import os
import random
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor


def run(cmd, log):
    log.write("$ " + " ".join(cmd) + "\n")
    log.flush()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=log, text=True)
    if p.returncode != 0:
        raise RuntimeError("%s exited with %d (see the log)" % (cmd[0], p.returncode))
    return p.stdout


def reach_rows(a, path, deep, par, log):
    """{test: t/s} and the weight bytes reach reads per token."""
    cmd = [a.reach, "bench", "-m", path, "-p", str(a.prompt), "-n", str(a.gen), "--chunk", str(a.prompt),
           "-r", str(a.reps), "-o", "json"]
    if deep:
        cmd += ["-d", "0,%d" % a.depth]
    out, size = {}, 0
    for t in json.loads(run(cmd, log)):
        size = t["model_size"]
        out[t["test"]] = t["avg_ts"]   # "tg128", "tg128 @ d8192"
    if par:
        cmd = [a.reach, "bench", "-m", path, "-p", "16", "-n", str(a.gen), "-r", "1",
               "--parallel", "1,%d" % a.streams, "-o", "csv"]
        for r in csv.DictReader(io.StringIO(run(cmd, log))):
            out["tg%d x%s" % (a.gen, r["streams"])] = float(r["aggregate_ts"])
    return out, size


class Peer:
    """One llama-server process on a free port, stopped on exit."""

    def __init__(self, a, path, ctx, slots, log_path):
        self.port = random.randint(20000, 60000)
        self.url = "http://127.0.0.1:%d" % self.port
        self.log = open(log_path, "a")
        cmd = [a.peer, "-m", path, "-ngl", "99", "-b", str(a.prompt), "-ub", str(a.prompt), "-c", str(ctx),
               "-np", str(slots), "--host", "127.0.0.1", "--port", str(self.port)]
        self.log.write("$ " + " ".join(cmd) + "\n")
        self.log.flush()
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + a.load_timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("llama-server exited with %d while loading (see %s)" % (self.proc.returncode, log_path))
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=5) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            time.sleep(0.5)
        self.close()
        raise RuntimeError("llama-server did not answer /health within %d s" % a.load_timeout)

    def complete(self, prompt, n_predict):
        # Random weights may pick a lone byte of a multi-byte UTF-8 character, and the server then
        # refuses the reply (HTTP 500): the byte tokens 128-255 of make_tiny_model.py's vocabulary
        # are banned, a host cost of microseconds per token.
        body = json.dumps({"prompt": prompt, "n_predict": n_predict, "cache_prompt": False, "ignore_eos": True,
                           "temperature": 0, "logit_bias": [[i, False] for i in range(128, 256)]}).encode()
        req = urllib.request.Request(self.url + "/completion", data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=600) as r:
            return json.loads(r.read())["timings"]

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()


def ids(n, vocab_lo, vocab_hi, rng):
    return [rng.randrange(vocab_lo, vocab_hi) for _ in range(n)]


def peer_rows(a, label, path, deep, par, rng):
    out = {}
    lo, hi = 300, a.vocab_hi
    ctx = (a.depth if deep else a.prompt) + a.gen + 64
    p = Peer(a, path, ctx, 1, os.path.join(a.out, "peer-%s.log" % label))
    try:
        p.complete(ids(8, lo, hi, rng), 8)   # warm-up
        mean = lambda xs: sum(xs) / len(xs)
        out["pp%d" % a.prompt] = mean([p.complete(ids(a.prompt, lo, hi, rng), 1)["prompt_per_second"]
                                       for _ in range(a.reps)])
        out["tg%d" % a.gen] = mean([p.complete(ids(1, lo, hi, rng), a.gen)["predicted_per_second"]
                                    for _ in range(a.reps)])
        if deep:
            out["tg%d @ d%d" % (a.gen, a.depth)] = mean(
                [p.complete(ids(a.depth, lo, hi, rng), a.gen)["predicted_per_second"] for _ in range(a.reps)])
    finally:
        p.close()
    if par:
        p = Peer(a, path, a.streams * (16 + a.gen + 64), a.streams, os.path.join(a.out, "peer-%s-np.log" % label))
        try:
            p.complete(ids(8, lo, hi, rng), 8)
            out["tg%d x1" % a.gen] = out.get("tg%d" % a.gen, 0)
            with ThreadPoolExecutor(a.streams) as ex:
                ex.map(lambda _: p.complete(ids(16, lo, hi, rng), 8), range(a.streams))   # every slot warm
                ts = list(ex.map(lambda _: p.complete(ids(16, lo, hi, rng), a.gen), range(a.streams)))
            out["tg%d x%d" % (a.gen, a.streams)] = sum(t["predicted_n"] for t in ts) / (
                max(t["predicted_ms"] for t in ts) / 1000.0)
        finally:
            p.close()
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reach", required=True)
    ap.add_argument("--peer", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--model", action="append", default=[], metavar="LABEL=FILE")
    ap.add_argument("--deep", action="append", default=[], metavar="LABEL")
    ap.add_argument("--parallel", action="append", default=[], metavar="LABEL")
    ap.add_argument("--copy-gbs", type=float, default=0.0)
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--depth", type=int, default=8192)
    ap.add_argument("--streams", type=int, default=8)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--vocab-hi", type=int, default=500, help="prompt ids are drawn from [300, this)")
    ap.add_argument("--load-timeout", type=int, default=300)
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    rng = random.Random(0)
    rows = []
    log = open(os.path.join(a.out, "peer-reach.log"), "a")
    for spec in a.model:
        label, path = spec.split("=", 1)
        deep, par = label in a.deep, label in a.parallel
        print("peer_bench: %s (%s)" % (label, path), file=sys.stderr, flush=True)
        try:
            r, size = reach_rows(a, path, deep, par, log)
        except (RuntimeError, ValueError, KeyError) as e:
            r, size = {}, 0
            print("peer_bench: reach on %s: %s" % (label, e), file=sys.stderr)
        try:
            p = peer_rows(a, label, path, deep, par, rng)
        except (RuntimeError, OSError, KeyError, ValueError) as e:
            p = {}
            print("peer_bench: llama-server on %s: %s" % (label, e), file=sys.stderr)
        for test in sorted(set(r) | set(p), key=lambda t: (not t.startswith("pp"), " x" in t, t)):
            row = {"model": label, "test": test, "reach": r.get(test), "peer": p.get(test), "weight_bytes": size}
            if row["reach"] and row["peer"]:
                row["ratio"] = row["reach"] / row["peer"]
            if test.startswith("tg") and row["reach"] and a.copy_gbs and size:
                streams = int(test.split(" x")[1]) if " x" in test else 1
                # Weights are read once per step; a step of S streams makes S tokens.
                row["copy_share"] = size * row["reach"] / streams / (a.copy_gbs * 1e9)
            rows.append(row)
    fmt = lambda v, f: (f % v) if v else "-"
    md = ["| model | test | reach t/s | llama.cpp-vk t/s | reach / peer | reach's weight reads / copy rate |",
          "| --- | --- | ---: | ---: | ---: | ---: |"]
    for row in rows:
        md.append("| %s | %s | %s | %s | %s | %s |" % (
            row["model"], row["test"], fmt(row["reach"], "%.2f"), fmt(row["peer"], "%.2f"),
            fmt(row.get("ratio"), "%.2fx"), fmt(100 * row.get("copy_share", 0), "%.0f %%")))
    if a.copy_gbs:
        md.append("\ncopy rate: %.1f GB/s (read + written); the last column is weight bytes x steps/s over it" % a.copy_gbs)
    with open(os.path.join(a.out, "peer.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    with open(os.path.join(a.out, "peer.json"), "w") as f:
        json.dump({"copy_gbs": a.copy_gbs, "rows": rows}, f, indent=1)
    print("\n".join(md))
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
