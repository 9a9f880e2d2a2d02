// The host side of the experts' weights: gpt-oss's transformers layout (x @ W, gate and up interleaved along
// the last axis) turned into the kernels' [out, in] rows, checked element by element against tensors whose
// values name their own (expert, row, column) as transformers writes them (GptOssExperts: gate_up_proj
// [E, hidden, 2 ffn], down_proj [E, ffn, hidden]); MXFP4 (runtime/quant/mxfp4) against the OCP specification
// (tests/support/quant_reference) and OpenAI's checkpoint layout (codes paired along the row, scales apart)
// against transformers' own unpacking rule (element 2i the low nibble of byte i, 2i + 1 the high one).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "runtime/model/expert_layout.hpp"
#include "runtime/quant/mxfp4.hpp"
#include "tests/support/quant_reference.hpp"

using namespace reach;
using namespace reach::test;

namespace {

std::vector<std::byte> floats(const std::vector<float>& v) {
  std::vector<std::byte> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}
float at(const std::vector<std::byte>& b, size_t i) {
  float f;
  std::memcpy(&f, b.data() + i * 4, 4);
  return f;
}

}  // namespace

TEST_CASE("gpt-oss experts: gate_up_proj [E, H, 2F] de-interleaved and transposed, down_proj [E, F, H] transposed") {
  const int64_t E = 3, H = 5, F = 4;
  // value(e, r, c) = 10000 e + 100 r + c: every element names its place.
  std::vector<float> gu(size_t(E * H * 2 * F)), dn(size_t(E * F * H));
  for (int64_t e = 0; e < E; ++e)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t c = 0; c < 2 * F; ++c) gu[size_t((e * H + h) * 2 * F + c)] = float(10000 * e + 100 * h + c);
  for (int64_t e = 0; e < E; ++e)
    for (int64_t f = 0; f < F; ++f)
      for (int64_t h = 0; h < H; ++h) dn[size_t((e * F + f) * H + h)] = float(10000 * e + 100 * f + h);
  const auto gb = floats(gu), db = floats(dn);
  const auto gate = experts_transposed(gb.data(), 4, E, H, 2 * F, 0, 2);
  const auto up = experts_transposed(gb.data(), 4, E, H, 2 * F, 1, 2);
  const auto down = experts_transposed(db.data(), 4, E, F, H, 0, 1);
  REQUIRE(gate.size() == size_t(E * F * H) * 4);
  REQUIRE(up.size() == gate.size());
  REQUIRE(down.size() == size_t(E * H * F) * 4);
  size_t bad = 0;
  for (int64_t e = 0; e < E; ++e)
    for (int64_t f = 0; f < F; ++f)
      for (int64_t h = 0; h < H; ++h) {
        // Row f of expert e's gate is gate_up_proj[e][:, 2f] (transformers: gate = gate_up[..., ::2]).
        bad += at(gate, size_t((e * F + f) * H + h)) != float(10000 * e + 100 * h + 2 * f);
        bad += at(up, size_t((e * F + f) * H + h)) != float(10000 * e + 100 * h + 2 * f + 1);
        // Row h of expert e's down is down_proj[e][:, h].
        bad += at(down, size_t((e * H + h) * F + f)) != float(10000 * e + 100 * f + h);
      }
  CHECK(bad == 0);
  // The biases [E, 2F]: gate the even columns, up the odd ones.
  std::vector<float> bias(size_t(E * 2 * F));
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = float(i);
  const auto bb = floats(bias);
  const auto gbias = columns_every(bb.data(), 4, E, 2 * F, 0, 2), ubias = columns_every(bb.data(), 4, E, 2 * F, 1, 2);
  for (int64_t e = 0; e < E; ++e)
    for (int64_t f = 0; f < F; ++f) {
      CHECK(at(gbias, size_t(e * F + f)) == float(e * 2 * F + 2 * f));
      CHECK(at(ubias, size_t(e * F + f)) == float(e * 2 * F + 2 * f + 1));
    }
}

