// embed (kernels/embed.cpp) on the Vulkan device vs a plain C++ gather, through
// tests/support/kernel_check: f32/f16/bf16 tables at every reduction workgroup
// size, out-of-range ids, tables forced into many row chunks, and an f16 table
// larger than maxStorageBufferRange.  Exact: a copy, and f16/bf16 -> f32 is
// exact; out-of-range ids give a row of zeros.
#include <doctest/doctest.h>

#include <algorithm>
#include <climits>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "tests/support/data.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/kernel_check.hpp"

using namespace reach;
using namespace reach::test;

namespace {

const char* const kExactWhy = "a gather: f32 copies and f16/bf16 -> f32 widening are exact";

std::vector<uint16_t> encode(const std::vector<float>& v, WType t) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = t == WType::f16 ? f32_to_f16_bits(v[i]) : f32_to_bf16_bits(v[i]);
  return out;
}
float decode(uint16_t b, WType t) { return t == WType::f16 ? f16_bits_to_f32(b) : bf16_bits_to_f32(b); }

// y[t, :] = table[ids[t], :], zeros for an id outside [0, rows).
std::vector<float> gather(const std::function<float(uint32_t, uint32_t)>& table, uint32_t rows, uint32_t cols,
                          const std::vector<int32_t>& ids) {
  std::vector<float> y(ids.size() * cols);
  for (size_t t = 0; t < ids.size(); ++t) {
    const bool valid = ids[t] >= 0 && uint32_t(ids[t]) < rows;
    for (uint32_t c = 0; c < cols; ++c) y[t * cols + c] = valid ? table(uint32_t(ids[t]), c) : 0.0f;
  }
  return y;
}

std::function<std::string(size_t)> token_col(const std::vector<int32_t>& ids, uint32_t cols) {
  return [&ids, cols](size_t i) { return str("token ", i / cols, " (id ", ids[i / cols], ") col ", i % cols); };
}

void check_embed(Kernels& k, WType type, uint32_t rows, uint32_t cols, const std::vector<int32_t>& ids,
                 const std::string& variant) {
  auto& g = gpu();
  const uint32_t seed = rows * 31 + cols;
  const auto vals = random_floats(size_t(rows) * cols, seed, -3.0f, 3.0f);
  std::vector<float> table(vals.size());   // what the device holds, as f32
  Buffer bt;
  if (type == WType::f32) {
    table = vals;
    bt = g.upload_f32(vals, Arena::weights, "table");
  } else {
    const auto bits = encode(vals, type);
    for (size_t i = 0; i < bits.size(); ++i) table[i] = decode(bits[i], type);
    bt = g.upload_bytes(bits.data(), bits.size() * 2, Arena::weights, "table");
  }
  const uint32_t n = uint32_t(ids.size());
  check_kernel({
      .op = "embed",
      .params = str("dtype=", wtype_name(type), " table=[", rows, ",", cols, "] tokens=", n, " variant=", variant),
      .seed = seed,
      .tol = Tolerance::exact(kExactWhy),
      .device =
          [&] {
            // y starts as 7.0: every element must be written.
            Buffer bi = g.upload_bytes(ids.data(), n * 4);
            Buffer by = g.upload_f32(std::vector<float>(size_t(n) * cols, 7.0f));
            g.run([&](CommandList& cmd) {
              k.embed(cmd, {&bt, 0, type, rows, cols}, bi.range(), n, {&by, 0, n, cols});
            });
            return Values::bits_of(g.download_f32(by, size_t(n) * cols));
          },
      .reference =
          [&] {
            return Values::bits_of(
                gather([&](uint32_t r, uint32_t c) { return table[size_t(r) * cols + c]; }, rows, cols, ids));
          },
      .where = token_col(ids, cols),
  });
}

}  // namespace

