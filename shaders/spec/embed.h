// embed.comp: y[t, :] = table[ids[t], :].
#include "elementwise.h"
BINDING(0, TABLE)
BINDING(1, IDS)
BINDING(2, Y)
