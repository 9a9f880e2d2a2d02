#version 450
// y[m, n] = dot(x[m, :], W[n, :]) for each row m of X, W in
// a GGML block format or mxfp4 (QTYPE), dequantized in registers 32 weights
// at a time, f32 accumulation: linear_matvec.comp's body (linear_matvec.glsl)
// with quantized W (W_QUANT, linear_matvec_unit.glsl).  A workgroup decodes
// each W sub-block once for all its XROWS rows of X; every X row keeps its own
// accumulators in the order of XROWS = 1, so its result is bit-identical to a
// matvec of that row alone.  MODE as linear_matvec.comp; in MODE 0 the 32
// activations of a sub-block are loaded once (uniform) for all the W rows.
#include "contract.glsl"
#include "spec/linear_matvec_q.h"
#include "linear_matvec.glsl"
