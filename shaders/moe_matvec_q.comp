#version 450
// moe_matvec.comp for quantized W (QTYPE, dequantized in registers 32 weights at a time).
#include "contract.glsl"
#include "spec/moe_matvec_q.h"
#include "moe_matvec.glsl"
