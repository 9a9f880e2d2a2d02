"""reach: run language models on any Vulkan GPU (or Mesa's lavapipe on a CPU) from Python.

A thin layer over reach's C API (include/reach.h) through the compiled extension reach._reach:

    import reach
    model = reach.Model("~/.cache/reach/models/smollm2-135m-instruct")
    print(model.chat([{"role": "user", "content": "Name three fruits."}], max_tokens=48, temperature=0).text)

Model, Session, KvPool, Completion, Stream, Error, devices(), info().
"""
from __future__ import annotations

import os
import threading
from typing import Any, Iterable, Mapping, Optional, Sequence, Union

from . import _reach
from ._generation import Completion, Stream, run as _run
from ._reach import KV_POOL_FULL, Error

__all__ = ["Model", "Session", "KvPool", "Device", "Completion", "Stream", "Error", "KV_POOL_FULL", "devices", "info",
           "__version__"]
__version__: str = _reach.version()

Device = _reach.Device

_QUANTIZE = {None: 0, "none": 0, "q8_0": 1, "q4_0": 2, "q4_k": 3}
_KV_TYPES = ("cache_type_k", "cache_type_v")
# The schemes whose window branch reads keys before rotation: a KvPool for their sessions keeps them.
_ROTATED_KEY_SCHEMES = ("rerope", "leaky_rerope", "self_extend")
_DEVICE_TYPES = {0: "other", 1: "integrated", 2: "discrete", 3: "virtual", 4: "cpu"}


def devices() -> list[dict]:
    """Every Vulkan device the loader reports: index, name, driver, type ("discrete", "cpu", ...),
    vendor_id, device_id, api_version, vram_bytes (bytes), fp16_storage, fp16_arithmetic,
    subgroup_size (lanes), subgroup_arithmetic."""
    out = _reach.devices()
    for d in out:
        d["type"] = _DEVICE_TYPES.get(d["type"], "other")
    return out


def info() -> dict:
    """reach's version and the devices it sees."""
    return {"version": __version__, "devices": devices()}


def _open_device(device: Union[None, int, str, "_reach.Device"]) -> "_reach.Device":
    if isinstance(device, _reach.Device):
        return device
    if device is None:
        return _reach.Device()
    if isinstance(device, bool) or not isinstance(device, (int, str)):
        raise TypeError(f"device is {type(device).__name__}: pass None, an index, a name substring or a reach.Device")
    return _reach.Device(index=device) if isinstance(device, int) else _reach.Device(name=device)


class Session:
    """A sequence on a model: its KV cache, logits and sampler (reach_session_*).

    Low-level use: prefill(ids), decode(token), sample() / step(token), logits().  Sessions of one
    device take turns on it (the C API serializes them); create models on separate Devices to
    run threads in parallel.
    """

    def __init__(self, model: "Model", pool: Optional["KvPool"] = None, **options: Any):
        self.model = model
        self.pool = pool
        merged = {**model._scheme_options, **options}
        if pool is not None:   # the pool's cache types apply; the model's defaults do not
            merged = {k: v for k, v in merged.items() if k not in _KV_TYPES or k in options}
            self._native = _reach.Session(model._native, pool=pool._native, **merged)
        else:
            self._native = _reach.Session(model._native, **merged)

    def prefill(self, ids: Sequence[int]) -> None:
        """Appends the ids at the current position; their last one's logits become readable."""
        self._native.prefill(ids)

    def decode(self, token: int) -> None:
        """Appends one token with the decode program."""
        self._native.decode(token)

    def sample(self) -> tuple[int, bool]:
        """(next token, is_eos) from the current logits with the session's sampler; appends nothing."""
        return self._native.sample()

    def step(self, token: int) -> tuple[int, bool]:
        """decode(token) then sample()."""
        return self._native.step(token)

    def set_sampling(self, temperature: float = 0.8, top_k: int = 40, top_p: float = 0.95, seed: int = 0) -> None:
        """Replaces the sampler: temperature (0: greedy), top_k (0: off), top_p in (0, 1], seed."""
        self._native.set_sampling(temperature=temperature, top_k=top_k, top_p=top_p, seed=seed)

    def set_json_schema(self, schema: Any) -> None:
        """Constrains the next samples to a JSON document the schema (dict or text) accepts; None removes it."""
        from ._generation import schema_text
        self._native.set_json_schema(schema_text(schema))

    def logits(self):
        """The last appended token's logits: a read-only float32 NumPy array of vocab_size values (a
        memoryview without NumPy) over the session's own buffer, no copy.  The session keeps it
        alive; the next prefill / decode / step overwrites it in place: .copy() to keep one."""
        buf = self._native.logits()
        try:
            import numpy
        except ImportError:
            return memoryview(buf)
        return numpy.frombuffer(buf, dtype=numpy.float32)

    @property
    def position(self) -> int:
        """Tokens held."""
        return self._native.position()[0]

    @property
    def capacity(self) -> int:
        """The context: tokens the KV cache holds at most."""
        return self._native.position()[1]

    def rewind(self, position: int) -> None:
        """Forgets everything after `position` tokens."""
        self._native.rewind(position)

    def reset(self) -> None:
        """An empty sequence (rewind(0))."""
        self._native.reset()


