// The attention kernel tests' harness (tests/support/attention_harness.hpp).
#include "tests/support/attention_harness.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "tests/support/data.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/kv_quant_reference.hpp"

namespace reach::test {

std::vector<double> inv_freqs(uint32_t pairs, uint32_t rot_dim, double base) {
  std::vector<double> f(pairs);
  for (uint32_t j = 0; j < pairs; ++j) f[j] = std::pow(base, -2.0 * j / double(rot_dim));
  return f;
}

Scheme make_scheme(Kind kind, uint32_t H, uint32_t Hkv, uint32_t d, uint32_t W, uint32_t window, uint32_t sinks) {
  Scheme s;
  const AttentionSpec plain = AttentionSpec::plain(H, Hkv, d);
  AttentionSpec& a = s.spec;
  a = plain;
  RefScheme& r = s.ref;
  r.inv_freq = inv_freqs(d / 2, d, s.base);
  switch (kind) {
    case Kind::rope_rotated: s.name = "rope (rotated cache)"; break;
    case Kind::rope_raw:
      s.name = "rope (raw cache)";
      a = plain.with_raw_cache();
      break;
    case Kind::yarn_af:
      s.name = "yarn-like table (af 1.25, base 500)";
      s.af = 1.25;
      s.base = 500;
      r.inv_freq = inv_freqs(d / 2, d, s.base);
      r.attention_factor = s.af;
      break;
    case Kind::rerope:
      s.name = "rerope";
      a = plain.with_rerope(W).with_logn(32);
      r.method = RefScheme::rerope;
      r.window = W;
      r.logn_train_len = 32;
      break;
    case Kind::leaky: {
      s.name = "leaky_rerope k=4";
      const int k = 4;
      a = plain.with_leaky_rerope(W, int32_t(W * (k - 1))).with_logn(32);
      r.method = RefScheme::leaky_rerope;
      r.window = W;
      r.leaky_k = k;
      r.logn_train_len = 32;
      break;
    }
    case Kind::self_extend: {
      s.name = "self_extend G=4";
      const uint32_t G = 4;
      a = plain.with_self_extend(G, W);
      r.method = RefScheme::self_extend;
      r.window = W;
      r.group = G;
      break;
    }
    case Kind::logn:
      s.name = "logn L=16";
      a = plain.with_logn(16);
      r.logn_train_len = 16;
      break;
    case Kind::key_norm:
      s.name = "key norm";
      a = plain.with_norm(QkNorm::key);
      r.norm = 1;
      break;
    case Kind::query_norm:
      s.name = "query norm (raw cache)";
      a = plain.with_norm(QkNorm::query).with_raw_cache();
      r.norm = 2;
      break;
    case Kind::cos_norm:
      s.name = "cos norm n=i+1 + logn";
      a = plain.with_norm(QkNorm::cos).with_logn(64);
      r.norm = 3;
      r.logn_train_len = 64;
      break;
    case Kind::cos_norm_fixed:
      s.name = "cos norm n=256 (raw cache)";
      a = plain.with_norm(QkNorm::cos, 256).with_raw_cache();
      r.norm = 3;
      r.cos_n = 256;
      break;
    case Kind::window_sinks:
      s.name = "window+sinks";
      a = plain.with_window(window, sinks);
      r.attn_window = window;
      r.attn_sinks = sinks;
      break;
    case Kind::window_rerope:
      s.name = "rerope + window+sinks";
      a = plain.with_rerope(W).with_window(window, sinks);
      r.method = RefScheme::rerope;
      r.window = W;
      r.attn_window = window;
      r.attn_sinks = sinks;
      break;
    case Kind::nope:
      s.name = "nope + logn";
      a = plain.without_rope().with_logn(16);
      r.inv_freq.clear();
      r.logn_train_len = 16;
      break;
    case Kind::alibi:
      s.name = "alibi max_bias 8 (no rope)";
      a = plain.with_alibi(8);
      r.inv_freq.clear();
      r.alibi_max_bias = 8;
      break;
  }
  return s;
}

std::vector<float> make_table(const std::vector<double>& inv, double af, uint32_t positions) {
  std::vector<float> t(size_t(positions) * inv.size() * 2);
  for (uint32_t p = 0; p < positions; ++p)
    for (size_t j = 0; j < inv.size(); ++j) {
      t[(p * inv.size() + j) * 2] = float(std::cos(p * inv[j]) * af);
      t[(p * inv.size() + j) * 2 + 1] = float(std::sin(p * inv[j]) * af);
    }
  return t;
}

double max_abs(const std::vector<float>& a, const std::vector<double>& b, size_t off_a, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; ++i) {
    const double e = std::fabs(double(a[off_a + i]) - b[i]);
    if (!(e <= m)) m = std::isnan(e) ? INFINITY : e;
  }
  return m;
}

