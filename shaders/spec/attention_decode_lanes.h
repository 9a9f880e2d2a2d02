// attention_decode_lanes.comp: the decode kernel of CPU devices; the same
// constants and bindings as attention_decode.comp.
#include "attention_decode.h"
