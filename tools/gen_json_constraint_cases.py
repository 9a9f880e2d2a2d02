#!/usr/bin/env python3
"""Writes tests/data/json_constraint/cases.json: JSON schemas and documents labelled by an independent
reference (Python's json module and the `jsonschema` package), for tests/test_json_constraint.cpp.

Each document has
  valid      json.loads accepts it (no NaN / Infinity) and jsonschema validates it;
  canonical  it was written the way the constrained sampler writes (properties in schema order, no
             extra keys, at most 15 digits per number part, whitespace gaps of at most 16 bytes, no
             \uD800-\uDFFF escapes), so the
             automaton must accept it whenever it is valid.
Documents are drawn from each schema (canonical) and mutated (inserted, deleted, swapped bytes,
truncations): the automaton may accept a mutation only where the reference calls it valid.

usage: tools/gen_json_constraint_cases.py [OUT]   (needs jsonschema: bash tools/venv.sh jsonschema)
"""
import json
import os
import random
import sys

import jsonschema

SCHEMAS = [
    {"type": "object"},   # response_format json_object
    {"type": "object", "properties": {
        "action": {"enum": ["greet", "trade", "attack", "flee"]},
        "line": {"type": "string", "description": "what the NPC says"},
        "mood": {"type": "integer"},
        "items": {"type": "array", "items": {"type": "string"}, "maxItems": 3}},
     "required": ["action", "line"], "additionalProperties": False},
    {"type": "object", "title": "nested", "properties": {
        "user": {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
                 "required": ["name", "age"], "additionalProperties": False},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3}},
     "required": ["user", "tags"]},
    {"type": "object", "properties": {
        "score": {"type": "number"}, "ok": {"type": "boolean"}, "note": {"type": ["string", "null"]},
        "level": {"type": ["integer", "string"]}},
     "required": ["score", "ok", "note"], "additionalProperties": False},
    {"$schema": "https://json-schema.org/draft/2020-12/schema",
     "$defs": {"node": {"type": "object", "properties": {
         "value": {"type": "integer"},
         "children": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}},
         "required": ["value"], "additionalProperties": False}},
     "type": "object", "properties": {
         "kind": {"const": "tree"}, "root": {"$ref": "#/$defs/node"},
         "extra": {"anyOf": [{"type": "string"}, {"type": "number"}, {"type": "null"},
                             {"type": "array", "items": {"type": "boolean"}}]}},
     "required": ["kind", "root"], "additionalProperties": False},
    {"type": "array", "items": {"enum": [1, 12, "a", None, True]}, "minItems": 2, "maxItems": 5},
    {"type": "number"},
    {"type": "string"},
    {"definitions": {"c": {"enum": [{"r": 1}, [1, 2], "x"]}}, "type": "object",
     "properties": {"c": {"$ref": "#/definitions/c"}, "n": {"type": "integer", "default": 3}},
     "required": ["c"], "additionalProperties": False},
    {"type": "object", "properties": {}, "additionalProperties": False},
    {"type": "object", "properties": {"a": {"type": "boolean"}, "b": {"type": "null"}, "c": {"type": "integer"}},
     "required": ["c"], "additionalProperties": False},
]

STRUCTURED_LITERALS = {8}   # the schemas whose enum holds objects or arrays

WORDS = ["hello", "Grüße", "naïve", "日本語", "emoji 🎉", "tab\there", 'quote "x"', "back\\slash", "new\nline",
         "ctrl \u0001", "", " ", "slash/", "\u2028sep", "z" * 40]


def rand_string(r):
    return r.choice(WORDS) if r.random() < 0.7 else "".join(r.choice("abc xyz.,!?é") for _ in range(r.randint(0, 12)))


def rand_number(r, integer):
    if integer or r.random() < 0.4:
        return r.randint(-10**6, 10**6) if r.random() < 0.8 else r.choice([0, -1, 10**14])
    return r.choice([round(r.uniform(-1000, 1000), r.randint(0, 6)), 1e-5, 2.5e10, -0.0, 0.5])


def rand_any(r, depth):
    kinds = ["string", "number", "bool", "null"] + (["object", "array"] if depth < 3 else [])
    k = r.choice(kinds)
    if k == "string":
        return rand_string(r)
    if k == "number":
        return rand_number(r, False)
    if k == "bool":
        return r.random() < 0.5
    if k == "null":
        return None
    if k == "array":
        return [rand_any(r, depth + 1) for _ in range(r.randint(0, 3))]
    return {rand_string(r): rand_any(r, depth + 1) for _ in range(r.randint(0, 3))}


def resolve(root, s):
    while "$ref" in s:
        _, section, name = s["$ref"].split("/")
        s = root[section][name]
    return s


