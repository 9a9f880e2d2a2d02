#!/usr/bin/env python3
"""`reach serve` against hostile and sloppy clients: every limit holds where the bytes arrive.

One check per denial-of-service case the server must withstand (U1..U6), plus the small protocol ones
(Authorization scheme case, Content-Encoding, 100-continue, oversized heads, error messages) and
GET /metrics parsed with prometheus_client, whose counters must move by what known requests did (the
usage the API itself reports).  Loopback only, bounded loops; the bounds on time are the behaviour
asked for (a client is served within 1 s, a slot freed within 0.5 s, exit within 2 s), generous next to
what the server needs.

The model is models/rope without a chat template.  Exit 77 (meson: skipped) without the `openai` or
`prometheus_client` package or without a build of `reach serve`.
"""
import gzip
import http.client
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import openai  # noqa: F401  (test_serve needs it; the skip message is the same)
    from prometheus_client.parser import text_string_to_metric_families
except ImportError as e:
    print(f"SKIP: {e.name} is missing (tools/setup.sh --test installs it)")
    sys.exit(77)
import test_serve as ts  # noqa: E402  the Server wrapper and check()

check = ts.check
KEY = "sk-hostile-1"
AUTH = {"Authorization": "Bearer " + KEY}
MIB = 1 << 20


def connect(port, timeout=10):
    return socket.create_connection(("127.0.0.1", port), timeout=timeout)


def read_response(sock):
    """(status, {lower-case name: value}, body bytes) of one response with a Content-Length."""
    data = b""
    while b"\r\n\r\n" not in data:
        more = sock.recv(65536)
        if not more:
            raise ConnectionError(f"closed before a response head ({data[:80]!r})")
        data += more
    head, body = data.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        more = sock.recv(65536)
        if not more:
            break
        body += more
    return status, headers, body[:length]


