// The weight types, listed once: WTYPE(id, name, NAME).  base/wtype.hpp turns
// the list into enum class WType (WType::name = id); the shaders include it
// too (shaders/quant_blocks.glsl, with the source root on glslc's include
// path) and turn it into `const uint QT_NAME = id`, the values the QTYPE
// specialization constants carry.  Plain text both compilers read: no include
// guard, no C++; the ids never change (GGUF files and the shaders rely on them).
WTYPE(0, f32, F32)
WTYPE(1, f16, F16)
WTYPE(2, bf16, BF16)
WTYPE(3, q8_0, Q8_0)
WTYPE(4, q4_0, Q4_0)
WTYPE(5, q4_1, Q4_1)
WTYPE(6, q5_0, Q5_0)
WTYPE(7, q5_1, Q5_1)
WTYPE(8, q4_k, Q4_K)
WTYPE(9, q5_k, Q5_K)
WTYPE(10, q6_k, Q6_K)
WTYPE(11, mxfp4, MXFP4)