std::string Harness::describe() const {
  std::ostringstream o;
  o << s.name << " [" << s.ref.describe() << "] H=" << s.spec.n_heads << " Hkv=" << s.spec.n_kv_heads
    << " d=" << s.spec.head_dim << " n=" << n << " chunks=";
  for (uint32_t c : chunks) o << c << ",";
  o << " decode=" << decode_steps << " tuning(decode Bc=" << tuning.decode_keys << ",lane keys="
    << tuning.decode_lane_keys << ",split=" << tuning.split_min << ",texel=" << tuning.texel
    << ",prefill key block=" << tuning.prefill_key_block
    << ") rotated_keys=" << rotated_keys << " ring=" << ring << " fused=" << fused
    << " sink_logits=" << sink_logits.size() << " kv=" << kv_type_name(k_type) << "/" << kv_type_name(v_type)
    << " block_rows=" << block_rows << " key_calib=" << !key_calib.empty();
  return o.str();
}

Result Harness::run() {
  Gpu& g = gpu();
  Attention att(*g.device, tuning);
  if (!sink_logits.empty()) {
    s.spec = s.spec.with_sink_logits();
    s.ref.sink_logits.assign(sink_logits.begin(), sink_logits.end());
  }
  const AttentionSpec& a = s.spec;
  const uint32_t H = a.n_heads, Hkv = a.n_kv_heads, d = a.head_dim;
  const uint32_t total = n + decode_steps;
  const uint32_t cap = total + 3;
  const uint32_t qd = H * d, kvd = Hkv * d;
  std::vector<float> q = random_floats(size_t(total) * qd, seed, -2.f, 2.f);
  std::vector<float> k = random_floats(size_t(total) * kvd, seed + 1, -1.f, 1.f);
  std::vector<float> v = random_floats(size_t(total) * kvd, seed + 2, -1.f, 1.f);
  // Tables: positions cover the cache and branch-2 query positions.
  const uint32_t positions = cap + uint32_t(std::max(0, a.q2_const)) + 2;
  const uint32_t pairs = a.rope ? a.rotary_dim / 2 : 0;
  Buffer t1buf, t2buf;
  RopeTable t1{}, t2{};
  std::vector<float> tab1;
  if (a.rope) {
    tab1 = make_table(s.ref.inv_freq, s.af, positions);
    t1buf = g.upload_f32(tab1, Arena::weights, "table1");
    t1 = {&t1buf, positions, pairs};
    if (a.branch2_table2) {
      std::vector<double> inv2 = s.ref.inv_freq;
      for (double& f : inv2) f /= s.ref.leaky_k;
      t2buf = g.upload_f32(make_table(inv2, s.af, positions), Arena::weights, "table2");
      t2 = {&t2buf, positions, pairs};
    }
  }
  // The values the reference takes: what the cache reads back (see k_type above).
  const bool k_rot = rotated_keys && wants_rotated_keys(a);
  std::vector<float> k_ref = k, v_ref = v;
  // q4_0 blocks are stored Walsh-Hadamard rotated: values always, keys unless the kernel turns a raw key
  // by its position (the rule as the harness states it, not as the library computes it).
  const bool had_v = v_type == KvType::q4_0;
  const bool had_k = k_type == KvType::q4_0 && !(a.rope && a.cache == KeyCacheMode::raw);
  auto round_k_plain = [&](float* x) {
    had_k ? kv_round_trip_hadamard(k_type, x, d) : kv_round_trip(k_type, x, d);
  };
  // Keys stored centred and smoothed: head h's y as (y - mu) / s (f32, as kv_store), rounded, then back.
  uint32_t round_head = 0;
  auto round_k = [&](float* x) {
    if (key_calib.empty()) return round_k_plain(x);
    const float* mu = key_calib.data() + 4 + size_t(2 * round_head) * d;
    const float* sc = mu + d;
    std::vector<float> z(d);
    for (uint32_t j = 0; j < d; ++j) z[j] = (x[j] - mu[j]) / sc[j];
    round_k_plain(z.data());
    for (uint32_t j = 0; j < d; ++j) x[j] = float(double(z[j]) * sc[j] + mu[j]);
  };
  for (size_t r = 0; r < size_t(total) * Hkv && reference_rounded; ++r) {
    if (had_v) kv_round_trip_hadamard(v_type, v_ref.data() + r * d, d);
    else kv_round_trip(v_type, v_ref.data() + r * d, d);
  }
  if (k_type != KvType::f32 && reference_rounded) {
    const bool key_norm = a.norm == QkNorm::key || a.norm == QkNorm::cos;
    REQUIRE_MESSAGE(!key_norm, "a rounded cache with key norms: no reference");
    REQUIRE_MESSAGE(!k_rot, "a rounded cache with k_rot: no reference");
    const bool rotated = a.rope && a.cache == KeyCacheMode::rotated;
    const uint32_t rp = a.rope ? a.rotary_dim / 2 : 0;
    // A calibrated cache of its own keeps the keys of its first positions exact (a ring's: of its sinks, up
    // to as many), unrounded up to f32.
    auto exact_row = [&](uint32_t m) {
      if (key_calib.empty() || block_rows) return false;
      return m < (ring ? std::min(kKeyCalibExactRows, a.sinks) : kKeyCalibExactRows);
    };
    for (uint32_t m = 0; m < total; ++m)
      for (uint32_t h = 0; h < Hkv; ++h) {
        float* x = k_ref.data() + (size_t(m) * Hkv + h) * d;
        round_head = h;
        if (exact_row(m)) continue;
        if (!rotated) {
          round_k(x);
          continue;
        }
        // As kv_store rotates (f32, the f32 table), rounded, then turned back in double.
        std::vector<float> y(x, x + d);
        const float* cs = tab1.data() + size_t(m) * (a.rotary_dim / 2) * 2;
        for (uint32_t j = 0; j < rp; ++j) {
          y[j] = x[j] * cs[2 * j] - x[j + rp] * cs[2 * j + 1];
          y[j + rp] = x[j + rp] * cs[2 * j] + x[j] * cs[2 * j + 1];
        }
        round_k(y.data());
        for (uint32_t j = 0; j < d; ++j) x[j] = y[j];
        for (uint32_t j = 0; j < rp; ++j) {
          const double c = cs[2 * j], sn = cs[2 * j + 1], n2 = c * c + sn * sn;
          x[j] = float((y[j] * c + y[j + rp] * sn) / n2);
          x[j + rp] = float((y[j + rp] * c - y[j] * sn) / n2);
        }
      }
  }
  // Caches start as NaN (all-ones bytes are NaN in every type: an f32 or f16
  // NaN, or a NaN block scale): reading a key past the live ones poisons the output.
  // A ring cache holds only sinks + ring rows: older keys are overwritten,
  // so a kernel that reads one outside the window gets a wrong (non-NaN)
  // key and the comparison with the reference fails.
  // A paged cache: table entry j (positions [j·B, (j+1)·B)) names pool block table[j].
  const uint32_t table_len = block_rows ? (cap + block_rows - 1) / block_rows : 0;
  const uint32_t pool_blocks = 2 * table_len + 1;
  std::vector<uint32_t> table;
  if (block_rows) {
    std::vector<uint32_t> ids(pool_blocks);
    for (uint32_t b = 0; b < pool_blocks; ++b) ids[b] = b;
    uint64_t x = 0x9e3779b97f4a7c15ull * (seed + 7);   // Fisher-Yates with a fixed LCG: the same table every run
    for (uint32_t b = pool_blocks - 1; b > 0; --b) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      std::swap(ids[b], ids[uint32_t((x >> 33) % (b + 1))]);
    }
    table.assign(ids.begin(), ids.begin() + table_len);
  }
  const uint32_t rows = ring ? a.sinks + ring : block_rows ? pool_blocks * block_rows : cap;
  std::vector<uint8_t> nan_k(size_t(Hkv) * rows * kv_row_bytes(k_type, d), 0xff);
  std::vector<uint8_t> nan_v(size_t(Hkv) * rows * kv_row_bytes(v_type, d), 0xff);
  Buffer kc = g.upload_bytes(nan_k.data(), nan_k.size(), Arena::cache, "k cache");
  Buffer vc = g.upload_bytes(nan_v.data(), nan_v.size(), Arena::cache, "v cache");
  Buffer krc;
  LayerCache cache{&kc, &vc, cap, nullptr, ring, k_type, v_type};
  if (block_rows) cache.block_rows = block_rows, cache.pool_rows = pool_blocks * block_rows;
  Buffer kcalb;
  if (!key_calib.empty()) {
    REQUIRE(key_calib.size() * 4 == key_calib_bytes(a));
    kcalb = g.upload_f32(key_calib, Arena::cache, "key calibration");
    cache.key_calib = kcalb.range();
  }
  REQUIRE(cache.rows(a) == rows);
  if (k_rot) {
    krc = g.upload_bytes(nan_k.data(), nan_k.size(), Arena::cache, "rotated k cache");
    cache.k_rot = &krc;
  }
  uint32_t max_chunk = 1;
  for (uint32_t c : chunks) max_chunk = std::max(max_chunk, c);
  Buffer qb = g.zeros(size_t(max_chunk) * qd * 4, "q");
  Buffer kb = g.zeros(size_t(max_chunk) * kvd * 4, "k");
  Buffer vb = g.zeros(size_t(max_chunk) * kvd * 4, "v");
  Buffer ob = g.zeros(size_t(max_chunk) * qd * 4, "out");
  const uint64_t step_bytes = block_rows ? paged_step_bytes(table_len) : 16;
  Buffer step = g.zeros(step_bytes, "step");
  Buffer sinkb;
  BufferRange sinks{};
  if (!sink_logits.empty()) {
    sinkb = g.upload_f32(sink_logits, Arena::weights, "sink logits");
    sinks = sinkb.range();
  }
  Result res;

  auto upload_rows = [&](uint32_t p0, uint32_t len) {
    std::vector<uint32_t> st = {p0, len, table_len, 0};
    st.insert(st.end(), table.begin(), table.end());
    g.transfer->upload(step, 0, st.data(), st.size() * 4);
    g.transfer->upload(qb, 0, q.data() + size_t(p0) * qd, size_t(len) * qd * 4);
    g.transfer->upload(kb, 0, k.data() + size_t(p0) * kvd, size_t(len) * kvd * 4);
    g.transfer->upload(vb, 0, v.data() + size_t(p0) * kvd, size_t(len) * kvd * 4);
  };
  auto check = [&](uint32_t p0, uint32_t len, const char* what) {
    std::vector<float> out = g.download_f32(ob, size_t(len) * qd);
    std::vector<int64_t> qp(len), kp(p0 + len);
    for (uint32_t t = 0; t < len; ++t) qp[t] = p0 + t;
    for (uint32_t m = 0; m < p0 + len; ++m) kp[m] = m;
    std::vector<float> qs(q.begin() + size_t(p0) * qd, q.begin() + size_t(p0 + len) * qd);
    std::vector<float> ks(k_ref.begin(), k_ref.begin() + size_t(p0 + len) * kvd);
    std::vector<float> vs(v_ref.begin(), v_ref.begin() + size_t(p0 + len) * kvd);
    const std::vector<double> ref = attention_reference(qs, ks, vs, qp, kp, int(H), int(Hkv), int(d), s.ref);
    for (uint32_t t = 0; t < len; ++t) {
      const double e = max_abs(out, std::vector<double>(ref.begin() + size_t(t) * qd, ref.begin() + size_t(t + 1) * qd),
                               size_t(t) * qd, qd);
      res.add(e, std::string(what) + " row at position " + std::to_string(p0 + t));
    }
    return out;
  };

  uint32_t p0 = 0;
  auto prefill_all = [&]() {
    p0 = 0;
    for (uint32_t len : chunks) {
      Act qa{&qb, 0, len, qd}, ka{&kb, 0, len, kvd}, va{&vb, 0, len, kvd}, oa{&ob, 0, len, qd};
      upload_rows(p0, len);
      CommandList cmd(*g.device);
      cmd.begin();
      att.kv_store(cmd, a, t1, step.range(), ka, va, cache);
      cmd.barrier();
      att.prefill(cmd, a, t1, t2, step.range(), qa, cache, oa, len, sinks);
      cmd.end();
      cmd.run();
      check(p0, len, "prefill");
      p0 += len;
    }
  };
  prefill_all();
  const uint32_t p_decode = p0;
  bool first_variant = true;
  for (uint32_t variant : decode_steps ? decode_variants : std::vector<uint32_t>{}) {
    AttentionTuning tv = tuning;
    tv.decode_variant = variant;
    Attention dec(*g.device, tv);
    if (variant == 2 && !dec.lanes_decode_supported()) continue;
    // A ring cannot be rewound: the previous variant's steps overwrote the
    // rows the first decode positions need, so prefill again.
    if (ring && !first_variant) prefill_all();
    first_variant = false;
    const std::string what = std::string(fused ? "fused " : "") + "decode (variant " + std::to_string(variant) + ")";
    Buffer scratch = g.zeros(dec.decode_scratch_bytes(a, cap), "decode scratch");
    Act qa{&qb, 0, 1, qd}, ka{&kb, 0, 1, kvd}, va{&vb, 0, 1, kvd}, oa{&ob, 0, 1, qd};
    CommandList cmd(*g.device);   // recorded once, resubmitted
    cmd.begin();
    if (fused) {
      REQUIRE(dec.fused_decode_supported(a, cache));
      dec.decode_fused(cmd, a, t1, t2, step.range(), qa, ka, va, cache, oa, scratch.range(), sinks);
    } else {
      dec.kv_store(cmd, a, t1, step.range(), ka, va, cache);
      cmd.barrier();
      dec.decode(cmd, a, t1, t2, step.range(), qa, cache, oa, scratch.range(), sinks);
    }
    cmd.end();
    p0 = p_decode;
    for (uint32_t t = 0; t < decode_steps; ++t, ++p0) {
      upload_rows(p0, 1);
      cmd.run();
      check(p0, 1, what.c_str());
    }
  }
  if (block_rows) {
    // Where the rows went: every written position's row in the block its table entry names, in every kv
    // head's slab, and nothing in the pool blocks the table does not name (still all NaN bytes).
    const uint64_t row_bytes = kv_row_bytes(k_type, d);
    std::vector<float> words = g.download_f32(kc, nan_k.size() / 4);
    const uint8_t* bytes = reinterpret_cast<const uint8_t*>(words.data());
    std::vector<bool> mapped(pool_blocks, false);
    for (uint32_t j = 0; j < table_len; ++j) mapped[table[j]] = true;
    auto untouched = [&](uint64_t row) {
      return std::all_of(bytes + row * row_bytes, bytes + (row + 1) * row_bytes, [](uint8_t b) { return b == 0xff; });
    };
    size_t misplaced = 0;
    for (uint32_t h = 0; h < Hkv; ++h) {
      for (uint32_t m = 0; m < total; ++m)
        misplaced += untouched(uint64_t(h) * rows + uint64_t(table[m / block_rows]) * block_rows + m % block_rows);
      for (uint32_t b = 0; b < pool_blocks; ++b)
        for (uint32_t r = 0; r < block_rows && !mapped[b]; ++r)
          misplaced += !untouched(uint64_t(h) * rows + uint64_t(b) * block_rows + r);
    }
    if (misplaced) res.add(INFINITY, std::to_string(misplaced) + " K rows not where the block table puts them");
  }
  return res;
}

void check_within_tolerance(Harness h) {
  const Result r = h.run();
  INFO(h.describe());
  INFO("max abs error " << r.max_err << " at " << r.where << ", tolerance " << kTol);
  CHECK(r.max_err <= kTol);
}

AttentionTuning small_tiles() {
  AttentionTuning t;
  t.texel = 1;
  t.decode_keys = 8;
  t.decode_lane_keys = 2;
  t.split_min = 16;
  t.max_splits = 256;
  t.prefill_key_block = 2;   // several online-softmax blocks per prefill tile (GPUs: 8 of 32)
  return t;
}

}  // namespace reach::test
