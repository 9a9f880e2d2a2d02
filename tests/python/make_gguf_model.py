#!/usr/bin/env python3
"""Write a (tiny) Hugging Face Llama safetensors model as a llama GGUF through the PyPI `gguf`
package, the way llama.cpp's convert_hf_to_gguf lays it out (tensor names, q/k rows permuted into
interleaved rotary pairs, ne order), for tests/test_model_gguf.cpp.

usage: make_gguf_model.py MODEL_DIR OUT.gguf [--type f32|f16|bf16|q8_0|q4_0|q4_1|q5_0|q5_1|q4_k|q5_k|q6_k]
                          [--embed-type T] [--blocks-out DIR]

--type applies to the weight matrices (norms stay F32, biases F32); --embed-type to token_embd
(default: --type).  Block types gguf.quants can quantize (q8_0 ... q5_1) are quantized from the
weights; the k-quants (which it cannot) get random blocks with finite f16 scales (for loading
checks, not for a forward).  --blocks-out writes, per matrix, the GGML blocks of the *unpermuted*
(Hugging Face row order) matrix to DIR/<gguf name>.bin: what a loader that undoes the permutation
must hold.  Prints JSON {tensor: {"type": NAME, "nbytes": N}} of what was written.
Exits 3 when gguf or numpy cannot be imported (the caller skips).
"""
import argparse
import json
import os
import sys

try:
    import numpy as np
    import gguf
    from gguf.quants import quantize
except ImportError as e:
    print("make_gguf_model: %s" % e, file=sys.stderr)
    sys.exit(3)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from refmodel.safetensors_io import read_model_tensors  # noqa: E402

Q = gguf.GGMLQuantizationType
TYPES = {"f32": Q.F32, "f16": Q.F16, "bf16": Q.BF16, "q8_0": Q.Q8_0, "q4_0": Q.Q4_0, "q4_1": Q.Q4_1,
         "q5_0": Q.Q5_0, "q5_1": Q.Q5_1, "q4_k": Q.Q4_K, "q5_k": Q.Q5_K, "q6_k": Q.Q6_K}
LAYER = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
         "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
         "mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm"}
GLOBAL = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
          "lm_head.weight": "output.weight"}


def permute(w, n_head):
    """llama.cpp convert_hf_to_gguf's LlamaModel.permute (half-split rows -> interleaved pairs)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def gguf_name(hf):
    if hf in GLOBAL:
        return GLOBAL[hf]
    parts = hf.split(".")   # model.layers.N.self_attn.q_proj.weight
    return "blk.%s.%s.%s" % (parts[2], LAYER[".".join(parts[3:-1])], parts[-1])


def blocks(a, qtype, rng):
    """(bytes array [rows, row_bytes], raw dtype) of a float32 matrix in qtype."""
    if qtype in (Q.Q4_K, Q.Q5_K, Q.Q6_K):
        block, size = gguf.GGML_QUANT_SIZES[qtype]
        raw = rng.integers(0, 256, size=(a.shape[0], a.shape[1] // block * size), dtype=np.uint8)
        # Keep the f16 scales finite (0x3c00 = 1.0) so nothing reads a NaN by accident.
        per = raw.reshape(a.shape[0], -1, size)
        if qtype == Q.Q6_K:
            per[:, :, size - 2:] = np.frombuffer(np.float16(0.01).tobytes(), dtype=np.uint8)
        else:
            per[:, :, 0:2] = np.frombuffer(np.float16(0.01).tobytes(), dtype=np.uint8)
            per[:, :, 2:4] = np.frombuffer(np.float16(0.0).tobytes(), dtype=np.uint8)
        return raw
    return quantize(a, qtype)


def main(argv):
    p = argparse.ArgumentParser()
    p.add_argument("model_dir")
    p.add_argument("out")
    p.add_argument("--type", default="f32", choices=sorted(TYPES))
    p.add_argument("--embed-type", choices=sorted(TYPES))
    p.add_argument("--blocks-out")
    a = p.parse_args(argv)
    with open(os.path.join(a.model_dir, "config.json")) as f:
        cfg = json.load(f)
    W = read_model_tensors(a.model_dir)
    heads, kv = cfg["num_attention_heads"], cfg.get("num_key_value_heads", cfg["num_attention_heads"])
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // heads

    w = gguf.GGUFWriter(a.out, "llama")
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_head_count(heads)
    w.add_head_count_kv(kv)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_rope_dimension_count(head_dim)
    w.add_layer_norm_rms_eps(cfg.get("rms_norm_eps", 1e-5))
    w.add_rope_freq_base(cfg.get("rope_theta", 10000.0))
    w.add_vocab_size(cfg["vocab_size"])
    rng = np.random.default_rng(14)
    written = {}
    for hf in sorted(W):
        arr = np.ascontiguousarray(W[hf], dtype=np.float32)
        name = gguf_name(hf)
        hf_rows = arr
        if ".q_proj." in hf:
            arr = permute(arr, heads)
        elif ".k_proj." in hf:
            arr = permute(arr, kv)
        t = TYPES[a.type]
        if name == "token_embd.weight" and a.embed_type:
            t = TYPES[a.embed_type]
        if arr.ndim == 1 or t == Q.F32:
            w.add_tensor(name, arr)
            t = Q.F32
        elif t == Q.F16:
            w.add_tensor(name, arr.astype(np.float16))
        else:
            if t in (Q.Q4_K, Q.Q5_K, Q.Q6_K):
                hb = blocks(hf_rows, t, rng)
                # Rows move whole: the permuted file rows are the HF rows' blocks, permuted.
                data = hb
                if ".q_proj." in hf:
                    data = permute(hb, heads)
                elif ".k_proj." in hf:
                    data = permute(hb, kv)
            else:
                hb = blocks(hf_rows, t, rng)
                data = blocks(arr, t, rng)
            w.add_tensor(name, np.ascontiguousarray(data), raw_dtype=t)
            if a.blocks_out:
                os.makedirs(a.blocks_out, exist_ok=True)
                np.ascontiguousarray(hb).tofile(os.path.join(a.blocks_out, name + ".bin"))
        written[name] = {"type": t.name, "nbytes": 0}
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    for t in gguf.GGUFReader(a.out).tensors:
        written[t.name]["nbytes"] = int(t.n_bytes)
    print(json.dumps(written))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
