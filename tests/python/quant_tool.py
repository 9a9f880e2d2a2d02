#!/usr/bin/env python3
"""Random GGML blocks and their dequantization by the PyPI gguf package (gguf.quants).

usage: quant_tool.py dequant TYPE N_BLOCKS SEED
  TYPE is q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k or q6_k.  Prints one JSON object:
  {"blocks": hex of the file-layout blocks, "values": hex of the f32 (little-endian) weights}.
  Every f16 field (d, m, dmin) is a random finite f16 (subnormals included); every other byte is random.
Exit status 3: gguf or numpy cannot be imported (the caller skips).
"""
import json
import sys

try:
    import numpy as np
    from gguf import GGMLQuantizationType as T
    from gguf import quants
except ImportError as e:  # pragma: no cover - environment dependent
    print(f'SKIP: {e}', file=sys.stderr)
    sys.exit(3)

# Block bytes and the byte offsets of each block's f16 fields (ggml-common.h).
TYPES = {
    'q8_0': (T.Q8_0, 34, [0]),
    'q4_0': (T.Q4_0, 18, [0]),
    'q4_1': (T.Q4_1, 20, [0, 2]),
    'q5_0': (T.Q5_0, 22, [0]),
    'q5_1': (T.Q5_1, 24, [0, 2]),
    'q4_k': (T.Q4_K, 144, [0, 2]),
    'q5_k': (T.Q5_K, 176, [0, 2]),
    'q6_k': (T.Q6_K, 210, [208]),
}


def main() -> int:
    if len(sys.argv) != 5 or sys.argv[1] != 'dequant' or sys.argv[2] not in TYPES:
        print(__doc__, file=sys.stderr)
        return 2
    qtype, block_bytes, f16_offsets = TYPES[sys.argv[2]]
    n, seed = int(sys.argv[3]), int(sys.argv[4])
    rng = np.random.default_rng(seed)
    blocks = rng.integers(0, 256, size=(n, block_bytes), dtype=np.uint8)
    for off in f16_offsets:
        bits = rng.integers(0, 1 << 16, size=n, dtype=np.uint32)
        bits = np.where((bits & 0x7C00) == 0x7C00, bits & ~np.uint32(0x4000), bits)   # no inf / NaN
        blocks[:, off] = (bits & 0xFF).astype(np.uint8)
        blocks[:, off + 1] = (bits >> 8).astype(np.uint8)
    values = quants.dequantize(blocks.reshape(-1), qtype).astype('<f4')
    print(json.dumps({'blocks': blocks.tobytes().hex(), 'values': values.tobytes().hex()}))
    return 0


if __name__ == '__main__':
    sys.exit(main())
