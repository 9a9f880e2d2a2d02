// Shared helpers for reach's kernels.
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : enable

// bf16 -> f32 is exact: the bf16 bits are the high half of the f32 bits.
float bf16_bits_to_float(uint bits16) { return uintBitsToFloat(bits16 << 16); }

// Elementwise kernels walk the data with a grid-stride loop so any n fits in
// maxComputeWorkGroupCount.
#define GRID_STRIDE_LOOP(i, n) \
  for (uint i = gl_GlobalInvocationID.x; i < (n); i += gl_NumWorkGroups.x * gl_WorkGroupSize.x)
