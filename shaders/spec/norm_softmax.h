// norm_softmax.comp: in place, per row, softmax(x * scale).
#include "norm.h"
BINDING(0, X)
