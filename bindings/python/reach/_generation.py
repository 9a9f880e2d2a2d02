"""One generation on a session: prefill, then sample / step token by token, the text assembled by a
reach_reply (stop strings with their held-back tail, harmony's channels), as `reach run` does."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional, Sequence

from . import _reach


@dataclass
class Completion:
    """What a generation produced.

    text: the reply (before the first stop string; with a harmony chat, its final channel).
    ids: the generated token ids, the end token (EOS, end of turn) excluded.
    finish_reason: "stop" (an end token, a stop string, or a whole JSON document) or "length"
        (max_tokens reached, or the session's context is full).
    prompt_ids: the ids that were prefilled.
    reasoning: a harmony reply's analysis channel ("" for other models).
    """

    text: str
    ids: list[int]
    finish_reason: str
    prompt_ids: list[int] = field(default_factory=list)
    reasoning: str = ""


def schema_text(json_schema: Any) -> Optional[str]:
    """A JSON schema given as a dict (or list) or as its text, as reach_session_set_json_schema takes it."""
    if json_schema is None or isinstance(json_schema, str):
        return json_schema
    return json.dumps(json_schema)


class Stream:
    """Iterates the text pieces of one generation as they become final (stream=True).

    Once the iteration ended, .completion holds the whole result (text, ids, finish_reason).  A
    stream left before its end releases its session when closed or collected.
    """

    def __init__(self, pieces: Iterator[str], completion: Completion):
        self._pieces = pieces
        self.completion = completion

    def __iter__(self) -> Iterator[str]:
        return self._pieces

    def __next__(self) -> str:
        return next(self._pieces)

    def close(self) -> None:
        self._pieces.close()  # type: ignore[attr-defined]


def run(native_model: "_reach.Model", session: "_reach.Session", prompt_ids: Sequence[int], *, max_tokens: int,
        temperature: float, top_k: int, top_p: float, seed: int, stop: Sequence[str], stop_ids: Sequence[int],
        json_schema: Any, channels: int, out: Completion) -> Iterator[str]:
    """Yields the reply's text pieces; fills `out` as it goes.  Python's own signal check between
    the C calls (each one token) is what lets Ctrl-C stop a generation: KeyboardInterrupt is raised
    at the next token."""
    if max_tokens < 0:
        raise ValueError(f"max_tokens is {max_tokens}: pass 0 or more")
    prompt_ids = list(prompt_ids)
    out.prompt_ids = prompt_ids
    if not prompt_ids:
        raise ValueError("the prompt is empty: it encodes to no tokens")
    stop = list(stop or [])
    session.reset()
    session.set_sampling(temperature=temperature, top_k=top_k, top_p=top_p, seed=seed)
    session.set_json_schema(schema_text(json_schema))
    reply = _reach.Reply(native_model, stop, channels)
    ends = set(stop_ids)
    session.prefill(prompt_ids)
    position, capacity = session.position()
    text: list[str] = []
    reasoning: list[str] = []
    out.finish_reason = "length"
    if max_tokens > 0:
        token, eos = session.sample()
        while True:
            if eos or token in ends:
                out.finish_reason = "stop"
                break
            out.ids.append(token)
            content, thought, stopped = reply.push(token)
            if thought:
                reasoning.append(thought)
            if content:
                text.append(content)
                yield content
            if stopped:
                out.finish_reason = "stop"
                break
            # The token just sampled goes into the cache at `position`: stop when that is past its end.
            if len(out.ids) >= max_tokens or position >= capacity:
                break
            position += 1
            token, eos = session.step(token)
    content, thought, _ = reply.finish()
    if thought:
        reasoning.append(thought)
    if content:
        text.append(content)
        yield content
    out.text = "".join(text)
    out.reasoning = "".join(reasoning)
