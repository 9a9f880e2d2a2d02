// safetensors header parsing (runtime/safetensors.*): SafeTensorsFile::open on
// arbitrary bytes, then every accessor and the f32 conversion of each tensor.
//
// Input: byte 0 picks the layout.  Even: the rest is the file as it is.  Odd:
// the rest is "JSON header + data section", split after the last '}', and the
// 8-byte header length is written in front, so mutations of the JSON do not
// all die at the length check.
#include <algorithm>
#include <cstring>
#include <vector>

#include "base/error.hpp"
#include "runtime/formats/safetensors.hpp"
#include "tests/fuzz/fuzz_support.hpp"

namespace {

// Tensors up to this many elements are converted to f32.
constexpr int64_t kMaxConvert = 1 << 16;

void exercise(const reach::SafeTensorsFile& f) {
  volatile float sink = 0;
  for (const auto& [name, t] : f.tensors()) {
    if (f.find(name) != &t) __builtin_trap();
    // Every byte of every tensor: a range past the mapping faults here.  The
    // sizes are bounded by the file, which libFuzzer bounds by -max_len.
    unsigned sum = 0;
    for (size_t i = 0; i < t.nbytes; ++i) sum += std::to_integer<unsigned>(t.data[i]);
    sink = sink + static_cast<float>(sum);
    (void)t.shape_string();
    const int64_t n = t.numel();
    if (n < 0 || static_cast<uint64_t>(n) * reach::dtype_size(t.dtype) != t.nbytes) __builtin_trap();
    if (!reach::dtype_is_compute(t.dtype) || n > kMaxConvert) continue;
    std::vector<float> out(static_cast<size_t>(n));
    reach::convert_to_f32(t, out.data());
    for (float v : out) sink = sink + v;
  }
  for (const auto& [k, v] : f.metadata()) sink = sink + static_cast<float>(k.size() + v.size());
  (void)f.find("");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static reach::fuzz::MemFile file("model.safetensors");
  if (size == 0) return 0;
  std::vector<uint8_t> bytes;
  if (data[0] % 2 == 0) {
    bytes.assign(data + 1, data + size);
  } else {
    const uint8_t* begin = data + 1;
    const uint8_t* end = data + size;
    const uint8_t* close = end;
    for (const uint8_t* p = end; p != begin;)
      if (*--p == '}') {
        close = p + 1;
        break;
      }
    const uint64_t n = static_cast<uint64_t>(close - begin);
    for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<uint8_t>(n >> (8 * i)));
    bytes.insert(bytes.end(), begin, end);
  }
  try {
    const reach::SafeTensorsFile f = reach::SafeTensorsFile::open(file.write(bytes.data(), bytes.size()));
    if (f.header_size() + 8 > f.file_size()) __builtin_trap();
    exercise(f);
  } catch (const reach::Error&) {
    // Rejected with a message: what a hostile file should get.
  }
  return 0;
}
