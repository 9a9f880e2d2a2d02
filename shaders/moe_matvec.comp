#version 450
// y[slot][n] = W_e[n, :] · x'[slot] (+ bias_e[n]) for each chosen (row, expert) slot, e = ids[slot], float W
// (f32, or f16 / bf16 with W_F16 / W_BF16): the experts' mat-vec of decode rows (moe_matvec.glsl).
#include "contract.glsl"
#include "spec/moe_matvec.h"
#include "moe_matvec.glsl"
