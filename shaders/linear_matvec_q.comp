#version 450
// y[m, n] = dot(x[m, :], W[n, :]) for each row m of X, W in
// a GGML block format (QTYPE), dequantized in registers 32 weights at a time,
// f32 accumulation.  A workgroup takes XROWS rows of X and decodes each W
// sub-block once for all of them; every X row keeps its own accumulators in
// the order of XROWS = 1, so its result is bit-identical to a matvec of that
// row alone.  MODE as linear_matvec.comp:
//  0  ROWS W rows per invocation (interleaved by WG), no reduction: CPU devices;
//     the 32 activations of a sub-block are loaded once (uniform) for all rows.
//  1  a subgroup per row, lanes split the sub-blocks, subgroupAdd (GPUs).
//  2  the workgroup splits the sub-blocks, shared-memory tree (WG a power of two).
#include "contract.glsl"
#include "spec/linear_matvec_q.h"
#include "linear_matvec_q.glsl"
