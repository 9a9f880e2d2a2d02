// The shape constants of every mat-vec list (linear_matvec[_fused][_q].h): how
// a workgroup covers rows of W and of X.  Ids 0..4 and 14.
#include "linear_matvec_mode.h"
SPEC_WG(wg)
SPEC_UINT(1, ROWS, rows, 4)        // output rows per workgroup (mode 0: per invocation)
SPEC_UINT(2, MODE, mode, 0)        // MATVEC_MODE_* (linear_matvec_mode.h)
SPEC_UINT(3, ALIGNED, aligned, 0)  // x_off % 4 == 0 (float W: and K, w_off; fused: and norm_off): vec4 loads
SPEC_UINT(4, XROWS, xrows, 1)      // X rows per workgroup (1..8): W is read once for all of them
SPEC_UINT(14, XSH, xsh, 0)         // vec4s of shared memory holding the X rows (XROWS · K / 4; 0: X read from memory)