def request(port, method, path, body=None, headers=None, timeout=30):
    """(status, headers, parsed JSON or text) over a fresh connection."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    data = body.encode() if isinstance(body, str) else body
    conn.request(method, path, body=data, headers=headers or {})
    r = conn.getresponse()
    text = r.read().decode()
    hdrs = {k.lower(): v for k, v in r.getheaders()}
    conn.close()
    try:
        return r.status, hdrs, json.loads(text)
    except ValueError:
        return r.status, hdrs, text


def completion(port, body, extra_headers=None):
    headers = {"Content-Type": "application/json", **AUTH, **(extra_headers or {})}
    return request(port, "POST", "/v1/completions", body, headers)


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def slots_busy(port):
    return request(port, "GET", "/health")[2]["slots_busy"]


def test_u1_chunked_body_cap(port):
    """50 chunks of 1 MiB: 413 once the body passes --max-body (1 MiB), not after all 50 MB."""
    s = connect(port)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Authorization: Bearer " + KEY.encode() + b"\r\nTransfer-Encoding: chunked\r\n\r\n")
    piece = b"x" * (64 * 1024)
    sent, answered = 0, False
    try:
        for _ in range(50):
            s.sendall(b"100000\r\n")
            for _ in range(16):
                if select.select([s], [], [], 0)[0]:
                    answered = True
                    break
                s.sendall(piece)
                sent += len(piece)
            if answered:
                break
            s.sendall(b"\r\n")
    except (ConnectionError, socket.timeout):
        pass   # the server closed after answering; its answer is still in our receive buffer
    status = read_response(s)[0]
    s.close()
    check(status == 413, f"U1: a chunked body past --max-body: {status} (want 413)")
    # What loopback buffers hold besides the 1 MiB read is a few MiB at most, far from 50.
    check(sent <= 12 * MIB, f"U1: the answer came after {sent / MIB:.1f} MiB of 50 sent")


def test_u2_gzip_bomb(port, pid):
    """100 MiB of zeros gzipped to ~100 KB: 413, and the server never holds the inflated body."""
    bomb = gzip.compress(b" " * (100 * MIB), 9)
    before = rss_kib(pid)
    status, _, body = completion(port, bomb, {"Content-Encoding": "gzip"})
    grew = (rss_kib(pid) - before) / 1024
    check(status == 413, f"U2: a {len(bomb) // 1024} KB gzip body inflating to 100 MiB: {status} (want 413)")
    check(grew < 32, f"U2: the server's memory grew {grew:.1f} MiB (want well under the 100 MiB inflated)")


def burst_request(port, out):
    try:
        st, hdrs, _ = completion(port, json.dumps({"prompt": "The", "max_tokens": 2, "temperature": 0}))
        out.append((st, hdrs.get("retry-after")))
    except Exception as e:  # noqa: BLE001  the point: count every kind of failure
        out.append((type(e).__name__, None))


def test_u3_bursts(port):
    """5 bursts of 40 simultaneous requests: every one answered (200, or 503 with Retry-After), none reset."""
    ss = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True)
    if ss.returncode == 0 and ss.stdout.split():
        backlog = int(ss.stdout.split()[2])   # Send-Q of a listening socket: its backlog
        check(backlog >= 128, f"U3: listen backlog {backlog} (want >= 128)")
    results = []
    for _ in range(5):
        threads = [threading.Thread(target=burst_request, args=(port, results)) for _ in range(40)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    failed = [r for r in results if r[0] not in (200, 503)]
    refused = [r for r in results if r[0] == 503]
    check(len(results) == 200 and not failed, f"U3: 200 requests in bursts of 40: failures {failed[:5]}")
    check(all(r[1] is not None for r in refused), f"U3: every 503 ({len(refused)}) carries Retry-After")
    check(any(r[0] == 200 for r in results), "U3: some of the burst requests are served")


def trickle(sock, stop, interval):
    """Sends a request head one byte per interval until told to stop or the server closes."""
    msg = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n"
    i = 0
    while not stop.wait(interval) and i < len(msg):
        try:
            sock.sendall(msg[i:i + 1])
        except OSError:
            return
        i += 1


def test_u4_slow_clients(port):
    """64 sockets trickling 1 byte / 2 s: another client's /health and completion are served within 1 s."""
    stop = threading.Event()
    socks = [connect(port) for _ in range(64)]
    threads = [threading.Thread(target=trickle, args=(s, stop, 2.0), daemon=True) for s in socks]
    for t in threads:
        t.start()
    time.sleep(0.5)
    worst = 0.0
    try:
        for _ in range(3):
            t0 = time.time()
            try:
                st_h = request(port, "GET", "/health", timeout=5)[0]
                st_c = completion(port, json.dumps({"prompt": "The", "max_tokens": 2}))[0]
            except (OSError, http.client.HTTPException) as e:
                st_h = st_c = type(e).__name__
            worst = max(worst, time.time() - t0)
            check(st_h == 200 and st_c == 200, f"U4: /health {st_h} and a completion {st_c} beside 64 slow clients")
            time.sleep(0.5)
        check(worst < 1.0, f"U4: served within {worst:.2f} s (want < 1 s) while 64 clients trickle")
        # The slow clients are still connected (the request deadline is 10 s): nothing was dropped to cope.
        alive = sum(1 for s in socks if not select.select([s], [], [], 0)[0])
        check(alive == 64, f"U4: {alive} of 64 slow clients still connected")
    finally:
        stop.set()
        for s in socks:
            s.close()


def test_request_deadline(port):
    """A request that never completes gets 408 and is closed (after the 10 s request deadline)."""
    s = connect(port, timeout=20)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
    status = read_response(s)[0]
    s.close()
    check(status == 408, f"a request head left unfinished: {status} (want 408)")


def test_u5_abandoned(port):
    """Non-streamed requests whose client leaves after 0.3 s free their slot within 0.5 s."""
    body = json.dumps({"prompt": "The", "max_tokens": 2000, "temperature": 0}).encode()
    for i in range(3):
        s = connect(port)
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Authorization: Bearer " + KEY.encode() + b"\r\nContent-Length: " + str(len(body)).encode()
                  + b"\r\n\r\n" + body)
        time.sleep(0.3)
        busy = slots_busy(port)
        s.close()
        t0 = time.time()
        while slots_busy(port) and time.time() - t0 < 5:
            time.sleep(0.01)
        freed = time.time() - t0
        check(busy == 1 and freed < 0.5, f"U5 #{i + 1}: the slot was busy ({busy}) and came free {freed:.3f} s "
                                         "after the client left (want < 0.5 s)")
    st, _, r = completion(port, json.dumps({"prompt": "The", "max_tokens": 3}))
    check(st == 200 and r["usage"]["completion_tokens"] == 3, "U5: the next request is served at once")


