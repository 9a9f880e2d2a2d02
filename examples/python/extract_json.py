"""Structured extraction: the reply is always a JSON document the schema accepts (constrained sampling).

    python examples/python/extract_json.py ~/.cache/reach/models/smollm2-135m-instruct
"""
import json
import sys

import reach

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer"},
        "city": {"type": "string"},
        "role": {"enum": ["engineer", "teacher", "doctor", "other"]},
    },
    "required": ["name", "age", "city", "role"],
    "additionalProperties": False,
}

TEXTS = [
    "Maria Lopez, 34, has taught maths in Seville for ten years.",
    "Dr. Ken Ito (52) runs the cardiology ward of a hospital in Osaka.",
]


def main() -> None:
    path = sys.argv[1] if len(sys.argv) > 1 else "~/.cache/reach/models/smollm2-135m-instruct"
    model = reach.Model(path, context=1024)
    for text in TEXTS:
        messages = [{"role": "user", "content": "Extract name, age, city and role as JSON from: " + text}]
        reply = model.chat(messages, max_tokens=96, temperature=0, json_schema=SCHEMA)
        record = json.loads(reply.text)   # never fails: the schema constrained every token
        print(record)


if __name__ == "__main__":
    main()
