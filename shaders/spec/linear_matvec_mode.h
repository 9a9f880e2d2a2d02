// The MODE values of linear_matvec.comp and linear_matvec_q.comp (how a row's
// K loop is spread); KernelConfig::matvec_mode holds one.
CONST_UINT(MATVEC_MODE_ROW_PER_LANE, 0)   // W rows per invocation, no reduction (CPU devices)
CONST_UINT(MATVEC_MODE_SUBGROUP, 1)       // a subgroup per row, subgroupAdd over K (GPUs)
CONST_UINT(MATVEC_MODE_SHARED, 2)         // the workgroup splits K, shared-memory reduction
