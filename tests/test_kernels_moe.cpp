// moe_route and prefill's moe_group / moe_gather / moe_scatter (kernels/moe.cpp) on the Vulkan device vs plain
// C++ references: the top-k choice in torch.topk's order (larger first, the lower index on equal logits) with
// many ties, the softmax weights with and without renormalising over the chosen, k = 1 and k = E; rows grouped
// by expert and added back with their weights.  (moe_combine: test_kernels_moe_matvec.cpp.)
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "base/error.hpp"
#include "tests/support/fixtures.hpp"

using namespace reach;
using namespace reach::test;

namespace {

struct Routed {
  std::vector<int32_t> ids;   // [T, k]
  std::vector<double> weights;
};

// The reference: a stable sort by logit, descending (equal logits keep index order), the softmax over all E in
// double, renormalised over the k when asked.
Routed route_reference(const std::vector<float>& logits, uint32_t T, uint32_t E, uint32_t k, bool norm) {
  Routed r;
  for (uint32_t t = 0; t < T; ++t) {
    const float* row = &logits[size_t(t) * E];
    std::vector<int32_t> order(E);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return row[a] > row[b]; });
    const double mx = row[order[0]];
    double all = 0, chosen = 0;
    for (uint32_t e = 0; e < E; ++e) all += std::exp(double(row[e]) - mx);
    for (uint32_t s = 0; s < k; ++s) chosen += std::exp(double(row[order[s]]) - mx);
    for (uint32_t s = 0; s < k; ++s) {
      r.ids.push_back(order[s]);
      r.weights.push_back(std::exp(double(row[order[s]]) - mx) / (norm ? chosen : all));
    }
  }
  return r;
}

std::vector<int32_t> as_ints(const std::vector<float>& v) {
  std::vector<int32_t> out(v.size());
  std::memcpy(out.data(), v.data(), v.size() * 4);
  return out;
}

}  // namespace

TEST_CASE("kernel moe_route: top-k order, ties to the lower index, softmax weights (renormalised or not)") {
  auto& g = gpu();
  std::mt19937 rng(7);
  for (uint32_t E : {4u, 8u, 64u})
    for (uint32_t k : {1u, 2u, 8u})
      for (uint32_t T : {1u, 7u, 70u})
        for (bool norm : {false, true})
          for (bool ties : {false, true}) {
            if (k > E) continue;
            CAPTURE(E);
            CAPTURE(k);
            CAPTURE(T);
            CAPTURE(norm);
            CAPTURE(ties);
            std::normal_distribution<float> nd(0, 2);
            std::vector<float> logits(size_t(T) * E);
            // Ties: logits on a grid of 0.5 over a few values, so most rows have equal logits in the top k.
            for (float& v : logits) v = ties ? std::round(nd(rng) * 0.5f) * 0.5f : nd(rng);
            const Routed want = route_reference(logits, T, E, k, norm);
            Buffer bl = g.upload_f32(logits), ids = g.zeros(size_t(T) * k * 4), w = g.zeros(size_t(T) * k * 4),
                   dense = g.upload_f32(std::vector<float>(size_t(T) * E, 5.0f));   // stale values are overwritten
            g.run([&](CommandList& cmd) {
              g.kernels->moe_route(cmd, Act{&bl, 0, T, E}, k, norm, ids.range(), w.range(), dense.range());
            });
            const auto got_ids = as_ints(g.download_f32(ids, size_t(T) * k));
            const auto got_w = g.download_f32(w, size_t(T) * k);
            const auto got_dense = g.download_f32(dense, size_t(T) * E);
            CHECK(got_ids == want.ids);
            double worst = 0;
            for (size_t i = 0; i < got_w.size(); ++i)
              worst = std::max(worst, std::fabs(got_w[i] - want.weights[i]) / want.weights[i]);
            CHECK(worst < 1e-5);   // f32 exp and sums of at most 64 terms
            for (uint32_t t = 0; t < T; ++t)
              for (uint32_t e = 0; e < E; ++e) {
                float expect = 0;
                for (uint32_t s = 0; s < k; ++s)
                  if (got_ids[t * k + s] == int32_t(e)) expect = got_w[t * k + s];
                CHECK(got_dense[size_t(t) * E + e] == expect);
              }
          }
}

