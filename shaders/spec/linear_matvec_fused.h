// linear_matvec_fused.comp: linear_matvec with a fused input (RMSNorm or gate)
// and epilogue (bias, accumulate), up to 3 outputs sharing X.
#include "linear_matvec_shape.h"
#include "linear_matvec_fusion.h"
// Bindings (shaders/linear_load_weight.glsl, linear_matvec_io.glsl declare them);
// W of outputs 0..2 at 1, 3, 5 (texel bindings must be below 8).
BINDING(0, X)      // activations [M, K] ([M, 2K] gated)
BINDING(1, W)      // output 0: weights [N0, K]
BINDING(2, Y)      // output 0: [M, N0]
BINDING(3, W1)
BINDING(4, Y1)
BINDING(5, W2)
BINDING(6, Y2)
BINDING(7, BIAS)   // f32 [N0]
BINDING(8, BIAS1)
BINDING(9, BIAS2)
BINDING(10, NORM)  // f32 [K]
