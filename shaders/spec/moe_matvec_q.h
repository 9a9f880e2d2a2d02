// moe_matvec_q.comp: moe_matvec.comp for quantized W (kernels/quant_layout.hpp, each expert's planes at a
// fixed stride).
#include "linear_matvec_mode.h"
#include "moe_act.h"
SPEC_WG(wg)
SPEC_UINT(1, ROWS, rows, 4)
SPEC_UINT(2, MODE, mode, 0)
SPEC_UINT(3, ALIGNED, aligned, 0)  // x offsets multiples of 4
SPEC_UINT(4, ACT, act, 0)
SPEC_BOOL(5, HAS_BIAS, has_bias, false)
SPEC_UINT(6, QTYPE, qtype, 4)      // WType of W
SPEC_BOOL(7, HAS_NORM, has_norm, false)
BINDING(0, X)
BINDING(1, WQUANT)   // quant planes (one view of the experts' range)
BINDING(2, Y)
BINDING(3, WMETA)    // meta planes (another view of the same range)
BINDING(4, IDS)
BINDING(5, BIAS)
BINDING(6, NORM)
