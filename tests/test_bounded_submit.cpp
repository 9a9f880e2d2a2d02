// Bounded submissions: a forward pass cut into several submissions (runtime/session/submit_plan.hpp)
// records the same kernels in the same order, so a prefill chunk, an eval pass (all logits), a decode
// step and a batched decode step give bit-identical logits to the pass in one submission; the cuts follow
// the cost model and the step cap, and move with the times measured on the device.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <numeric>
#include <vector>

#include "base/settings.hpp"
#include "engine/device.hpp"
#include "runtime/model/model.hpp"
#include "runtime/session/decode_batch.hpp"
#include "runtime/session/session.hpp"
#include "runtime/session/submit_parts.hpp"
#include "runtime/session/submit_plan.hpp"
#include "tests/support/data.hpp"
#include "tests/support/model_fixture.hpp"

using namespace reach;
using namespace reach::test;

namespace {

constexpr uint32_t kVocab = 300;
constexpr uint32_t kLayers = 4;
constexpr uint32_t kSteps = kLayers + 2;   // embedding, layers, head
const char* kDense = "--dtype f32 --hidden 64 --intermediate 160 --layers 4 --heads 4 --kv-heads 2 --vocab 300 --seed 3";
const char* kMoe =
    "--dtype f32 --hidden 64 --intermediate 96 --layers 4 --heads 4 --kv-heads 2 --vocab 300 --experts 4 "
    "--experts-per-tok 2 --seed 4";

SessionOptions opts(SubmitBound bound) {
  SessionOptions o;
  o.context = 96;
  o.chunk = 16;
  o.submit = bound;
  return o;
}
const SubmitBound kWhole{0, 0};       // one submission per pass
const SubmitBound kPerStep{0, 1};     // one step per submission

bool same(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
}

// A prompt over several chunks (all logits: the eval path), decode steps, a decode_async step: logits and
// submission counts of a session cut by `bound` against one that is not.
void check_session_bitwise(Model& model, SubmitBound bound, uint32_t want_submissions) {
  Session whole(model, opts(kWhole)), cut(model, opts(bound));
  const auto ids = random_ids(50, kVocab, 11);
  std::vector<float> all_whole, all_cut;
  whole.prefill(std::span<const int32_t>(ids.data(), 37), &all_whole);
  CHECK(whole.last_counts().submissions == 1);
  cut.prefill(std::span<const int32_t>(ids.data(), 37), &all_cut);
  CHECK(cut.last_counts().submissions == want_submissions);
  CHECK(all_cut.size() == size_t(37) * kVocab);
  CHECK(same(all_cut, all_whole));
  // Prompt chunks (last row's logits only), then decode steps.
  whole.prefill(std::span<const int32_t>(ids.data() + 37, 9));
  cut.prefill(std::span<const int32_t>(ids.data() + 37, 9));
  CHECK(cut.last_counts().submissions == want_submissions);
  CHECK(same(cut.logits(), whole.logits()));
  // Same dispatches; each submission ends with a barrier of its own.
  CHECK(cut.last_counts().dispatches == whole.last_counts().dispatches);
  CHECK(cut.last_counts().layer_dispatches == whole.last_counts().layer_dispatches);
  for (size_t t = 46; t < 49; ++t) {
    whole.decode(ids[t]);
    cut.decode(ids[t]);
    CAPTURE(t);
    CHECK(cut.last_counts().submissions == want_submissions);
    CHECK(same(cut.logits(), whole.logits()));
  }
  whole.decode_async(ids[49]);
  cut.decode_async(ids[49]);
  CHECK(cut.decode_pending());
  CHECK(cut.decode_fence() != VK_NULL_HANDLE);
  CHECK(whole.wait_decode(UINT64_MAX));
  CHECK(cut.wait_decode(UINT64_MAX));
  CHECK_FALSE(cut.decode_pending());
  CHECK(cut.position() == 50);
  CHECK(same(cut.logits(), whole.logits()));
}

}  // namespace

