#!/usr/bin/env python3
"""A GPU lost while running, made on purpose with the test hook REACH_FAULT=submit:N:device_lost (the Nth
queue submission of the process's first device fails with VK_ERROR_DEVICE_LOST):

  * `reach run`: the text generated so far stays on stdout, stderr says the GPU was lost and what to try
    (driver, --ctx / --chunk, the submission bound), and the exit code is 3 (README, "A lost GPU");
  * `reach serve`: the requests in flight end with 503 naming the cause (a stream: an error event, then
    [DONE]); /health answers 503 "loading" while the model is loaded again on a new device, and a new
    request 503 with Retry-After; then /health says "ok" and the same greedy request gives what `reach run`
    gives without a fault.

N is measured first: a `reach run -n 1` (load, prefill, first sample) fails for every N up to the
submissions it makes, which a bisection on N finds; a fault 8 past that lands a few decode steps in.
Model: models/rope (each token one byte).
Exit 77 (meson: skipped) without a build of `reach`.
"""
import http.client
import json
import os
import re
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REACH = os.path.join(os.environ.get("REACH_BUILD_ROOT", os.path.join(ROOT, "build")), "cli", "reach")
MODEL = os.path.join(ROOT, "models", "rope")
PROMPT = "Once upon a time"
CTX = 256
EXIT_DEVICE_LOST = 3
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def run(n, fault=None):
    env = dict(os.environ)
    env.pop("REACH_FAULT", None)
    if fault:
        env["REACH_FAULT"] = fault
    return subprocess.run([REACH, "run", "-m", MODEL, "-p", PROMPT, "-n", str(n), "--temp", "0", "--ctx", str(CTX)],
                          capture_output=True, text=True, timeout=180, env=env)


def submissions_before_decode():
    """The smallest N whose fault lands in a `reach run -n 1` (load + prefill + first sample): those
    submissions come before any decode step."""
    lo, hi = 1, 1
    while run(1, f"submit:{hi}:device_lost").returncode == EXIT_DEVICE_LOST:
        lo, hi = hi, hi * 2
        if hi > 4096:
            raise RuntimeError("a one-token run never stops failing")
    # run(1) fails at lo, not at hi: the last failing N is in [lo, hi).
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if run(1, f"submit:{mid}:device_lost").returncode == EXIT_DEVICE_LOST:
            lo = mid
        else:
            hi = mid
    return lo


def check_run(first_decode):
    ref = run(40)
    check(ref.returncode == 0, f"reach run without a fault exits 0 ({ref.stderr[-300:]})")
    # The fault a few decode steps in: some text is out before it.
    r = run(40, f"submit:{first_decode + 8}:device_lost")
    check(r.returncode == EXIT_DEVICE_LOST, f"reach run exits {EXIT_DEVICE_LOST} on a lost GPU (got {r.returncode})")
    err = r.stderr
    check("reach run: error: the GPU was lost while running" in err, "stderr says the GPU was lost")
    for what in ("update the GPU driver", "--ctx", "--chunk", "submission bound", "VK_ERROR_DEVICE_LOST"):
        check(what in err, f"stderr names {what!r}")
    printed = r.stdout.strip("\n")
    check(len(printed) > 0 and ref.stdout.startswith(printed),
          f"the text before the loss stays on stdout and is the start of the full reply ({printed!r})")
    return ref.stdout[:-1]


