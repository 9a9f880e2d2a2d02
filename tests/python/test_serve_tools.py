#!/usr/bin/env python3
"""Function calling through `reach serve` (tools, tool_choice, parallel_tool_calls, tool history) on the
Qwen3, Llama 3, Mistral, SmolLM3 and Phi-3 family fixtures (tests/data/families/*/hf: tiny random
checkpoints whose tokenizer_config.json carries Qwen3's, Llama 3.1's, Mistral v0.3's, SmolLM3's and
Phi-4-mini's templates), on the gpt-oss fixture (harmony, its format from its vocabulary: compared with
gpt-oss's template, tests/data/chat_templates/gpt_oss.jinja) and on SmolLM2 (whose template has no tools).

Checked against references that are not reach's own code:
  - the prompt: usage.prompt_tokens equals the token count of jinja2's rendering of the template with the
    tools and the tool history (transformers' tojson, each call's arguments as a parsed object), encoded
    by the tokenizers package, plus "<tool_call>\\n" where tool_choice forces a call; for a tool round
    trip (call -> tool message -> answer) too;
  - tool_choice "required" with one tool / a named function among two: REACH_TOOL_REQUESTS (200) replies
    sampled at temperature 1 each parse into one call of that tool whose arguments validate against its
    schema (jsonschema); "required" among two tools makes one call of them that validates against the
    schema of the tool it names;
  - tool_choice "auto" at temperature 1 over REACH_TOOL_AUTO_SEEDS (12) seeds: every call a reply makes
    (the sampler constrains a call once the model opens one) validates against its tool's schema, and a
    reply with calls ends with finish_reason "tool_calls";
  - a streamed reply, its delta.tool_calls pieces joined, equals the whole reply (same seed);
  - `reach run --tools --tool-choice required` prints the call the server makes (greedy);
  - the 400s name the field: a malformed tool schema, an unknown tool_choice name, a tool message
    without tool_call_id, "required" without tools, arguments that are not JSON, tools on a template
    without them (SmolLM2).
The model is random: under tool_choice "auto" it seldom opens a call (tests/test_tool_calls.cpp steers
random replies into calls to check the constraint, and the parsing of calls in free text).  Exit 77 (skipped) without openai, jinja2, tokenizers or jsonschema, or
without a build of `reach serve`.
"""
import concurrent.futures
import datetime
import json
import os
import subprocess
import sys
import tempfile

try:
    import jinja2  # noqa: F401
    import jsonschema
    import openai
    from tokenizers import Tokenizer
except ImportError as e:
    print(f"SKIP: {e.name} is missing (bash tools/venv.sh openai jinja2 tokenizers jsonschema)")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import chat_template_ref  # noqa: E402
from test_serve import REACH, Server, check, failures  # noqa: E402  (the server harness)

SMOLLM2 = os.path.expanduser("~/.cache/reach/models/smollm2-135m-instruct")
REQUESTS = int(os.environ.get("REACH_TOOL_REQUESTS", "200"))
AUTO_SEEDS = int(os.environ.get("REACH_TOOL_AUTO_SEEDS", "12"))
GPT_OSS_TEMPLATE = os.path.join(ROOT, "tests", "data", "chat_templates", "gpt_oss.jinja")

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather <forecast> for a city & day",
    "parameters": {"type": "object", "properties": {
        "unit": {"enum": ["celsius", "fahrenheit"]}, "days": {"type": "integer"}, "alerts": {"type": "boolean"}},
        "required": ["unit", "days"], "additionalProperties": False}}}
CLOCK = {"type": "function", "function": {"name": "clock", "parameters": {
    "type": "object", "properties": {"zone": {"enum": ["utc", "local"]}}, "required": ["zone"]}}}
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in (WEATHER, CLOCK)}
ASK = [{"role": "user", "content": "Weather in Paris for two days?"}]


