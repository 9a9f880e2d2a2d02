// The fusions of linear_matvec_fused / linear_matvec_fused_q (ids 8..12 of
// both): what the mat-vec does to its input rows and to its outputs.
SPEC_UINT(8, OUTS, outs, 1)            // outputs (W, Y, bias) in this dispatch, 1..3
SPEC_UINT(9, NORM, norm, 0)            // NORM_*: x' = x · rsqrt(mean(x²) + eps) · norm[k] per X row
SPEC_UINT(10, GATE, gate, 0)           // GATE_*: X rows [gate | up], x' = act(gate) · up
SPEC_UINT(11, BIAS_MASK, bias_mask, 0) // bit o: y += bias_o[n] for output o
SPEC_UINT(12, ACC_MASK, acc_mask, 0)   // bit o: y = y_old + ... for output o (residual add)
CONST_UINT(NORM_NONE, 0)
CONST_UINT(NORM_LANE, 1)               // mode 0: each invocation sums its rows' squares alone
CONST_UINT(NORM_SUBGROUP, 2)           // mode 0: the subgroup splits the sum (subgroupAdd); modes 1, 2 their own way
CONST_UINT(GATE_NONE, 0)
CONST_UINT(GATE_SILU, 1)               // x · sigmoid(x), as elementwise_silu_mul
CONST_UINT(GATE_GELU_TANH, 2)          // as elementwise_gelu_tanh_mul
