// elementwise_f32_to_f16.comp: f32 -> f16 bits.
#include "elementwise.h"
BINDING(0, IN)
BINDING(1, OUT)