def render(template, messages, tools, bos="", eos="<|im_end|>", tools_variable="tools"):
    """jinja2 as transformers renders the template, the API's argument strings parsed into objects."""
    env = chat_template_ref.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                          extensions=[chat_template_ref.GenerationTag])
    env.globals["raise_exception"] = chat_template_ref.raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.datetime.now().strftime(fmt)
    env.filters["tojson"] = chat_template_ref.tojson
    msgs = []
    for m in messages:
        m = dict(m)
        if m.get("tool_calls"):
            m["tool_calls"] = [dict(c, function=dict(c["function"], arguments=json.loads(c["function"]["arguments"])))
                               for c in m["tool_calls"]]
        msgs.append(m)
    if tools_variable == "system_tools":
        # Phi-4-mini's model card: json.dumps of the functions in the system message's "tools" field.
        if tools:
            text_tools = json.dumps([t["function"] for t in tools])
            if msgs[0]["role"] == "system":
                msgs[0]["tools"] = text_tools
            else:
                msgs.insert(0, {"role": "system", "content": "", "tools": text_tools})
        return env.from_string(template).render(messages=msgs, add_generation_prompt=True, bos_token=bos, eos_token=eos)
    return env.from_string(template).render(messages=msgs, add_generation_prompt=True, bos_token=bos, eos_token=eos,
                                            **{tools_variable: tools})


def calls_of(message):
    return [(c.function.name, c.function.arguments) for c in (message.tool_calls or [])]


def streamed(client, **kw):
    """A streamed reply put together: content, calls [(name, arguments)], finish reason, ids seen."""
    content, calls, finish, ids = "", {}, None, []
    for chunk in client.chat.completions.create(stream=True, **kw):
        if not chunk.choices:
            continue
        ch = chunk.choices[0]
        content += ch.delta.content or ""
        for d in ch.delta.tool_calls or []:
            if d.id:
                check(d.index not in calls and d.type == "function" and d.function.name,
                      "a call's first delta carries its id, type and name")
                calls[d.index] = [d.function.name, ""]
                ids.append(d.id)
            calls[d.index][1] += d.function.arguments or ""
        finish = ch.finish_reason or finish
    return content, [tuple(calls[i]) for i in sorted(calls)], finish, ids


def test_prompts(c, tk, template, forced_prefix, bos, eos, tools_variable, second=CLOCK, forced_two=None):
    """second: the other tool beside WEATHER; forced_two: the prefix "required" writes with two tools
    (harmony's stops before the name), forced_prefix where it is the same."""
    def render_(messages, tools):
        return render(template, messages, tools, bos, eos, tools_variable)

    prefix = tk.encode("", add_special_tokens=True).ids

    def count(text):
        ids = tk.encode(text, add_special_tokens=False).ids
        return len(ids) + (0 if ids[:len(prefix)] == prefix else len(prefix))

    for choice, forced in (("auto", ""), ("required", forced_prefix if forced_two is None else forced_two)):
        r = c.chat.completions.create(model="m", messages=ASK, tools=[WEATHER, second], tool_choice=choice,
                                      max_tokens=1, temperature=0)
        want = count(render_(ASK, [WEATHER, second]) + forced)
        check(r.usage.prompt_tokens == want, f"tool_choice {choice}: the prompt is jinja2's ({r.usage.prompt_tokens} == {want})")
    # tool_choice none: the tools are left out of the prompt.
    r = c.chat.completions.create(model="m", messages=ASK, tools=[WEATHER], tool_choice="none", max_tokens=1, temperature=0)
    check(r.usage.prompt_tokens == count(render_(ASK, None)), "tool_choice none renders no tools")

    # A round trip: the call the model made, its result, the answer; then a question after it.
    call = c.chat.completions.create(model="m", messages=ASK, tools=[WEATHER], tool_choice="required",
                                     max_tokens=400, temperature=0)
    tc = call.choices[0].message.tool_calls
    check(bool(tc), "a forced call comes back as tool_calls")
    if not tc:
        return
    history = ASK + [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": tc[0].id, "type": "function", "function": {"name": tc[0].function.name,
                                                               "arguments": tc[0].function.arguments}}]},
        {"role": "tool", "tool_call_id": tc[0].id, "content": "{\"temp\": 21}"}]
    jinja_history = [dict(m, content=m["content"] or "") for m in history]
    r = c.chat.completions.create(model="m", messages=history, tools=[WEATHER], max_tokens=1, temperature=0)
    want = count(render_(jinja_history, [WEATHER]))
    check(r.usage.prompt_tokens == want, f"the round trip renders as jinja2 ({r.usage.prompt_tokens} == {want})")
    more = history + [{"role": "assistant", "content": "It is 21."}, {"role": "user", "content": "Thanks"}]
    r = c.chat.completions.create(model="m", messages=more, tools=[WEATHER], max_tokens=1, temperature=0)
    want = count(render_([dict(m, content=m["content"] or "") for m in more], [WEATHER]))
    check(r.usage.prompt_tokens == want, f"the answer after the round trip renders as jinja2 ({r.usage.prompt_tokens} == {want})")


