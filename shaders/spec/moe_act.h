// The activations of an expert's gate and up (moe_matvec's input transform, moe_activate): out = act(gate) · up.
CONST_UINT(MOE_ACT_NONE, 0)            // the input as it is (gate / up read the layer's rows)
CONST_UINT(MOE_ACT_SILU, 1)            // silu(g) · u, elementwise_silu_mul's formula
CONST_UINT(MOE_ACT_GELU_TANH, 2)       // gelu_tanh(g) · u, elementwise_gelu_tanh_mul's formula
CONST_UINT(MOE_ACT_SWIGLU_CLAMPED, 3)  // gpt-oss: g = min(g, limit), u = clamp(u, ±limit), (u + 1) · g · sigmoid(alpha g)
