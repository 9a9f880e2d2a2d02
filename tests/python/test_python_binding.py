"""The Python package reach (bindings/python) against the reach CLI and the C API's contracts.

- greedy generate() / chat() give the token ids `reach run --ids` prints, on SmolLM2-135M-Instruct and
  Gemma 3 270M (${REACH_MODELS:-~/.cache/reach/models}; a missing model skips its cases);
- streaming yields the same text and ids as one call, with stop strings held back;
- a JSON schema is honoured (jsonschema validates the reply where installed, and the keys are checked);
- errors (a missing folder, a corrupt file, a bad option, a bad sampling value) raise reach.Error with
  the C status and its message;
- two threads generating at once give what each gives alone; Ctrl-C stops a generation between tokens;
- logits() is a view of the session's buffer whose argmax is the greedy token;
- cache_type_k / _v name the KV cache's storage (f16 by default);
- sessions in a reach.KvPool generate what sessions of their own do, map a shared prompt, and a full
  pool raises reach.Error with KV_POOL_FULL, every session intact.

Run by meson (tests/meson.build: the venv's python3, PYTHONPATH = the build's bindings/python,
REACH_BUILD_ROOT for the CLI).  Exits 77 (meson's SKIP) with a message when the extension was not
built (-Dpython=disabled, no python3-dev) or pytest is missing.
"""
import json
import os
import shutil
import subprocess
import sys
import threading
import time

MISSING = None
try:
    import pytest
except ImportError:
    MISSING = "pytest is not installed in this python (bash tools/venv.sh pytest)"
try:
    import reach
except ImportError as e:
    MISSING = MISSING or ("the extension reach._reach was not built (%s): meson setup -Dpython=enabled needs "
                          "python3-dev; see README, Python" % e)

MODELS = os.environ.get("REACH_MODELS") or os.path.expanduser("~/.cache/reach/models")
SMOLLM2 = os.path.join(MODELS, "smollm2-135m-instruct")
GEMMA3 = os.path.join(MODELS, "gemma-3-270m")
BUILD = os.environ.get("REACH_BUILD_ROOT", "build")
REACH = os.path.join(BUILD, "cli", "reach")
CONTEXT = 128   # the same for the CLI and the binding: one KV layout, one program


def need(path):
    if not os.path.exists(path):
        pytest.skip("%s is missing (tools/get_smollm2.sh, tools/get_gemma3.sh)" % path)
    return path


_models = {}


def model(path):
    """One loaded model per path for the whole module (loads take seconds on lavapipe)."""
    need(path)
    if path not in _models:
        _models[path] = reach.Model(path, context=CONTEXT)
    return _models[path]


