// linear_q8.comp: Y = X · Wᵀ with X in Q8 blocks (linear_quantize_q8.comp) and W quantized
// (kernels/quant_layout.hpp), multiplied as packed int8x4 integer dot products.
SPEC_WG(wg)
SPEC_UINT(1, TM, tm, 1)         // register tile: rows of X per invocation
SPEC_UINT(2, TN, tn, 4)         // register tile: rows of W per invocation (interleaved by WG)
SPEC_UINT(3, QTYPE, qtype, 4)   // WType of W (q8_0 = 3 ... q6_k = 10)
BINDING(0, XQUANT)   // X quant plane (uvec4 units, linear_quantize_q8.h)
BINDING(1, WQUANT)   // quant plane of W (uvec4 units)
BINDING(2, Y)        // output [M, N] f32
BINDING(3, WMETA)    // meta plane of W (16-bit units)
BINDING(4, XMETA)    // X meta plane (vec2 units)