def test_forced(c, requests):
    """"required" with one tool, or a named tool among two: the call follows that tool's schema."""
    def one(i):
        tools = [WEATHER] if i % 2 == 0 else [WEATHER, CLOCK]
        want = "get_weather" if i % 4 != 1 else "clock"
        choice = "required" if i % 2 == 0 else {"type": "function", "function": {"name": want}}
        r = c.chat.completions.create(model="m", messages=ASK, tools=tools, tool_choice=choice, max_tokens=400,
                                      temperature=1, seed=i)
        return i, want, r.choices[0]

    invalid, shown = [], 0
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        for i, want, ch in pool.map(one, range(requests)):
            calls = calls_of(ch.message)
            why = None
            if ch.finish_reason != "tool_calls" or len(calls) != 1:
                why = f"finish {ch.finish_reason}, {len(calls)} calls, content {ch.message.content!r}"
            elif calls[0][0] != want:
                why = f"the call is {calls[0][0]}, not {want}"
            else:
                try:
                    jsonschema.validate(json.loads(calls[0][1]), SCHEMAS[want])
                except (ValueError, jsonschema.ValidationError) as e:
                    why = f"{calls[0][1]!r}: {e}"
            if why:
                invalid.append((i, why))
            elif shown < 3:
                shown += 1
                print(f"request {i}: {calls[0]}")
    check(not invalid, f"{requests} forced calls at temperature 1 parse and validate ({len(invalid)} do not: {invalid[:3]})")

    # "required" among several tools: the name is one of theirs and the arguments follow the schema of the
    # one it names (the sampler walks both tools' call forms).  A random model may not finish, so over a
    # few seeds: every reply that ends by itself is one valid call of theirs, and at least one ends.
    ended, wrong = 0, []
    for seed in range(3, 9):
        r = c.chat.completions.create(model="m", messages=ASK, tools=[WEATHER, CLOCK], tool_choice="required",
                                      max_tokens=400, temperature=1, seed=seed)
        calls = calls_of(r.choices[0].message)
        if r.choices[0].finish_reason == "length":
            continue
        ended += 1
        ok = r.choices[0].finish_reason == "tool_calls" and len(calls) == 1 and calls[0][0] in SCHEMAS
        if ok:
            try:
                jsonschema.validate(json.loads(calls[0][1]), SCHEMAS[calls[0][0]])
            except (ValueError, jsonschema.ValidationError):
                ok = False
        if not ok:
            wrong.append((seed, r.choices[0].finish_reason, calls[:1]))
    check(ended >= 1 and not wrong,
          f"required among two tools makes one valid call of them ({ended} of 6 replies ended; not so: {wrong})")


def test_stream(c):
    for choice in ("required", "auto"):
        kw = dict(model="m", messages=ASK, tools=[WEATHER] if choice == "required" else [WEATHER, CLOCK],
                  tool_choice=choice, max_tokens=60 if choice == "auto" else 400, temperature=1, seed=7)
        whole = c.chat.completions.create(**kw).choices[0]
        content, calls, finish, ids = streamed(c, **kw)
        check((content or None, calls, finish) == (whole.message.content or None, calls_of(whole.message), whole.finish_reason),
              f"tool_choice {choice}: the streamed reply equals the whole one ({calls} vs {calls_of(whole.message)})")
        if choice == "required":
            check(finish == "tool_calls" and len(ids) == 1, "a forced call streams one call, finish_reason tool_calls")


def test_auto(c, tools=None):
    """tool_choice auto at temperature 1: every call validates; finish_reason says whether there are calls."""
    tools = tools or [WEATHER, CLOCK]
    made, bad = 0, []
    for seed in range(AUTO_SEEDS):
        ch = c.chat.completions.create(model="m", messages=ASK, tools=tools, tool_choice="auto", max_tokens=120,
                                       temperature=1, seed=100 + seed).choices[0]
        calls = calls_of(ch.message)
        if calls and ch.finish_reason != "tool_calls":
            bad.append((seed, f"finish {ch.finish_reason} with calls"))
        for name, args in calls:
            made += 1
            try:
                jsonschema.validate(json.loads(args), SCHEMAS[name])
            except (KeyError, ValueError, jsonschema.ValidationError) as e:
                bad.append((seed, name, args, str(e)[:80]))
    print(f"auto: {AUTO_SEEDS} replies, {made} calls, {len(bad)} invalid")
    check(not bad, f"tool_choice auto: every call validates ({bad[:3]})")


