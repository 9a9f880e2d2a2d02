#version 450
// Compiled once at configure time (shaders/meson.build): a glslang that accepts this can build the
// cooperative-matrix GEMMs (linear_gemm_coopmat*.comp).
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
layout(local_size_x = 32) in;
shared float16_t s[256];
shared float r[256];
void main() {
  coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a;
  coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> b;
  coopMatLoad(a, s, 0, 16, gl_CooperativeMatrixLayoutRowMajor);
  coopMatLoad(b, s, 0, 16, gl_CooperativeMatrixLayoutColumnMajor);
  coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> c =
      coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0.0);
  c = coopMatMulAdd(a, b, c);
  coopMatStore(c, r, 0, 16, gl_CooperativeMatrixLayoutRowMajor);
}
