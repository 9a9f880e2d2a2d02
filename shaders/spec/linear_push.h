// Push constants of linear_gemm.comp and linear_matvec.comp.
PUSH_UINT(M)
PUSH_UINT(N)
PUSH_UINT(K)
PUSH_UINT(x_off)   // element offsets inside the bound ranges
PUSH_UINT(w_off)
PUSH_UINT(y_off)
PUSH_UINT(ldy)     // row stride of Y (a weight split into row chunks writes columns of Y)
PUSH_UINT(pad)