def cli_ids(path, *args):
    """(prompt ids, generated ids) that `reach run --ids` prints; the end token, if any, dropped."""
    if not os.path.exists(REACH):
        pytest.skip("%s is not built" % REACH)
    r = subprocess.run([REACH, "run", "-m", path, "--temp", "0", "--ids", "--ctx", str(CONTEXT), *args],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    lines = {k: v for k, _, v in (l.partition(": ") for l in r.stderr.splitlines())}
    return ([int(x) for x in lines["prompt ids"].split()], [int(x) for x in lines["generated ids"].split()])


def same_as_cli(got, cli_generated):
    """The binding's ids exclude the end token; `reach run` lists it."""
    if got.finish_reason == "stop" and len(cli_generated) == len(got.ids) + 1:
        cli_generated = cli_generated[:-1]
    assert got.ids == cli_generated


@pytest.mark.parametrize("path,prompt", [(SMOLLM2, "The three primary colors are"),
                                         (GEMMA3, "The tallest mountain in the world is")])
def test_greedy_generate_equals_reach_run(path, prompt):
    m = model(path)
    cli_prompt, cli_generated = cli_ids(path, "-p", prompt, "-n", "16")
    got = m.generate(prompt, max_tokens=16, temperature=0)
    assert got.prompt_ids == cli_prompt
    same_as_cli(got, cli_generated)
    assert got.text == m.detokenize(got.ids)
    assert got.finish_reason in ("stop", "length")


@pytest.mark.parametrize("path", [SMOLLM2, GEMMA3])
def test_greedy_chat_equals_reach_run_chat(path):
    m = model(path)
    question = "What is the capital of France? Answer in one sentence."
    cli_prompt, cli_generated = cli_ids(path, "--chat", question, "-n", "20")
    got = m.chat([{"role": "user", "content": question}], max_tokens=20, temperature=0)
    assert got.prompt_ids == cli_prompt
    same_as_cli(got, cli_generated)
    if path == SMOLLM2:   # the instruction-tuned one answers (Gemma 3 270M is a base model)
        assert "Paris" in got.text


def test_stream_equals_one_call():
    m = model(SMOLLM2)
    for stop in (None, ["\n\n", "colors"]):
        whole = m.generate("List the planets of the solar system:", max_tokens=40, temperature=0, stop=stop)
        stream = m.generate("List the planets of the solar system:", max_tokens=40, temperature=0, stop=stop,
                            stream=True)
        pieces = list(stream)
        assert len(pieces) > 1
        assert "".join(pieces) == whole.text
        assert stream.completion.ids == whole.ids
        assert stream.completion.finish_reason == whole.finish_reason
    # A stop string ends the reply before it, also when the model writes it over several tokens.
    full = m.generate("List the planets of the solar system:", max_tokens=40, temperature=0).text
    cut = full.find("\n", 1)
    assert cut > 0, full
    stopped = m.generate("List the planets of the solar system:", max_tokens=40, temperature=0, stop="\n")
    assert stopped.text == full[:full.find("\n")] and stopped.finish_reason == "stop"


def test_sampling_is_seeded():
    m = model(SMOLLM2)
    a = m.generate("Once upon a time", max_tokens=16, temperature=1.0, seed=7)
    b = m.generate("Once upon a time", max_tokens=16, temperature=1.0, seed=7)
    assert a.ids == b.ids


def test_a_full_context_ends_with_length():
    m = model(SMOLLM2)
    prompt = m.tokenize("one two three four five six seven eight nine ten " * 11)[:CONTEXT - 8]
    got = m.generate(prompt, max_tokens=100, temperature=0)
    # The last token sampled fills the cache's last row: CONTEXT - len(prompt) decodes, one more sample.
    assert got.finish_reason == "length" and len(got.ids) == CONTEXT - len(prompt) + 1, got


def test_json_schema_is_honoured():
    m = model(SMOLLM2)
    schema = {"type": "object",
              "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                             "city": {"enum": ["Paris", "London", "Tokyo"]}},
              "required": ["name", "age", "city"], "additionalProperties": False}
    got = m.chat([{"role": "user", "content": "Alice is 31 and lives in Paris. Give her details as JSON."}],
                 max_tokens=64, temperature=0, json_schema=schema)
    assert got.finish_reason == "stop", got
    doc = json.loads(got.text)
    assert set(doc) == {"name", "age", "city"} and isinstance(doc["age"], int) and doc["city"] in schema[
        "properties"]["city"]["enum"]
    try:
        import jsonschema
    except ImportError:
        return
    jsonschema.validate(doc, schema)
    # The next generation on the pooled session is free text again.
    assert m.generate("Hello", max_tokens=4, temperature=0).ids == m.generate("Hello", max_tokens=4,
                                                                             temperature=0).ids


def test_errors_carry_the_status_and_message(tmp_path):
    with pytest.raises(reach.Error) as e:
        reach.Model(tmp_path / "no-such-model")
    assert e.value.status_name == "REACH_ERROR_IO" and e.value.status == 5
    assert "no-such-model" in e.value.message and str(e.value) == e.value.message

    src = need(SMOLLM2)
    bad = tmp_path / "corrupt"
    bad.mkdir()
    for f in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(src, f), bad / f)
    (bad / "model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all")
    with pytest.raises(reach.Error) as e:
        reach.Model(bad)
    assert e.value.status_name == "REACH_ERROR_FORMAT"
    assert "model.safetensors" in e.value.message

    with pytest.raises(reach.Error) as e:
        reach.Model(src, rope_scaling="sideways")
    assert e.value.status_name == "REACH_ERROR_INVALID_ARGUMENT" and "rope-scaling" in e.value.message
    with pytest.raises(TypeError):
        reach.Model(src, no_such_option=1)

    m = model(SMOLLM2)
    with pytest.raises(reach.Error) as e:
        m.generate("Hi", max_tokens=4, temperature=-1)
    assert e.value.status_name == "REACH_ERROR_INVALID_ARGUMENT" and "temperature" in e.value.message
    with pytest.raises(reach.Error) as e:
        m.generate("Hi", max_tokens=4, json_schema={"type": "string", "pattern": "a+"})
    assert "pattern" in e.value.message
    with pytest.raises(reach.Error) as e:
        m.generate([m.info["vocab_size"] + 5], max_tokens=4)
    assert e.value.status_name == "REACH_ERROR_INVALID_ARGUMENT"
    with pytest.raises(reach.Error) as e:   # more prompt than the context holds
        m.generate(list(range(1, CONTEXT + 10)), max_tokens=4)
    assert e.value.status_name == "REACH_ERROR_CONTEXT_OVERFLOW"
    # The model still works after every failure.
    assert m.generate("Hello", max_tokens=2, temperature=0).ids