TEST_CASE("REACH_SUBMIT_MS and REACH_SUBMIT_LAYERS set the bound; a value not taken keeps the default") {
  auto parse = [](std::map<std::string, std::string> env) {
    return settings_from([&](const char* name) -> const char* {
      auto it = env.find(name);
      return it == env.end() ? nullptr : it->second.c_str();
    });
  };
  const Settings d = parse({});
  CHECK(d.submit_ms == 500);
  CHECK(d.submit_layers == 0);
  CHECK(submit_bound_from(d).target_ms == 500);
  CHECK(submit_bound_from(d).bounded());
  const Settings s = parse({{"REACH_SUBMIT_MS", "0"}, {"REACH_SUBMIT_LAYERS", "3"}});
  CHECK(s.submit_ms == 0);
  CHECK(s.submit_layers == 3);
  CHECK(s.ignored.empty());
  CHECK(submit_bound_from(s).max_steps == 3);
  CHECK_FALSE(submit_bound_from(parse({{"REACH_SUBMIT_MS", "0"}})).bounded());
  for (const char* v : {"-1", "abc", "60001", "1.5"}) {
    CAPTURE(v);
    const Settings bad = parse({{"REACH_SUBMIT_MS", v}});
    CHECK(bad.submit_ms == 500);
    REQUIRE(bad.ignored.size() == 1);
    CHECK(bad.ignored[0].find("REACH_SUBMIT_MS='" + std::string(v) + "' ignored") == 0);
  }
  CHECK(parse({{"REACH_SUBMIT_LAYERS", "0"}}).submit_layers == 0);
  CHECK(parse({{"REACH_SUBMIT_LAYERS", "x"}}).ignored.size() == 1);
}

TEST_CASE("plan_cuts: greedy runs of steps within the budget, never an empty part, at most max_steps") {
  const std::vector<double> costs{1, 2, 3, 4, 0.5};
  CHECK(plan_cuts(costs, 1e9, 0) == std::vector<size_t>{0});
  CHECK(plan_cuts(costs, 5, 0) == std::vector<size_t>{0, 2, 3});   // {1,2} {3} {4,0.5}
  CHECK(plan_cuts(costs, 6, 0) == std::vector<size_t>{0, 3});   // {1,2,3} {4,0.5}: exactly 6 fits
  // A step over the budget on its own is one part: a step is never cut.
  CHECK(plan_cuts(costs, 0.1, 0) == std::vector<size_t>{0, 1, 2, 3, 4});
  CHECK(plan_cuts(costs, 1e9, 1) == std::vector<size_t>{0, 1, 2, 3, 4});
  CHECK(plan_cuts(costs, 1e9, 2) == std::vector<size_t>{0, 2, 4});
  CHECK(plan_cuts(costs, 5, 2) == std::vector<size_t>{0, 2, 3});
}

TEST_CASE("adapt_scale: up at once, down by at most 8x a run, unchanged by nothing measured") {
  CHECK(adapt_scale(1, 3) == 3);
  CHECK(adapt_scale(1, 0.5) == 0.5);
  CHECK(adapt_scale(1, 0.001) == 0.125);
  CHECK(adapt_scale(0.125, 0.001) == 0.125 / 8);
  CHECK(adapt_scale(2, 0) == 2);
  CHECK(adapt_scale(2, -1) == 2);
}

TEST_CASE("forward_step_costs: weights, rows, attention keys and the logits rows each add work") {
  auto model = load_model(tiny_model(kDense));
  const ModelConfig& c = model->config();
  std::vector<AttentionSpec> specs(kLayers);
  const std::vector<uint32_t> one{1}, far{4096};
  const auto decode = forward_step_costs(*model, c, specs, one, 1);
  REQUIRE(decode.size() == kSteps);
  // A decode layer reads its weight matrices once: at least their bytes at the reference rate.
  const LayerWeights& w = model->layers()[0];
  double layer_bytes = 0;
  for (const Mat* m : {&w.q, &w.k, &w.v, &w.o, &w.gate, &w.up, &w.down}) layer_bytes += double(m->bytes());
  CHECK(decode[1] >= layer_bytes / kRefBytesPerNs);
  CHECK(decode[1] <= 2 * layer_bytes / kRefBytesPerNs);
  CHECK(decode[kSteps - 1] >= double(model->lm_head().bytes()) / kRefBytesPerNs);
  // More keys cost more attention: 4 · heads · head_dim FLOPs per key.
  const auto deep = forward_step_costs(*model, c, specs, far, 1);
  CHECK(deep[1] - decode[1] == doctest::Approx(4.0 * 4 * 16 * 4095 / kRefFlopsPerNs));
  CHECK(deep[0] == decode[0]);
  // A window caps the keys a row sees.
  std::vector<AttentionSpec> windowed(kLayers, AttentionSpec{}.with_window(64, 0));
  CHECK(forward_step_costs(*model, c, windowed, far, 1)[1] < deep[1]);
  // Logits of every row cost the head more.
  std::vector<uint32_t> rows(16);
  std::iota(rows.begin(), rows.end(), 1u);
  CHECK(forward_step_costs(*model, c, specs, rows, 16)[kSteps - 1] > forward_step_costs(*model, c, specs, rows, 1)[kSteps - 1]);
}

