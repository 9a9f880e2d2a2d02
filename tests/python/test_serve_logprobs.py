#!/usr/bin/env python3
"""`reach serve` logprobs, as the PyPI `openai` client reads them, against `reach eval --dump-logprobs`.

models/rope (a tiny byte-level Llama, one token per byte) serves greedy replies with logprobs; the
reference is `reach eval` scoring the prompt's and the reply's token ids (its last-segment protocol over
the whole sequence), a different program path: eval prefills the sequence (GEMM), the server sampled
after decode steps (the one-row mat-vec), so the values agree to float rounding, not bit for bit.
Also: the top alternatives are sorted, hold the greedy token first, and their probabilities sum to at
most 1; streamed and whole answers agree; out-of-range requests get 400 naming the field.

Exit 77 (meson: skipped) without the `openai` package or without a build of `reach serve`.
"""
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import openai  # noqa: F401
except ImportError:
    print("SKIP: the openai package is missing (python3 -m pip install openai)")
    sys.exit(77)
from test_serve import CHATML, MODEL_SRC, REACH, Server, check, failures  # noqa: E402

# decode (mat-vec) vs prefill (GEMM) sum the same f32 products in another order: logits differ by ~1e-5
# relative on this model; 2e-3 on a log-probability is far below what would change a greedy choice.
TOL = 2e-3


def eval_logprobs(model, ids, n_scored, tmp):
    """reach eval's logprobs of the last n_scored tokens of ids, read from position 0 (position: lp)."""
    tokens = os.path.join(tmp, "ids.txt")
    dump = os.path.join(tmp, "dump.tsv")
    with open(tokens, "w") as f:
        f.write(" ".join(map(str, ids)))
    subprocess.run([REACH, "eval", "-m", model, "--tokens", tokens, "--ctx", str(len(ids) - 1),
                    "--score-last", str(n_scored), "--dump-logprobs", dump],
                   capture_output=True, text=True, timeout=120, check=True)
    out = {}
    with open(dump) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            pos, target, lp = line.split("\t")
            out[int(pos)] = (int(target), float(lp))
    return out


def check_top(entries, greedy, what):
    """Sorted alternatives, the chosen token first when greedy, probabilities summing to at most 1."""
    ok_sorted = all(all(a >= b for a, b in zip(lps, lps[1:])) for lps in entries)
    check(ok_sorted, f"{what}: top logprobs sorted, most likely first")
    check(all(math.fsum(math.exp(x) for x in lps) <= 1 + 1e-6 for lps in entries), f"{what}: exp-sum <= 1")
    check(all(lps[0] == g for lps, g in zip(entries, greedy)), f"{what}: the greedy token's logprob is the top one")


def test_completions(srv, model, tmp):
    c = srv.client()
    prompt, n = "And God said", 16
    r = c.completions.create(model="tiny", prompt=prompt, max_tokens=n, temperature=0, logprobs=5)
    ch = r.choices[0]
    lp = ch.logprobs
    check(ch.finish_reason == "length" and len(lp.tokens) == n, f"{n} tokens with logprobs")
    check("".join(lp.tokens) == ch.text, "the tokens spell the text")
    offsets = [sum(len(t) for t in lp.tokens[:i]) for i in range(n)]
    check(lp.text_offset == offsets, "text_offset: where each token starts in the reply")
    check(all(len(t) == 5 for t in lp.top_logprobs), "5 alternatives per token")
    check(all(lp.tokens[i] in lp.top_logprobs[i] for i in range(n)), "the chosen token is among its alternatives")
    # Legacy top_logprobs are JSON objects (unordered): sorted here before the checks.
    check_top([sorted(t.values(), reverse=True) for t in lp.top_logprobs], lp.token_logprobs, "completions")

    # The reference: reach eval on BOS + prompt + reply (one byte per token here).
    ids = [256] + list(prompt.encode()) + list(ch.text.encode())
    check(len(ids) == 1 + len(prompt) + n, "the reply is one token per byte")
    ref = eval_logprobs(model, ids, n, tmp)
    start = 1 + len(prompt)
    worst = max(abs(lp.token_logprobs[i] - ref[start + i][1]) for i in range(n))
    check(all(ref[start + i][0] == ids[start + i] for i in range(n)), "eval scored the same targets")
    check(worst < TOL, f"logprobs equal reach eval --dump-logprobs (max diff {worst:.2e} < {TOL})")

    # Streamed: the chunks' entries are the whole answer's (the prompt's last token now comes from the
    # slot's cache, one decode step: equal within the same tolerance).
    toks, lps, offs = [], [], []
    for chunk in c.completions.create(model="tiny", prompt=prompt, max_tokens=n, temperature=0, logprobs=2,
                                      stream=True):
        if chunk.choices and chunk.choices[0].logprobs:
            toks += chunk.choices[0].logprobs.tokens
            lps += chunk.choices[0].logprobs.token_logprobs
            offs += chunk.choices[0].logprobs.text_offset
    check(toks == lp.tokens and offs == offsets, "streamed: the same tokens and offsets")
    check(max(abs(a - b) for a, b in zip(lps, lp.token_logprobs)) < TOL, "streamed: the same logprobs")

    # A stop string cuts the reply: the entries are those of the tokens whose text starts before the cut,
    # whole and streamed (entries wait with the text held back for a possible stop string).
    stop = ch.text[6:9]
    cut = ch.text.find(stop)
    keep = sum(1 for o in offsets if o < cut)
    rs = c.completions.create(model="tiny", prompt=prompt, max_tokens=n, temperature=0, logprobs=1, stop=stop)
    check(rs.choices[0].text == ch.text[:cut] and rs.choices[0].logprobs.tokens == lp.tokens[:keep],
          f"stop {stop!r}: {keep} tokens with logprobs, those of the text kept")
    streamed_toks = []
    for chunk in c.completions.create(model="tiny", prompt=prompt, max_tokens=n, temperature=0, logprobs=1,
                                      stop=stop, stream=True):
        if chunk.choices and chunk.choices[0].logprobs:
            streamed_toks += chunk.choices[0].logprobs.tokens
    check(streamed_toks == lp.tokens[:keep], f"streamed stop {stop!r}: the same {keep} tokens")

    r0 = c.completions.create(model="tiny", prompt=prompt, max_tokens=4, temperature=0, logprobs=0)
    check(all(t == {} for t in r0.choices[0].logprobs.top_logprobs) and len(r0.choices[0].logprobs.tokens) == 4,
          "logprobs 0: the chosen tokens only")
    plain = c.completions.create(model="tiny", prompt=prompt, max_tokens=4, temperature=0)
    check(plain.choices[0].logprobs is None, "no logprobs asked: null")
    # Sampling at a temperature does not change what is reported: the raw logits' log-softmax.
    hot = c.completions.create(model="tiny", prompt=prompt, max_tokens=1, temperature=1.5, seed=3, logprobs=1)
    check(abs(hot.choices[0].logprobs.top_logprobs[0].get(lp.tokens[0], 0) - lp.token_logprobs[0]) < TOL,
          "logprobs are of the raw logits, whatever the temperature")


