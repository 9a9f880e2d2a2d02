#!/usr/bin/env python3
"""Prompt-prefix reuse in `reach serve`: time to first token of chat requests that share a long system
prompt, with the prefix cache on and off (--no-prefix-cache), and whether the replies are the same.

Starts `reach serve` itself (once per mode, one slot), then per mode:
  warm-up  a different long system prompt and a question (untimed: pipelines and chunk programs);
  first    the shared system prompt + question 1 (the slot holds the warm-up: nothing to reuse);
  next     the shared system prompt + questions 2.. (the slot holds the system prompt: only the rest
           is prefilled when the cache is on).
TTFT = from sending the request to the first streamed chunk with content.  Greedy, so both modes must
give the same replies (printed as a check).  Standard library only.

  python3 tools/bench_prefix.py -m ~/.cache/reach/models/smollm2-135m-instruct
"""
import argparse
import http.client
import json
import os
import re
import subprocess
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QUESTIONS = ["What is this text about?", "Who speaks first in it?", "Summarize it in one sentence.",
             "Name one place it mentions."]


def start_server(reach, model, extra):
    proc = subprocess.Popen([reach, "serve", "-m", model, "--port", "0", "--parallel", "1", *extra],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 300
    while time.time() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        m = re.search(r"listening on http://[^:]+:(\d+)", line)
        if m:
            threading.Thread(target=proc.stderr.read, daemon=True).start()
            return proc, int(m.group(1))
    proc.kill()
    raise RuntimeError("reach serve did not start: " + proc.stderr.read())


def chat(port, system, question, n):
    """(TTFT s, total s, reply text, prompt tokens) of one streamed greedy chat request."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    body = json.dumps({"messages": [{"role": "system", "content": system}, {"role": "user", "content": question}],
                       "max_tokens": n, "temperature": 0, "stream": True, "stream_options": {"include_usage": True}})
    t0 = time.perf_counter()
    conn.request("POST", "/v1/chat/completions", body=body, headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    if r.status != 200:
        raise RuntimeError(f"HTTP {r.status}: {r.read().decode()}")
    first, text, prompt_tokens = None, "", 0
    for line in r:
        line = line.strip()
        if not line.startswith(b"data: ") or line == b"data: [DONE]":
            continue
        chunk = json.loads(line[6:])
        if chunk.get("usage"):
            prompt_tokens = chunk["usage"]["prompt_tokens"]
        for ch in chunk.get("choices", []):
            piece = ch.get("delta", {}).get("content") or ""
            if piece and first is None:
                first = time.perf_counter() - t0
            text += piece
    conn.close()
    return first or 0.0, time.perf_counter() - t0, text, prompt_tokens


def run_mode(reach, model, extra, system, warm_system, n):
    proc, port = start_server(reach, model, extra)
    try:
        chat(port, warm_system, QUESTIONS[0], 4)
        return [chat(port, system, q, n) for q in QUESTIONS]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--reach", default=os.path.join(ROOT, "build", "cli", "reach"))
    ap.add_argument("--chars", type=int, default=4400, help="system prompt length in characters (~1,000 tokens)")
    ap.add_argument("-n", type=int, default=16, help="max_tokens per reply")
    ap.add_argument("--ctx", type=int, default=2048)
    a = ap.parse_args()
    with open(os.path.join(ROOT, "models", "heldout.txt")) as f:
        text = f.read()
    system = "Answer questions about this text.\n\n" + text[:a.chars]
    warm_system = "Answer questions about this text.\n\n" + text[a.chars:2 * a.chars]
    modes = {"reuse": [], "no reuse": ["--no-prefix-cache"]}
    results = {name: run_mode(a.reach, a.model, ["--ctx", str(a.ctx), *flags], system, warm_system, a.n)
               for name, flags in modes.items()}
    print(f"model {a.model}, system prompt {a.chars} chars, {a.n} tokens per reply, one slot")
    print("| request | prompt tokens | TTFT reuse s | TTFT no reuse s | total reuse s | total no reuse s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for i, q in enumerate(QUESTIONS):
        r, o = results["reuse"][i], results["no reuse"][i]
        print(f"| {i + 1}: {q} | {r[3]} | {r[0]:.3f} | {o[0]:.3f} | {r[1]:.3f} | {o[1]:.3f} |")
    first = results["reuse"][0][0]
    later = [r[0] for r in results["reuse"][1:]]
    print(f"reuse: later TTFT / first TTFT = {max(later) / first:.1%} (worst), {min(later) / first:.1%} (best)")
    same = all(results["reuse"][i][2] == results["no reuse"][i][2] for i in range(len(QUESTIONS)))
    print("replies identical with and without reuse:", "yes" if same else "NO")
    if not same:
        for i in range(len(QUESTIONS)):
            print(repr(results["reuse"][i][2]), "vs", repr(results["no reuse"][i][2]))
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
