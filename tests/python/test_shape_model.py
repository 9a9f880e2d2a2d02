#!/usr/bin/python3
"""The GPU check's model files: tools/make_shape_model.py and `reach quantize` as llama.cpp reads them.

  * make_shape_model.py writes a safetensors file whose header names every tensor of the shape with
    its f16 size, back to back, and nothing after the last (parsed here, not by reach);
  * `reach quantize` of it (f16 and q4_k) writes GGUF tokenizer metadata llama.cpp accepts: the token
    list as long as the embedding's rows (the tokenizer has far fewer ids: the rest are "[PAD<id>]" of
    type unused, 5), and the pre-tokenizer under llama.cpp's name "gpt-2" (it refuses "gpt2");
    token_embd has vocab_size rows (a GGUF reader in this file, from the format's specification);
  * reach loads and runs the written file (`reach bench`).

usage: /usr/bin/python3 tests/python/test_shape_model.py [REACH]   (default build/cli/reach; needs numpy)
"""
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
failures = []
VOCAB, HIDDEN, INTER, LAYERS = 1024, 256, 512, 2


def check(cond, what, detail=""):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what + (": " + detail[-2000:] if detail else ""))


def read_gguf(path):
    """({key: value}, {tensor: dims}) of a GGUF v3 file (little-endian), per the GGUF specification."""
    with open(path, "rb") as f:
        data = f.read()
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from("<" + fmt, data, pos)
        pos += struct.calcsize("<" + fmt)
        return v[0]

    def string():
        nonlocal pos
        n = take("Q")
        s = data[pos:pos + n].decode("utf-8")
        pos += n
        return s

    scalars = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

    def value(t):
        if t == 8:
            return string()
        if t == 9:
            et, n = take("I"), take("Q")
            return [value(et) for _ in range(n)]
        return take(scalars[t])

    assert data[:4] == b"GGUF", "not a GGUF file"
    pos = 4
    take("I")
    n_tensors, n_kv = take("Q"), take("Q")
    kv = {}
    for _ in range(n_kv):
        k = string()
        kv[k] = value(take("I"))
    tensors = {}
    for _ in range(n_tensors):
        name = string()
        dims = [take("Q") for _ in range(take("I"))]
        take("I")
        take("Q")
        tensors[name] = dims
    return kv, tensors


def main():
    reach = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "cli", "reach")
    env = dict(os.environ, REACH_PROGRESS="0")
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "shape")
        r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "make_shape_model.py"), model,
                            "--hidden", str(HIDDEN), "--intermediate", str(INTER), "--layers", str(LAYERS),
                            "--heads", "4", "--kv-heads", "2", "--vocab", str(VOCAB)],
                           capture_output=True, text=True, timeout=120)
        check(r.returncode == 0, "make_shape_model.py writes the folder", r.stderr)
        if r.returncode:
            return
        st = os.path.join(model, "model.safetensors")
        with open(st, "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            header = json.loads(f.read(n))
        header.pop("__metadata__", None)
        expect = {"model.embed_tokens.weight": [VOCAB, HIDDEN], "lm_head.weight": [VOCAB, HIDDEN],
                  "model.layers.1.mlp.down_proj.weight": [HIDDEN, INTER], "model.norm.weight": [HIDDEN]}
        check(all(header.get(k, {}).get("shape") == v for k, v in expect.items()),
              "the safetensors header has the shape's tensors", json.dumps({k: header.get(k) for k in expect}))
        check(len(header) == 2 + 9 * LAYERS + 1, "one tensor per weight of the shape (%d)" % len(header))
        spans = sorted(v["data_offsets"] for v in header.values())
        sizes_ok = all(v["dtype"] == "F16" and v["data_offsets"][1] - v["data_offsets"][0] ==
                       2 * math.prod(v["shape"]) for v in header.values())
        contiguous = all(a[1] == b[0] for a, b in zip(spans, spans[1:])) and spans[0][0] == 0
        check(sizes_ok and contiguous and os.path.getsize(st) == 8 + n + spans[-1][1],
              "f16 tensors back to back, the file ending with the last")
        tok = json.load(open(os.path.join(model, "tokenizer.json")))
        n_ids = len(tok["model"]["vocab"]) + len(tok["added_tokens"])
        check(n_ids < VOCAB, "the tokenizer has fewer ids (%d) than the embedding's rows" % n_ids)

        for t in ("f16", "q4_k"):
            gguf = os.path.join(tmp, "shape-%s.gguf" % t)
            r = subprocess.run([reach, "quantize", model, gguf, "--type", t], capture_output=True, text=True,
                               timeout=300, env=env)
            check(r.returncode == 0, "reach quantize --type %s" % t, r.stderr)
            if r.returncode:
                continue
            kv, tensors = read_gguf(gguf)
            tokens, types = kv.get("tokenizer.ggml.tokens", []), kv.get("tokenizer.ggml.token_type", [])
            check(len(tokens) == VOCAB and len(types) == VOCAB,
                  "%s: the token list is as long as the embedding (%d tokens)" % (t, len(tokens)))
            check(tokens[-1:] == ["[PAD%d]" % (VOCAB - 1)] and types[-1:] == [5] and tokens[n_ids] == "[PAD%d]" % n_ids,
                  "%s: the padding is \"[PAD<id>]\" of type unused" % t, str(tokens[n_ids - 2:n_ids + 2]))
            check(kv.get("tokenizer.ggml.pre") == "gpt-2",
                  "%s: the pre-tokenizer is named as llama.cpp names it" % t, str(kv.get("tokenizer.ggml.pre")))
            check(tensors.get("token_embd.weight") == [HIDDEN, VOCAB], "%s: token_embd is %d x %d" % (t, HIDDEN, VOCAB),
                  str(tensors.get("token_embd.weight")))
            r = subprocess.run([reach, "bench", "-m", gguf, "-p", "8", "-n", "4", "-r", "1"], capture_output=True,
                               text=True, timeout=300, env=env)
            check(r.returncode == 0 and "tg4" in r.stdout, "%s: reach bench runs the file" % t, r.stderr + r.stdout)


if __name__ == "__main__":
    main()
    if failures:
        print("\n%d failure(s):\n  " % len(failures) + "\n  ".join(failures))
        sys.exit(1)
    print("all passed")
