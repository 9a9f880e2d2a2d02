#!/usr/bin/env python3
"""`reach serve` and `reach run --chat` on a harmony (gpt-oss) chat: the gpt-oss family fixture
(tests/data/families/gpt_oss/hf, a tiny random checkpoint) with gpt-oss's template
(tests/data/chat_templates/gpt_oss.jinja) put into a temporary copy's tokenizer_config.json.

Checked against references that are not reach's own code:
  - the prompt: usage.prompt_tokens equals the token count of jinja2's rendering of the template (today's
    date, each reasoning effort) encoded by the tokenizers package;
  - the reply's split: the same prompt sent to /v1/completions with logprobs gives the reply's tokens as
    text, special tokens written out; a separate implementation of harmony's message rules here splits
    them into analysis and final, and the chat answer's reasoning_content / content must equal that
    (whole and streamed as delta.reasoning_content / delta.content), as must `reach run --chat` (final
    channel on stdout, analysis on stderr with --reasoning);
  - stop strings apply to the final channel; response_format and logprobs are refused (400) for harmony;
    reasoning_effort other than low / medium / high is a 400 naming the field.
The model is random: whether its reply opens a harmony message at all is chance; the checks hold either way.

Exit 77 (meson: skipped) without the openai, jinja2 or tokenizers packages or a build of `reach serve`; a
fixture that does not load is a failure.
"""
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

try:
    import jinja2  # noqa: F401
    import openai  # noqa: F401
    from tokenizers import Tokenizer
except ImportError as e:
    print(f"SKIP: {e.name} is missing (bash tools/venv.sh openai jinja2 tokenizers)")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import chat_template_ref  # noqa: E402
from test_serve import REACH, Server, check, failures  # noqa: E402  (the server harness)

FIXTURE = os.path.join(ROOT, "tests", "data", "families", "gpt_oss", "hf")
TEMPLATE = os.path.join(ROOT, "tests", "data", "chat_templates", "gpt_oss.jinja")
SPECIALS = {"<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|return|>", "<|call|>", "<|constrain|>"}
N = 48


def render(messages, **variables):
    env = chat_template_ref.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = chat_template_ref.raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.datetime.now().strftime(fmt)
    with open(TEMPLATE, encoding="utf-8") as f:
        return env.from_string(f.read()).render(messages=messages, add_generation_prompt=True,
                                                bos_token="<|endoftext|>", eos_token="<|endoftext|>", **variables)


def split_harmony(tokens):
    """harmony's messages, token by token: <|start|> opens a header, <|channel|>NAME names its channel,
    <|message|> opens the body, <|end|> closes it, <|return|> / <|call|> end the reply.  analysis and
    commentary bodies are reasoning, others (final, or no channel) content; a reply that opens no body is
    content whole."""
    state, header, channel, opened = "header", "", "", False
    reasoning, content, raw = [], [], []
    for t in tokens:
        if not opened:
            raw.append(t)
        if state == "ended":
            continue
        if t == "<|start|>":
            state, header = "header", ""
        elif t in ("<|channel|>", "<|constrain|>"):
            if state != "header":
                state, header = "header", ""
            header += t
        elif t == "<|message|>":
            h = header if state == "header" else ""
            # The word after the first <|channel|>: blanks before it skipped, up to a blank, '<' or newline.
            name = re.split(r"[ <\n]", h.split("<|channel|>", 1)[1].lstrip(" "), 1)[0] if "<|channel|>" in h else ""
            channel, state, opened = name or "final", "body", True
        elif t == "<|end|>":
            state = "between"
        elif t in ("<|return|>", "<|call|>"):
            state = "ended"
        elif state == "header":
            header += t
        elif state == "body":
            (reasoning if channel in ("analysis", "commentary") else content).append(t)
    if not opened:
        return "", "".join(raw)
    return "".join(reasoning), "".join(content)


def raw_tokens(client, prompt, n):
    """The reply's tokens as text (special tokens written out) for a plain completion of the prompt, cut
    where a harmony chat ends (<|return|>, <|call|>), and the prompt's token count."""
    r = client.completions.create(model="m", prompt=prompt, max_tokens=n, temperature=0, logprobs=0)
    tokens = []
    for t in r.choices[0].logprobs.tokens:
        if t in ("<|return|>", "<|call|>"):
            break
        tokens.append(t)
    return tokens, r.usage.prompt_tokens


def loads(model):
    r = subprocess.run([REACH, "run", "-m", model, "-p", "hi", "-n", "1", "--temp", "0"], capture_output=True,
                       text=True, timeout=300)
    return r.returncode == 0, r.stderr.strip().splitlines()[-1:] if r.stderr.strip() else [""]


