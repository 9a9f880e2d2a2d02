#pragma once
// SPIR-V modules compiled at build time and embedded in the binary.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace reach {

struct EmbeddedShader {
  const char* name;
  const uint32_t* code;
  size_t words;
};

extern const EmbeddedShader g_embedded_shaders[];
extern const size_t g_embedded_shader_count;

// Throws Error(internal) if no kernel has this name.
std::span<const uint32_t> embedded_shader(std::string_view name);
std::span<const EmbeddedShader> embedded_shaders();

}  // namespace reach
