// linear_matvec_fused_q.comp: linear_matvec_q with a fused input (RMSNorm or
// gate) and epilogue (bias, accumulate), up to 3 outputs sharing X and QTYPE.
#include "linear_matvec_shape.h"
SPEC_UINT(5, QTYPE, qtype, 4)      // WType of every W
#include "linear_matvec_fusion.h"
// Bindings (linear_q_common.glsl, quant_blocks.glsl, linear_matvec_io.glsl);
// the planes (texel buffers on CPU devices) below 8.
BINDING(0, X)         // activations [M, K] ([M, 2K] gated)
BINDING(1, WQUANT)    // output 0: quant plane of W
BINDING(2, Y)         // output 0: [M, N0]
BINDING(3, WMETA)     // output 0: meta plane of W
BINDING(4, WQUANT1)
BINDING(5, WMETA1)
BINDING(6, WQUANT2)
BINDING(7, WMETA2)
BINDING(8, Y1)
BINDING(9, Y2)
BINDING(10, BIAS)     // f32 [N0]
BINDING(11, BIAS1)
BINDING(12, BIAS2)
BINDING(13, NORM)     // f32 [K]