def test_two_threads_give_what_each_gives_alone():
    m = model(SMOLLM2)
    prompts = ["The sun is a", "Water boils at"]
    alone = [m.generate(p, max_tokens=16, temperature=0).ids for p in prompts]
    # A model of its own per thread (own device: truly parallel), and both threads on one model.
    other = reach.Model(SMOLLM2, context=CONTEXT)
    for models in ([m, other], [m, m]):
        results = [None, None]

        def work(i):
            results[i] = models[i].generate(prompts[i], max_tokens=16, temperature=0).ids

        threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert results == alone


def test_the_gil_is_released_while_generating():
    m = model(SMOLLM2)
    ticks = []
    done = threading.Event()

    def count():
        while not done.is_set():
            ticks.append(1)
            time.sleep(0.001)

    t = threading.Thread(target=count)
    t.start()
    start = time.monotonic()
    m.generate("Counting while the device works:", max_tokens=16, temperature=0)
    elapsed = time.monotonic() - start
    done.set()
    t.join()
    # With the GIL held through each token the counter would starve (a tick per token at best).
    assert len(ticks) > 16 and len(ticks) > elapsed * 50, (len(ticks), elapsed)


def test_ctrl_c_stops_between_tokens():
    import _thread
    m = model(SMOLLM2)
    timer = threading.Timer(1.0, _thread.interrupt_main)
    timer.start()
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        for _ in m.generate("Write a long story about a dragon:", max_tokens=100000, temperature=0, stream=True):
            pass
    timer.join()
    assert time.monotonic() - start < 30
    assert m.generate("Hello", max_tokens=2, temperature=0).ids   # the session went back to the model


def test_session_logits_are_a_view_with_the_greedy_argmax():
    np = pytest.importorskip("numpy")
    m = model(SMOLLM2)
    s = m.session()
    s.set_sampling(temperature=0)
    s.prefill(m.tokenize("The capital of France is"))
    logits = s.logits()
    assert logits.dtype == np.float32 and logits.shape == (m.info["vocab_size"],)
    assert not logits.flags.writeable
    token, _ = s.sample()
    assert int(np.argmax(logits)) == token
    before = logits.copy()
    assert np.shares_memory(logits, s.logits())   # no copy: the session's own buffer
    s.decode(token)
    assert s.position == len(m.tokenize("The capital of France is")) + 1
    assert not np.array_equal(before, logits)     # overwritten in place by the decode
    s.rewind(2)
    assert s.position == 2


def test_cache_types_by_name():
    """cache_type_k / _v pick the KV cache's storage: f16 by default, f32 on request (the logits of one
    prompt then differ, by f16's rounding of K and V only), and an unknown name is a ValueError."""
    np = pytest.importorskip("numpy")
    m = model(SMOLLM2)
    ids = m.tokenize("The capital of France is")
    got = {}
    for name, opts in (("default", {}), ("f16", {"cache_type_k": "f16", "cache_type_v": "f16"}),
                       ("f32", {"cache_type_k": "f32", "cache_type_v": "f32"})):
        s = m.session(**opts)
        s.prefill(ids)
        got[name] = s.logits().copy()
    assert np.array_equal(got["default"], got["f16"])
    assert not np.array_equal(got["f16"], got["f32"])
    # f16 keeps 11 significant bits of each K / V element: the logits move by far less than their spread.
    assert float(np.max(np.abs(got["f16"] - got["f32"]))) < 0.05 * float(np.std(got["f32"]))
    with pytest.raises(ValueError, match="cache_type_v is 'q5'"):
        m.session(cache_type_v="q5")


