#!/usr/bin/env python3
"""Reference chat prompt ids for tests/test_chat_template.cpp (encode_chat): the conversation rendered by
Python's jinja2 as chat_template_ref.py renders it (with the assistant's turn opened), then encoded by the
PyPI tokenizers package without adding special tokens, which is what transformers' apply_chat_template
(tokenize=True) gives.  Also reports the ids encode(text, add_special_tokens=True) puts before a plain
text (the tokenizer's BOS prefix), measured on an empty string.

usage: chat_ids_ref.py REQUEST.json
  REQUEST.json: {"cases": [{"template": TEXT | "template_file": PATH, "bos_token": S, "eos_token": S,
                            "messages": [{"role", "content"}...], "tokenizer_json": PATH,
                            "variables": {NAME: VALUE...}}, ...]}
  "variables" (optional) are further template variables (reasoning_effort, ...); strftime_now formats
  chat_template_ref.py's FIXED_DATE.
  prints a JSON list, one entry per case: {"ids": [...], "prefix": [...]} or {"error": message}.
Exit status 3 when jinja2 or tokenizers cannot be imported: the caller skips.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chat_template_ref  # noqa: E402  (exits 3 without jinja2)

try:
    from tokenizers import Tokenizer
except ImportError:
    print("the tokenizers package is not installed", file=sys.stderr)
    sys.exit(3)


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        request = json.load(f)
    env = chat_template_ref.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = chat_template_ref.raise_exception
    env.globals["strftime_now"] = chat_template_ref.strftime_now
    tokenizers = {}
    out = []
    for case in request["cases"]:
        if "template" in case:
            text = case["template"]
        else:
            with open(case["template_file"], encoding="utf-8") as f:
                text = f.read()
        path = case["tokenizer_json"]
        if path not in tokenizers:
            tokenizers[path] = Tokenizer.from_file(path)
        tk = tokenizers[path]
        try:
            rendered = env.from_string(text).render(
                messages=case["messages"], add_generation_prompt=True,
                bos_token=case["bos_token"], eos_token=case["eos_token"], **case.get("variables", {}))
        except (chat_template_ref.TemplateError, chat_template_ref.jinja2.TemplateError) as e:
            out.append({"error": str(e)})
            continue
        out.append({"ids": tk.encode(rendered, add_special_tokens=False).ids,
                    "prefix": tk.encode("", add_special_tokens=True).ids})
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
