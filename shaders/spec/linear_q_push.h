// Push constants of linear_matvec_q.comp and linear_gemm_q.comp (quantized W).
PUSH_UINT(M)
PUSH_UINT(N)
PUSH_UINT(K)
PUSH_UINT(x_off)   // X element offset inside the bound range
PUSH_UINT(q_off)   // first quant-plane unit (16 bytes) of the bound W rows
PUSH_UINT(m_off)   // first meta-plane unit (2 bytes) of the bound W rows
PUSH_UINT(y_off)
PUSH_UINT(ldy)     // row stride of Y (a weight split into row chunks writes columns of Y)
