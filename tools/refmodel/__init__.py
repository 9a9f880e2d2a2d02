"""Independent float64 NumPy reference for reach (see each module's docstring for signatures).

  safetensors_io  read/write safetensors by hand (F32/F16/BF16), bf16 round-to-nearest-even
  rope            inv_freq / attention_factor tables (default, linear, ntk, dynamic, yarn, llama3),
                  half-split and interleaved rotation, logn factor, ALiBi slopes
  attention       Scheme, attention_logits / attention_reference (raw q/k/v, absolute positions,
                  every reach scheme, naive n x n / two-matrix form), relative_positions,
                  classify_tile (§5.1)
  model           HF Llama/Qwen2 forward (config.json + safetensors), per-layer schemes, greedy
                  generation with a raw k/v cache
"""