def test_harmony():
    """gpt-oss: the prompt with tools and a tool round trip is the template's; forced calls follow their
    schema; auto's calls validate; streamed equals whole."""
    fixture = os.path.join(ROOT, "tests", "data", "families", "gpt_oss", "hf")
    tk = Tokenizer.from_file(os.path.join(fixture, "tokenizer.json"))
    with open(GPT_OSS_TEMPLATE, encoding="utf-8") as f:
        template = f.read()
    # The template raises for a tool without a description.
    clock = {"type": "function", "function": dict(CLOCK["function"], description="The time in a zone")}
    header = "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
    srv = Server(fixture, "--ctx", "3072", "--alias", "m", "--parallel", "4")
    try:
        c = srv.client()
        test_prompts(c, tk, template, header, "<|endoftext|>", "<|endoftext|>", "tools", clock,
                     "<|channel|>commentary to=functions.")
        for choice in ("required", {"type": "function", "function": {"name": "clock"}}):
            tools = [WEATHER] if choice == "required" else [WEATHER, clock]
            want = "get_weather" if choice == "required" else "clock"
            bad = []
            for seed in range(max(4, REQUESTS // 10)):
                ch = c.chat.completions.create(model="m", messages=ASK, tools=tools, tool_choice=choice,
                                               max_tokens=400, temperature=1, seed=seed).choices[0]
                calls = calls_of(ch.message)
                try:
                    assert ch.finish_reason == "tool_calls" and len(calls) == 1 and calls[0][0] == want, (ch.finish_reason, calls)
                    jsonschema.validate(json.loads(calls[0][1]), SCHEMAS[want])
                except (AssertionError, ValueError, jsonschema.ValidationError) as e:
                    bad.append((seed, str(e)[:120]))
            check(not bad, f"harmony, tool_choice {choice}: one call of {want} that validates ({bad[:3]})")
        # "required" among two: the reply names one of them and its arguments follow that one's schema.
        ended, bad = 0, []
        for seed in range(8):
            ch = c.chat.completions.create(model="m", messages=ASK, tools=[WEATHER, clock], tool_choice="required",
                                           max_tokens=400, temperature=1, seed=seed).choices[0]
            if ch.finish_reason == "length":
                continue
            ended += 1
            calls = calls_of(ch.message)
            try:
                assert ch.finish_reason == "tool_calls" and len(calls) == 1, (ch.finish_reason, calls)
                jsonschema.validate(json.loads(calls[0][1]), SCHEMAS[calls[0][0]])
            except (AssertionError, KeyError, ValueError, jsonschema.ValidationError) as e:
                bad.append((seed, str(e)[:120]))
        check(ended >= 1 and not bad, f"harmony, required among two: one call that validates ({ended} ended; {bad[:3]})")
        test_auto(c, [WEATHER, clock])
        for choice in ("required", "auto"):
            kw = dict(model="m", messages=ASK, tools=[WEATHER], tool_choice=choice, max_tokens=120, temperature=1, seed=7)
            whole = c.chat.completions.create(**kw).choices[0]
            content, calls, finish, ids = streamed(c, **kw)
            check((content or None, calls, finish) == (whole.message.content or None, calls_of(whole.message), whole.finish_reason),
                  f"harmony, tool_choice {choice}: the streamed reply equals the whole one")
    finally:
        srv.stop()


def test_errors(srv):
    body = {"model": "m", "messages": ASK, "max_tokens": 1}
    cases = [
        ("parameters that are not a schema object", {"tools": [dict(WEATHER, function=dict(WEATHER["function"], parameters="x"))]},
         "tools[0].function.parameters"),
        ("properties that are not an object", {"tools": [{"type": "function", "function": {
            "name": "f", "parameters": {"type": "object", "properties": ["a"]}}}]}, "tools[0].function.parameters.properties"),
        ("a tool without a name", {"tools": [{"type": "function", "function": {"parameters": {}}}]}, "tools[0].function.name"),
        ("a tool of another type", {"tools": [{"type": "retrieval"}]}, "tools[0].type"),
        ("an unknown tool_choice name", {"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "nope"}}},
         "tool_choice.function.name"),
        ("an unknown tool_choice", {"tools": [WEATHER], "tool_choice": "always"}, "tool_choice"),
        ("required without tools", {"tool_choice": "required"}, "tool_choice"),
        ("a tool message without tool_call_id", {"messages": ASK + [{"role": "tool", "content": "21"}]},
         "messages[1].tool_call_id"),
        ("arguments that are not JSON", {"messages": ASK + [{"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{unit"}}]}]},
         "messages[1].tool_calls[0].function.arguments"),
        ("a forced call whose schema the grammar cannot follow", {"tools": [{"type": "function", "function": {
            "name": "f", "parameters": {"type": "object", "properties": {"s": {"type": "string", "pattern": "a+"}}}}}],
            "tool_choice": "required"}, "tools[0].function.parameters"),
    ]
    for name, extra, param in cases:
        st, j = srv.raw("POST", "/v1/chat/completions", json.dumps(dict(body, **extra)))
        check(st == 400 and j["error"]["param"] == param, f"{name}: 400 naming {param} ({st} {j})")