def test_small(port, model_dir):
    st, _, _ = request(port, "GET", "/v1/models", headers={"Authorization": "bearer " + KEY})
    check(st == 200, f"'Authorization: bearer KEY' (lower-case scheme): {st} (want 200)")
    st, _, _ = request(port, "GET", "/v1/models", headers={"Authorization": "BEARER   " + KEY})
    check(st == 200, f"'Authorization: BEARER   KEY': {st} (want 200)")
    st, _, _ = request(port, "GET", "/v1/models", headers={"Authorization": "Basic " + KEY})
    check(st == 401, f"'Authorization: Basic KEY': {st} (want 401)")

    st, _, r = request(port, "POST", "/v1/chat/completions",
                       json.dumps({"messages": [{"role": "user", "content": "hi"}]}),
                       {"Content-Type": "application/json", **AUTH})
    msg = r["error"]["message"] if isinstance(r, dict) else str(r)
    check(st == 400 and "no chat template" in msg and model_dir not in msg and "/" not in msg.split("(")[0],
          f"chat on a model without a template: {st}, '{msg}' (no file paths)")

    st, _, r = completion(port, json.dumps({"prompt": "The", "top_k": 2147483648}))
    msg = r["error"]["message"] if isinstance(r, dict) else str(r)
    check(st == 400 and r["error"]["param"] == "top_k" and "top_k" in msg and ">= 0" not in msg
          and ("range" in msg or "large" in msg), f"top_k 2147483648: {st}, '{msg}'")

    plain = json.dumps({"prompt": "The quick", "max_tokens": 8, "temperature": 0})
    st, _, ref = completion(port, plain)
    for name, data in (("gzip", gzip.compress(plain.encode())), ("deflate", zlib.compress(plain.encode())),
                       ("identity", plain.encode())):
        st, _, r = completion(port, data, {"Content-Encoding": name})
        same = isinstance(r, dict) and r.get("choices", [{}])[0].get("text") == ref["choices"][0]["text"]
        check(st == 200 and same, f"Content-Encoding {name}: {st}, the same text as the plain request")
    st, _, r = completion(port, b"\x28\xb5\x2f\xfd" + plain.encode(), {"Content-Encoding": "zstd"})
    msg = r["error"]["message"] if isinstance(r, dict) else str(r)
    check(st == 415 and "zstd" in msg, f"Content-Encoding zstd: {st} (want 415), '{msg}'")
    st, _, r = completion(port, b"\x1f\x8b not gzip at all", {"Content-Encoding": "gzip"})
    check(st == 400, f"a corrupt gzip body: {st} (want 400)")

    # Expect: 100-continue: the server says to go on before the client sends its body.
    s = connect(port)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nAuthorization: Bearer "
              + KEY.encode() + b"\r\nContent-Length: " + str(len(plain)).encode() + b"\r\n\r\n")
    interim = s.recv(64)
    s.sendall(plain.encode())
    st, _, body = read_response(s)
    check(interim.startswith(b"HTTP/1.1 100") and st == 200 and json.loads(body)["choices"][0]["text"]
          == ref["choices"][0]["text"], f"Expect: 100-continue: {interim[:20]!r} then {st}")
    # Keep-alive: a second request on the same connection.
    s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    st2 = read_response(s)[0]
    s.close()
    check(st2 == 200, f"a second request on a kept-alive connection: {st2}")

    # HTTP/1.0 has no chunked coding: a stream is plain bytes ended by closing the connection.
    s = connect(port)
    body10 = json.dumps({"prompt": "The quick", "max_tokens": 8, "temperature": 0, "stream": True}).encode()
    s.sendall(b"POST /v1/completions HTTP/1.0\r\nAuthorization: Bearer " + KEY.encode() + b"\r\nContent-Length: "
              + str(len(body10)).encode() + b"\r\n\r\n" + body10)
    data = b""
    while True:
        more = s.recv(65536)
        if not more:
            break
        data += more
    s.close()
    head10, _, events = data.partition(b"\r\n\r\n")
    text10 = "".join(json.loads(line[6:])["choices"][0]["text"] for line in events.decode().split("\n")
                     if line.startswith("data: {"))
    check(head10.startswith(b"HTTP/1.1 200") and b"chunked" not in head10.lower()
          and events.endswith(b"data: [DONE]\n\n") and text10 == ref["choices"][0]["text"],
          "an HTTP/1.0 stream: plain events to the close, the same text as the whole answer")

    s = connect(port)
    s.sendall(b"GET /health HTTP/1.1\r\nX-Pad: " + b"a" * (20 * 1024) + b"\r\n\r\n")
    st = read_response(s)[0]
    s.close()
    check(st == 431, f"a 20 KiB header: {st} (want 431)")
    st, hdrs, _ = request(port, "DELETE", "/v1/completions", headers=AUTH)
    check(st == 405 and hdrs.get("allow") == "POST", f"DELETE on a POST route: {st}, Allow {hdrs.get('allow')}")


