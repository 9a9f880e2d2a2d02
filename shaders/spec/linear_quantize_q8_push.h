// Push constants of linear_quantize_q8.comp.
PUSH_UINT(M)
PUSH_UINT(K)
PUSH_UINT(x_off)    // X element offset inside the bound range
PUSH_UINT(q_off)    // first quant-plane unit (16 bytes)
PUSH_UINT(m_off)    // first meta-plane unit (8 bytes)
