// elementwise_add.comp: y = a + b[i % b_period].
#include "elementwise.h"
BINDING(0, A)
BINDING(1, B)
BINDING(2, Y)
