// elementwise_gelu_tanh_mul.comp: y = gelu_tanh(g) * u.
#include "elementwise.h"
BINDING(0, G)
BINDING(1, U)
BINDING(2, Y)
