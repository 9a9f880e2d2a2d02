// Push constants of linear_q8.comp.
PUSH_UINT(M)
PUSH_UINT(N)
PUSH_UINT(K)
PUSH_UINT(xq_off)  // first X quant unit (16 bytes) of the bound rows
PUSH_UINT(q_off)   // first quant-plane unit (16 bytes) of the bound W rows
PUSH_UINT(m_off)   // first meta-plane unit (2 bytes) of the bound W rows
PUSH_UINT(y_off)
PUSH_UINT(ldy)     // row stride of Y (a weight split into row chunks writes columns of Y)
PUSH_UINT(xm_off)  // first X meta unit (8 bytes) of the bound rows
