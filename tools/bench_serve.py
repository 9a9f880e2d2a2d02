#!/usr/bin/env python3
"""HTTP load generator for `reach serve`: N concurrent streaming completions, for each N in --streams.

Prints per N: aggregate generated tokens/s over the wall time, and per request the time to first token and
the total time (mean and max).  Standard library only; counts one token per streamed chunk carrying text
(reach streams a chunk per sampled token that completes text).

  ./build/cli/reach serve -m MODEL --parallel 8 --port 8080 &
  python3 tools/bench_serve.py --url http://127.0.0.1:8080 --streams 1,2,4,8 -n 32
"""
import argparse
import http.client
import json
import threading
import time
import urllib.parse


def one_request(url, prompt, n, out):
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=600)
    body = json.dumps({"prompt": prompt, "max_tokens": n, "temperature": 0, "stream": True,
                       })
    t0 = time.time()
    conn.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    if r.status != 200:
        raise RuntimeError(f"HTTP {r.status}: {r.read().decode()}")
    first, tokens = None, 0
    for line in r:
        line = line.strip()
        if not line.startswith(b"data: ") or line == b"data: [DONE]":
            continue
        chunk = json.loads(line[6:])
        if chunk.get("choices") and chunk["choices"][0].get("text"):
            tokens += 1
            if first is None:
                first = time.time() - t0
    conn.close()
    out.append((first or 0.0, time.time() - t0, tokens))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--streams", default="1,2,4,8", help="comma-separated concurrent request counts")
    ap.add_argument("-n", type=int, default=32, help="max_tokens per request")
    ap.add_argument("--prompt", default="Once upon a time")
    a = ap.parse_args()
    counts = [int(x) for x in a.streams.split(",")]
    # Untimed: the server compiles its pipelines and records its programs on first use.
    warm = []
    threads = [threading.Thread(target=one_request, args=(a.url, a.prompt, 4, warm)) for _ in range(max(counts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("| streams | tokens | wall s | aggregate t/s | first token s (mean / max) | request s (mean / max) |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for n_streams in counts:
        results = []
        threads = [threading.Thread(target=one_request, args=(a.url, f"{a.prompt} ({i})", a.n, results))
                   for i in range(n_streams)]
        t0 = time.time()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.time() - t0
        if len(results) != n_streams:
            raise SystemExit(f"{n_streams - len(results)} of {n_streams} requests failed")
        tokens = sum(r[2] for r in results)
        ttft = [r[0] for r in results]
        total = [r[1] for r in results]
        print(f"| {n_streams} | {tokens} | {wall:.2f} | {tokens / wall:.2f} | {sum(ttft) / len(ttft):.2f} / "
              f"{max(ttft):.2f} | {sum(total) / len(total):.2f} / {max(total):.2f} |", flush=True)


if __name__ == "__main__":
    main()
