#!/usr/bin/env python3
"""Reference chat-template rendering for tests/test_chat_template.cpp: Python's jinja2, set up as
Hugging Face transformers renders chat templates (a sandboxed environment with trim_blocks and
lstrip_blocks, and a raise_exception function), without transformers itself.

usage: chat_template_ref.py REQUEST.json
  REQUEST.json: {"cases": [{"template": TEXT | "template_file": PATH | "template_gguf": PATH,
                            "bos_token": S, "eos_token": S, "messages": [{"role", "content"}...],
                            "add_generation_prompt": BOOL, "variables": {NAME: VALUE...}}, ...]}
  "variables" (optional) are further template variables (enable_thinking, date_string, ...);
  "tools" (optional) the tool list, passed as transformers' apply_chat_template(tools=...) passes it
  (the variable is left undefined when absent); messages may carry tool_calls, tool_call_id and name.
  "system_tools" (optional): tools put into the system message's "tools" field as Phi-4-mini's model
  card does (json.dumps of the functions; an empty system message added where there is none).
  prints a JSON list, one entry per case: {"text": rendered} or {"error": message} (the template
  raised).  "template_gguf" reads tokenizer.chat_template with the PyPI gguf package.
strftime_now is the function transformers provides (SmolLM3's and Llama 3.2's templates call it for
today's date); here it formats one fixed day, FIXED_DATE, so that the rendering is reproducible and the
C++ side, given the same date, can be compared byte for byte.
Exit status 3 when jinja2 (or gguf, for template_gguf) cannot be imported: the caller skips.
"""
import json
import sys

import datetime

try:
    import jinja2
    from jinja2.ext import Extension
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError:
    print("jinja2 is not installed (python3 -m pip install jinja2; tools/setup.sh does)", file=sys.stderr)
    sys.exit(3)


class TemplateError(Exception):
    pass


def raise_exception(message):
    raise TemplateError(message)


# The day strftime_now formats: tests/test_chat_template.cpp passes the same date to reach.
FIXED_DATE = datetime.datetime(2025, 7, 8, 12, 0, 0)


def strftime_now(fmt):
    return FIXED_DATE.strftime(fmt)


class GenerationTag(Extension):
    """transformers' {% generation %} ... {% endgeneration %} (marks the assistant's tokens for
    training masks); for rendering it is only its body (SmolLM3's template uses it)."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.Scope(body, lineno=lineno)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    """transformers' tojson filter: json.dumps, keys in order, no HTML escaping (jinja2's own sorts the
    keys and escapes <, >, &, ')."""
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


_gguf_templates = {}


def gguf_template(path):
    # GGUFReader parses the whole vocabulary into Python objects (about a second for SmolLM2's 49k
    # tokens): read each file once, not once per case.
    if path in _gguf_templates:
        return _gguf_templates[path]
    try:
        import gguf
    except ImportError:
        print("the gguf package is not installed", file=sys.stderr)
        sys.exit(3)
    field = gguf.GGUFReader(path).fields.get("tokenizer.chat_template")
    if field is None:
        raise SystemExit(f"{path}: no tokenizer.chat_template")
    _gguf_templates[path] = bytes(field.parts[field.data[0]]).decode("utf-8")
    return _gguf_templates[path]


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        request = json.load(f)
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[GenerationTag])
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    env.filters["tojson"] = tojson
    out = []
    for case in request["cases"]:
        if "template" in case:
            text = case["template"]
        elif "template_file" in case:
            with open(case["template_file"], encoding="utf-8") as f:
                text = f.read()
        else:
            text = gguf_template(case["template_gguf"])
        tools = {"tools": case["tools"]} if "tools" in case else {}
        messages = case["messages"]
        if "system_tools" in case:
            # Phi-4-mini's model card: json.dumps of the functions in the system message's "tools" field.
            text_tools = json.dumps([t.get("function", t) for t in case["system_tools"]])
            messages = [dict(m) for m in messages]
            if messages and messages[0]["role"] == "system":
                messages[0]["tools"] = text_tools
            else:
                messages.insert(0, {"role": "system", "content": "", "tools": text_tools})
        try:
            rendered = env.from_string(text).render(
                messages=messages, add_generation_prompt=case["add_generation_prompt"],
                bos_token=case["bos_token"], eos_token=case["eos_token"], **tools,
                **case.get("variables", {}))
            out.append({"text": rendered})
        except (TemplateError, jinja2.TemplateError) as e:
            out.append({"error": str(e)})
    json.dump(out, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