class KvPool:
    """One paged KV cache that Sessions of a model share (reach_kv_pool_*), as a server's slots do.

    Memory is reserved once for the pool instead of a whole context per session.  A session takes
    blocks of block_rows positions as it grows and gives them back when it rewinds or is freed; a
    prompt whose leading blocks another session already computed (same tokens, same position
    scheme) maps them instead of computing them.  When no block is free, prefill / decode raise
    reach.Error with status == reach.KV_POOL_FULL and every session stays as it was: retry after
    another session ends.

    tokens: positions the pool holds, or bytes: the device bytes it may take.  block_rows: a power of
    two (0: the device's widest subgroup, 16 to 64).  cache_type_k / cache_type_v: as Session's
    (default: the model's options, else "f16").
    rotated_keys: keep keys before rotation for ReRoPE / Leaky ReRoPE / Self-Extend sessions (default:
    when the model's rope_scaling is one of them).

        pool = reach.KvPool(model, tokens=8192)
        a, b = model.session(pool=pool), model.session(pool=pool)
    """

    def __init__(self, model: "Model", tokens: int = 0, *, bytes: int = 0, block_rows: int = 0,
                 cache_type_k: Optional[str] = None, cache_type_v: Optional[str] = None,
                 rotated_keys: Optional[bool] = None):
        if rotated_keys is None:
            rotated_keys = model._scheme_options.get("rope_scaling") in _ROTATED_KEY_SCHEMES
        self.model = model
        self._native = _reach.KvPool(model._native, tokens=tokens, bytes=bytes, block_rows=block_rows,
                                     cache_type_k=cache_type_k or model._scheme_options.get("cache_type_k"),
                                     cache_type_v=cache_type_v or model._scheme_options.get("cache_type_v"),
                                     rotated_keys=bool(rotated_keys))

    def info(self) -> dict:
        """block_rows, blocks, blocks_used (held by live sessions; a shared block once), blocks_cached
        (held by none, kept for their prefix), sessions, bytes, bytes_per_token, prefix_hits and
        prefix_hit_tokens (prefills that mapped blocks, and the positions they mapped)."""
        return self._native.info()


