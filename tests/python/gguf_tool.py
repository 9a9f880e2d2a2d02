#!/usr/bin/env python3
"""GGUF files through the PyPI `gguf` package, for tests/test_gguf.cpp (an independent writer and
reader to check reach's GGUF reader against).

usage: gguf_tool.py write PATH [--alignment N]   write a file with every metadata value type and
                                                 one tensor of each type reach reads
       gguf_tool.py dump PATH                    print what gguf.GGUFReader sees, as JSON
       gguf_tool.py sizes                        print gguf's GGML_QUANT_SIZES as JSON {id: [block, bytes]}

Exits 3 when `gguf` (or numpy) cannot be imported, so the caller can skip.
"""
import json
import sys

try:
    import numpy as np
    import gguf
except ImportError as e:  # the C++ test prints a SKIP line
    print("gguf_tool: %s" % e, file=sys.stderr)
    sys.exit(3)

# The tensor types reach reads, with ne = [cols, rows] (cols a multiple of the block size).
TENSORS = [
    ("f32", gguf.GGMLQuantizationType.F32, [5, 3]),
    ("f16", gguf.GGMLQuantizationType.F16, [7]),
    ("bf16", gguf.GGMLQuantizationType.BF16, [4, 2, 3]),
    ("q8_0", gguf.GGMLQuantizationType.Q8_0, [64, 3]),
    ("q4_0", gguf.GGMLQuantizationType.Q4_0, [32, 5]),
    ("q4_1", gguf.GGMLQuantizationType.Q4_1, [96, 1]),
    ("q5_0", gguf.GGMLQuantizationType.Q5_0, [32, 2, 2]),
    ("q5_1", gguf.GGMLQuantizationType.Q5_1, [32, 1, 1, 3]),
    ("q4_k", gguf.GGMLQuantizationType.Q4_K, [256, 2]),
    ("q5_k", gguf.GGMLQuantizationType.Q5_K, [512, 1]),
    ("blk.0.q6_k.weight", gguf.GGMLQuantizationType.Q6_K, [256, 3]),
]


def write(path, alignment=None):
    rng = np.random.default_rng(14)
    w = gguf.GGUFWriter(path, "llama")
    if alignment:
        w.add_custom_alignment(alignment)
    w.add_uint8("t.u8", 200)
    w.add_int8("t.i8", -100)
    w.add_uint16("t.u16", 60000)
    w.add_int16("t.i16", -30000)
    w.add_uint32("t.u32", 4000000000)
    w.add_int32("t.i32", -2000000000)
    w.add_float32("t.f32", 0.1)
    w.add_uint64("t.u64", 2 ** 63 + 5)
    w.add_int64("t.i64", -(2 ** 62))
    w.add_float64("t.f64", 1e-300)
    w.add_bool("t.bool", True)
    w.add_string("t.str", "h\u00e9llo \u4e16\u754c")
    w.add_array("t.strs", ["a", "", "\u0120the", "x" * 300])
    w.add_key_value("t.i32s", [3, -1, 7], gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType.INT32)
    w.add_key_value("t.f32s", [0.5, -2.0, 1e-7], gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType.FLOAT32)
    w.add_key_value("t.bools", [True, False, True], gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType.BOOL)
    w.add_key_value("t.u8s", bytes([1, 2, 255]), gguf.GGUFValueType.ARRAY)
    w.add_key_value("t.nested", [[1, 2], [3]], gguf.GGUFValueType.ARRAY)
    for name, qtype, ne in TENSORS:
        block, nbytes = gguf.GGML_QUANT_SIZES[qtype]
        rows = int(np.prod(ne[1:])) if len(ne) > 1 else 1
        row_bytes = ne[0] // block * nbytes
        # numpy shape is ne reversed; quantized rows are given as bytes (the writer derives ne[0]).
        if qtype == gguf.GGMLQuantizationType.F32:
            data = rng.standard_normal(list(reversed(ne))).astype(np.float32)
            w.add_tensor(name, data)
        elif qtype == gguf.GGMLQuantizationType.F16:
            data = rng.standard_normal(list(reversed(ne))).astype(np.float16)
            w.add_tensor(name, data)
        else:
            data = rng.integers(0, 256, size=list(reversed(ne[1:])) + [row_bytes], dtype=np.uint8)
            w.add_tensor(name, data, raw_dtype=qtype)
        assert rows * row_bytes == data.nbytes
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def plain(v):
    if isinstance(v, (bytes, bytearray)):
        return list(v)
    if isinstance(v, list):
        return [plain(x) for x in v]
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    return v


def dump(path):
    r = gguf.GGUFReader(path)
    kv = {}
    for key, f in r.fields.items():
        if key.startswith("GGUF."):
            continue
        types = [gguf.GGUFValueType(t).name for t in f.types]
        value = plain(f.contents())
        if isinstance(value, list) and len(value) > 8:  # a vocabulary: its size and a few entries
            value = {"count": len(value), "head": value[:4], "tail": value[-2:]}
        kv[key] = {"types": types, "value": value}
    tensors = [{"name": t.name, "ne": [int(d) for d in t.shape], "type": int(t.tensor_type),
                "offset": int(t.data_offset), "nbytes": int(t.n_bytes)} for t in r.tensors]
    version = int(r.fields["GGUF.version"].contents())
    print(json.dumps({"version": version, "alignment": int(r.alignment), "data_offset": int(r.data_offset),
                      "kv": kv, "tensors": tensors}, ensure_ascii=False))


def main(argv):
    if len(argv) >= 2 and argv[0] == "write":
        alignment = int(argv[3]) if len(argv) == 4 and argv[2] == "--alignment" else None
        write(argv[1], alignment)
    elif len(argv) == 2 and argv[0] == "dump":
        dump(argv[1])
    elif argv == ["sizes"]:
        print(json.dumps({int(t): list(s) for t, s in gguf.GGML_QUANT_SIZES.items()}))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
