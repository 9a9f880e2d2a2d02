// The bindings of the linear kernels with quantized W (linear_gemm_q.h,
// linear_matvec_q.h, linear_gemm_coopmat_q.h; kernels/quant_layout.hpp;
// shaders/linear_q_common.glsl and quant_blocks.glsl declare them).
BINDING(0, X)        // activations [M, K]
BINDING(1, WQUANT)   // quant plane of W (uvec4 units)
BINDING(2, Y)        // output [M, N]
BINDING(3, WMETA)    // meta plane of W (16-bit units; bytes for mxfp4)
