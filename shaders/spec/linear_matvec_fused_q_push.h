// Push constants of linear_matvec_fused_q.comp (100 bytes).  As
// linear_matvec_fused_push.h, W as quant / meta plane unit offsets.
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
PUSH_UINT(q_off0)
PUSH_UINT(q_off1)
PUSH_UINT(q_off2)
PUSH_UINT(m_off0)
PUSH_UINT(m_off1)
PUSH_UINT(m_off2)
PUSH_UINT(y_off0)
PUSH_UINT(y_off1)
PUSH_UINT(y_off2)
PUSH_UINT(ldy0)
PUSH_UINT(ldy1)
PUSH_UINT(ldy2)
PUSH_UINT(b_off0)
PUSH_UINT(b_off1)
PUSH_UINT(b_off2)