TEST_CASE("kernel moe_group, moe_gather, moe_scatter: rows grouped by expert and added back with their weights") {
  // moe_group: each row's slot among the rows that chose the expert (in row order), the cut group counts;
  // moe_gather: the rows in their slots; moe_scatter: the weighted sum in expert order.
  auto& g = gpu();
  const uint32_t T = 40, first = 5, rows = 20, cap = 32, E = 6, k = 2, H = 10, C = 3;
  std::mt19937 rng(11);
  // Expert 0 takes every row (slot 0), expert 5 none; the second choice is one of 1..4.
  std::vector<int32_t> ids(size_t(T) * k);
  for (uint32_t t = 0; t < T; ++t) ids[t * k] = 0, ids[t * k + 1] = int32_t(1 + rng() % 4);
  std::vector<float> dense(size_t(T) * E, 0.0f);
  for (uint32_t t = 0; t < T; ++t) dense[t * E + 0] = 0.6f, dense[t * E + size_t(ids[t * k + 1])] = 0.4f;
  const std::vector<uint32_t> grids = {7, 4, 1, 7, 4, 1, 3, 4, 1};   // recorded for cap rows: 8 rows a group
  std::vector<float> x(size_t(T) * H), out(size_t(E) * cap * H), y0(size_t(T) * H);
  std::normal_distribution<float> nd(0, 1);
  for (float& v : x) v = nd(rng);
  for (float& v : out) v = nd(rng);
  for (float& v : y0) v = nd(rng);
  Buffer bi = g.upload_bytes(ids.data(), ids.size() * 4), bg = g.upload_bytes(grids.data(), grids.size() * 4),
         bslots = g.zeros(size_t(cap) * E * 4), bargs = g.zeros(size_t(E) * C * 12),
         bx = g.upload_f32(x), bxg = g.zeros(size_t(E) * cap * H * 4), bd = g.upload_f32(dense), bo = g.upload_f32(out),
         by = g.upload_f32(y0);
  g.run([&](CommandList& cmd) {
    g.kernels->moe_group(cmd, bi.range(), first, rows, k, E, cap, bg.range(), C, bslots.range(), bargs.range());
    cmd.barrier();
    g.kernels->moe_gather(cmd, bi.range(), bslots.range(), first, rows, k, E, cap, Act{&bx, 0, T, H}, bxg.range());
    g.kernels->moe_scatter(cmd, bd.range(), bslots.range(), first, rows, E, cap, bo.range(), Act{&by, 0, T, H});
  });
  const auto slots = as_ints(g.download_f32(bslots, size_t(cap) * E));
  const auto args = as_ints(g.download_f32(bargs, size_t(E) * C * 3));
  const auto xg = g.download_f32(bxg, size_t(E) * cap * H);
  const auto y = g.download_f32(by, size_t(T) * H);
  for (uint32_t e = 0; e < E; ++e) {
    CAPTURE(e);
    std::vector<int32_t> want;   // the rows (relative to first) that chose e, in row order
    for (uint32_t t = 0; t < rows; ++t)
      if (ids[(first + t) * k] == int32_t(e) || ids[(first + t) * k + 1] == int32_t(e)) want.push_back(int32_t(t));
    for (size_t i = 0; i < want.size(); ++i) {
      CHECK(slots[size_t(want[i]) * E + e] == int32_t(i));
      for (uint32_t j = 0; j < H; ++j) CHECK(xg[(e * cap + i) * H + j] == x[(first + want[i]) * H + j]);
    }
    const uint32_t n = uint32_t(want.size());
    for (uint32_t c = 0; c < C; ++c) {
      CHECK(args[(e * C + c) * 3 + 0] == int32_t(n ? grids[c * 3] : 0));
      CHECK(args[(e * C + c) * 3 + 1] == int32_t(n ? (n * 4 + cap - 1) / cap : 0));
      CHECK(args[(e * C + c) * 3 + 2] == int32_t(n ? 1 : 0));
    }
  }
  CHECK(slots[(rows - 1) * E + 0] == int32_t(rows - 1));   // expert 0 took every row
  CHECK(args[5 * C * 3 + 0] == 0);                           // expert 5 none
  for (uint32_t t = 0; t < T; ++t)
    for (uint32_t j = 0; j < H; ++j) {
      const size_t i = size_t(t) * H + j;
      if (t < first || t >= first + rows) {
        CHECK(y[i] == y0[i]);   // rows outside the range untouched
        continue;
      }
      // Experts in index order: 0 first, then the row's second choice.
      const uint32_t r = t - first, e2 = uint32_t(ids[t * k + 1]);
      float want = y0[i];
      want += 0.6f * out[(0 * cap + uint32_t(slots[r * E + 0])) * H + j];
      want += 0.4f * out[(e2 * cap + uint32_t(slots[r * E + e2])) * H + j];
      CHECK(std::fabs(y[i] - want) <= 1e-6f * (1 + std::fabs(want)));
    }
}
