// elementwise_scale.comp: y = x * s.
#include "elementwise.h"
BINDING(0, X)
BINDING(1, Y)
