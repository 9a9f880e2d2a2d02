#pragma once
// A minimal safetensors writer, for tests that craft good and bad files (the
// engine only reads them).  Tensors are laid out in the given order; the
// header is padded with spaces to 8 bytes.  Throws invalid_argument when a
// tensor's bytes do not match shape x dtype, io when the file cannot be written.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "runtime/formats/safetensors.hpp"

namespace reach {

using TensorToWrite = std::tuple<std::string, DType, std::vector<int64_t>, std::vector<std::byte>>;
void write_safetensors(const std::filesystem::path& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace reach
