#!/usr/bin/env python3
"""`reach serve` driven by real clients: the PyPI `openai` package, and raw HTTP for bad requests.

The model is models/rope (a tiny trained byte-level Llama) copied into a temporary folder with a
ChatML chat template beside its tokenizer, so both endpoints run.  References are `reach run`'s
greedy outputs for the same prompt and -n (the CLI shares the tokenizer, the chat template code and
the sampler but not the server's request path, scheduler or stop handling), and each request's own
output when sent alone.

Exit 77 (meson: skipped) without the `openai` package or without a build of `reach serve`.
"""
import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

try:
    import openai
except ImportError:
    print("SKIP: the openai package is missing (python3 -m pip install openai)")
    sys.exit(77)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REACH = os.path.join(os.environ.get("REACH_BUILD_ROOT", os.path.join(ROOT, "build")), "cli", "reach")
MODEL_SRC = os.path.join(ROOT, "models", "rope")
CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
          "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
          "{% endif %}")
KEY = "sk-test-123"
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


class Server:
    def __init__(self, model, *flags):
        self.proc = subprocess.Popen([REACH, "serve", "-m", model, "--port", "0", *flags],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.port = None
        self.startup = []   # its stderr lines up to "listening on"
        deadline = time.time() + 60
        while time.time() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.startup.append(line.rstrip("\n"))
            m = re.search(r"listening on http://[^:]+:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                break
        if self.port is None:
            self.proc.kill()
            raise RuntimeError("reach serve did not start: " + self.proc.stderr.read())
        threading.Thread(target=self.proc.stderr.read, daemon=True).start()   # keep the pipe drained
        self.base = f"http://127.0.0.1:{self.port}"

    def client(self, key="none", **kw):
        return openai.OpenAI(base_url=self.base + "/v1", api_key=key, max_retries=0, timeout=60, **kw)

    def raw(self, method, path, body=None, headers=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        data = body if isinstance(body, (bytes, type(None))) else body.encode()
        conn.request(method, path, body=data, headers=headers or {"Content-Type": "application/json"})
        r = conn.getresponse()
        text = r.read().decode()
        conn.close()
        try:
            return r.status, json.loads(text)
        except ValueError:
            return r.status, text

    def health(self):
        return self.raw("GET", "/health")[1]

    def stop(self):
        self.proc.terminate()
        try:
            rc = self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = "killed"
        check(rc == 0, f"server on port {self.port} stops cleanly on SIGTERM (rc {rc})")
        return rc


def reach_run(model, n, ctx, prompt=None, chat=None):
    args = [REACH, "run", "-m", model, "-n", str(n), "--temp", "0", "--ctx", str(ctx)]
    args += ["-p", prompt] if prompt is not None else ["--chat", chat]
    out = subprocess.run(args, capture_output=True, text=True, timeout=120, check=True).stdout
    assert out.endswith("\n")
    return out[:-1]   # reach run ends the reply with a newline of its own


def complete(client, prompt, n, **kw):
    r = client.completions.create(model="tiny", prompt=prompt, max_tokens=n, **kw)
    return r.choices[0].text, r.choices[0].finish_reason, r.usage


def stream_complete(client, prompt, n, **kw):
    text, finish = "", None
    for chunk in client.completions.create(model="tiny", prompt=prompt, max_tokens=n, stream=True, **kw):
        if chunk.choices:
            text += chunk.choices[0].text
            finish = chunk.choices[0].finish_reason or finish
    return text, finish


def chat(client, msg, n, stream=False, **kw):
    messages = [{"role": "user", "content": msg}]
    if not stream:
        r = client.chat.completions.create(model="tiny", messages=messages, max_tokens=n, **kw)
        return r.choices[0].message.content, r.choices[0].finish_reason
    text, finish = "", None
    for chunk in client.chat.completions.create(model="tiny", messages=messages, max_tokens=n, stream=True, **kw):
        if chunk.choices:
            text += chunk.choices[0].delta.content or ""
            finish = chunk.choices[0].finish_reason or finish
    return text, finish


PROMPTS = ["The quick brown", "In the beginning", "And God said", "Once upon a time", "The pass key is",
           "Hello, world", "There and back", "The sky is"]


def test_main(model):
    ctx = 256
    srv = Server(model, "--parallel", "4", "--ctx", str(ctx), "--alias", "tiny")
    try:
        c = srv.client()
        check([m.id for m in c.models.list().data] == ["tiny"], "/v1/models lists the alias")
        check(srv.health()["slots"] == 4, "/health reports 4 slots")

        # Greedy completions equal reach run's, whole and streamed.
        for p in PROMPTS[:3]:
            ref = reach_run(model, 24, ctx, prompt=p)
            text, finish, usage = complete(c, p, 24, temperature=0)
            check(text == ref, f"completion of {p!r} equals reach run ({text!r} vs {ref!r})")
            check(finish == "length" and usage.completion_tokens == 24, "finish_reason length, 24 tokens")
            check(usage.prompt_tokens == len(p.encode()) + 1, "prompt_tokens: the bytes and BOS")
            check(stream_complete(c, p, 24, temperature=0) == (ref, "length"), f"streamed {p!r} equals reach run")
        # Chat through the template, whole and streamed.
        ref = reach_run(model, 20, ctx, chat="Tell me a story")
        check(chat(c, "Tell me a story", 20, temperature=0)[0] == ref, "chat equals reach run --chat")
        check(chat(c, "Tell me a story", 20, stream=True, temperature=0)[0] == ref, "streamed chat equals reach run")

        # Stop strings, across token boundaries (each token is one byte here): the text ends before the first
        # occurrence, and nothing of the stop string leaks.
        full = complete(c, PROMPTS[0], 40, temperature=0)[0]
        stop = full[10:14]
        want = full[:full.find(stop)]
        text, finish, _ = complete(c, PROMPTS[0], 40, temperature=0, stop=[stop, "\x00never"])
        check((text, finish) == (want, "stop"), f"stop {stop!r}: {text!r} == {want!r}, finish stop")
        check(stream_complete(c, PROMPTS[0], 40, temperature=0, stop=stop) == (want, "stop"), "streamed stop")
        # A stop string that starts like the text but never completes: nothing is lost.
        check(complete(c, PROMPTS[0], 40, temperature=0, stop=full[5:9] + "\x01")[0] == full,
              "a stop string that never completes holds nothing back at the end")

        # Seeded sampling repeats; max_tokens beyond the context is capped with finish_reason length.
        a = complete(c, PROMPTS[1], 30, temperature=0.9, top_p=0.9, seed=7, extra_body={"top_k": 20})[0]
        b = complete(c, PROMPTS[1], 30, temperature=0.9, top_p=0.9, seed=7, extra_body={"top_k": 20})[0]
        check(a == b, "same seed, same sample")
        text, finish, usage = complete(c, "x" * 200, 1000, temperature=0)
        check(finish == "length" and usage.completion_tokens == ctx - 201, "max_tokens capped by the context")

        # 8 concurrent clients (4 slots, 4 queued) get what they got alone.
        alone = {p: complete(c, p, 32, temperature=0.7, seed=i)[0] for i, p in enumerate(PROMPTS)}
        got = {}

        def worker(i, p):
            cl = srv.client()
            got[p] = (stream_complete if i % 2 else lambda *a, **k: complete(*a, **k)[:2])(
                cl, p, 32, temperature=0.7, seed=i)[0]
        threads = [threading.Thread(target=worker, args=(i, p)) for i, p in enumerate(PROMPTS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        check(got == alone, "8 concurrent clients get the outputs they get alone")

        # Bad requests: each class its status; the server keeps serving.
        good = {"model": "tiny", "prompt": "The", "max_tokens": 2}
        cases = [
            ("malformed JSON", "/v1/completions", '{"prompt": ', 400),
            ("not an object", "/v1/completions", "[1, 2]", 400),
            ("max_tokens of the wrong type", "/v1/completions", dict(good, max_tokens="x"), 400),
            ("stream of the wrong type", "/v1/completions", dict(good, stream="yes"), 400),
            ("negative temperature", "/v1/completions", dict(good, temperature=-1), 400),
            ("top_p 0", "/v1/completions", dict(good, top_p=0), 400),
            ("top_k negative", "/v1/completions", dict(good, top_k=-3), 400),
            ("empty stop string", "/v1/completions", dict(good, stop=[""]), 400),
            ("missing prompt", "/v1/completions", {"model": "tiny"}, 400),
            ("token id out of range", "/v1/completions", dict(good, prompt=[1, 99999]), 400),
            ("prompt longer than the context", "/v1/completions", dict(good, prompt="y" * 400), 400),
            ("bad role", "/v1/chat/completions", {"messages": [{"role": "robot", "content": "x"}]}, 400),
            ("messages not an array", "/v1/chat/completions", {"messages": "hi"}, 400),
            ("deep nesting", "/v1/completions", "[" * 5000 + "]" * 5000, 400),
            ("unknown model", "/v1/completions", dict(good, model="gpt-9"), 404),
            ("unknown route", "/v1/nothing", good, 404),
            ("body too large", "/v1/completions", dict(good, prompt="z" * (2 << 20)), 413),
        ]
        for what, path, body, status in cases:
            body = body if isinstance(body, str) else json.dumps(body)
            got_status, got_body = srv.raw("POST", path, body)
            ok = got_status == status and isinstance(got_body, dict) and "message" in got_body.get("error", {})
            check(ok, f"{what}: {got_status} (want {status}) with an error body")
        check(srv.raw("GET", "/v1/completions")[0] in (404, 405), "GET on a POST route is refused")
        check(complete(c, PROMPTS[0], 24, temperature=0)[0] == reach_run(model, 24, ctx, prompt=PROMPTS[0]),
              "still serving after the bad requests")
    finally:
        srv.stop()


def test_limits(model):
    """One slot, no queue, an API key: disconnects free the slot, a busy server answers 503."""
    srv = Server(model, "--parallel", "1", "--queue", "0", "--ctx", "2048", "--api-key", KEY, "--alias", "tiny")
    try:
        st, body = srv.raw("POST", "/v1/completions", json.dumps({"prompt": "The", "max_tokens": 2}))
        check(st == 401 and body["error"]["type"] == "authentication_error", f"no key: 401 ({st})")
        try:
            srv.client(key="wrong").completions.create(model="tiny", prompt="The", max_tokens=2)
            check(False, "a wrong key is refused")
        except openai.AuthenticationError:
            check(True, "a wrong key: openai.AuthenticationError (401)")
        c = srv.client(key=KEY)
        check(complete(c, "The", 4, temperature=0)[1] == "length", "the right key is accepted")

        # A long stream: while it runs, a second request gets 503; then the client goes away mid-stream.
        stream = c.completions.create(model="tiny", prompt="The", max_tokens=2000, stream=True, temperature=0)
        it = iter(stream)
        for _ in range(3):
            next(it)
        check(srv.health()["slots_busy"] == 1, "the stream holds the slot")
        try:
            c.completions.create(model="tiny", prompt="The", max_tokens=2)
            check(False, "a request while the only slot is busy and the queue is 0 is refused")
        except openai.APIStatusError as e:
            check(e.status_code == 503, f"busy: {e.status_code} (want 503)")
        t0 = time.time()
        stream.close()
        while srv.health()["slots_busy"] and time.time() - t0 < 5:
            time.sleep(0.02)
        freed = time.time() - t0
        # 2000 tokens take ~14 s here; the slot must come free long before.
        check(srv.health()["slots_busy"] == 0 and freed < 5, f"a disconnected stream frees its slot ({freed:.2f} s)")
        check(complete(c, "The", 4, temperature=0)[1] == "length", "the next request succeeds")
    finally:
        srv.stop()


def test_batching(model):
    """Continuous batching: 8 slots step together; prompts prefill in chunks between decode steps.

    Rows of a batched step go through the GEMM kernel instead of the one-row matvec, so their logits differ
    from a request served alone by float rounding only (at most 1e-4 of the largest logit, checked by the
    decode_batch suite); on this trained model no greedy choice is that close, so the greedy texts must be
    identical."""
    ctx = 512
    srv = Server(model, "--parallel", "8", "--ctx", str(ctx), "--chunk", "16", "--alias", "tiny")
    try:
        c = srv.client()
        check(srv.health()["slots"] == 8, "/health reports 8 slots")
        # Different prompt lengths, so the rows sit at different positions; one prompt spans many chunks.
        prompts = PROMPTS[:7] + ["Some words, then more words. " * 6]
        alone = [complete(c, p, 40, temperature=0)[0] for p in prompts]
        got = [None] * len(prompts)

        def worker(i, p):
            cl = srv.client()
            if i % 2:
                got[i] = stream_complete(cl, p, 40, temperature=0)[0]
            else:
                got[i] = complete(cl, p, 40, temperature=0)[0]
        threads = [threading.Thread(target=worker, args=(i, p)) for i, p in enumerate(prompts)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for i, p in enumerate(prompts):
            check(got[i] == alone[i], f"concurrent greedy {p[:20]!r} equals its output alone")

        # A client leaving mid-stream frees its slot at once while other streams keep running.
        long_stream = c.completions.create(model="tiny", prompt="The", max_tokens=400, stream=True, temperature=0)
        it = iter(long_stream)
        next(it)
        other = c.completions.create(model="tiny", prompt="And", max_tokens=400, stream=True, temperature=0)
        oit = iter(other)
        for _ in range(3):
            next(it)
            next(oit)
        check(srv.health()["slots_busy"] == 2, "two streams hold two slots")
        t0 = time.time()
        other.close()
        while srv.health()["slots_busy"] > 1 and time.time() - t0 < 5:
            time.sleep(0.02)
        check(srv.health()["slots_busy"] == 1, f"the disconnected stream's slot is free ({time.time() - t0:.2f} s)")
        n = sum(1 for _ in it)
        check(n > 0, "the other stream runs to its end")
        check(complete(c, PROMPTS[0], 40, temperature=0)[0] == alone[0], "a later request is served")
        t0 = time.time()
        while srv.health()["slots_busy"] and time.time() - t0 < 5:
            time.sleep(0.02)
        check(srv.health()["slots_busy"] == 0, "every slot is free at the end")
    finally:
        srv.stop()


def metric(text, name):
    m = re.search(r"^" + name + r" ([0-9.e+]+)$", text, re.M)
    return float(m.group(1)) if m else None


def greedy_at_once(srv, prompts, n=24):
    """The greedy texts of n tokens for `prompts`, sent all at once, one thread each."""
    got = [None] * len(prompts)

    def worker(i):
        got[i] = complete(srv.client(), prompts[i], n, temperature=0)[0]
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return got


def test_paged(model):
    """--kv-size: the slots share one paged KV pool.  Four concurrent requests with a common 290-byte
    opening give the greedy texts of a server without a pool, and the later ones map the first one's
    blocks (/metrics counts the tokens); at the end no block is held, and the full ones stay cached."""
    common = "Some words, then more words. " * 10
    prompts = [common + p for p in PROMPTS[:4]]
    ref = Server(model, "--ctx", "512", "--chunk", "16", "--alias", "tiny", "--no-prefix-cache", "--no-kv-pool")
    try:
        alone = [complete(ref.client(), p, 24, temperature=0)[0] for p in prompts]
    finally:
        ref.stop()
    srv = Server(model, "--parallel", "4", "--ctx", "512", "--chunk", "16", "--kv-size", "2048", "--alias", "tiny")
    try:
        first = complete(srv.client(), prompts[0], 24, temperature=0)[0]
        check(first == alone[0], "paged: the first request's greedy text equals the reference's")
        got = greedy_at_once(srv, prompts)
        for i in range(4):
            check(got[i] == alone[i], f"paged: concurrent request {i} equals the reference's text")
        t0 = time.time()
        while srv.health()["slots_busy"] and time.time() - t0 < 5:
            time.sleep(0.02)
        time.sleep(0.2)   # the scheduler publishes the pool's counters after its turn
        st, text = srv.raw("GET", "/metrics")
        check(st == 200 and metric(text, "reach_kv_blocks") == 128, "paged: /metrics reports 128 blocks of 16")
        check(metric(text, "reach_kv_blocks_used") == 0, "paged: no block is held once every request ended")
        cached = metric(text, "reach_kv_blocks_cached") or 0
        check(cached >= 18, f"paged: the common opening's full blocks stay cached ({cached})")
        hits = metric(text, "reach_kv_prefix_hit_tokens_total") or 0
        # 4 later requests map at least the 18 whole blocks (288 tokens) of BOS + the common opening.
        check(hits >= 4 * 288, f"paged: later requests map the opening's blocks ({hits:.0f} tokens)")
    finally:
        srv.stop()
    check(not any("shared by the slots" in l for l in ref.startup), "--no-kv-pool: the server says no pool")

    # Without --kv-size the slots share a pool of their whole contexts (this fixture has no windowed
    # layer): 2 slots of 512 tokens, the same greedy texts, and a repeated prompt maps its blocks.
    srv = Server(model, "--parallel", "2", "--ctx", "512", "--chunk", "16", "--alias", "tiny")
    try:
        line = next((l for l in srv.startup if "shared by the slots" in l), "")
        m = re.search(r"(\d+) blocks of (\d+) rows \((\d+) tokens\)", line)
        check(m is not None and int(m.group(3)) == 2 * 512, f"default pool: 2 x 512 tokens shared ({line!r})")
        got = greedy_at_once(srv, prompts[:2])
        for i in range(2):
            check(got[i] == alone[i], f"default pool: concurrent request {i} equals the reference's text")
        again = complete(srv.client(), prompts[0], 24, temperature=0)[0]
        check(again == alone[0], "default pool: a repeated prompt gives the same text")
        time.sleep(0.2)
        st, text = srv.raw("GET", "/metrics")
        blocks = metric(text, "reach_kv_blocks")
        check(m is not None and blocks == int(m.group(1)), f"default pool: /metrics reports its blocks ({blocks})")
        hits = metric(text, "reach_kv_prefix_hit_tokens_total") or 0
        check(hits >= 288, f"default pool: the repeated prompt maps its blocks ({hits:.0f} tokens)")
    finally:
        srv.stop()


def main():
    if not os.path.exists(REACH):
        print(f"SKIP: {REACH} is not built")
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "rope")
        shutil.copytree(MODEL_SRC, model)
        with open(os.path.join(model, "tokenizer_config.json"), "w") as f:
            json.dump({"chat_template": CHATML, "bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>"}, f)
        t0 = time.time()
        test_main(model)
        test_limits(model)
        test_batching(model)
        test_paged(model)
        print(f"{time.time() - t0:.1f} s")
    if failures:
        print(f"{len(failures)} check(s) failed:\n  " + "\n  ".join(failures))
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