TEST_CASE("bounded submissions: one step per submission gives the same bits as one submission") {
  auto model = load_model(tiny_model(kDense));
  check_session_bitwise(*model, kPerStep, kSteps);
  check_session_bitwise(*model, SubmitBound{0, 4}, 2);   // {embedding, 3 layers} {layer, head}
}

TEST_CASE("bounded submissions: a mixture of experts (grouped prefill, chosen-slot decode) keeps its bits") {
  auto model = load_model(tiny_model(kMoe));
  check_session_bitwise(*model, kPerStep, kSteps);
}

TEST_CASE("bounded submissions: a time budget below every step cuts at every step") {
  auto model = load_model(tiny_model(kDense));
  // 1 ns: no step fits, so each is a part of its own, whatever the device measures.
  check_session_bitwise(*model, SubmitBound{1e-6, 0}, kSteps);
}

TEST_CASE("bounded submissions: a batched decode step cut per step equals it whole") {
  auto model = load_model(tiny_model(kDense));
  constexpr size_t kSeqs = 3;
  std::vector<std::unique_ptr<Session>> whole, cut;
  std::vector<std::vector<int32_t>> ids;
  for (size_t s = 0; s < kSeqs; ++s) {
    ids.push_back(random_ids(12 + 5 * s, kVocab, 30 + uint32_t(s)));
    whole.push_back(std::make_unique<Session>(*model, opts(kWhole)));
    cut.push_back(std::make_unique<Session>(*model, opts(kPerStep)));
    whole[s]->prefill(std::span<const int32_t>(ids[s].data(), ids[s].size() - 4));
    cut[s]->prefill(std::span<const int32_t>(ids[s].data(), ids[s].size() - 4));
  }
  DecodeBatch batch_whole(*model, kSeqs), batch_cut(*model, kSeqs);
  CHECK(batch_cut.last_submissions() == 0);
  for (size_t t = 0; t < 4; ++t) {
    std::vector<Session*> rw, rc;
    std::vector<int32_t> toks;
    for (size_t s = 0; s < kSeqs; ++s) {
      rw.push_back(whole[s].get());
      rc.push_back(cut[s].get());
      toks.push_back(ids[s][ids[s].size() - 4 + t]);
    }
    batch_whole.step(rw, toks);
    batch_cut.step(rc, toks);
    CHECK(batch_whole.last_submissions() == 1);
    CHECK(batch_cut.last_submissions() == kSteps);
    for (size_t s = 0; s < kSeqs; ++s) {
      CAPTURE(t);
      CAPTURE(s);
      CHECK(same(cut[s]->logits(), whole[s]->logits()));
    }
  }
}

