// elementwise_bf16_to_f32.comp: bf16 bits -> f32.
#include "elementwise.h"
BINDING(0, IN)
BINDING(1, OUT)
