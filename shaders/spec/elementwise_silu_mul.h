// elementwise_silu_mul.comp: y = silu(g) * u.
#include "elementwise.h"
BINDING(0, G)
BINDING(1, U)
BINDING(2, Y)
