#pragma once
// Where metadata for a GGUF file goes: code that knows what to write (the
// tokenizer, the model config) calls a sink; the GGUF writer implements it.
// Keeps those producers independent of the file writer.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace reach {

class GgufMetaSink {
 public:
  virtual ~GgufMetaSink() = default;
  virtual void put_string(std::string_view key, std::string_view value) = 0;
  virtual void put_u32(std::string_view key, uint32_t value) = 0;
  virtual void put_i32(std::string_view key, int32_t value) = 0;
  virtual void put_f32(std::string_view key, float value) = 0;
  virtual void put_bool(std::string_view key, bool value) = 0;
  virtual void put_string_array(std::string_view key, const std::vector<std::string>& values) = 0;
  virtual void put_i32_array(std::string_view key, const std::vector<int32_t>& values) = 0;
  virtual void put_f32_array(std::string_view key, const std::vector<float>& values) = 0;
};

}  // namespace reach
