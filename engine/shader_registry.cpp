#include "engine/shader_registry.hpp"

#include <string>

#include "base/error.hpp"

namespace reach {

std::span<const EmbeddedShader> embedded_shaders() { return {g_embedded_shaders, kShaderCount}; }

const EmbeddedShader& embedded_shader(ShaderId id) {
  const auto i = static_cast<uint32_t>(id);
  if (i >= kShaderCount || g_embedded_shaders[i].id != id)
    throw Error(ErrorCode::internal, "no embedded shader with id " + std::to_string(i));
  return g_embedded_shaders[i];
}

const char* shader_name(ShaderId id) { return embedded_shader(id).name; }

}  // namespace reach
