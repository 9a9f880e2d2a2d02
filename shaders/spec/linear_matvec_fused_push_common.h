// The push constants of linear_matvec_fused.comp and linear_matvec_fused_q.comp,
// in order.  The includer defines FUSED_W_OFFSETS, the weight offsets of
// outputs 0..2 (linear_matvec_fused_push.h, linear_matvec_fused_q_push.h).
// Element offsets inside the bound ranges; output o's workgroups are x in
// [g_o, g_{o+1}).
PUSH_UINT(M)
PUSH_UINT(K)
PUSH_UINT(x_off)
PUSH_FLOAT(eps)     // NORM
PUSH_UINT(norm_off)
PUSH_UINT(g1)       // first workgroup of output 1
PUSH_UINT(g2)       // first workgroup of output 2
PUSH_UINT(N0)
PUSH_UINT(N1)
PUSH_UINT(N2)
FUSED_W_OFFSETS
PUSH_UINT(y_off0)
PUSH_UINT(y_off1)
PUSH_UINT(y_off2)
PUSH_UINT(ldy0)
PUSH_UINT(ldy1)
PUSH_UINT(ldy2)
PUSH_UINT(b_off0)   // bias element offsets
PUSH_UINT(b_off1)
PUSH_UINT(b_off2)
#undef FUSED_W_OFFSETS
