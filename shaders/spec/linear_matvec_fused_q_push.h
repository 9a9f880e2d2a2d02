// Push constants of linear_matvec_fused_q.comp (100 bytes): W as quant / meta
// plane unit offsets.
#define FUSED_W_OFFSETS \
  PUSH_UINT(q_off0) PUSH_UINT(q_off1) PUSH_UINT(q_off2) PUSH_UINT(m_off0) PUSH_UINT(m_off1) PUSH_UINT(m_off2)
#include "linear_matvec_fused_push_common.h"