def test_chat(srv):
    c = srv.client()
    msgs = [{"role": "user", "content": "Tell me a story"}]
    r = c.chat.completions.create(model="tiny", messages=msgs, max_tokens=12, temperature=0, logprobs=True,
                                  top_logprobs=3)
    ch = r.choices[0]
    content = ch.logprobs.content
    check(len(content) == r.usage.completion_tokens == 12, "chat: one entry per reply token")
    check("".join(e.token for e in content) == ch.message.content, "chat: the tokens spell the reply")
    check(b"".join(bytes(e.bytes) for e in content) == ch.message.content.encode(),
          "chat: the tokens' bytes joined are the reply's UTF-8")
    check(all(len(e.top_logprobs) == 3 for e in content), "chat: 3 alternatives per token")
    check_top([[a.logprob for a in e.top_logprobs] for e in content], [e.logprob for e in content], "chat")
    check(all(e.top_logprobs[0].token == e.token for e in content), "chat: greedy token first among alternatives")

    streamed = []
    for chunk in c.chat.completions.create(model="tiny", messages=msgs, max_tokens=12, temperature=0,
                                           logprobs=True, stream=True):
        if chunk.choices and chunk.choices[0].logprobs and chunk.choices[0].logprobs.content:
            streamed += chunk.choices[0].logprobs.content
    check([e.token for e in streamed] == [e.token for e in content], "chat streamed: the same tokens")
    check(max(abs(a.logprob - b.logprob) for a, b in zip(streamed, content)) < TOL, "chat streamed: the same values")
    check(all(e.top_logprobs == [] for e in streamed), "chat: logprobs without top_logprobs lists no alternatives")


def test_bad_requests(srv):
    good_c = {"model": "tiny", "prompt": "The", "max_tokens": 2}
    good_m = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    cases = [
        ("/v1/completions", dict(good_c, logprobs=6), "logprobs"),
        ("/v1/completions", dict(good_c, logprobs=-1), "logprobs"),
        ("/v1/completions", dict(good_c, logprobs="x"), "logprobs"),
        ("/v1/completions", dict(good_c, logprobs=True), "logprobs"),
        ("/v1/chat/completions", dict(good_m, logprobs=True, top_logprobs=21), "top_logprobs"),
        ("/v1/chat/completions", dict(good_m, logprobs=True, top_logprobs=-1), "top_logprobs"),
        ("/v1/chat/completions", dict(good_m, top_logprobs=2), "top_logprobs"),
        ("/v1/chat/completions", dict(good_m, logprobs=3), "logprobs"),
        ("/v1/completions", dict(good_c, cache_prompt="no"), "cache_prompt"),
    ]
    for path, body, param in cases:
        st, b = srv.raw("POST", path, json.dumps(body))
        got = b.get("error", {}).get("param") if isinstance(b, dict) else None
        check(st == 400 and got == param, f"{path} {body}: 400 naming {param} (got {st}, {got})")
    st, b = srv.raw("POST", "/v1/completions", json.dumps(dict(good_c, logprobs=False)))
    check(st == 200, "logprobs false is accepted")
    st, b = srv.raw("POST", "/v1/completions", json.dumps(dict(good_c, cache_prompt=False, temperature=0)))
    check(st == 200, "cache_prompt false is accepted")


def main():
    if not os.path.exists(REACH):
        print(f"SKIP: {REACH} is not built")
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "rope")
        shutil.copytree(MODEL_SRC, model)
        with open(os.path.join(model, "tokenizer_config.json"), "w") as f:
            json.dump({"chat_template": CHATML, "bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>"}, f)
        srv = Server(model, "--ctx", "256", "--alias", "tiny")
        try:
            test_completions(srv, model, tmp)
            test_chat(srv)
            test_bad_requests(srv)
        finally:
            srv.stop()
    if failures:
        print(f"{len(failures)} check(s) failed:\n  " + "\n  ".join(failures))
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