TEST_CASE("bounded submissions: the cuts follow the times the device measures") {
  auto model = load_model(tiny_model(kDense));
  if (!model->device().caps().timestamps) {
    MESSAGE("no timestamps on this device: the static estimate stands (not tested here)");
    return;
  }
  const auto ids = random_ids(16, kVocab, 21);
  // The pass whole, timed (a bound no pass reaches): how long it runs here.
  Session probe(*model, opts(SubmitBound{1e6, 0}));
  // The fastest of a few runs (the first ones also warm the device up).
  double whole_ns = 1e18;
  for (int i = 0; i < 4; ++i) {
    probe.reset();
    probe.prefill(ids);
    CHECK(probe.last_counts().submissions == 1);
    whole_ns = std::min(whole_ns, probe.last_counts().longest_submit_ns);
  }
  REQUIRE(whole_ns > 0);
  REQUIRE(whole_ns < 1e18);
  // A target of a quarter of that: the reference estimate of this tiny model is far below it (one part),
  // but once timed the pass is cut into several.
  const SubmitBound quarter{whole_ns / 4 / 1e6, 0};
  Session whole(*model, opts(kWhole)), cut(*model, opts(quarter));
  whole.prefill(ids);
  cut.prefill(ids);
  const uint32_t first = cut.last_counts().submissions;
  CHECK(cut.last_counts().longest_submit_ns > 0);
  uint32_t later = first;
  for (int i = 0; i < 3; ++i) {
    cut.reset();
    cut.prefill(ids);
    later = cut.last_counts().submissions;
    CHECK(same(cut.logits(), whole.logits()));
  }
  // What the first run was planned with: the reference estimate of the chunk at the end of the context.
  std::vector<uint32_t> keys(16);
  std::iota(keys.begin(), keys.end(), 96u - 16 + 1);
  const auto est = forward_step_costs(*model, model->config(), cut.schemes().layers, keys, 1);
  const double est_ns = std::accumulate(est.begin(), est.end(), 0.0);
  CAPTURE(whole_ns);
  CAPTURE(est_ns);
  CAPTURE(first);
  MESSAGE("whole pass " << whole_ns / 1e6 << " ms (estimated " << est_ns / 1e6 << " ms on the reference); target "
          << quarter.target_ms << " ms: " << first << " submission(s) first, then " << later << ", the longest "
          << cut.last_counts().longest_submit_ns / 1e6 << " ms");
  if (est_ns <= quarter.target_ms * 1e6 * kSubmitFill) CHECK(first == 1);
  CHECK(later >= 2);
  CHECK(later >= first);
}

// SubmitParts over a stand-in pass whose steps each fill 16 MiB: its estimated costs are chosen far from
// what the device measures, so the cuts must move, one way or the other, after the first run.
TEST_CASE("SubmitParts: the measured times merge an over-cut pass and cut an under-cut one; the fence stays") {
  auto model = load_model(tiny_model(kDense));
  Device& device = model->device();
  if (!device.caps().timestamps) return;   // nothing measured: the cuts never change
  constexpr size_t kFillSteps = 6;
  constexpr uint64_t kBytes = 16u << 20;
  std::vector<Buffer> bufs;
  for (size_t i = 0; i < kFillSteps; ++i) bufs.push_back(model->allocator().allocate(Arena::scratch, kBytes, "fill"));
  auto record = [&](CommandList& cmd, ForwardSteps steps) {
    for (size_t i = steps.first; i < std::min(steps.end, kFillSteps); ++i) cmd.fill(bufs[i].range(0, kBytes), uint32_t(i));
    return ForwardCounts{};
  };
  SUBCASE("estimated far too slow: one list per step first, then one list") {
    // 1e12 units each, 1 s target: the reference says no two steps fit; the device fills them in ms.
    const std::vector<double> costs(kFillSteps, 1e12);
    SubmitParts parts(device, false, SubmitBound{1000, 0}, record, costs);
    CHECK(parts.size() == kFillSteps);
    const VkFence fence = parts.fence();
    parts.run(costs);
    CHECK(parts.measured());
    CHECK(parts.longest_ns() > 0);
    CHECK(parts.scale() < 1e-3);
    parts.run(costs);   // recorded again before it is submitted
    CHECK(parts.size() == 1);
    CHECK(parts.fence() == fence);   // the last list (its fence) is kept through the new cuts
  }
  SUBCASE("estimated far too fast: one list first, then cut") {
    // 1 unit (1 ns on the reference) each, 1 ms target: all fit at first; a 16 MiB fill takes longer than 0.7 ms.
    const std::vector<double> costs(kFillSteps, 1);
    SubmitParts parts(device, false, SubmitBound{1, 0}, record, costs);
    CHECK(parts.size() == 1);
    const VkFence fence = parts.fence();
    parts.run(costs);
    CAPTURE(parts.longest_ns());
    CHECK(parts.scale() > 1);
    parts.run(costs);
    CHECK(parts.size() == kFillSteps);
    CHECK(parts.fence() == fence);
  }
  SUBCASE("no time bound: one list, never timed") {
    SubmitParts parts(device, false, SubmitBound{0, 0}, record, std::vector<double>(kFillSteps, 1e12));
    CHECK(parts.size() == 1);
    CHECK_FALSE(parts.timed());
    parts.run({});
    CHECK(parts.longest_ns() < 0);
  }
}
