// serve::make_slot_pool: the KV pool a server's slots share when no size is asked for.
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "runtime/model/model.hpp"
#include "runtime/serve/slot_pool.hpp"
#include "runtime/session/kv_pool.hpp"
#include "runtime/session/session.hpp"
#include "tests/support/model_fixture.hpp"

using namespace reach;
using reach::test::load_model;
using reach::test::tiny_model;

namespace {
const char* kSlotModel = "--dtype f32 --hidden 128 --intermediate 192 --layers 2 --heads 2 --kv-heads 1 --vocab 300 --seed 5";
}

TEST_CASE("slot pool: the slots' whole contexts shared, unless a windowed layer's ring is smaller") {
  auto model = load_model(tiny_model(kSlotModel));
  SessionOptions o;
  o.context = 200;
  o.cache_type_k = o.cache_type_v = KvType::f16;
  std::string why;

  auto pool = serve::make_slot_pool(*model, o, 3, why);
  REQUIRE(pool);
  CHECK(why.empty());
  // 3 contexts of 200, each in whole blocks: every slot can always hold its whole context.
  const uint32_t B = pool->block_rows();
  REQUIRE(200 % B != 0);   // a context that ends inside a block: the case where rounding matters
  CHECK(pool->pool_rows() == 3 * ((200 + B - 1) / B) * B);
  CHECK(pool->options().cache_type_k == KvType::f16);
  CHECK_FALSE(pool->options().rotated_keys);
  // Its bytes per token are a session's own: the same memory, shared.
  CHECK(pool->bytes_per_token() == Session(*model, o).kv_bytes_per_token());
  o.kv_pool = pool;
  {
    // Three slots fill their whole contexts at once (distinct prompts: no block shared).
    std::vector<std::unique_ptr<Session>> slots;
    for (int s = 0; s < 3; ++s) {
      slots.push_back(std::make_unique<Session>(*model, o));
      std::vector<int32_t> ids(200);
      for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t((i * 7 + size_t(s) * 31 + 1) % 300);
      CHECK_NOTHROW(slots.back()->prefill(ids));
      CHECK(slots.back()->position() == 200);
    }
  }
  o.kv_pool.reset();

  // A windowed layer: its own cache is a ring of window + chunk - 1 rows, a pool would hold all 200.
  o.overrides.attn_window = 32;
  o.chunk = 16;
  CHECK(Session::rings_some_layer(*model, o));
  CHECK_FALSE(serve::make_slot_pool(*model, o, 3, why));
  CHECK(why.find("sliding-window") != std::string::npos);
  // Keeping every position anyway (--full-kv), or a window that spans the context: a pool again.
  o.full_kv = true;
  CHECK_FALSE(Session::rings_some_layer(*model, o));
  CHECK(serve::make_slot_pool(*model, o, 3, why));
  o.full_kv = false;
  o.overrides.attn_window = 190;
  CHECK_FALSE(Session::rings_some_layer(*model, o));

  // ReRoPE reads rotated keys: the pool keeps them.
  SessionOptions rr;
  rr.context = 200;
  rr.overrides.rope_scaling = "rerope";
  rr.overrides.rerope_window = 16;
  CHECK(Session::keeps_rotated_keys(*model, rr));
  auto rpool = serve::make_slot_pool(*model, rr, 2, why);
  REQUIRE(rpool);
  CHECK(rpool->options().rotated_keys);
}