def test_chat(model):
    tk = Tokenizer.from_file(os.path.join(model, "tokenizer.json"))
    srv = Server(model, "--ctx", "512", "--alias", "m")
    try:
        c = srv.client()
        messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2+2?"}]
        # The tokenizer's own prefix (BOS, where it adds one) goes before a rendering that does not start
        # with it, as in transformers' apply_chat_template output given to generate().
        prefix = tk.encode("", add_special_tokens=True).ids
        for effort in (None, "low", "high"):
            extra = {"reasoning_effort": effort} if effort else {}
            ids = tk.encode(render(messages, **extra), add_special_tokens=False).ids
            want = len(ids) + (0 if ids[:len(prefix)] == prefix else len(prefix))
            r = c.chat.completions.create(model="m", messages=messages, max_tokens=2, temperature=0, extra_body=extra)
            check(r.usage.prompt_tokens == want,
                  f"reasoning_effort {effort}: the prompt is jinja2's rendering ({r.usage.prompt_tokens} == {want})")

        prompt = render(messages)
        tokens, completion_prompt_tokens = raw_tokens(c, prompt, N)
        clean = not any("\ufffd" in t for t in tokens)
        reasoning, content = split_harmony(tokens)
        print(f"reply tokens: {tokens!r}")
        r = c.chat.completions.create(model="m", messages=messages, max_tokens=N, temperature=0)
        check(r.usage.prompt_tokens == completion_prompt_tokens, "the completion's prompt is the chat's")
        msg = r.choices[0].message.model_dump()
        check("reasoning_content" in msg, "the chat answer has message.reasoning_content")
        if clean:
            check((msg.get("reasoning_content"), msg["content"]) == (reasoning, content),
                  f"reasoning_content / content are the reply's analysis / final ({msg!r} vs {(reasoning, content)!r})")
        else:
            print("note: a reply token is part of a UTF-8 character; the split is compared by length only")
            check(len(msg["content"]) <= len("".join(tokens)), "content is no longer than the reply")
        # Streamed: reasoning_content deltas, then content deltas; the same texts.
        s_reasoning, s_content, saw_content = "", "", False
        order_ok = True
        for chunk in c.chat.completions.create(model="m", messages=messages, max_tokens=N, temperature=0, stream=True):
            if not chunk.choices:
                continue
            d = chunk.choices[0].delta.model_dump()
            if d.get("reasoning_content"):
                order_ok = order_ok and not saw_content
                s_reasoning += d["reasoning_content"]
            if d.get("content"):
                saw_content = True
                s_content += d["content"]
        check((s_reasoning, s_content) == (msg.get("reasoning_content"), msg["content"]), "streamed equals whole")
        check(order_ok, "no reasoning delta after the first content delta")

        # reach run --chat: the final channel on stdout, the analysis on stderr with --reasoning.
        run = subprocess.run([REACH, "run", "-m", model, "--system", "Be brief.", "--chat", "What is 2+2?", "-n", str(N),
                              "--temp", "0", "--ctx", "512", "--reasoning"], capture_output=True, text=True, timeout=300)
        check(run.returncode == 0 and run.stdout == msg["content"] + "\n", "reach run --chat prints the final channel")
        if msg.get("reasoning_content"):
            check("reasoning: " + msg["reasoning_content"] in run.stderr, "reach run --reasoning prints the analysis")

        # Stop strings in the final channel end it; the analysis is not searched.
        if len(content) > 4:
            stop = content[2:4]
            r = c.chat.completions.create(model="m", messages=messages, max_tokens=N, temperature=0, stop=[stop])
            check(r.choices[0].message.content == content[:content.find(stop)] and r.choices[0].finish_reason == "stop",
                  f"stop {stop!r} cuts the final channel")

        body = {"model": "m", "messages": messages, "max_tokens": 2}
        for name, extra, param in [
                ("response_format", {"response_format": {"type": "json_object"}}, "response_format"),
                ("logprobs", {"logprobs": True}, "logprobs"),
                ("a bad reasoning_effort", {"reasoning_effort": "max"}, "reasoning_effort")]:
            st, j = srv.raw("POST", "/v1/chat/completions", json.dumps(dict(body, **extra)))
            check(st == 400 and j["error"]["param"] == param, f"{name} is a 400 naming {param} ({st} {j})")
        # /v1/completions stays raw text: no reasoning field, no split.
        r = c.completions.create(model="m", prompt=prompt, max_tokens=4, temperature=0)
        check(isinstance(r.choices[0].text, str), "/v1/completions answers plain text")
    finally:
        srv.stop()


def main():
    if not os.path.exists(REACH):
        print(f"SKIP: {REACH} is not built")
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "gpt_oss")
        shutil.copytree(FIXTURE, model)
        cfg_path = os.path.join(model, "tokenizer_config.json")
        with open(cfg_path, encoding="utf-8") as f:
            cfg = json.load(f)
        with open(TEMPLATE, encoding="utf-8") as f:
            cfg["chat_template"] = f.read()
        with open(cfg_path, "w", encoding="utf-8") as f:
            json.dump(cfg, f)
        ok, why = loads(model)
        if not ok:   # reach runs gpt-oss (tests/test_families.cpp): a fixture that does not load is a failure
            print(f"FAIL the gpt-oss fixture does not load: {why[0]}")
            return 1
        test_chat(model)
    if failures:
        print(f"{len(failures)} check(s) failed:\n  " + "\n  ".join(failures))
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