TEST_CASE("kernel embed: f32/f16/bf16 tables, out-of-range ids, forced row chunks") {
  auto& g = gpu();
  const bool s16 = g.device->caps().storage_16bit;
  const std::vector<int32_t> ids{0, 36, 5, -1, 37, INT_MIN, INT_MAX, 5, 17, 1};
  for (WType type : {WType::f32, WType::f16, WType::bf16}) {
    if (type != WType::f32 && !s16) continue;
    for (uint32_t wg : reduce_workgroup_sizes()) {
      Kernels k = kernels_with(wg);
      for (uint32_t cols : {1u, 13u, wg + 1, 300u}) check_embed(k, type, 37, cols, ids, "wg=" + std::to_string(wg));
    }
    // A tiny max_binding forces many row chunks (one dispatch each).
    for (uint64_t max_binding : {256ull, 1000ull, 4096ull}) {
      Kernels k = kernels_with(0, max_binding);
      check_embed(k, type, 37, 13, ids, "max_binding=" + std::to_string(max_binding));
      check_embed(k, type, 37, 1, ids, "max_binding=" + std::to_string(max_binding));
    }
  }
  // Misuse.
  Buffer bt = g.zeros(37 * 13 * 4), bi = g.zeros(40), by = g.zeros(10 * 13 * 4);
  CommandList bad(*g.device);
  bad.begin();
  CHECK_THROWS_AS(g.kernels->embed(bad, {&bt, 0, WType::f32, 37, 13}, bi.range(), 10, {&by, 0, 10, 12}), Error);
  CHECK_THROWS_AS(g.kernels->embed(bad, {&bt, 0, WType::f32, 37, 13}, bi.range(), 11, {&by, 0, 10, 13}), Error);
  CHECK_THROWS_AS(g.kernels->embed(bad, {&bt, 0, WType::f32, 38, 13}, bi.range(), 10, {&by, 0, 10, 13}), Error);
  bad.end();
}

TEST_CASE("kernel embed: an f16 table larger than maxStorageBufferRange") {
  auto& g = gpu();
  if (!g.device->caps().storage_16bit) return;
  const uint32_t rows = 70000, cols = 1024;   // 143 MB > 128 MiB (lavapipe's maxStorageBufferRange)
  const Mat probe{nullptr, 0, WType::f16, rows, cols};
  const uint64_t limit = g.kernels->config().max_binding;
  auto chunks = split_rows(probe, limit, g.device->caps().min_storage_buffer_offset_alignment);
  CAPTURE(limit);
  CAPTURE(chunks.size());
  if (probe.bytes() <= limit) MESSAGE("max_binding " << limit << " holds the whole table: only one chunk exercised");
  // A cheap exact pattern: value(r, c) = ((r * 7 + c * 3) % 2001 - 1000) / 8, exact in f16.
  auto value = [](uint32_t r, uint32_t c) { return float(int((r * 7u + c * 3u) % 2001u) - 1000) / 8.0f; };
  std::vector<uint16_t> lut(2001);
  for (uint32_t i = 0; i < 2001; ++i) lut[i] = f32_to_f16_bits(float(int(i) - 1000) / 8.0f);
  Buffer bt = g.allocator->allocate(Arena::weights, probe.bytes(), "big table");
  {
    std::vector<uint16_t> row(size_t(cols) * 4096);
    for (uint32_t r0 = 0; r0 < rows; r0 += 4096) {
      const uint32_t nr = std::min(4096u, rows - r0);
      for (uint32_t r = 0; r < nr; ++r)
        for (uint32_t c = 0; c < cols; ++c) row[size_t(r) * cols + c] = lut[((r0 + r) * 7u + c * 3u) % 2001u];
      g.transfer->upload(bt, uint64_t(r0) * cols * 2, row.data(), uint64_t(nr) * cols * 2);
    }
  }
  std::vector<int32_t> ids{0, 1, int32_t(rows - 1), -3, int32_t(rows), 12345};
  for (const auto& ch : chunks) {   // the first and last row of every chunk
    ids.push_back(int32_t(ch.first_row));
    ids.push_back(int32_t(ch.first_row + ch.rows - 1));
  }
  const uint32_t n = uint32_t(ids.size());
  check_kernel({
      .op = "embed",
      .params = str("dtype=f16 table=[", rows, ",", cols, "] tokens=", n, " chunks=", chunks.size(),
                    " max_binding=", limit, " values ((r*7 + c*3) % 2001 - 1000) / 8"),
      .tol = Tolerance::exact(kExactWhy),
      .device =
          [&] {
            Buffer bi = g.upload_bytes(ids.data(), n * 4);
            Buffer by = g.upload_f32(std::vector<float>(size_t(n) * cols, 7.0f));
            const uint32_t dispatches = g.run([&](CommandList& cmd) {
              g.kernels->embed(cmd, {&bt, 0, WType::f16, rows, cols}, bi.range(), n, {&by, 0, n, cols});
            });
            CHECK(dispatches == chunks.size());
            return Values::bits_of(g.download_f32(by, size_t(n) * cols));
          },
      .reference = [&] { return Values::bits_of(gather(value, rows, cols, ids)); },
      .where = token_col(ids, cols),
  });
  MESSAGE("embed: f16 table of " << probe.bytes() << " bytes in " << chunks.size() << " row chunks (binding limit "
                                 << limit << ")");
}
