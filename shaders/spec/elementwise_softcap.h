// elementwise_softcap.comp: y = cap * tanh(x / cap).
#include "elementwise.h"
BINDING(0, X)
BINDING(1, Y)
