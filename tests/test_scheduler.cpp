// The server's Scheduler (runtime/serve/scheduler.hpp) driven directly, no HTTP: prompt-prefix reuse gives the
// same greedy replies as prefilling every prompt whole (a second Scheduler with the prefix cache off is
// the reference), the reuse counters move by the prefix lengths worked out here from the ids, and the
// per-token logprobs are the log-softmax of a plain Session's logits over the same ids.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "runtime/model/model.hpp"
#include "runtime/serve/scheduler.hpp"
#include "runtime/session/kv_pool.hpp"
#include "tests/support/files.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/model_fixture.hpp"

using namespace reach;
using namespace reach::serve;
using namespace reach::test;

namespace {

struct Reply {
  std::string text;
  Usage usage;
  FinishReason finish = FinishReason::stop;
  std::vector<TokenLogprob> logprobs;
};

// A greedy job submitted to s.
std::shared_ptr<Job> submit(Scheduler& s, const std::vector<int32_t>& ids, int64_t max_tokens, int logprobs = -1) {
  auto job = std::make_shared<Job>();
  job->ids = ids;
  job->max_tokens = max_tokens;
  job->sampling.temperature = 0;
  job->logprobs = logprobs;
  REQUIRE(s.submit(job));
  return job;
}

// The job's events until it ends, which must be without an error.
Reply collect(Job& job) {
  Reply r;
  for (;;) {
    std::optional<JobEvent> e = job.pop(120000);
    REQUIRE_MESSAGE(e.has_value(), "no event from the scheduler in 120 s");
    r.text += e->text;
    r.logprobs.insert(r.logprobs.end(), e->logprobs.begin(), e->logprobs.end());
    if (!e->done) continue;
    REQUIRE_MESSAGE(e->error.empty(), e->error);
    r.usage = e->usage;
    r.finish = e->finish;
    return r;
  }
}

Reply run(Scheduler& s, const std::vector<int32_t>& ids, int64_t max_tokens, int logprobs = -1) {
  return collect(*submit(s, ids, max_tokens, logprobs));
}

// The models in models/ use a byte-level vocabulary: id = byte (256 is BOS).
std::vector<int32_t> bytes_of(const std::string& s) {
  std::vector<int32_t> ids;
  for (unsigned char c : s) ids.push_back(int32_t(c));
  return ids;
}

std::string heldout(size_t from, size_t n) {
  std::ifstream in(source_root() / "models" / "heldout.txt", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(all.size() >= from + n);
  return all.substr(from, n);
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<int32_t> head(const std::vector<int32_t>& a, size_t n) { return {a.begin(), a.begin() + ptrdiff_t(n)}; }

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t k = 0;
  while (k < a.size() && k < b.size() && a[k] == b[k]) ++k;
  return k;
}

// What one slot's cache holds after a reply: the prompt and the reply tokens that were decoded (all but
// the last sampled one).  The reply's ids are its bytes (byte-level vocabulary, ASCII replies).
std::vector<int32_t> cached_after(const std::vector<int32_t>& prompt, const Reply& r) {
  std::vector<int32_t> reply = bytes_of(r.text);
  const size_t decoded = size_t(r.usage.completion_tokens) - 1;
  REQUIRE(reply.size() >= decoded);   // an end token (not in the text) can only be the last one
  return concat(prompt, head(reply, decoded));
}

}  // namespace

TEST_CASE("scheduler: prefix reuse gives the replies of whole prefills, and counts what it skipped") {
  auto model = load_model(source_root() / "models" / "rope");
  SessionOptions so;
  so.context = 128;
  so.chunk = 16;   // the shared prefixes below span several chunks
  Scheduler cached(*model, so, 1, 4);
  Scheduler whole(*model, so, 1, 4, false);

  const std::vector<int32_t> bos{256};
  const std::vector<int32_t> a = concat(bos, bytes_of(heldout(0, 60)));
  // Each prompt with what it shares with the one slot's cache: expected reuse min(shared, n - 1).
  const std::vector<std::vector<int32_t>> prompts = {
      a,                                                      // cold
      concat(head(a, 40), bytes_of("Zebras graze.")),         // 40 shared: more than two chunks
      concat(head(a, 40), bytes_of("Zeb")),                   // shares 43 with the last prompt
      head(a, 25),                                            // a strict prefix of the cached ids: 24 reused
      concat(bos, bytes_of("Quiet rivers run deep, and")),    // the BOS only
  };
  const int64_t n_new = 8;
  std::vector<int32_t> slot;   // what the slot holds, worked out from the ids
  uint64_t hits = 0, reused = 0;
  std::vector<int32_t> multi_turn;
  for (size_t i = 0; i <= prompts.size(); ++i) {
    CAPTURE(i);
    // Last: a follow-up that extends the previous prompt and its reply (as a chat's next turn does).
    const std::vector<int32_t> p = i < prompts.size() ? prompts[i] : multi_turn;
    const size_t expect = std::min(common_prefix(slot, p), p.size() - 1);
    if (expect > 0) { ++hits; reused += expect; }
    const Reply got = run(cached, p, n_new);
    const Reply want = run(whole, p, n_new);
    CHECK(got.text == want.text);
    CHECK(got.usage.completion_tokens == want.usage.completion_tokens);
    CHECK(got.usage.prompt_tokens == int64_t(p.size()));
    const SchedulerStats st = cached.stats();
    CHECK(st.prefix_hits == hits);
    CHECK(st.prefix_tokens_reused == reused);
    slot = cached_after(p, got);
    if (i + 1 == prompts.size()) multi_turn = concat(slot, bytes_of(" and then"));
  }
  CHECK(hits >= 4);   // the cases above did reuse (the counts were checked one by one)
  const SchedulerStats off = whole.stats();
  CHECK(off.prefix_hits == 0);
  CHECK(off.prefix_tokens_reused == 0);
}

TEST_CASE("scheduler: a job goes to the free slot that holds the longest prefix of its prompt") {
  auto model = load_model(source_root() / "models" / "rope");
  SessionOptions so;
  so.context = 128;
  Scheduler s(*model, so, 2, 4);
  // No BOS: the prompts share nothing unless made to.
  const std::vector<int32_t> p1 = bytes_of(heldout(0, 50));
  const std::vector<int32_t> p2 = bytes_of("Zebras and lions share the plain at dusk.");
  run(s, p1, 4);   // into one empty slot
  run(s, p2, 4);   // shares nothing with p1: the empty slot, keeping p1's
  CHECK(s.stats().prefix_hits == 0);
  const std::vector<int32_t> p3 = concat(head(p1, 30), bytes_of("Zz"));
  Scheduler whole(*model, so, 1, 4, false);
  CHECK(run(s, p3, 6).text == run(whole, p3, 6).text);
  CHECK(s.stats().prefix_hits == 1);
  CHECK(s.stats().prefix_tokens_reused == 30);
}

TEST_CASE("scheduler: a shared KV pool gives the replies of whole prefills, maps any slot's blocks, and queues") {
  auto model = load_model(source_root() / "models" / "rope");
  SessionOptions so;
  so.context = 128;
  so.chunk = 16;
  Scheduler whole(*model, so, 1, 8, false);
  KvPoolOptions po;
  po.tokens = 160;   // 10 blocks of 16: two jobs of 5 at once, not three
  po.cache_type_k = po.cache_type_v = so.cache_type_k;
  SessionOptions paged = so;
  paged.kv_pool = std::make_shared<KvPool>(*model, po);
  Scheduler s(*model, paged, 3, 8);
  paged.kv_pool.reset();   // the scheduler holds it alone
  const std::vector<int32_t> bos{256};
  // Prompts of 61 tokens and 8 new: 69 rows, 5 blocks each.
  std::vector<std::vector<int32_t>> prompts;
  for (size_t k = 0; k < 3; ++k) prompts.push_back(concat(bos, bytes_of(heldout(100 * k, 60))));
  std::vector<std::shared_ptr<Job>> jobs;
  for (const auto& p : prompts) jobs.push_back(submit(s, p, 8));
  for (size_t k = 0; k < jobs.size(); ++k) {   // all three end well: the third waited for blocks
    CHECK(collect(*jobs[k]).text == run(whole, prompts[k], 8).text);
  }
  // The scheduler publishes the pool's counters after each turn: wait for the turn after the last end.
  SchedulerStats st;
  for (int i = 0; i < 200; ++i) {
    st = s.stats();
    if (st.busy == 0 && st.kv_blocks_used == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CHECK(st.kv_blocks_total == 10);
  CHECK(st.kv_blocks_used == 0);
  CHECK(st.kv_waits >= 1);
  // A prompt sharing 40 tokens with the last job's (finished, its blocks cached; the first two jobs'
  // were evicted for the third's) maps 2 whole blocks.
  const uint64_t tokens_before = st.kv_prefix_hit_tokens;
  const std::vector<int32_t> p = concat(head(prompts[2], 40), bytes_of("Zebras graze."));
  CHECK(run(s, p, 8).text == run(whole, p, 8).text);
  for (int i = 0; i < 200 && s.stats().kv_prefix_hit_tokens == tokens_before; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(s.stats().kv_prefix_hit_tokens == tokens_before + 32);
  CHECK(s.stats().prefix_tokens_reused >= 32);
  // A job cancelled while it prefills gives its blocks back (checked by the pool's counters).
  auto gone = std::make_shared<Job>();
  gone->ids = concat(prompts[1], prompts[2]);   // 122 tokens: 8 chunks of 16
  gone->max_tokens = 4;
  gone->sampling.temperature = 0;
  REQUIRE(s.submit(gone));
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  gone->cancelled = true;
  std::optional<JobEvent> end;
  while ((end = gone->pop(120000)) && !end->done) {}
  REQUIRE(end.has_value());
  for (int i = 0; i < 200 && (s.stats().busy || s.stats().kv_blocks_used); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(s.stats().kv_blocks_used == 0);
  // A job no empty pool can hold fails, saying so, and the scheduler serves on.
  po.tokens = 64;   // 4 blocks
  SessionOptions tiny = so;
  tiny.kv_pool = std::make_shared<KvPool>(*model, po);
  Scheduler small(*model, tiny, 2, 4);
  tiny.kv_pool.reset();
  auto big = std::make_shared<Job>();
  big->ids = prompts[1];
  big->max_tokens = 8;
  big->sampling.temperature = 0;
  REQUIRE(small.submit(big));
  std::optional<JobEvent> e;
  while ((e = big->pop(120000)) && !e->done) {}
  REQUIRE(e.has_value());
  CHECK(e->error.find("the KV pool is full") != std::string::npos);
  CHECK(run(small, head(prompts[2], 30), 4).text == run(whole, head(prompts[2], 30), 4).text);
}

TEST_CASE("scheduler: windowed requests longer than the KV pool run in their window's blocks") {
  auto model = load_model(source_root() / "models" / "rope");
  SessionOptions so;
  so.context = 256;
  so.chunk = 8;
  so.overrides.attn_window = 24;
  so.overrides.attn_sinks = 4;
  Scheduler whole(*model, so, 1, 8, false);
  KvPoolOptions po;
  po.tokens = 80;   // 10 blocks of 8; a windowed request holds 1 + (24 + 8) / 8 + 3 = 8 of them
  po.block_rows = 8;
  po.cache_type_k = po.cache_type_v = so.cache_type_k;
  SessionOptions paged = so;
  paged.kv_pool = std::make_shared<KvPool>(*model, po);
  Scheduler s(*model, paged, 2, 8);
  paged.kv_pool.reset();
  const std::vector<int32_t> bos{256};
  std::vector<std::vector<int32_t>> prompts;   // 121 tokens each and 8 new: 129 rows in a pool of 80
  for (size_t k = 0; k < 2; ++k) prompts.push_back(concat(bos, bytes_of(heldout(200 * k + 50, 120))));
  std::vector<std::shared_ptr<Job>> jobs;
  for (const auto& p : prompts) jobs.push_back(submit(s, p, 8));
  for (size_t k = 0; k < jobs.size(); ++k) {   // both end well: the second waited for the first's blocks
    CHECK(collect(*jobs[k]).text == run(whole, prompts[k], 8).text);
  }
  SchedulerStats st;
  for (int i = 0; i < 200; ++i) {
    st = s.stats();
    if (st.busy == 0 && st.kv_blocks_used == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CHECK(st.kv_blocks_used == 0);
  CHECK(st.kv_waits >= 1);
}

TEST_CASE("scheduler: sliding-window rings limit reuse to what the ring still holds") {
  // models/hwfa: three layers with a 32-token window, one full NoPE layer.  With chunks of 8 a windowed
  // layer keeps a ring of 32 + 8 - 1 = 39 keys, so after writing positions up to P a session can rewind
  // only to about P - 8 (Session::rewind_floor), or to 0.
  auto model = load_model(source_root() / "models" / "hwfa");
  SessionOptions so;
  so.context = 128;
  so.chunk = 8;
  Scheduler cached(*model, so, 1, 4);
  Scheduler whole(*model, so, 1, 4, false);
  REQUIRE(cached.context() == 128);

  const std::vector<int32_t> a = concat({256}, bytes_of(heldout(0, 90)));   // 91 tokens
  const std::vector<int32_t> b = concat(head(a, 50), bytes_of(heldout(300, 40)));   // shares 50: below the floor
  const std::vector<int32_t> c = concat(head(b, 88), bytes_of("Zz!"));     // shares 88 of b's 90 + 3 decoded
  // c wrote up to position 94 (91 + 3 decoded): the floor is 94 - 8 = 86.
  const std::vector<int32_t> d = head(c, 90);                                // strict prefix, 89 reused
  const std::vector<int32_t> e = head(c, 60);                                // strict prefix below the floor
  struct Case { const std::vector<int32_t>* p; uint64_t hits, reused; };
  const std::vector<Case> cases = {{&a, 0, 0}, {&b, 0, 0}, {&c, 1, 88}, {&d, 2, 88 + 89}, {&e, 2, 88 + 89}};
  for (size_t i = 0; i < cases.size(); ++i) {
    CAPTURE(i);
    const Reply got = run(cached, *cases[i].p, 4);
    const Reply want = run(whole, *cases[i].p, 4);
    CHECK(got.text == want.text);
    CHECK(got.usage.completion_tokens == want.usage.completion_tokens);
    CHECK(cached.stats().prefix_hits == cases[i].hits);
    CHECK(cached.stats().prefix_tokens_reused == cases[i].reused);
  }
}

TEST_CASE("scheduler: logprobs are the log-softmax of the logits of a plain prefill of prompt + reply") {
  auto model = load_model(source_root() / "models" / "rope");
  SessionOptions so;
  so.context = 128;
  Scheduler s(*model, so, 1, 4);
  const std::vector<int32_t> prompt = concat({256}, bytes_of(heldout(0, 40)));
  const int top = 5;
  const Reply r = run(s, prompt, 10, top);
  REQUIRE(r.finish == FinishReason::length);
  REQUIRE(r.logprobs.size() == 10);
  std::vector<int32_t> ids = prompt;
  for (const TokenLogprob& t : r.logprobs) ids.push_back(t.id);

  // Reference: one prefill of the prompt and the reply (the GEMM path; the server sampled after decode
  // steps, the mat-vec path: the same sums in another order, hence a tolerance, not equality).
  Session ref(*model, so);
  std::vector<float> logits;
  ref.prefill(ids, &logits);
  const size_t V = size_t(model->config().vocab_size);
  size_t offset = 0;
  for (size_t i = 0; i < r.logprobs.size(); ++i) {
    CAPTURE(i);
    const TokenLogprob& t = r.logprobs[i];
    const float* row = logits.data() + (prompt.size() - 1 + i) * V;
    double z = 0;
    for (size_t v = 0; v < V; ++v) z += std::exp(double(row[v]));
    CHECK(std::fabs(t.logprob - (row[t.id] - std::log(z))) < 2e-3);
    REQUIRE(t.top.size() == size_t(top));
    CHECK(t.top[0].id == t.id);   // greedy: the sampled token is the most likely
    double mass = 0;
    for (size_t j = 0; j < t.top.size(); ++j) {
      if (j) CHECK(t.top[j].logprob <= t.top[j - 1].logprob);
      CHECK(std::fabs(t.top[j].logprob - (row[t.top[j].id] - std::log(z))) < 2e-3);
      mass += std::exp(double(t.top[j].logprob));
    }
    CHECK(mass <= 1.0 + 1e-6);
    CHECK(t.token == std::string(1, char(t.id)));   // the byte-level token's text
    CHECK(t.text_offset == offset);
    offset += t.token.size();
  }
  // Without asking, no entries.
  CHECK(run(s, prompt, 4).logprobs.empty());
}

TEST_CASE("scheduler: a lost device ends the jobs as device_lost, reloads the model and serves the same replies") {
  // A device of its own: a lost device stays lost, and the suite's shared one must not be.
  struct Loaded {
    std::unique_ptr<Device> device;
    std::unique_ptr<Allocator> alloc;
    std::unique_ptr<Model> model;
  } e;
  int loads = 0;
  auto load = [&]() -> Model& {
    e.model.reset();
    e.alloc.reset();
    e.device.reset();
    DeviceOptions opt;
    opt.validation = validation_wanted();
    opt.on_validation = on_validation_message;
    opt.pipeline_cache_dir = "-";
    e.device = Device::create(opt);
    e.alloc = std::make_unique<Allocator>(*e.device);
    e.model = Model::load(*e.device, *e.alloc, source_root() / "models" / "rope", LoadOptions{});
    ++loads;
    return *e.model;
  };
  SessionOptions so;
  so.context = 128;
  Scheduler s(load(), so, 1, 4, true, load);
  const std::vector<int32_t> prompt = bytes_of("Once upon a time");
  const Reply before = run(s, prompt, 24);

  // Lost a few steps into the next job: it ends with an error marked device_lost.
  e.device->faults().arm(FaultPoint::submit, 5, VK_ERROR_DEVICE_LOST);
  auto job = std::make_shared<Job>();
  job->ids = prompt;
  job->max_tokens = 24;
  job->sampling.temperature = 0;
  REQUIRE(s.submit(job));
  JobEvent last;
  for (;;) {
    std::optional<JobEvent> ev = job->pop(120000);
    REQUIRE(ev.has_value());
    if (ev->done) { last = *ev; break; }
  }
  CHECK(last.device_lost);
  CHECK(last.error.find("GPU was lost") != std::string::npos);
  // The reload follows on the scheduler's thread; then the same job gives the same reply.
  for (int i = 0; i < 1200 && s.reloads() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK(s.reloads() == 1);
  CHECK_FALSE(s.loading());
  CHECK(loads == 2);
  CHECK(run(s, prompt, 24).text == before.text);
}
