#version 450
// linear_matvec_q.comp with its neighbours fused in (Kernels::linear_matvec_fused,
// quantized W of one block type QTYPE): the fusions of linear_matvec_fused.comp
// (RMSNorm or gated input, bias and accumulate epilogue, up to 3 outputs in
// one dispatch); with none set, linear_matvec_q's order (same bits).
#define FUSED 1
#include "contract.glsl"
#include "spec/linear_matvec_fused_q.h"
layout(push_constant) uniform LinearFusedQPush {
#include "spec/linear_matvec_fused_q_push.h"
} p;
#include "linear_matvec.glsl"