class Model:
    """A model folder (config.json, *.safetensors, tokenizer.json) or a .gguf file, loaded onto a device.

    path: the folder or file (~ is expanded).
    device: None (a new device of the best type: discrete > integrated > ... > CPU), a device index,
        a case-insensitive substring of its name, or a reach.Device (models on one Device share it
        and take turns on it).
    quantize: None (keep the file's types), "q8_0", "q4_0" or "q4_k" (safetensors only).
    scheme_options: defaults of this model's sessions, as reach_session_params names them: context
        (tokens; 0: min(max_position_embeddings, 4096)), chunk (prefill chunk, tokens; 256),
        l_test, rope_scaling, rope_factor, original_ctx, rerope_window, leaky_k,
        self_extend_group, self_extend_window, logn, qk_norm, cos_n, attn_window, attn_sinks,
        scheme_flags (more flags as on `reach run`'s command line), full_kv, profile, and
        cache_type_k / cache_type_v: how the KV cache stores keys and values, "f16" (the default, as
        reach_session_default_params), "f32" (exact), "q8_0" or "q4_0" (README, "KV cache types").
    """

    def __init__(self, path: Union[str, os.PathLike], device: Union[None, int, str, "_reach.Device"] = None, *,
                 quantize: Optional[str] = None, require_tokenizer: bool = True, **scheme_options: Any):
        if quantize not in _QUANTIZE:
            raise ValueError(f"quantize is {quantize!r}: pass None, 'q8_0', 'q4_0' or 'q4_k'")
        self.path = os.path.expanduser(os.fspath(path))
        self.device = _open_device(device)
        self._native = _reach.Model(self.device, self.path, require_tokenizer=require_tokenizer,
                                    quantize=_QUANTIZE[quantize])
        self._scheme_options = dict(scheme_options)
        # A bad option fails here, naming it, rather than at the first generate.
        self._idle: list[Session] = [Session(self)]
        self._lock = threading.Lock()

    @property
    def info(self) -> dict:
        """vocab_size, n_layers, hidden_size, n_heads, n_kv_heads, head_dim, max_position_embeddings,
        n_params, weight_bytes (device bytes), bos_id, eos_id (-1: none), has_tokenizer."""
        return self._native.info()

    def session(self, pool: Optional[KvPool] = None, **options: Any) -> Session:
        """A new Session; options override the model's scheme options.  pool: its KV cache is that
        KvPool's blocks (with the pool's cache types) instead of a cache of its own."""
        return Session(self, pool=pool, **options)

    def tokenize(self, text: str, add_special: bool = True) -> list[int]:
        """Token ids of the text; add_special adds what the tokenizer adds (BOS for Llama)."""
        return self._native.tokenize(text, add_special)

    def detokenize(self, ids: Iterable[int], skip_special: bool = True) -> str:
        """The text of token ids; skip_special drops BOS, EOS and the like."""
        return self._native.detokenize(list(ids), skip_special)

    def chat_prompt(self, messages: Sequence[Union[Mapping[str, str], Sequence[str]]]) -> tuple[list[int], list[int]]:
        """(prompt ids, stop ids) of a conversation through the model's chat template, the
        assistant's turn opened (reach_chat_tokenize; the stop ids: reach_chat_end_tokens)."""
        pairs = []
        for i, m in enumerate(messages):
            if isinstance(m, Mapping):
                if "role" not in m or "content" not in m:
                    raise ValueError(f"messages[{i}] has no 'role' or 'content': pass {{'role': ..., 'content': ...}}")
                pairs.append((m["role"], m["content"]))
            else:
                role, content = m
                pairs.append((role, content))
        return self._native.chat_encode(pairs)

    def _take_session(self) -> Session:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        return Session(self)

    def _give_back(self, s: Session) -> None:
        with self._lock:
            self._idle.append(s)

    def _generate(self, prompt_ids: Sequence[int], stop_ids: Sequence[int], channels: int, stream: bool,
                  session: Optional[Session], max_tokens: int, temperature: float, top_k: int, top_p: float,
                  seed: int, stop: Union[None, str, Sequence[str]], json_schema: Any):
        if isinstance(stop, str):
            stop = [stop]
        out = Completion(text="", ids=[], finish_reason="length")
        own = session is None

        def pieces():
            # Taken when the generation starts: a Stream never iterated holds no session.
            s = self._take_session() if own else session
            try:
                yield from _run(self._native, s._native, prompt_ids, max_tokens=max_tokens, temperature=temperature,
                                top_k=top_k, top_p=top_p, seed=seed, stop=stop or [], stop_ids=stop_ids,
                                json_schema=json_schema, channels=channels, out=out)
            finally:
                if own:
                    self._give_back(s)

        if stream:
            return Stream(pieces(), out)
        for _ in pieces():
            pass
        return out

    def generate(self, prompt: Union[str, Sequence[int]], max_tokens: int = 128, temperature: float = 0.8,
                 top_k: int = 40, top_p: float = 0.95, seed: int = 0, stop: Union[None, str, Sequence[str]] = None,
                 json_schema: Any = None, stream: bool = False, session: Optional[Session] = None):
        """Continues a prompt (text, encoded with the tokenizer's BOS; or token ids as they are).

        max_tokens: new tokens at most (default 128).  temperature: 0 is greedy (default 0.8);
        top_k (default 40; 0: off); top_p in (0, 1] (default 0.95; 1: off); seed (default 0).
        stop: a string or up to 16 strings; the reply ends before the first one.
        json_schema: a dict or its text: the reply is a JSON document it accepts.
        stream: False returns a Completion; True a Stream that yields text pieces as they become
        final (its .completion is whole once the iteration ends).
        session: generate on this Session (its cache is reset first); default: one of the model's own.
        Ctrl-C stops between two tokens (KeyboardInterrupt).
        """
        ids = self.tokenize(prompt) if isinstance(prompt, str) else list(prompt)
        eos = self.info["eos_id"]
        return self._generate(ids, [eos] if eos >= 0 else [], 0, stream, session, max_tokens, temperature, top_k,
                              top_p, seed, stop, json_schema)

    def chat(self, messages: Sequence[Union[Mapping[str, str], Sequence[str]]], max_tokens: int = 512,
             temperature: float = 0.8, top_k: int = 40, top_p: float = 0.95, seed: int = 0,
             stop: Union[None, str, Sequence[str]] = None, json_schema: Any = None, stream: bool = False,
             session: Optional[Session] = None):
        """The assistant's next message for a conversation: a list of {"role": "system" | "user" |
        "assistant", "content": text} (or (role, content) pairs), put through the model's chat
        template.  It ends at the template's end-of-turn token.  A harmony (gpt-oss) reply's
        analysis channel is in .reasoning, its final channel in .text.  Other arguments as generate
        (max_tokens default 512)."""
        ids, stop_ids = self.chat_prompt(messages)
        return self._generate(ids, stop_ids, _reach.REPLY_CHANNELS_AUTO, stream, session, max_tokens, temperature,
                              top_k, top_p, seed, stop, json_schema)
