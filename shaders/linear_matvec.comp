#version 450
// y[m, n] = dot(x[m, :], W[n, :]) for each row m of X, W f32 / f16 / bf16:
// decode is memory-bound, 4 K-elements per load.  The body
// (linear_matvec.glsl) is every weight kind's: linear_matvec_q.comp is the
// same kernel for quantized W.  A workgroup takes XROWS rows of X
// (gl_WorkGroupID.y * XROWS ...; batched decode of several sequences) and
// reads each W element once for all of them.  Each X row keeps its own f32
// accumulators, updated in exactly the order of XROWS = 1, so every row's
// result is bit-identical to a matvec of that row alone.
//
// MODE (specialization constant) picks how a row's K loop is spread:
//  0  one W row per invocation (ROWS of them, interleaved by WG), the whole K
//     loop in registers, no reduction: CPU devices (llvmpipe), where x loads
//     are uniform across the lanes and there is no barrier.  A workgroup
//     covers WG * ROWS rows.
//  1  a workgroup covers ROWS rows; each subgroup takes rows in turn, its
//     lanes split K and subgroupAdd reduces (GPUs with subgroup arithmetic).
//     Uses the real subgroup size, so any subgroup size (8/32/64, or a
//     partial subgroup when WG is smaller: its live lanes) is correct.
//  2  as 1 but the whole workgroup splits K and a shared-memory tree
//     reduces (no subgroup ops; WG must be a power of two).
#include "contract.glsl"
#include "spec/linear_matvec.h"
#include "linear_matvec.glsl"
