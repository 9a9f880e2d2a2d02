"""Minimal safetensors reader/writer (json + struct + numpy only).

Functions:
  write_safetensors(path, tensors: dict[str, np.ndarray], dtype="f32"|"f16"|"bf16",
                    metadata={"format": "pt"})
      Writes tensors sorted by name, contiguous, header padded with spaces to 8 bytes.
      bf16 is produced by rounding float32 to nearest-even (f32_to_bf16_bits).
  read_safetensors(path) -> dict[str, np.ndarray]          (float32 for F32/F16/BF16)
  read_model_tensors(model_dir) -> dict[str, np.ndarray]   (model.safetensors or the
      sharded model.safetensors.index.json layout)
  f32_to_bf16_bits(a) -> uint16 array;  bf16_bits_to_f32(u16) -> float32 array
"""
import json
import os
import struct

import numpy as np

_DTYPES = {"F32": (np.float32, 4), "F16": (np.float16, 2), "BF16": (np.uint16, 2),
           "F64": (np.float64, 8), "I64": (np.int64, 8), "I32": (np.int32, 4)}


def f32_to_bf16_bits(a):
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounding = ((u >> 16) & 1) + 0x7FFF
    return ((u + rounding) >> 16).astype(np.uint16)


def bf16_bits_to_f32(u):
    return (np.asarray(u, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def _encode(a, dtype):
    a = np.asarray(a)
    if dtype == "f32":
        return "F32", np.ascontiguousarray(a, dtype="<f4").tobytes()
    if dtype == "f16":
        return "F16", np.ascontiguousarray(a.astype(np.float32).astype("<f2")).tobytes()
    if dtype == "bf16":
        return "BF16", f32_to_bf16_bits(a.astype(np.float32)).astype("<u2").tobytes()
    raise ValueError("unknown dtype %r (f32|f16|bf16)" % dtype)


def write_safetensors(path, tensors, dtype="f32", metadata=None):
    header = {"__metadata__": dict(metadata or {"format": "pt"})}
    blobs, off = [], 0
    for name in sorted(tensors):
        st, raw = _encode(tensors[name], dtype)
        header[name] = {"dtype": st, "shape": list(np.shape(tensors[name])),
                        "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    hj = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hj += b" " * ((-len(hj)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError("%s: too short for a safetensors header" % path)
    (hlen,) = struct.unpack("<Q", data[:8])
    if 8 + hlen > len(data):
        raise ValueError("%s: header length %d exceeds file size" % (path, hlen))
    header = json.loads(data[8:8 + hlen].decode("utf-8"))
    base = 8 + hlen
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dt, size = _DTYPES[info["dtype"]]
        b, e = info["data_offsets"]
        shape = tuple(info["shape"])
        if e - b != size * int(np.prod(shape, dtype=np.int64)) or base + e > len(data):
            raise ValueError("%s: tensor %s has a bad byte range" % (path, name))
        arr = np.frombuffer(data, dtype=np.dtype(dt).newbyteorder("<"), count=(e - b) // size,
                            offset=base + b).reshape(shape)
        if info["dtype"] == "BF16":
            arr = bf16_bits_to_f32(arr)
        elif info["dtype"] in ("F16", "F32"):
            arr = arr.astype(np.float32)
        out[name] = arr
    return out


def read_model_tensors(model_dir):
    single = os.path.join(model_dir, "model.safetensors")
    if os.path.exists(single):
        return read_safetensors(single)
    index = os.path.join(model_dir, "model.safetensors.index.json")
    with open(index) as f:
        wm = json.load(f)["weight_map"]
    out = {}
    for shard in sorted(set(wm.values())):
        out.update(read_safetensors(os.path.join(model_dir, shard)))
    return out
