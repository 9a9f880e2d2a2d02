#!/usr/bin/env python3
"""`reach serve` shuts down by draining: SIGTERM lets the requests in flight finish.

  * a clean drain: two streams and a whole (non-streamed) request in flight, an idle keep-alive
    connection and a client sending its request slowly.  On SIGTERM the idle connection closes at once,
    the slow client gets 503 with Retry-After and is closed, a new request gets 503 with Retry-After and
    GET /health a 503 saying "draining"; the streams end with their finish_reason, usage and [DONE], the
    whole request gets its whole answer (with "Connection: close"), and the process exits 0 right after;
  * the deadline: --drain-timeout 1, a stream far longer and a whole request queued behind it: the
    stream ends with an error event and [DONE], the whole request with an error answer, and the process
    exits 0 soon after the deadline;
  * a second SIGTERM stops at once, with a stream still running; so does SIGINT (test_serve_hostile U6);
  * with nothing in flight, SIGTERM exits at once.

Loopback only, every wait bounded; the bounds on time are generous next to what the server needs (it
answers in milliseconds), so that a loaded machine does not fail them.  The model is models/rope (each
token one byte, ~150 tokens/s for one stream on lavapipe).  Exit 77 (meson: skipped) without the `openai`
package (test_serve's) or without a build of `reach serve`.
"""
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_serve as ts  # noqa: E402  the Server wrapper and check(); exits 77 without openai

check = ts.check
servers = []   # killed at the end, whatever happened


def start(model, *flags):
    srv = ts.Server(model, *flags)
    servers.append(srv)
    return srv


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
    headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        more = sock.recv(65536)
        if not more:
            break
        body += more
    return int(lines[0].split()[1]), headers, body[:length]


def closed_within(sock, seconds):
    """True when the peer closes `sock` within `seconds` (bytes before the close are read and dropped)."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        if select.select([sock], [], [], max(0.0, deadline - time.time()))[0]:
            try:
                if not sock.recv(65536):
                    return True
            except ConnectionError:
                return True
    return False


def request(port, method, path, body=None, timeout=10):
    """(status, lower-case headers, parsed JSON or text) over a fresh connection."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    conn.request(method, path, body=json.dumps(body) if body is not None else None,
                 headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    text = r.read().decode()
    hdrs = {k.lower(): v for k, v in r.getheaders()}
    conn.close()
    try:
        return r.status, hdrs, json.loads(text)
    except ValueError:
        return r.status, hdrs, text


class Stream(threading.Thread):
    """A streamed completion read to its end on a thread: the events, how the body ended, when."""

    def __init__(self, port, max_tokens, prompt="The"):
        super().__init__(daemon=True)
        self.port, self.max_tokens, self.prompt = port, max_tokens, prompt
        self.events, self.complete, self.error, self.ended = [], False, None, None
        self.start()

    def count(self):
        return len(self.events)

    def run(self):
        try:
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
            conn.request("POST", "/v1/completions",
                         json.dumps({"prompt": self.prompt, "max_tokens": self.max_tokens, "stream": True,
                                     "temperature": 0, "stream_options": {"include_usage": True}}),
                         {"Content-Type": "application/json"})
            r = conn.getresponse()
            # Event by event (each its own chunk), so that the test can see the reply advance.
            try:
                while True:
                    line = r.readline()
                    if not line:
                        break
                    if line.startswith(b"data: "):
                        self.events.append(line[6:].decode().rstrip("\n"))
                self.complete = True   # the chunked body ended with its last chunk
            except http.client.IncompleteRead:
                pass
            conn.close()
        except Exception as e:  # noqa: BLE001  reported by the checks
            self.error = repr(e)
        finally:
            self.ended = time.time()

    def summary(self):
        """(finish_reason, completion_tokens, text length, error message, [DONE] last) from the events."""
        finish, tokens, text, error = None, None, 0, None
        for e in self.events[:-1] if self.events and self.events[-1] == "[DONE]" else self.events:
            j = json.loads(e)
            if "error" in j:
                error = j["error"]["message"]
                continue
            for c in j.get("choices", []):
                text += len(c.get("text", ""))
                finish = c.get("finish_reason") or finish
            if j.get("usage"):
                tokens = j["usage"]["completion_tokens"]
        return finish, tokens, text, error, bool(self.events) and self.events[-1] == "[DONE]"


class Whole(threading.Thread):
    """A non-streamed completion on a thread."""

    def __init__(self, port, max_tokens):
        super().__init__(daemon=True)
        self.port, self.max_tokens = port, max_tokens
        self.status, self.headers, self.body, self.error, self.ended = None, {}, None, None, None
        self.start()

    def run(self):
        try:
            self.status, self.headers, self.body = request(
                self.port, "POST", "/v1/completions",
                {"prompt": "And", "max_tokens": self.max_tokens, "temperature": 0}, timeout=120)
        except Exception as e:  # noqa: BLE001
            self.error = repr(e)
        finally:
            self.ended = time.time()


