// Push constants of linear_matvec_fused.comp (88 bytes).  Element offsets
// inside the bound ranges; output o's workgroups are x in [g_o, g_{o+1}).
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
PUSH_UINT(w_off0)
PUSH_UINT(w_off1)
PUSH_UINT(w_off2)
PUSH_UINT(y_off0)
PUSH_UINT(y_off1)
PUSH_UINT(y_off2)
PUSH_UINT(ldy0)
PUSH_UINT(ldy1)
PUSH_UINT(ldy2)
PUSH_UINT(b_off0)   // bias element offsets
PUSH_UINT(b_off1)
PUSH_UINT(b_off2)
