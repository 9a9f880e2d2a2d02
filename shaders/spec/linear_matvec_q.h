// linear_matvec_q.comp: y = W · x per row of X, W quantized (kernels/quant_layout.hpp).
#include "linear_matvec_mode.h"
SPEC_WG(wg)
SPEC_UINT(1, ROWS, rows, 4)        // output rows per workgroup (mode 0: per invocation)
SPEC_UINT(2, MODE, mode, 0)        // MATVEC_MODE_* (linear_matvec_mode.h)
SPEC_UINT(3, ALIGNED, aligned, 0)  // x_off % 4 == 0: X read as vec4
SPEC_UINT(4, QTYPE, qtype, 4)      // WType of W (q8_0 = 3 ... q6_k = 10)
SPEC_UINT(5, XROWS, xrows, 1)      // X rows per workgroup (1..8): W is read once for all of them
SPEC_UINT(14, XSH, xsh, 0)         // vec4s of shared memory holding the X rows (XROWS · K / 4; 0: X read from memory)
// Bindings (shaders/linear_q_common.glsl, quant_blocks.glsl declare them).
BINDING(0, X)        // activations [M, K]
BINDING(1, WQUANT)   // quant plane of W (uvec4 units)
BINDING(2, Y)        // output [M, N]
BINDING(3, WMETA)    // meta plane of W (16-bit units)
