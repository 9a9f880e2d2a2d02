// norm_rms.comp: y = x * rsqrt(mean(x²) + eps) * w per row.
#include "norm.h"
BINDING(0, X)
BINDING(1, W)
BINDING(2, Y)
