#pragma once
// SPIR-V modules compiled at build time and embedded in the binary, named by
// the generated `ShaderId` enum (shaders/embedded_shaders.hpp).
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "shaders/embedded_shaders.hpp"

namespace reach {

struct EmbeddedShader {
  ShaderId id;
  const char* name;
  const uint32_t* code;
  size_t words;   // 0: not built (a kernel whose compiler this build lacked; shaders/meson.build)
  bool built() const { return words != 0; }
};

extern const EmbeddedShader g_embedded_shaders[kShaderCount];

const EmbeddedShader& embedded_shader(ShaderId id);
const char* shader_name(ShaderId id);
std::span<const EmbeddedShader> embedded_shaders();

}  // namespace reach
