#!/usr/bin/env python3
"""`reach serve` POST /v1/embeddings through the openai client, on the tiny Qwen3-Embedding-shaped fixture
(tests/data/embedding, tools/embedding_fixture.py): a string, a list of strings, token ids and lists of them
against the fixture's float64 embeddings (cosine >= 0.9999), a list equal to its items one at a time, base64
equal to float, `dimensions` other than the model's a 400, and a server without --embeddings on a chat model
answering 404."""
import base64
import json
import math
import os
import struct
import sys

try:
    import openai
except ImportError as e:
    print(f"SKIP: {e.name} is missing (bash tools/venv.sh openai)")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from test_serve import REACH, Server, check, failures  # noqa: E402  (the server harness)

FIXTURE = os.path.join(ROOT, "tests", "data", "embedding")
CHAT_MODEL = os.path.join(ROOT, "tests", "data", "families", "qwen3", "hf")


def cosine(a, b):
    ab = sum(x * y for x, y in zip(a, b))
    return ab / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def main():
    if not os.path.exists(REACH):
        print("SKIP: no reach binary at " + REACH)
        return 77
    with open(os.path.join(FIXTURE, "reference.json"), encoding="utf-8") as f:
        ref = json.load(f)
    inputs = ref["inputs"]
    dims = ref["dims"]
    # An embedding model serves /v1/embeddings without --embeddings.
    srv = Server(FIXTURE, "--alias", "e", "--ctx", "128")
    try:
        client = srv.client()
        # A string.
        r = client.embeddings.create(model="e", input=inputs[0]["text"])
        v = r.data[0].embedding
        check(len(r.data) == 1 and len(v) == dims and r.data[0].index == 0, "a string gives one embedding of dims floats")
        check(cosine(v, inputs[0]["embedding"]) >= 0.9999, f"a string's embedding is the float64 reference's "
                                                           f"(cosine {cosine(v, inputs[0]['embedding']):.9f})")
        check(abs(math.sqrt(sum(x * x for x in v)) - 1) < 1e-5, "the embedding is L2-normalized (the model's Normalize)")
        check(r.usage.prompt_tokens == len(inputs[0]["ids"]), "usage counts the input's tokens")
        # A list of strings, and the same one at a time.
        texts = [i["text"] for i in inputs]
        r = client.embeddings.create(model="e", input=texts)
        check([d.index for d in r.data] == list(range(len(texts))), "a list gives one embedding per item, in order")
        for d, i in zip(r.data, inputs):
            check(cosine(d.embedding, i["embedding"]) >= 0.9999, f"list item {d.index} is the reference's")
            alone = client.embeddings.create(model="e", input=i["text"]).data[0].embedding
            check(alone == d.embedding, f"list item {d.index} equals the same input alone")
        # Token ids, and a list of token-id lists.
        r = client.embeddings.create(model="e", input=inputs[1]["ids"])
        check(len(r.data) == 1 and cosine(r.data[0].embedding, inputs[1]["embedding"]) >= 0.9999,
              "token ids give the reference's embedding")
        r = client.embeddings.create(model="e", input=[i["ids"] for i in inputs])
        check(len(r.data) == len(inputs) and all(cosine(d.embedding, i["embedding"]) >= 0.9999
                                                 for d, i in zip(r.data, inputs)),
              "a list of token-id lists gives each one's embedding")
        # base64: the float32 values' little-endian bytes.
        st, j = srv.raw("POST", "/v1/embeddings", json.dumps({"model": "e", "input": texts[:2],
                                                             "encoding_format": "base64"}))
        floats = client.embeddings.create(model="e", input=texts[:2], encoding_format="float").data
        ok = st == 200 and len(j["data"]) == 2
        for d, fl in zip(j["data"] if ok else [], floats):
            raw = base64.b64decode(d["embedding"])
            ok = ok and list(struct.unpack(f"<{len(raw) // 4}f", raw)) == fl.embedding
        check(ok, "base64 decodes to the same float32 values as encoding_format float")
        # The openai client asks for base64 by default and decodes it itself (numpy or struct).
        r = client.embeddings.create(model="e", input=texts[2])
        check(cosine(r.data[0].embedding, inputs[2]["embedding"]) >= 0.9999, "the client's default (base64) round trip")
        # dimensions: only the model's own.
        try:
            client.embeddings.create(model="e", input="x", dimensions=dims // 2)
            check(False, "dimensions below the model's is a 400")
        except openai.BadRequestError as e:
            check(e.status_code == 400 and "dimensions" in str(e), "dimensions below the model's is a 400 naming it")
        r = client.embeddings.create(model="e", input="x", dimensions=dims)
        check(len(r.data[0].embedding) == dims, "dimensions equal to the model's is accepted")
        # Bad inputs: 400s that name the field.
        for body, what in (({"input": []}, "an empty list"), ({"input": ""}, "an empty string"),
                           ({"input": [1, 384]}, "a token id outside the vocabulary"), ({}, "no input"),
                           ({"input": [{"a": 1}]}, "an object"), ({"input": "x", "encoding_format": "hex"}, "hex")):
            st, j = srv.raw("POST", "/v1/embeddings", json.dumps(body))
            param = j.get("error", {}).get("param") if isinstance(j, dict) else None
            check(st == 400 and param in ("input", "encoding_format"), f"{what} is a 400 naming the field ({st} {j})")
        st, j = srv.raw("POST", "/v1/embeddings", json.dumps({"model": "other", "input": "x"}))
        check(st == 404, "another model's name is a 404")
        st, j = srv.raw("POST", "/v1/embeddings", json.dumps({"input": list(range(5, 5 + 129))}))
        check(st == 400 and j["error"]["code"] == "context_length_exceeded", "an input past --ctx is a 400")
    finally:
        srv.stop()
    # A chat model without --embeddings: no route; with it, the last token, normalized.
    srv = Server(CHAT_MODEL, "--alias", "c", "--ctx", "64")
    try:
        st, j = srv.raw("POST", "/v1/embeddings", json.dumps({"input": "x"}))
        check(st == 404 and "--embeddings" in j["error"]["message"], "a chat model without --embeddings answers 404")
    finally:
        srv.stop()
    srv = Server(CHAT_MODEL, "--alias", "c", "--ctx", "64", "--embeddings")
    try:
        v = srv.client().embeddings.create(model="c", input="hello").data[0].embedding
        check(len(v) == 64 and abs(math.sqrt(sum(x * x for x in v)) - 1) < 1e-5,
              "--embeddings on a chat model serves last-token normalized vectors")
    finally:
        srv.stop()
    if failures:
        print(f"{len(failures)} check(s) failed:\n  " + "\n  ".join(failures))
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
