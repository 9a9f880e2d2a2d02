// Push constants of linear_matvec_fused.comp (88 bytes): W as element offsets.
#define FUSED_W_OFFSETS PUSH_UINT(w_off0) PUSH_UINT(w_off1) PUSH_UINT(w_off2)
#include "linear_matvec_fused_push_common.h"