def wait_exit(srv, timeout):
    """(exit status or 'killed', seconds waited)."""
    t0 = time.time()
    try:
        rc = srv.proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        srv.proc.kill()
        srv.proc.wait()
        rc = "killed"
    return rc, time.time() - t0


def warm_up(port, n):
    """n requests at once, so that the device has run steps of n rows before the timed part: the first
    such step creates its pipelines (seconds on a loaded machine)."""
    ts = [Whole(port, 8) for _ in range(n)]
    for t in ts:
        t.join(120)
    return all(t.status == 200 for t in ts)


def wait_busy(port, n, streams, timeout=120):
    """Waits (bounded) until n slots are busy and then every stream has received 3 more events: the
    device has run steps of n rows (the first such step creates its pipelines, seconds on a loaded
    machine), so what follows is timed by the server, not by that.  True when so."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if request(port, "GET", "/health")[2].get("slots_busy", 0) >= n:
            break
        time.sleep(0.02)
    else:
        return False
    counts = [s.count() for s in streams]
    while time.time() < deadline:
        if all(s.count() >= c + 3 or s.ended for s, c in zip(streams, counts)):
            return not any(s.ended for s in streams)
        time.sleep(0.02)
    return False


def test_clean_drain(model):
    """Two streams, a whole request, an idle connection and a slow client when SIGTERM comes."""
    srv = start(model, "--parallel", "3", "--ctx", "1024", "--drain-timeout", "60")
    n = 500   # tokens per request: 2-3 s at three rows a step (more on a loaded machine), so that all
    #           three are mid-reply while the checks after SIGTERM run
    warm = warm_up(srv.port, 3)
    streams = [Stream(srv.port, n, p) for p in ("The", "Once upon")]
    whole = Whole(srv.port, n)
    busy = warm and wait_busy(srv.port, 3, streams)
    idle = connect(srv.port)
    idle.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    st_idle = read_response(idle)[0]
    slow = connect(srv.port)
    slow.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Le")
    time.sleep(0.05)
    check(st_idle == 200 and busy, f"drain: three requests in flight ({busy}), an idle connection, a slow one")

    t_term = time.time()
    srv.proc.send_signal(signal.SIGTERM)
    at_term = [s.count() for s in streams]
    check(closed_within(idle, 1.0), "drain: the idle keep-alive connection is closed at once")
    try:
        st, hdrs, body = read_response(slow)
        gone = closed_within(slow, 1.0)
    except (ConnectionError, socket.timeout) as e:
        st, hdrs, body, gone = repr(e), {}, b"", False
    check(st == 503 and hdrs.get("retry-after") and hdrs.get("connection") == "close" and gone,
          f"drain: the half-sent request gets 503 ({st}) with Retry-After ({hdrs.get('retry-after')}) and is closed")
    t_slow = time.time() - t_term

    st, hdrs, body = request(srv.port, "POST", "/v1/completions", {"prompt": "The", "max_tokens": 2})
    code = body.get("error", {}).get("code") if isinstance(body, dict) else None
    check(st == 503 and hdrs.get("retry-after") == "1" and code == "server_shutting_down",
          f"drain: a new request gets 503 ({st}) with Retry-After ({hdrs.get('retry-after')}), code {code}")
    st, hdrs, body = request(srv.port, "GET", "/health")
    status = body.get("status") if isinstance(body, dict) else body
    in_flight = body.get("in_flight") if isinstance(body, dict) else None
    check(st == 503 and status == "draining" and in_flight == 3 and hdrs.get("connection") == "close",
          f"drain: /health answers {st} {status!r}, {in_flight} in flight (want 503 'draining', 3)")
    check(request(srv.port, "GET", "/metrics")[0] == 200, "drain: /metrics is still served")
    still_running = all(s.ended is None for s in streams) and whole.ended is None
    check(still_running, "drain: the checks above ran while the three requests were still in flight")

    for s in streams:
        s.join(120)
    whole.join(120)
    rc, waited = wait_exit(srv, 60)
    t_exit = time.time()
    for i, s in enumerate(streams):
        finish, tokens, text, error, done = s.summary()
        check(s.error is None and s.complete and done and finish == "length" and tokens == n and error is None,
              f"drain: stream {i + 1} ends whole: finish_reason {finish}, {tokens} tokens (want {n}), "
              f"[DONE] last {done}, chunked end {s.complete}, error {s.error or error}")
    choice = whole.body["choices"][0] if isinstance(whole.body, dict) else {}
    check(whole.status == 200 and choice.get("finish_reason") == "length"
          and whole.body["usage"]["completion_tokens"] == n and whole.headers.get("connection") == "close",
          f"drain: the whole request gets its whole answer ({whole.status}, {choice.get('finish_reason')}, "
          f"Connection: {whole.headers.get('connection')}) {whole.error or ''}")
    last = max([s.ended for s in streams] + [whole.ended])
    check(rc == 0 and t_exit - last < 3.0,
          f"drain: exit {rc} {t_exit - last:.2f} s after the last answer ended "
          f"({last - t_term:.2f} s after SIGTERM; want 0, within 3 s)")
    print(f"     drain: events per stream at SIGTERM {at_term}; slow client answered {t_slow:.3f} s after SIGTERM; "
          f"last answer {last - t_term:.2f} s, exit {t_exit - t_term:.2f} s after SIGTERM")
    idle.close()
    slow.close()


def test_deadline(model):
    """--drain-timeout 1 with a stream that needs ~15 s and a whole request queued behind it: both end with
    an error, the stream with an error event and [DONE]."""
    srv = start(model, "--parallel", "1", "--ctx", "2048", "--drain-timeout", "1")
    stream = Stream(srv.port, 2000)
    busy = wait_busy(srv.port, 1, [stream])
    whole = Whole(srv.port, 2000)
    t0 = time.time()
    while request(srv.port, "GET", "/health")[2].get("queued", 0) < 1 and time.time() - t0 < 10:
        time.sleep(0.02)
    t_term = time.time()
    srv.proc.send_signal(signal.SIGTERM)
    stream.join(30)
    whole.join(30)
    rc, _ = wait_exit(srv, 30)
    t_exit = time.time() - t_term
    finish, tokens, text, error, done = stream.summary()
    check(busy and stream.error is None and stream.complete and done and error and "drain deadline" in error
          and finish is None,
          f"deadline: the cut stream ends with an error event ({error!r}), then [DONE] ({done}) and the end of "
          f"its body ({stream.complete}); {text} of 2000 tokens sent {stream.error or ''}")
    cut_after = stream.ended - t_term if stream.ended else -1
    check(0.9 < cut_after < 4.0, f"deadline: the stream is cut {cut_after:.2f} s after SIGTERM (want ~1 s)")
    msg = whole.body.get("error", {}).get("message", "") if isinstance(whole.body, dict) else ""
    check(whole.status == 500 and "drain deadline" in msg,
          f"deadline: the whole request gets an error answer ({whole.status}, {msg!r}) {whole.error or ''}")
    check(rc == 0 and t_exit < 5.0, f"deadline: exit {rc} {t_exit:.2f} s after SIGTERM (want 0 within 5 s)")


def test_second_signal(model):
    """SIGTERM with nothing in flight exits at once; SIGTERM twice with a stream running, at once too."""
    srv = start(model, "--parallel", "1", "--ctx", "2048")
    t0 = time.time()
    srv.proc.send_signal(signal.SIGTERM)
    rc, took = wait_exit(srv, 10)
    check(rc == 0 and took < 2.0, f"no load: exit {rc} {took:.2f} s after SIGTERM (want 0 within 2 s)")

    srv = start(model, "--parallel", "1", "--ctx", "2048")
    stream = Stream(srv.port, 2000)
    busy = wait_busy(srv.port, 1, [stream])
    srv.proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    draining = request(srv.port, "GET", "/health")[2]
    t0 = time.time()
    srv.proc.send_signal(signal.SIGTERM)
    rc, took = wait_exit(srv, 10)
    stream.join(5)
    check(busy and isinstance(draining, dict) and draining.get("status") == "draining" and rc == 0
          and took < 2.0, f"a second SIGTERM while draining: exit {rc} {took:.2f} s after it (want 0 within 2 s)")


def main():
    if not os.path.exists(ts.REACH):
        print(f"SKIP: {ts.REACH} is not built")
        return 77
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "rope")
        shutil.copytree(ts.MODEL_SRC, model)
        try:
            for test in (test_clean_drain, test_deadline, test_second_signal):
                t1 = time.time()
                test(model)
                print(f"     {test.__name__}: {time.time() - t1:.1f} s", flush=True)
        finally:
            for srv in servers:
                if srv.proc.poll() is None:
                    srv.proc.kill()
                    srv.proc.wait()
    print(f"{time.time() - t0:.1f} s")
    if ts.failures:
        print(f"{len(ts.failures)} check(s) failed:\n  " + "\n  ".join(ts.failures))
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
