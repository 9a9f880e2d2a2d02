// moe_matvec.comp: y[slot] = W_{ids[slot]} · x[slot / x_div] for the chosen experts, float W (f32 / f16 / bf16).
#include "linear_matvec_mode.h"
#include "moe_act.h"
SPEC_WG(wg)
SPEC_UINT(1, ROWS, rows, 4)        // output rows per workgroup (mode 0: per invocation)
SPEC_UINT(2, MODE, mode, 0)        // MATVEC_MODE_ROW_PER_LANE or MATVEC_MODE_SUBGROUP
SPEC_UINT(3, ALIGNED, aligned, 0)  // K, x and W offsets multiples of 4: vec4 loads
SPEC_UINT(4, ACT, act, 0)          // MOE_ACT_*: X rows are [gate | up] and the input is act(gate) · up
SPEC_BOOL(5, HAS_BIAS, has_bias, false)   // y += bias[id][n]
SPEC_BOOL(6, HAS_NORM, has_norm, false)   // x' = RMSNorm(x row) · norm (gate / up: the MoE block's pre-norm)
BINDING(0, X)     // activations
BINDING(1, W)     // the experts' matrices, stacked at a fixed stride
BINDING(2, Y)     // [slots][ldy]
BINDING(3, IDS)   // int32 expert id per slot (moe_route's)
BINDING(4, BIAS)  // f32 [experts][N]
BINDING(5, NORM)  // f32 [K]
