// embed_q.comp: the embedding gather from a quantized table (kernels/quant_layout.hpp).
SPEC_WG(wg)
SPEC_UINT(1, QTYPE, qtype, 4)   // WType of the table (q8_0 = 3 ... q6_k = 10)
BINDING(0, WQUANT)   // quant plane of the table (quant_blocks.glsl)
BINDING(1, IDS)      // token ids (int32)
BINDING(2, Y)        // output rows
BINDING(3, WMETA)    // meta plane of the table