def test_run(c, fixture):
    """`reach run --tools FILE --tool-choice required` prints the call reach serve makes (greedy)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "tools.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump([WEATHER], f)
        run = subprocess.run([REACH, "run", "-m", fixture, "--chat", ASK[0]["content"], "--tools", path,
                              "--tool-choice", "required", "-n", "400", "--ctx", "2048", "--temp", "0"],
                             capture_output=True, text=True, timeout=300)
    r = c.chat.completions.create(model="m", messages=ASK, tools=[WEATHER], tool_choice="required", max_tokens=400,
                                  temperature=0)
    lines = run.stdout.splitlines()
    printed = [(x["name"], x["arguments"]) for x in json.loads(lines[-1])] if run.returncode == 0 and lines else None
    check(printed == calls_of(r.choices[0].message),
          f"reach run --tools prints the served call ({printed} vs {calls_of(r.choices[0].message)}; {run.stderr[-200:]})")


def main():
    if not os.path.exists(REACH):
        print(f"SKIP: {REACH} is not built")
        return 77
    # Qwen3's template (<tool_call> tags, "arguments"), Llama 3.1's (the reply is the call object,
    # "parameters"; tools in the first user message) and Mistral v3's ([TOOL_CALLS] and an array; ids of
    # 9 characters), SmolLM3's (its template reads xml_tools) and Phi-4-mini's (tools in the system
    # message; the phi3 fixture carries its template), each on its family's fixture.
    quarter = max(1, REQUESTS // 4)
    for family, forced_prefix, requests, variable in (("qwen3", "<tool_call>\n", REQUESTS, "tools"),
                                                      ("llama3", "", quarter, "tools"),
                                                      ("mistral", "[TOOL_CALLS] ", quarter, "tools"),
                                                      ("smollm3", "<tool_call>\n", quarter, "xml_tools"),
                                                      ("phi3", "<|tool_call|>", quarter, "system_tools")):
        fixture = os.path.join(ROOT, "tests", "data", "families", family, "hf")
        with open(os.path.join(fixture, "tokenizer_config.json"), encoding="utf-8") as f:
            cfg = json.load(f)
        tk = Tokenizer.from_file(os.path.join(fixture, "tokenizer.json"))
        print(f"-- {family}")
        # The fixture's 384-token vocabulary spells the tool block out in many tokens: a context past the
        # 256 positions it was made for holds it (the model is random either way).
        srv = Server(fixture, "--ctx", "3072", "--alias", "m", "--parallel", "4")
        try:
            c = srv.client()
            test_prompts(c, tk, cfg["chat_template"], forced_prefix, cfg["bos_token"], cfg["eos_token"], variable)
            test_stream(c)
            test_auto(c)
            if family == "qwen3":
                test_errors(srv)
                test_run(c, fixture)
            test_forced(c, requests)
        finally:
            srv.stop()
    print("-- gpt_oss")
    test_harmony()
    if os.path.isdir(SMOLLM2):
        srv = Server(SMOLLM2, "--ctx", "512", "--alias", "m")
        try:
            st, j = srv.raw("POST", "/v1/chat/completions",
                            json.dumps({"messages": ASK, "tools": [WEATHER], "max_tokens": 1}))
            check(st == 400 and j["error"]["param"] == "tools", f"SmolLM2's template has no tools: 400 naming tools ({st} {j})")
            st, j = srv.raw("POST", "/v1/chat/completions",
                            json.dumps({"messages": ASK, "tools": [WEATHER], "tool_choice": "none", "max_tokens": 1}))
            check(st == 200, f"tool_choice none on SmolLM2 answers as without tools ({st})")
        finally:
            srv.stop()
    else:
        print(f"note: {SMOLLM2} is absent; the template-without-tools check is skipped")
    if failures:
        print(f"{len(failures)} check(s) failed:\n  " + "\n  ".join(failures))
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
