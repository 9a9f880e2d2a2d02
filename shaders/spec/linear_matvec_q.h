// linear_matvec_q.comp: y = W · x per row of X, W quantized (kernels/quant_layout.hpp).
#include "linear_matvec_shape.h"
SPEC_UINT(5, QTYPE, qtype, 4)      // WType of W (q8_0 = 3 ... q6_k = 10, mxfp4)
#include "linear_q_bindings.h"