def _greedy(session, ids, n):
    session.set_sampling(temperature=0)
    session.prefill(ids)
    out = [session.sample()[0]]
    while len(out) < n:
        out.append(session.step(out[-1])[0])
    return out


def test_kv_pool_sessions_share_a_prompt_and_generate_as_alone():
    m = model(SMOLLM2)
    ids = m.tokenize("Once upon a time in a quiet village by the sea, there lived an old fisherman who")
    want = _greedy(m.session(), ids, 12)
    pool = reach.KvPool(m, tokens=256)
    a, b = m.session(pool=pool), m.session(pool=pool)
    assert _greedy(a, ids, 12) == want
    used_one = pool.info()["blocks_used"]
    assert _greedy(b, ids, 12) == want
    info = pool.info()
    full_blocks = (len(ids) - 1) // info["block_rows"]   # never the block holding the prompt's last token
    assert info["prefix_hits"] == 1 and info["prefix_hit_tokens"] == full_blocks * info["block_rows"]
    assert info["sessions"] == 2 and info["blocks_used"] < 2 * used_one
    assert info["bytes"] == info["blocks"] * info["block_rows"] * info["bytes_per_token"]
    del pool   # the sessions keep it alive
    assert a.pool.info()["sessions"] == 2
    del a, b


def test_a_full_kv_pool_raises_kv_pool_full_and_serves_after():
    m = model(SMOLLM2)
    pool = reach.KvPool(m, tokens=32, block_rows=16, cache_type_k="q8_0", cache_type_v="q8_0")
    long_prompt = m.tokenize("one two three four five six seven eight nine ten eleven twelve thirteen")
    a, b = m.session(pool=pool), m.session(pool=pool)
    a.prefill(long_prompt * 2)   # both blocks
    with pytest.raises(reach.Error) as e:
        b.prefill(long_prompt)
    assert e.value.status == reach.KV_POOL_FULL and e.value.status_name == "REACH_ERROR_KV_POOL_FULL"
    assert "the KV pool is full" in e.value.message
    assert b.position == 0
    a.sample()   # a's logits are intact
    with pytest.raises(ValueError, match="give cache_type_k / cache_type_v to the KvPool"):
        m.session(pool=pool, cache_type_k="f16")
    del a
    b.prefill(long_prompt)
    assert b.position == len(long_prompt)
    with pytest.raises(reach.Error) as e:
        reach.KvPool(m, block_rows=16)   # no size
    assert e.value.status_name == "REACH_ERROR_INVALID_ARGUMENT"


def test_devices_and_info():
    ds = reach.devices()
    assert ds and all(d["name"] for d in ds)
    assert reach.info()["version"] == reach.__version__
    m = model(SMOLLM2)
    assert m.info["vocab_size"] == 49152 and m.info["n_layers"] == 30
    assert m.detokenize(m.tokenize("Hello world", add_special=False)) == "Hello world"


def test_the_stub_names_what_the_extension_has():
    import ast
    stub = os.path.join(os.path.dirname(reach.__file__), "_reach.pyi")
    tree = ast.parse(open(stub).read())
    named = 0
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            cls = getattr(reach._reach, node.name)
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name != "__init__":
                    assert callable(getattr(cls, item.name)), (node.name, item.name)
                    named += 1
        elif isinstance(node, ast.FunctionDef):
            assert callable(getattr(reach._reach, node.name)), node.name
            named += 1
    assert named >= 20   # 2 functions and 19 methods when written
    # And the other way: every public method of the extension's types is in the stub.
    for name in ("Device", "Model", "Session", "Reply", "KvPool"):
        cls_node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)
        stubbed = {f.name for f in cls_node.body if isinstance(f, ast.FunctionDef)}
        public = {a for a in vars(getattr(reach._reach, name)) if not a.startswith("_")}
        assert public <= stubbed, (name, public - stubbed)


if __name__ == "__main__":
    if MISSING:
        print("SKIP:", MISSING)
        sys.exit(77)
    sys.exit(pytest.main([__file__, "-q", "-p", "no:cacheprovider"] + sys.argv[1:]))
