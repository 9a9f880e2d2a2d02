// linear_matvec.comp: y = W · x per row of X.
#include "linear_matvec_mode.h"
SPEC_WG(wg)
SPEC_UINT(1, ROWS, rows, 4)        // output rows per workgroup (mode 0: per invocation)
SPEC_UINT(2, MODE, mode, 0)        // MATVEC_MODE_* (linear_matvec_mode.h)
SPEC_UINT(3, ALIGNED, aligned, 0)
SPEC_UINT(4, XROWS, xrows, 1)      // X rows per workgroup (1..8): W is read once for all of them
SPEC_UINT(14, XSH, xsh, 0)         // vec4s of shared memory holding the X rows (XROWS · K / 4; 0: X read from memory)
// Bindings (shaders/linear_load_weight.glsl declares them).
BINDING(0, X)   // activations [M, K]
BINDING(1, W)   // weights [N, K]
BINDING(2, Y)   // output [M, N]
