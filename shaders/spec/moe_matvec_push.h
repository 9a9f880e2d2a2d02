// Push constants of moe_matvec.comp and moe_matvec_q.comp (80 bytes).  Units of W: elements (float W) or
// quant-plane units of 16 bytes and meta-plane units (16 bits; bytes for mxfp4) for the block types.
PUSH_UINT(N)          // output rows of one expert's matrix
PUSH_UINT(K)          // its columns (an activated input row holds [gate | up], 2K wide)
PUSH_UINT(slots)      // chosen (row, expert) slots: rows x top-k, the grid's y
PUSH_UINT(x_div)      // slot s reads X row s / x_div (top-k for gate / up, 1 for down)
PUSH_UINT(x_stride)   // elements between two X rows
PUSH_UINT(x_off)
PUSH_UINT(ids_off)    // first expert id of the slots (int32 [slots])
PUSH_UINT(e0)         // the experts bound: [e0, e0 + ecount); the other slots are another dispatch's
PUSH_UINT(ecount)
PUSH_UINT(q_off)      // W units of expert e0 (quant plane for block types)
PUSH_UINT(m_off)      // meta-plane units of expert e0 (block types)
PUSH_UINT(w_stride)   // W units between two experts
PUSH_UINT(m_stride)   // meta units between two experts (block types)
PUSH_UINT(y_off)      // Y[slot][n] = y[y_off + slot * ldy + n]
PUSH_UINT(ldy)
PUSH_UINT(b_off)      // bias of expert id, row n: bias[b_off + id * N + n] (HAS_BIAS)
PUSH_FLOAT(alpha)     // MOE_ACT_SWIGLU_CLAMPED
PUSH_FLOAT(limit)
PUSH_FLOAT(eps)       // HAS_NORM
PUSH_UINT(norm_off)