TEST_CASE("mxfp4: the host dequantizer equals the OCP specification's values bit for bit") {
  const size_t nb = 300;
  const auto blocks = quant_random_blocks(WType::mxfp4, nb, 11);
  std::vector<float> got(nb * 32);
  dequantize_mxfp4(blocks.data(), nb, got.data());
  const auto want = quant_dequantize(WType::mxfp4, blocks.data(), nb);
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) bad += got[i] != want[i];
  CHECK(bad == 0);
  // Every scale byte, including ggml's subnormal rule below 2 (2^(e - 128) exactly).
  for (int e = 0; e < 256; ++e) CHECK(mxfp4_scale(uint8_t(e)) == float(std::ldexp(1.0, e - 128)));
}

TEST_CASE("mxfp4: OpenAI's *_blocks / *_scales repacked into ggml blocks keep every weight") {
  // transformers' convert_moe_packed_tensors: FP4 values, element 2i from the low nibble of byte i and 2i + 1
  // from the high one, times 2^(scale - 127).
  static const float kFp4[16] = {+0.0f, +0.5f, +1.0f, +1.5f, +2.0f, +3.0f, +4.0f, +6.0f,
                                 -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
  const size_t nb = 64;
  std::vector<uint8_t> codes(nb * 16), scales(nb);
  uint32_t s = 12345;
  for (auto& c : codes) c = uint8_t((s = s * 1103515245u + 12345u) >> 16);
  for (auto& c : scales) c = uint8_t(115 + ((s = s * 1103515245u + 12345u) >> 16) % 20);
  std::vector<uint8_t> blocks(nb * 17);
  mxfp4_from_openai(codes.data(), scales.data(), nb, blocks.data());
  std::vector<float> got(nb * 32);
  dequantize_mxfp4(blocks.data(), nb, got.data());
  size_t bad = 0;
  for (size_t b = 0; b < nb; ++b)
    for (size_t i = 0; i < 16; ++i) {
      const double scale = std::ldexp(1.0, int(scales[b]) - 127);
      const uint8_t byte = codes[b * 16 + i];
      bad += got[b * 32 + 2 * i] != float(kFp4[byte & 15] * scale);
      bad += got[b * 32 + 2 * i + 1] != float(kFp4[byte >> 4] * scale);
    }
  CHECK(bad == 0);
}

TEST_CASE("gpt-oss MXFP4 experts: gate_up_proj_blocks' even rows are gate, odd rows up, down_proj's rows kept") {
  static const float kFp4[16] = {+0.0f, +0.5f, +1.0f, +1.5f, +2.0f, +3.0f, +4.0f, +6.0f,
                                 -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
  const int64_t E = 2, rows = 6, cols = 64, bpr = cols / 32;
  std::vector<uint8_t> codes(size_t(E * rows * bpr * 16)), scales(size_t(E * rows * bpr));
  uint32_t s = 99;
  for (auto& c : codes) c = uint8_t((s = s * 1103515245u + 12345u) >> 16);
  for (auto& c : scales) c = uint8_t(118 + ((s = s * 1103515245u + 12345u) >> 16) % 10);
  // transformers' unpacking of row r, element k: block k / 32, byte (k % 32) / 2, low nibble for even k.
  auto openai = [&](int64_t e, int64_t r, int64_t k) {
    const size_t row = size_t(e * rows + r), b = size_t(k / 32);
    const uint8_t byte = codes[(row * bpr + b) * 16 + size_t(k % 32) / 2];
    return float(kFp4[(k % 2) ? byte >> 4 : byte & 15] * std::ldexp(1.0, int(scales[row * bpr + b]) - 127));
  };
  for (int64_t first : {0, 1}) {
    CAPTURE(first);
    const auto blocks = mxfp4_experts_from_openai(codes.data(), scales.data(), E, rows, cols, first, 2);
    const int64_t m = rows / 2;
    REQUIRE(blocks.size() == size_t(E * m * bpr * 17));
    std::vector<float> got(size_t(E * m * cols));
    dequantize_mxfp4(blocks.data(), uint64_t(E * m * bpr), got.data());
    size_t bad = 0;
    for (int64_t e = 0; e < E; ++e)
      for (int64_t j = 0; j < m; ++j)
        for (int64_t k = 0; k < cols; ++k) bad += got[size_t((e * m + j) * cols + k)] != openai(e, first + 2 * j, k);
    CHECK(bad == 0);
  }
}