class Server:
    def __init__(self, fault, *flags):
        env = dict(os.environ)
        env["REACH_FAULT"] = fault
        self.proc = subprocess.Popen([REACH, "serve", "-m", MODEL, "--port", "0", "--ctx", str(CTX), *flags],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
        self.log = []
        self.port = None
        deadline = time.time() + 120
        while time.time() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.log.append(line)
            m = re.search(r"listening on http://[^:]+:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                break
        if self.port is None:
            self.proc.kill()
            raise RuntimeError("reach serve did not start: " + "".join(self.log) + self.proc.stderr.read())
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self):
        for line in self.proc.stderr:
            self.log.append(line)

    def request(self, method, path, body=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        conn.request(method, path, body=json.dumps(body) if body is not None else None,
                     headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        status, headers, data = r.status, {k.lower(): v for k, v in r.getheaders()}, r.read().decode()
        conn.close()
        return status, headers, data

    def stop(self):
        self.proc.terminate()
        try:
            return self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return "killed"


def completion(n, stream=False):
    return {"model": "rope", "prompt": PROMPT, "max_tokens": n, "temperature": 0, "stream": stream}


def check_serve(first_decode, reference):
    # The server's load takes the run's submissions before its first decode, less the prefill's: a fault
    # at that count + 8 lands a few steps into the first request.
    srv = Server(f"submit:{first_decode + 8}:device_lost", "--parallel", "2")
    try:
        results = {}

        def stream():
            results["stream"] = srv.request("POST", "/v1/completions", completion(60, stream=True))

        def whole():
            results["whole"] = srv.request("POST", "/v1/completions", completion(60))

        threads = [threading.Thread(target=stream), threading.Thread(target=whole)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        # Right after: the reload is under way (it begins before the requests hear of the loss).
        health_status, health_headers, health = srv.request("GET", "/health")
        late_status, late_headers, late = srv.request("POST", "/v1/completions", completion(5))

        status, _, body = results["stream"]
        check(status == 200, f"the stream had started (200), got {status}")
        events = [line[6:] for line in body.splitlines() if line.startswith("data: ")]
        check(len(events) >= 2 and events[-1] == "[DONE]", f"the stream ends with [DONE] ({events[-2:]})")
        err = json.loads(events[-2]) if len(events) >= 2 else {}
        check("error" in err and "GPU was lost" in err["error"].get("message", ""),
              f"the stream's last event is an error naming the lost GPU ({events[-2:][:1]})")
        check(err.get("error", {}).get("code") == "device_lost", "its code is device_lost")

        status, headers, body = results["whole"]
        check(status == 503, f"the whole request in flight gets 503 (got {status}: {body[:200]})")
        check("GPU was lost" in body, "its message names the lost GPU")
        check("retry-after" in headers, "with Retry-After")

        check(health_status == 503 and json.loads(health).get("status") == "loading",
              f"/health says loading meanwhile ({health_status} {health})")
        check("retry-after" in health_headers, "/health's 503 has Retry-After")
        check(late_status == 503 and "retry-after" in late_headers and "loaded again" in late,
              f"a new request during the reload gets 503 with Retry-After ({late_status} {late[:160]})")

        deadline = time.time() + 120
        health = ""
        while time.time() < deadline:
            status, _, health = srv.request("GET", "/health")
            if status == 200:
                break
            time.sleep(0.2)
        check(json.loads(health).get("status") == "ok", f"/health says ok again ({health})")
        status, _, body = srv.request("POST", "/v1/completions", completion(40))
        text = json.loads(body)["choices"][0]["text"] if status == 200 else body
        check(status == 200 and text == reference,
              f"a later request gives reach run's greedy reply ({text!r} vs {reference!r})")
        status, _, metrics = srv.request("GET", "/metrics")
        check(status == 200 and "reach_device_reloads_total 1" in metrics, "/metrics counts one reload")
        log = "".join(srv.log)
        check("loading the model again" in log and "loaded again" in log, "the server's log says it reloaded")
    finally:
        rc = srv.stop()
    check(rc == 0, f"the server stops cleanly after the reload (rc {rc})")


def main():
    if not os.path.exists(REACH):
        print("SKIP: no build of reach at " + REACH)
        return 77
    first_decode = submissions_before_decode()
    print(f"a load + prefill of {MODEL} takes {first_decode} submission(s)", flush=True)
    reference = check_run(first_decode)
    check_serve(first_decode, reference)
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
