#include "engine/shader_registry.hpp"

#include <string>

#include "engine/error.hpp"

namespace reach {

std::span<const EmbeddedShader> embedded_shaders() { return {g_embedded_shaders, g_embedded_shader_count}; }

std::span<const uint32_t> embedded_shader(std::string_view name) {
  for (const auto& s : embedded_shaders())
    if (name == s.name) return {s.code, s.words};
  throw Error(ErrorCode::internal, "no embedded shader named '" + std::string(name) + "' (is it listed in shaders/meson.build?)");
}

}  // namespace reach
