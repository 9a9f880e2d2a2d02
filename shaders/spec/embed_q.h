// embed_q.comp: the embedding gather from a quantized table (kernels/quant_layout.hpp).
SPEC_WG(wg)
SPEC_UINT(1, QTYPE, qtype, 4)   // WType of the table (q8_0 = 3 ... q6_k = 10)
