// write_safetensors: the tests' writer of crafted files (tests/support/safetensors_writer.hpp).
#include "tests/support/safetensors_writer.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "base/platform/file_names.hpp"

namespace reach {

void write_safetensors(const std::filesystem::path& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  // Build the header with keys in file order (nlohmann::ordered_json keeps it).
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json m = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    header["__metadata__"] = std::move(m);
  }
  uint64_t offset = 0;
  for (const auto& [name, dtype, shape, bytes] : tensors) {
    if (name == "__metadata__" || header.contains(name))
      throw Error(ErrorCode::invalid_argument,
                  "write_safetensors " + path.string() + ": duplicate or reserved tensor name '" + name + "'");
    uint64_t numel = 1;
    for (int64_t d : shape) {
      if (d < 0 || __builtin_mul_overflow(numel, static_cast<uint64_t>(d), &numel))
        throw Error(ErrorCode::invalid_argument,
                    "write_safetensors " + path.string() + ": tensor '" + name + "' has a bad shape " +
                        shape_to_string(shape));
    }
    if (numel * dtype_size(dtype) != bytes.size())
      throw Error(ErrorCode::invalid_argument,
                  "write_safetensors " + path.string() + ": tensor '" + name + "' shape " + shape_to_string(shape) +
                      " x " + dtype_name(dtype) + " needs " + std::to_string(numel * dtype_size(dtype)) +
                      " bytes, got " + std::to_string(bytes.size()));
    header[name] = {{"dtype", dtype_name(dtype)}, {"shape", shape}, {"data_offsets", {offset, offset + bytes.size()}}};
    offset += bytes.size();
  }
  std::string text = header.dump();
  while (text.size() % 8) text.push_back(' ');   // the reference writer pads to 8 with spaces

  std::FILE* fp = platform::open_file(path, "wb");
  if (!fp) {
    int e = errno;
    throw Error(ErrorCode::io, "write_safetensors: cannot create " + path.string() + ": " + std::strerror(e));
  }
  bool ok = true;
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(static_cast<uint64_t>(text.size()) >> (8 * i));
  ok = ok && std::fwrite(len, 1, 8, fp) == 8;
  ok = ok && std::fwrite(text.data(), 1, text.size(), fp) == text.size();
  for (const auto& t : tensors) {
    const auto& bytes = std::get<3>(t);
    if (!bytes.empty()) ok = ok && std::fwrite(bytes.data(), 1, bytes.size(), fp) == bytes.size();
  }
  ok = (std::fclose(fp) == 0) && ok;
  if (!ok) throw Error(ErrorCode::io, "write_safetensors: writing " + path.string() + " failed (disk full?)");
}

}  // namespace reach
