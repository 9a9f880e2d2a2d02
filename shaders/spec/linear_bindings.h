// The bindings of the linear kernels with float W (linear_gemm.h, linear_matvec.h,
// linear_gemm_coopmat.h; shaders/linear_load_weight.glsl declares them).
BINDING(0, X)   // activations [M, K]
BINDING(1, W)   // weights [N, K]
BINDING(2, Y)   // output [M, N]
