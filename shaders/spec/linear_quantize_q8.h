// linear_quantize_q8.comp: f32 activation rows -> Q8 blocks (the int8 path's X, kernels/linear_q8.cpp).
SPEC_WG(wg)
BINDING(0, X)       // activations [M, K] f32
BINDING(1, XQUANT)  // quant plane: 32 int8 per block (two uvec4 units), row-major blocks
BINDING(2, XMETA)   // meta plane: per block vec2(d, sum of the 32 int8 quants)