def draw(root, s, r, depth=0):
    """A value of schema s written the canonical way (the property order is the dict's)."""
    s = resolve(root, s)
    if "const" in s:
        return s["const"]
    if "enum" in s:
        return r.choice(s["enum"])
    if "anyOf" in s:
        return draw(root, r.choice(s["anyOf"]), r, depth)
    t = s.get("type")
    if isinstance(t, list):
        t = r.choice(t)
    if t is None:
        t = "object" if "properties" in s else "array" if "items" in s else None
    if t is None:
        return rand_any(r, depth)
    if t == "object":
        if "properties" not in s:
            return {rand_string(r): rand_any(r, depth + 1) for _ in range(r.randint(0, 4))}
        req = set(s.get("required", []))
        return {k: draw(root, v, r, depth + 1) for k, v in s["properties"].items() if k in req or r.random() < 0.5}
    if t == "array":
        lo, hi = s.get("minItems", 0), min(s.get("maxItems", 4), 4 if depth < 3 else lo if "minItems" in s else 0)
        hi = max(hi, lo)
        return [draw(root, s.get("items", {}), r, depth + 1) for _ in range(r.randint(lo, hi))]
    if t == "string":
        return rand_string(r)
    if t in ("number", "integer"):
        return rand_number(r, t == "integer")
    if t == "boolean":
        return r.random() < 0.5
    return None


def reference_valid(schema, text):
    def no_constant(name):
        raise ValueError(name)
    try:
        value = json.loads(text, parse_constant=no_constant)
    except ValueError:
        return False
    return jsonschema.Draft202012Validator(schema).is_valid(value)


def mutate(text, r):
    b = list(text)
    op = r.randrange(5)
    i = r.randrange(len(b) + 1)
    junk = r.choice(list('{}[]",:0-.e \\ntfa1') + ["\x01", "é"])
    if op == 0 and b:
        del b[min(i, len(b) - 1)]
    elif op == 1:
        b.insert(i, junk)
    elif op == 2 and len(b) > 1:
        j = r.randrange(len(b) - 1)
        b[j], b[j + 1] = b[j + 1], b[j]
    elif op == 3:
        return text[:i]
    else:
        b[min(i, len(b) - 1):min(i, len(b) - 1) + 1] = [junk]
    return "".join(b)


HAND = ['{"a":1,}', '{"a":01}', '{"a":1.}', '{"a":-}', '{"a":"\\ud800"}', '{"a":"x\u0001"}', '{"a":NaN}',
        '{"a":.5}', '{"a":1e}', '{"a":"\\x"}', '{} {}', '{"a" 1}', '[1,]', '"abc', '1 2', '{"a":tru}',
        '{"action":"greet"}', '{"line":"hi","action":"greet"}', '{"action":"wave","line":"hi"}',
        '{"action":"greet","line":"hi","extra":1}', '{"score":1,"ok":true,"note":null,"level":1.5}',
        '{"kind":"tree","root":{"value":1,"children":[{"value":2,"children":[{"value":3},{"value":4},{"value":5}]}]}}',
        '[1]', '[1,12,"a",null,true,1]', '[12,1]', '[2,1]', '-0', '1E+2', '1.5e-3', '"\\u00e9\\n"', '{"c":{"r":1}}',
        '{"c":[1,2],"n":3}', '{"c":[1,2,3]}', '{}', '{ }', '{"c":1}', '{"a":true,"c":2}', '{"b":null}',
        '{"user":{"name":"x","age":3},"tags":[]}', '{"user":{"name":"x","age":3.5},"tags":["a"]}']


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "tests", "data",
                                                             "json_constraint", "cases.json")
    r = random.Random(20261127)
    cases = []
    for si, schema in enumerate(SCHEMAS):
        drawn = []
        for k in range(25):
            v = draw(schema, schema, r)
            indent = 2 if k % 4 == 3 else None
            text = json.dumps(v, ensure_ascii=k % 2 == 0, indent=indent, separators=None if indent else (",", ":"))
            drawn.append(text)
            # \uD800-\uDFFF escapes (surrogate pairs of ensure_ascii) are outside what the sampler writes.
            # Enum and const values are written compact: an indented object or array value is not canonical.
            canonical = "\\ud" not in text.lower() and not (indent and si in STRUCTURED_LITERALS)
            cases.append({"schema": si, "doc": text, "valid": reference_valid(schema, text), "canonical": canonical})
        for _ in range(60):
            text = mutate(r.choice(drawn), r)
            cases.append({"schema": si, "doc": text, "valid": reference_valid(schema, text), "canonical": False})
        for text in HAND:
            cases.append({"schema": si, "doc": text, "valid": reference_valid(schema, text), "canonical": False})
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"generator": "tools/gen_json_constraint_cases.py", "schemas": SCHEMAS, "cases": cases}, f,
                  ensure_ascii=True, indent=0)
        f.write("\n")
    valid = sum(c["valid"] for c in cases)
    print(f"{len(cases)} documents ({valid} valid) over {len(SCHEMAS)} schemas -> {out}")


if __name__ == "__main__":
    main()
