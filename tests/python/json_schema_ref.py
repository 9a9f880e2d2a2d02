#!/usr/bin/env python3
"""The reference for tests/test_json_constraint.cpp's random walks: reads {"schemas": [...], "docs":
[[schema_index, text], ...]} from the file named by argv[1] and prints a JSON list, per document, of
whether Python's json module parses it (no NaN / Infinity) and `jsonschema` validates it.
Exit 77 without the jsonschema package."""
import json
import sys

try:
    import jsonschema
except ImportError:
    print("SKIP: the jsonschema package is missing (bash tools/venv.sh jsonschema)")
    sys.exit(77)


def valid(schema, text):
    def no_constant(name):
        raise ValueError(name)
    try:
        value = json.loads(text, parse_constant=no_constant)
    except ValueError:
        return False
    return jsonschema.Draft202012Validator(schema).is_valid(value)


with open(sys.argv[1], encoding="utf-8") as f:
    req = json.load(f)
print(json.dumps([valid(req["schemas"][i], text) for i, text in req["docs"]]))
