#version 450
// linear_matvec.comp with its neighbours fused in (Kernels::linear_matvec_fused):
// the input rows RMS-normalised (NORM) or gated ([gate | up] -> act(gate) · up,
// GATE), each output y = [y +] dot [+ bias] (ACC_MASK, BIAS_MASK), and up to
// OUTS = 3 outputs (W, Y, bias) sharing X in one dispatch, the grid's x
// workgroups split between them at p.g1, p.g2.  Every switch is a
// specialization constant; with none set the dot of each row is computed in
// exactly linear_matvec's order (same bits).  MODE, XROWS: linear_matvec.comp.
#define FUSED 1
#include "contract.glsl"
#include "spec/linear_matvec_fused.h"
layout(push_constant) uniform LinearFusedPush {
#include "spec/linear_matvec_fused_push.h"
} p;
#include "linear_matvec.glsl"