def scrape(port):
    st, hdrs, text = request(port, "GET", "/metrics")   # open like /health: no key
    assert st == 200, st
    assert hdrs["content-type"].startswith("text/plain; version=0.0.4"), hdrs["content-type"]
    values = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            values[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return values


def test_metrics(port):
    def get(v, name, **labels):
        return v.get((name, tuple(sorted(labels.items()))), 0.0)

    before = scrape(port)
    st, _, r = completion(port, json.dumps({"prompt": "Once upon a time", "max_tokens": 7, "temperature": 0}))
    st404 = request(port, "GET", "/no/such/route", headers=AUTH)[0]
    after = scrape(port)
    u = r["usage"]
    check(st == 200 and st404 == 404, "metrics: the known requests were answered")
    d = {k: get(after, k[0], **dict(k[1])) - get(before, k[0], **dict(k[1])) for k in after}
    check(d[("reach_http_requests_total", (("endpoint", "/v1/completions"), ("status", "200")))] == 1,
          "metrics: one more 200 on /v1/completions")
    check(d[("reach_http_requests_total", (("endpoint", "other"), ("status", "404")))] == 1,
          "metrics: one more 404 on other paths")
    check(d[("reach_http_requests_total", (("endpoint", "/metrics"), ("status", "200")))] == 1,
          "metrics: the first scrape is counted")
    check(d[("reach_generated_tokens_total", ())] == u["completion_tokens"],
          f"metrics: generated tokens +{d[('reach_generated_tokens_total', ())]} (usage says {u['completion_tokens']})")
    prompt_moved = d[("reach_prompt_tokens_total", ())] + d.get(("reach_prefix_cache_reused_tokens_total", ()), 0)
    check(prompt_moved == u["prompt_tokens"],
          f"metrics: prompt tokens prefilled + reused +{prompt_moved} (usage says {u['prompt_tokens']})")
    at_rest = get(after, "reach_slots_busy") == 0 and get(after, "reach_queue_depth") == 0
    check(get(after, "reach_slots") == 1 and at_rest, "metrics: 1 slot, none busy, nothing queued at rest")
    check(get(after, "reach_decode_tokens_per_second") > 0 and get(after, "reach_prefill_tokens_per_second") > 0,
          "metrics: prefill and decode rates are positive after work")


def test_u6_sigint(model):
    """SIGINT while a client trickles and another streams: the process exits within 2 s.  (SIGTERM drains:
    test_serve_drain.py.)"""
    srv = ts.Server(model, "--parallel", "1", "--ctx", "2048")
    stop = threading.Event()
    slow = connect(srv.port)
    threading.Thread(target=trickle, args=(slow, stop, 0.2), daemon=True).start()
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
    conn.request("POST", "/v1/completions", json.dumps({"prompt": "The", "max_tokens": 2000, "stream": True}),
                 {"Content-Type": "application/json"})
    r = conn.getresponse()
    r.readline()
    time.sleep(0.3)
    t0 = time.time()
    srv.proc.send_signal(signal.SIGINT)
    try:
        rc = srv.proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        srv.proc.kill()
        rc = "killed"
    took = time.time() - t0
    stop.set()
    slow.close()
    conn.close()
    check(rc == 0 and took < 2.0, f"U6: exit {rc} {took:.2f} s after SIGINT (want 0 within 2 s)")


def main():
    if not os.path.exists(ts.REACH):
        print(f"SKIP: {ts.REACH} is not built")
        return 77
    if subprocess.run([ts.REACH, "serve", "--help"], capture_output=True).returncode != 0:
        print("SKIP: this build has no `reach serve`")
        return 77
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "rope")
        shutil.copytree(ts.MODEL_SRC, model)
        srv = ts.Server(model, "--parallel", "1", "--queue", "4", "--ctx", "2048", "--api-key", KEY)
        try:
            test_small(srv.port, model)
            test_metrics(srv.port)
            test_u1_chunked_body_cap(srv.port)
            test_u2_gzip_bomb(srv.port, srv.proc.pid)
            test_u3_bursts(srv.port)
            dl = threading.Thread(target=test_request_deadline, args=(srv.port,))
            dl.start()   # takes the 10 s deadline; the next checks run meanwhile
            test_u4_slow_clients(srv.port)
            test_u5_abandoned(srv.port)
            dl.join()
            check(request(srv.port, "GET", "/health")[0] == 200, "still serving after all of it")
        finally:
            srv.stop()
        test_u6_sigint(model)
    print(f"{time.time() - t0:.1f} s")
    if ts.failures:
        print(f"{len(ts.failures)} check(s) failed:\n  " + "\n  ".join(ts.failures))
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
