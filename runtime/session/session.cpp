#include "runtime/session/session.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <sstream>

#include "base/checked.hpp"
#include "base/error.hpp"
#include "base/settings.hpp"
#include "engine/device.hpp"
#include "engine/transfer.hpp"
#include "kernels/binding.hpp"
#include "kernels/kernels.hpp"
#include "runtime/session/forward.hpp"

namespace reach {

namespace {

std::string tok(uint64_t n) { return std::to_string(n) + " tokens"; }
std::string mib(uint64_t bytes) { return std::to_string(mib_ceil(bytes)) + " MiB"; }
std::string num(double v) {
  std::ostringstream o;
  o.precision(10);
  o << v;
  return o.str();
}

// Bytes one binding of the attention kernels may span: the KV store binds the
// caches and table 1 as storage buffers, prefill / decode (texel variant) bind
// them, table 2 and the rotated keys as R32G32B32A32 texel buffers.
uint64_t attention_binding_limit(const Capabilities& caps, const AttentionTuning& tuning) {
  uint64_t limit = binding_span(caps);
  if (tuning.texel == 2) limit = std::min(limit, saturating_mul({caps.max_texel_buffer_elements, 16}));
  return limit;
}

// The largest Self-Extend window (a multiple of G) whose grouped positions
// floor((context−1)/G) + W − W/G stay below max_rows.
std::string self_extend_advice(int64_t G, uint32_t context, uint64_t max_rows) {
  const int64_t room = int64_t(max_rows) - 1 - (int64_t(context) - 1) / G;
  if (G < 2 || room < G - 1) return "use a smaller context";
  return "use a window of at most " + std::to_string(room / (G - 1) * G);
}

// A cos/sin table of `rows` positions that one binding cannot hold: the error
// names what asked for that many rows (the context, or the scheme's window).
[[noreturn]] void table_too_large(const ResolvedSchemes& s, bool table2, uint64_t rows, uint64_t pairs,
                                  uint32_t context, uint64_t limit) {
  const uint64_t max_rows = limit / std::max<uint64_t>(pairs * 8, 1);
  const std::string need = "a cos/sin table of " + std::to_string(rows) + " positions x " + std::to_string(pairs) +
                           " pairs (" + mib(saturating_mul({rows, pairs, 8})) + "), more than one binding on this "
                           "device holds (" + mib(limit) + ", " + std::to_string(max_rows) + " positions)";
  if (rows <= context)
    throw Error(ErrorCode::out_of_memory, "a context of " + tok(context) + " needs " + need +
                                              ": use a context of at most " + tok(max_rows));
  const RopeScaling& r = s.rope;
  std::string what;
  if (table2) {   // only Leaky ReRoPE has one
    what = "leaky_rerope window·(k−1) = " + std::to_string(r.window) + "·(" + num(r.leaky_k) + "−1) shifts branch 2 by " +
           std::to_string(rows - context) + " positions beyond the context, so it needs " + need +
           ": choose window and k with window·(k−1) at most " +
           std::to_string(max_rows > context ? max_rows - context : 0);
  } else if (r.type == RopeType::self_extend) {
    what = "self_extend group " + std::to_string(r.group) + ", window " + std::to_string(r.window) +
           " puts grouped queries at positions up to " + std::to_string(rows - 1) +
           " (floor((context−1)/G) + W − W/G), so it needs " + need + ": " +
           self_extend_advice(r.group, context, max_rows);
  } else {   // rerope: positions up to the window
    what = std::string(rope_type_name(r.type)) + " window " + std::to_string(r.window) + " needs " + need +
           ": use a window of at most " + std::to_string(max_rows ? max_rows - 1 : 0);
  }
  throw Error(ErrorCode::unsupported, "position schemes: " + what);
}

// What tells rows of the same tokens at the same positions apart between sessions: the position
// scheme (its description, every table's frequencies and factor) and the context it was resolved for.
// KvBlockPool compares the salt exactly, so a collision only costs sharing.
uint64_t scheme_salt(const ResolvedSchemes& s, uint32_t capacity) {
  KvSaltHasher h;
  const std::string d = s.describe();
  h.add(d.data(), d.size());
  h.add(&capacity, sizeof capacity);
  h.add(&s.l_test, sizeof s.l_test);
  for (const RopeFreqs* f : {&s.table1, s.table2 ? &*s.table2 : nullptr, s.table_local ? &*s.table_local : nullptr}) {
    if (!f) continue;
    h.add(f->inv_freq.data(), f->inv_freq.size() * sizeof(double));
    h.add(&f->attention_factor, sizeof f->attention_factor);
  }
  return h.value();
}

uint64_t next_serial() {
  static std::atomic<uint64_t> counter{0};
  return ++counter;
}

// The context a session of these options holds: its own, else the model's up to 4,096 positions.
uint32_t capacity_for(const ModelConfig& c, const SessionOptions& options) {
  return options.context ? options.context
                         : uint32_t(std::min<int64_t>(std::max<int64_t>(c.max_position_embeddings, 1), 4096));
}

uint32_t chunk_of(const SessionOptions& options, uint32_t capacity) {
  return std::max<uint32_t>(1, std::min(options.chunk ? options.chunk : kDefaultPrefillChunk, capacity));
}

// Rows of a layer's ring cache (LayerCache::ring), 0 where it keeps every position: a sliding-window
// layer outside a pool, when window + chunk - 1 rows (every key a chunk of queries still sees) and the
// sinks take less than the context.
uint32_t ring_rows(const AttentionSpec& spec, const SessionOptions& options, uint32_t chunk, uint32_t capacity) {
  const uint64_t ring = uint64_t(spec.window) + chunk - 1;
  const bool use = !options.full_kv && !options.kv_pool && spec.window > 0 && spec.sinks + ring < capacity;
  return use ? uint32_t(ring) : 0;
}

ResolvedSchemes schemes_of(const Model& model, const SessionOptions& options) {
  ModelConfig c = model.config();
  apply_overrides(c, options.overrides);
  const uint32_t capacity = capacity_for(c, options);
  return resolve_schemes(c, capacity, options.l_test > 0 ? options.l_test : capacity);
}

}  // namespace

Session::Session(Model& model, const SessionOptions& options)
    : model_(model), options_(options), config_(model.config()), attention_(model.device()), serial_(next_serial()) {
  apply_overrides(config_, options.overrides);
  const ModelConfig& c = config_;
  capacity_ = capacity_for(c, options);
  chunk_ = chunk_of(options, capacity_);
  const int64_t l_test = options.l_test > 0 ? options.l_test : capacity_;
  schemes_ = resolve_schemes(c, capacity_, l_test);
  activations_ = resolve_activations(model, options.activations, &activations_source_);
  submit_bound_ = options.submit ? *options.submit : submit_bound_from(model.device().settings());

  // Every size below is checked before anything is allocated: the tables and
  // each layer's KV cache against one binding, the total against the memory left.
  const Device& dev = model.device();
  const uint64_t limit = attention_binding_limit(dev.caps(), attention_.tuning());
  const uint64_t rows1 = std::max<uint64_t>(std::max(schemes_.table1_positions, capacity_), 1);
  const uint64_t rows2 = schemes_.table2 ? std::max<uint32_t>(schemes_.table2_positions, 1) : 0;
  const uint64_t pairs = schemes_.table_pairs;
  if (saturating_mul({rows1, pairs, 8}) > limit) table_too_large(schemes_, false, rows1, pairs, capacity_, limit);
  if (saturating_mul({rows2, pairs, 8}) > limit) table_too_large(schemes_, true, rows2, pairs, capacity_, limit);

  // Ring caches for sliding-window layers when they save memory (LayerCache::ring):
  // window + chunk - 1 rows hold every key a chunk of queries still sees.
  for (const auto& spec : schemes_.layers) ring_.push_back(ring_rows(spec, options, chunk_, capacity_));
  ring_lost_.assign(ring_.size(), 0);
  const uint64_t d = uint64_t(c.head_dim);
  for (auto [t, flag] : {std::pair{options.cache_type_k, "--cache-type-k"}, std::pair{options.cache_type_v, "--cache-type-v"}}) {
    std::string why;
    if (!kv_type_fits(t, uint32_t(d), &why)) throw Error(ErrorCode::unsupported, std::string(flag) + " " + why);
  }
  const uint64_t row_k = kv_row_bytes(options.cache_type_k, uint32_t(d));
  const uint64_t row_v = kv_row_bytes(options.cache_type_v, uint32_t(d));
  const uint64_t row_max = std::max(row_k, row_v);
  uint64_t max_rows = 0;
  for (size_t l = 0; l < ring_.size(); ++l) max_rows = std::max<uint64_t>(max_rows, kv_rows(l));
  const uint64_t kv_limit = kv_binding_limit(dev.caps(), attention_.tuning(), options.cache_type_k, options.cache_type_v);
  const uint64_t kv_bytes = saturating_mul({uint64_t(c.n_kv_heads), max_rows, row_max});
  pool_ = options.kv_pool;
  if (pool_) {   // the pool checked its own bindings; its types and rotated keys must serve this session
    const KvPoolOptions& po = pool_->options();
    if (&pool_->model() != &model)
      throw Error(ErrorCode::invalid_argument, "the KV pool belongs to another model: give each model its own pool");
    if (po.cache_type_k != options.cache_type_k || po.cache_type_v != options.cache_type_v)
      throw Error(ErrorCode::invalid_argument,
                  std::string("the KV pool stores K ") + kv_type_name(po.cache_type_k) + " V " +
                      kv_type_name(po.cache_type_v) + " but the session asks for K " +
                      kv_type_name(options.cache_type_k) + " V " + kv_type_name(options.cache_type_v) +
                      ": give the session the pool's cache types");
    for (const auto& spec : schemes_.layers)
      if (wants_rotated_keys(spec) && !po.rotated_keys)
        throw Error(ErrorCode::invalid_argument, "this session's position scheme (" + schemes_.describe() +
                                                     ") reads rotated keys, and the KV pool keeps none: make the "
                                                     "pool with rotated_keys");
  } else if (kv_bytes > kv_limit)
    throw Error(ErrorCode::out_of_memory,
                "a context of " + tok(capacity_) + " needs a KV cache of " + mib(kv_bytes) + " per layer (" +
                    std::to_string(c.n_kv_heads) + " kv heads x " + std::to_string(row_max) +
                    " bytes per token and head), more than one binding on this device holds (" + mib(kv_limit) +
                    "): use a context of at most " + tok(kv_limit / (uint64_t(c.n_kv_heads) * row_max)) +
                    ", or a smaller --cache-type-k / --cache-type-v");
  const uint64_t V = uint64_t(c.vocab_size), n = chunk_;
  uint64_t dec = 0;
  for (const auto& spec : schemes_.layers) dec = std::max(dec, attention_.decode_scratch_bytes(spec, capacity_));
  uint64_t caches = 0;
  for (size_t l = 0; l < schemes_.layers.size(); ++l) {
    const uint64_t per_row = row_k * (wants_rotated_keys(schemes_.layers[l]) ? 2 : 1) + row_v;
    caches = saturating_add(caches, saturating_mul({uint64_t(c.n_kv_heads), kv_rows(l), per_row}));
    kv_bytes_per_token_ += uint64_t(c.n_kv_heads) * per_row;
  }
  if (pool_) caches = 0, kv_bytes_per_token_ = pool_->bytes_per_token();   // the pool's memory, not the session's
  kv_cache_bytes_ = caches;
  const uint64_t rows_local = schemes_.table_local ? std::max<uint32_t>(capacity_, 1) : 0;
  const uint64_t tables = saturating_mul({rows1 + rows2 + rows_local, pairs, 8});
  const uint64_t scratch = saturating_add(ForwardScratch::activation_bytes(c, n), dec);
  model.allocator().require(Arena::cache, saturating_add(saturating_add(caches, tables), scratch),
                            "a session with a context of " + tok(capacity_) + " (KV cache " + mib(caches) +
                                ", cos/sin tables " + mib(tables) + ", activations for chunks of " + tok(n) + " " +
                                mib(scratch) + ")",
                            "use a smaller context");
  model.allocator().require(Arena::readback, ForwardScratch::logits_bytes(c, n),
                            "the logits of chunks of " + tok(n) + " (x vocab_size " + std::to_string(V) + ")",
                            "use a smaller prefill chunk");

  Allocator& A = model.allocator();
  Transfer T(A);
  auto make_table = [&](const RopeFreqs& f, uint32_t positions, Buffer& buf, RopeTable& t, const char* label) {
    positions = std::max<uint32_t>(positions, 1);
    const uint32_t pairs = schemes_.table_pairs;   // kernel_rotary_dim / 2: padding pairs are the identity
    const uint64_t row_floats = uint64_t(pairs) * 2;
    buf = A.allocate(Arena::cache, positions * row_floats * 4, label);
    // Built and uploaded a piece at a time: host memory stays small for any table.
    const uint32_t piece_rows =
        uint32_t(std::clamp<uint64_t>((4u << 20) / std::max<uint64_t>(row_floats, 1), 1, positions));
    std::vector<float> piece(piece_rows * row_floats);
    for (uint32_t p0 = 0, rows = 0; p0 < positions; p0 += rows) {
      rows = std::min(piece_rows, positions - p0);
      fill_rope_rows(f, p0, rows, pairs, piece.data());
      T.upload(buf, p0 * row_floats * 4, piece.data(), rows * row_floats * 4);
    }
    t = {&buf, positions, pairs};
  };
  make_table(schemes_.table1, uint32_t(rows1), rope1_, table1_, "rope table");
  if (schemes_.table2) make_table(*schemes_.table2, uint32_t(rows2), rope2_, table2_, "rope table 2");
  else table2_ = table1_;
  if (schemes_.table_local) make_table(*schemes_.table_local, uint32_t(rows_local), rope_local_, table_local_,
                                       "rope table (local layers)");

  for (int64_t l = 0; l < c.n_layers && !pool_; ++l) {
    const std::string name = "kv cache layer " + std::to_string(l);
    const uint64_t k_bytes = uint64_t(c.n_kv_heads) * kv_rows(size_t(l)) * row_k;
    const uint64_t layer_bytes = k_bytes;   // the rotated keys are stored as the keys are
    k_cache_.push_back(A.allocate(Arena::cache, k_bytes, "k " + name));
    v_cache_.push_back(A.allocate(Arena::cache, uint64_t(c.n_kv_heads) * kv_rows(size_t(l)) * row_v, "v " + name));
    // Dual-branch layers keep rotated keys too (LayerCache::k_rot): the
    // window branch then costs what plain RoPE does, for 50 % more cache.
    k_rot_.push_back(wants_rotated_keys(schemes_.layers[size_t(l)])
                         ? A.allocate(Arena::cache, layer_bytes, "rotated k " + name)
                         : Buffer{});
  }
  // The keys' calibration (q4_0 keys, where a layer's scheme allows it): the pool's, or the session's own.
  bool calibrated_layers = false;
  for (size_t l = 0; l < schemes_.layers.size(); ++l) calibrated_layers |= key_calib_applies(layer_spec(l));
  if (calibrated_layers && pool_ && pool_->key_calibration().enabled()) {
    key_calib_ = &pool_->key_calibration();
  } else if (calibrated_layers && !pool_ && KeyCalibration::wanted(options.cache_type_k, options.calibrate_keys)) {
    own_key_calib_ = KeyCalibration(A, uint32_t(c.n_layers), uint32_t(c.n_kv_heads), uint32_t(c.head_dim), true);
    key_calib_ = &own_key_calib_;
    if (!options.key_calib_file.empty()) own_key_calib_.load(options.key_calib_file);
  }
  fwd_ = ForwardScratch::allocate(A, c, n, "");
  if (pool_) {
    table_.emplace(pool_->blocks());
    prefix_salt_ = scheme_salt(schemes_, capacity_);
    // Blocks behind a window go back only when no layer reads them: every layer windowed.
    const bool all_windowed = !schemes_.layers.empty() &&
                              std::all_of(schemes_.layers.begin(), schemes_.layers.end(),
                                          [](const AttentionSpec& a) { return a.window > 0; });
    if (all_windowed && !options.full_kv)
      for (const AttentionSpec& a : schemes_.layers) {
        drop_window_ = drop_window_ ? std::min(drop_window_, a.window) : a.window;
        drop_sinks_ = std::max(drop_sinks_, a.sinks);
      }
  }
  step_ = A.allocate(Arena::staging, step_range().size, pool_ ? "step params and block table" : "step params");
  decode_scratch_ = A.allocate(Arena::scratch, std::max<uint64_t>(dec, 16), "decode scratch");
  // The fused decode's arrival counters must start at zero (each step leaves them so).
  const std::vector<uint8_t> zeros(size_t(std::max<uint64_t>(dec, 16)), 0);
  T.upload(decode_scratch_, 0, zeros.data(), zeros.size());
  logits_.assign(size_t(V), 0.0f);
}

Session::~Session() {
  // The buffers a decode_async step reads and writes go with the members.
  if (decode_pending()) {
    try {
      async_->wait();
    } catch (const Error&) {   // device lost: nothing runs any more
    }
  }
  if (table_) table_->release_all(pool_->blocks());   // after the step: the pool may hand them out at once
}

BufferRange Session::step_range() const {
  const uint64_t bytes = pool_ ? paged_step_bytes((capacity_ + pool_->block_rows() - 1) / pool_->block_rows())
                               : sizeof(StepParams);
  return step_ ? step_.range(0, bytes) : BufferRange{VK_NULL_HANDLE, 0, bytes};
}

uint64_t Session::kv_cache_bytes() const {
  if (!table_) return kv_cache_bytes_;
  return uint64_t(table_->held()) * pool_->block_rows() * kv_bytes_per_token_;
}

bool Session::keeps_rotated_keys(const Model& model, const SessionOptions& options) {
  const ResolvedSchemes s = schemes_of(model, options);
  return std::any_of(s.layers.begin(), s.layers.end(), [](const AttentionSpec& a) { return reach::wants_rotated_keys(a); });
}

uint32_t Session::context_of(const Model& model, const SessionOptions& options) {
  ModelConfig c = model.config();
  apply_overrides(c, options.overrides);
  return capacity_for(c, options);
}

bool Session::rings_some_layer(const Model& model, const SessionOptions& options) {
  SessionOptions own = options;
  own.kv_pool.reset();
  const ResolvedSchemes s = schemes_of(model, own);
  const uint32_t capacity = context_of(model, own), chunk = chunk_of(own, capacity);
  return std::any_of(s.layers.begin(), s.layers.end(),
                     [&](const AttentionSpec& a) { return ring_rows(a, own, chunk, capacity) > 0; });
}

void Session::need_idle(const char* what) const {
  if (decode_pending())
    throw Error(ErrorCode::invalid_argument, std::string(what) +
                                                 ": a decode_async step is in flight: poll_decode / wait_decode "
                                                 "until it is done first");
}

void Session::rewind(uint32_t n) {
  need_idle("rewind");
  if (n > pos_)
    throw Error(ErrorCode::invalid_argument, "cannot rewind to position " + std::to_string(n) +
                                                 ": the session holds only " + tok(pos_));
  const uint32_t floor = rewind_floor();
  if (n != 0 && n < floor)
    throw Error(ErrorCode::invalid_argument,
                "cannot rewind to position " + std::to_string(n) + ": the sliding-window layers keep their keys in a "
                "ring of about window + prefill chunk positions, and the keys position " + std::to_string(n) +
                " needs were overwritten; rewind to 0 or to at least " + std::to_string(floor) +
                ", or open the session with full_kv (--full-kv) to keep every position");
  pos_ = n;   // cache entries past n are simply overwritten later
  if (n == 0) {   // nothing older is needed again, nor stored with the keys' calibration of its own
    ring_lost_.assign(ring_lost_.size(), 0), dropped_to_ = 0;
    if (key_calib_ == &own_key_calib_) own_key_calib_.restart();
  }
  if (table_) {   // the blocks past n go back to the pool (shared ones stay with their other holders)
    tokens_.resize(std::min<size_t>(tokens_.size(), n));
    table_->rewind(std::min(n, table_->rows()), pool_->blocks());
  }
}

void Session::save_key_calibration(const std::filesystem::path& path) const {
  if (!key_calib_)
    throw Error(ErrorCode::invalid_argument, "no key calibration to save: it takes q4_0 keys (-ctk q4_0), "
                                             "calibration on, and a layer that allows it");
  key_calib_->save(path);
}

uint32_t Session::rewind_floor() const {
  uint32_t floor = 0;
  for (size_t l = 0; l < ring_.size(); ++l) {
    if (!ring_[l]) continue;
    const AttentionSpec& spec = schemes_.layers[l];
    // Position n needs keys [max(sinks, n - window + 1), n) >= sinks: intact when
    // they start at or after ring_lost_, or when there are none (n <= sinks).
    if (ring_lost_[l] <= spec.sinks) continue;
    floor = std::max<uint32_t>(floor, ring_lost_[l] + spec.window - 1);
  }
  // A paged window's dropped blocks: position n needs keys from n - window + 1 on.
  if (dropped_to_) floor = std::max<uint32_t>(floor, dropped_to_ + drop_window_ - 1);
  return floor;
}

uint32_t Session::kv_rows(size_t l) const {
  // LayerCache::rows is the one definition (the buffers may not exist yet).
  return LayerCache{nullptr, nullptr, capacity_, nullptr, ring_[l]}.rows(schemes_.layers[l]);
}

std::string Session::describe_kv_cache() const {
  size_t rings = 0, windowed = 0;
  uint32_t ring_rows = 0;
  for (size_t l = 0; l < ring_.size(); ++l) {
    if (schemes_.layers[l].window) ++windowed;
    if (ring_[l]) {
      ++rings;
      ring_rows = std::max(ring_rows, kv_rows(l));
    }
  }
  if (pool_)
    return "KV cache paged: " + std::to_string(table_->held()) + " blocks held (" + mib(kv_cache_bytes()) +
           ") for up to " + tok(capacity_) + ", " + std::to_string(kv_bytes_per_token_) + " bytes per token" +
           (drop_window_ ? ", blocks behind the window of " + tok(drop_window_) + " given back" : std::string()) +
           "; " + pool_->describe();
  std::string s = "KV cache " + mib(kv_cache_bytes_) + " for " + tok(capacity_) + ", K " +
                  kv_type_name(options_.cache_type_k) + " V " + kv_type_name(options_.cache_type_v) + ", " +
                  std::to_string(kv_bytes_per_token_) + " bytes per token";
  if (rings)
    s += " (" + std::to_string(rings) + " of " + std::to_string(ring_.size()) + " layers are sliding-window rings of " +
         std::to_string(ring_rows) + " rows; --full-kv keeps every position)";
  else if (windowed)
    s += " (every position on all layers, sliding-window ones included)";
  return s;
}

void Session::advance(uint32_t n) {
  if (table_) {   // the step's rows are computed: index the blocks they fill
    tokens_.insert(tokens_.end(), step_ids_.begin(), step_ids_.begin() + std::min<size_t>(n, step_ids_.size()));
    table_->register_full_blocks(tokens_, prefix_salt_, pool_->blocks());
  }
  pos_ += n;
  for (size_t l = 0; l < ring_.size(); ++l)
    if (ring_[l] && pos_ > ring_[l]) ring_lost_[l] = std::max(ring_lost_[l], pos_ - ring_[l]);
}

Session::Program& Session::program(uint32_t n, Output out) {
  auto key = std::make_pair(n, out);
  auto it = programs_.find(key);
  if (it != programs_.end()) return it->second;
  Program p;
  p.n = n;
  p.out = out;
  const bool all_logits = out != Output::last_logits;   // every row through the head
  // A new program starts from the slowest ns per cost unit the others measured (none: the reference).
  double scale = 0;
  for (const auto& [k, q] : programs_)
    if (q.parts->measured()) scale = std::max(scale, q.parts->scale());
  // Cut where the pass costs most: its rows at the end of the context.
  p.parts = std::make_unique<SubmitParts>(
      model_.device(), options_.profile, submit_bound_,
      [this, n, out](CommandList& cmd, ForwardSteps steps) { return record(cmd, n, out, steps); },
      step_costs(n, all_logits, capacity_ - n), scale > 0 ? scale : 1, scale > 0);
  return programs_.emplace(key, std::move(p)).first->second;
}

std::vector<double> Session::step_costs(uint32_t n, bool all_logits, uint32_t pos) const {
  std::vector<uint32_t> keys(n);
  for (uint32_t i = 0; i < n; ++i) keys[i] = pos + i + 1;
  return forward_step_costs(model_, config_, schemes_.layers, keys, all_logits ? n : 1);
}

std::vector<double> Session::run_costs(const SubmitParts& parts, uint32_t n, bool all_logits) const {
  return parts.timed() ? step_costs(n, all_logits, pos_) : std::vector<double>{};
}

ForwardCounts Session::record(CommandList& cmd, uint32_t n, Output out, ForwardSteps steps) {
  const ForwardBuffers b = fwd_.buffers();
  ForwardAttention attention;
  attention.store = [&](CommandList& c, size_t l, const Act& q, const Act& k, const Act& v) {
    record_store_kv(c, l, k, v, &q);
  };
  attention.attend = [&](CommandList& c, size_t l, const Act& q, const Act& o) { record_attend(c, l, q, o, n); };
  if (n == 1 && options_.fused_decode) {
    attention.can_store_attend = [&](size_t l) { return can_store_attend(l); };
    attention.store_attend = [&](CommandList& c, size_t l, const Act& q, const Act& k, const Act& v, const Act& o,
                                 const QkRmsNorm* qk) { record_store_attend(c, l, q, k, v, o, qk); };
  }
  return record_forward(cmd, model_, config_, b, n, out == Output::last_logits ? 1 : n, attention,
                        options_.fused_decode, n == 1 ? activations_.decode : activations_.prefill, steps,
                        out == Output::hidden ? ForwardHead::hidden : ForwardHead::logits);
}

LayerCache Session::layer_cache(size_t l) const {
  LayerCache c;
  if (pool_) {
    c = {&pool_->k(l), &pool_->v(l), capacity_, wants_rotated_keys(schemes_.layers[l]) ? pool_->k_rot(l) : nullptr,
         0, options_.cache_type_k, options_.cache_type_v};
    c.block_rows = pool_->block_rows();
    c.pool_rows = pool_->pool_rows();
  } else {
    c = {&k_cache_[l], &v_cache_[l], capacity_, k_rot_[l] ? &k_rot_[l] : nullptr, ring_[l], options_.cache_type_k,
         options_.cache_type_v};
  }
  if (key_calib_ && key_calib_applies(layer_spec(l))) c.key_calib = key_calib_->layer(l);
  return c;
}

AttentionSpec Session::layer_spec(size_t l) const {
  return schemes_.layers[l].with_sink_logits(bool(model_.layers()[l].attn_sinks));
}

BufferRange Session::layer_sinks(size_t l) const {
  const Buffer& b = model_.layers()[l].attn_sinks;
  return b ? b.range() : BufferRange{};
}

void Session::record_store_kv(CommandList& cmd, size_t l, const Act& k, const Act& v, const Act* q) {
  const bool local = l < schemes_.local.size() && schemes_.local[l];
  const RopeTable& t1 = local ? table_local_ : table1_;
  const AttentionSpec spec = layer_spec(l);
  const LayerCache cache = layer_cache(l);
  if (q && k.rows > 1 && cache.key_calib.buffer != VK_NULL_HANDLE) {   // the kernel checks whether it has work
    attention_.kv_calibrate(cmd, spec, t1, step_range(), *q, k, cache);
    cmd.barrier();
  }
  attention_.kv_store(cmd, spec, t1, step_range(), k, v, cache);
}

void Session::record_attend(CommandList& cmd, size_t l, const Act& q, const Act& o, uint32_t n) {
  const AttentionSpec spec = layer_spec(l);
  const bool local = l < schemes_.local.size() && schemes_.local[l];
  const RopeTable& t1 = local ? table_local_ : table1_;
  const RopeTable& t2 = local ? table_local_ : table2_;
  const BufferRange step = step_range();
  if (n == 1) attention_.decode(cmd, spec, t1, t2, step, q, layer_cache(l), o, decode_scratch_.range(), layer_sinks(l));
  else attention_.prefill(cmd, spec, t1, t2, step, q, layer_cache(l), o, n, layer_sinks(l));
}

bool Session::can_store_attend(size_t l) const {
  return attention_.fused_decode_supported(layer_spec(l), layer_cache(l));
}

void Session::record_store_attend(CommandList& cmd, size_t l, const Act& q, const Act& k, const Act& v, const Act& o,
                                  const QkRmsNorm* qk) {
  const AttentionSpec spec = layer_spec(l);
  const LayerCache cache = layer_cache(l);
  const bool local = l < schemes_.local.size() && schemes_.local[l];
  const RopeTable& t1 = local ? table_local_ : table1_;
  const RopeTable& t2 = local ? table_local_ : table2_;
  attention_.decode_fused(cmd, spec, t1, t2, step_range(), q, k, v, cache, o,
                          decode_scratch_.range(), layer_sinks(l), qk ? *qk : QkRmsNorm{});
}

void Session::record_store_attend_rows(CommandList& cmd, size_t l, const Act& q, const Act& k, const Act& v,
                                       const Act& o, const QkRmsNorm* qk, const BufferRange& steps,
                                       const BufferRange& scratch, const DecodeRows& rows) {
  const bool local = l < schemes_.local.size() && schemes_.local[l];
  const RopeTable& t1 = local ? table_local_ : table1_;
  const RopeTable& t2 = local ? table_local_ : table2_;
  attention_.decode_fused(cmd, layer_spec(l), t1, t2, steps, q, k, v, layer_cache(l), o, scratch, layer_sinks(l),
                          qk ? *qk : QkRmsNorm{}, rows);
}

void Session::record_store_kv_rows(CommandList& cmd, size_t l, const Act& k, const Act& v, const BufferRange& steps,
                                   const DecodeRows& rows) {
  const bool local = l < schemes_.local.size() && schemes_.local[l];
  attention_.kv_store(cmd, layer_spec(l), local ? table_local_ : table1_, steps, k, v, layer_cache(l), rows);
}

void Session::record_attend_rows(CommandList& cmd, size_t l, const Act& q, const Act& o, const BufferRange& steps,
                                 const BufferRange& scratch, const DecodeRows& rows) {
  const bool local = l < schemes_.local.size() && schemes_.local[l];
  const RopeTable& t1 = local ? table_local_ : table1_;
  const RopeTable& t2 = local ? table_local_ : table2_;
  attention_.decode(cmd, layer_spec(l), t1, t2, steps, q, layer_cache(l), o, scratch, layer_sinks(l), rows);
}

bool Session::shares_attention(const Session& other) const {
  return pool_ && pool_ == other.pool_ && &model_ == &other.model_ && prefix_salt_ == other.prefix_salt_ &&
         capacity_ == other.capacity_ && options_.fused_decode == other.options_.fused_decode;
}

std::span<const uint8_t> Session::step_record() const {
  return {static_cast<const uint8_t*>(step_.mapped()), size_t(step_range().size)};
}

void Session::check_ids(std::span<const int32_t> ids) const {
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= config_.vocab_size)
      throw Error(ErrorCode::invalid_argument, "token id " + std::to_string(ids[i]) + " at position " +
                                                   std::to_string(pos_ + i) + " is outside the vocabulary of " +
                                                   std::to_string(config_.vocab_size));
}

// The ids were checked (check_prefill / check_decode) before the first step.
void Session::run_step(const int32_t* ids, uint32_t n, std::vector<float>* all_logits, std::vector<float>* hidden) {
  const uint32_t V = uint32_t(config_.vocab_size);
  Program& p = program(n, hidden ? Output::hidden : all_logits ? Output::all_logits : Output::last_logits);
  write_step_inputs(ids, n);
  if (key_calib_) key_calib_->before_step(n);
  p.parts->run(run_costs(*p.parts, n, all_logits || hidden));
  last_ = p.parts.get();
  const uint32_t rows = all_logits ? n : 1;
  Transfer T(model_.allocator());
  if (hidden) {
    const size_t old = hidden->size(), H = size_t(config_.hidden_size);
    hidden->resize(old + size_t(n) * H);
    T.download(fwd_.logits, 0, hidden->data() + old, uint64_t(n) * H * 4);
  } else if (all_logits) {
    const size_t old = all_logits->size();
    all_logits->resize(old + size_t(rows) * V);
    T.download(fwd_.logits, 0, all_logits->data() + old, uint64_t(rows) * V * 4);
    std::memcpy(logits_.data(), all_logits->data() + old + size_t(rows - 1) * V, size_t(V) * 4);
  } else {
    T.download(fwd_.logits, 0, logits_.data(), uint64_t(V) * 4);
  }
  advance(n);
}

void Session::write_step_inputs(const int32_t* ids, uint32_t n) {
  std::memcpy(fwd_.ids.mapped(), ids, size_t(n) * 4);
  StepParams sp{pos_, n, 0, 0};
  if (table_) {
    const std::vector<uint32_t>& blocks = table_->blocks();
    sp.blocks = uint32_t(blocks.size());
    uint32_t* out = reinterpret_cast<uint32_t*>(static_cast<uint8_t*>(step_.mapped()) + sizeof sp);
    std::memcpy(out, blocks.data(), blocks.size() * 4);
    if (table_->held() < blocks.size()) {
      // Dropped entries read the anchor: the held block after the last dropped one, every row computed.
      const size_t last = size_t(std::find(blocks.rbegin(), blocks.rend(), KvBlockTable::kDropped) - blocks.rbegin());
      const uint32_t anchor = blocks[blocks.size() - last];
      for (size_t i = 0; i < blocks.size(); ++i)
        if (blocks[i] == KvBlockTable::kDropped) out[i] = anchor;
    }
    step_ids_.assign(ids, ids + n);
  }
  std::memcpy(step_.mapped(), &sp, sizeof sp);
}

void Session::check_prefill(std::span<const int32_t> ids) const {
  if (ids.empty())
    throw Error(ErrorCode::invalid_argument, "the prompt is empty: give at least one token (a BOS token counts)");
  if (uint64_t(pos_) + ids.size() > capacity_)
    throw Error(ErrorCode::context_overflow,
                "prompt of " + tok(ids.size()) + " at position " + std::to_string(pos_) +
                    " does not fit the context of " + tok(capacity_) + ": raise the context or shorten the prompt");
  // Every chunk's ids before the first chunk runs: a bad id late in a long
  // prompt must not leave the earlier chunks appended.
  check_ids(ids);
}

void Session::prefill(std::span<const int32_t> ids, std::vector<float>* all_logits) {
  need_idle("prefill");
  check_prefill(ids);
  size_t done = 0;
  last_prefix_rows_ = 0;
  if (!all_logits) done = map_prefix(ids);   // every row's logits: every row computed
  try {
    // A windowed session takes its blocks chunk by chunk, giving back those behind the window as it
    // goes: a prompt longer than the pool fits.
    if (drop_window_)
      check_window_prefill(uint32_t(ids.size() - done));
    else
      reserve_rows(pos_ + uint32_t(ids.size() - done));
  } catch (...) {
    if (done) rewind(0);   // the matched blocks go back: nothing was appended
    throw;
  }
  last_prefix_rows_ = uint32_t(done);
  for (; done < ids.size();) {
    const uint32_t n = uint32_t(std::min<size_t>(chunk_, ids.size() - done));
    if (drop_window_) reserve_rows(pos_ + n);
    // A single token goes through the decode program (it is recorded anyway).
    run_step(ids.data() + done, n, all_logits);
    done += n;
  }
}

void Session::prefill_hidden(std::span<const int32_t> ids, std::vector<float>& hidden) {
  need_idle("prefill_hidden");
  if (config_.vocab_size < config_.hidden_size)
    throw Error(ErrorCode::unsupported, "hidden states are read back through the logits buffer, and this model's "
                                        "vocabulary (" + std::to_string(config_.vocab_size) +
                                        ") is smaller than its hidden size (" + std::to_string(config_.hidden_size) + ")");
  check_prefill(ids);
  reserve_rows(pos_ + uint32_t(ids.size()));
  for (size_t done = 0; done < ids.size();) {
    const uint32_t n = uint32_t(std::min<size_t>(chunk_, ids.size() - done));
    run_step(ids.data() + done, n, nullptr, &hidden);
    done += n;
  }
}

void Session::decode(int32_t id) {
  need_idle("decode");
  check_decode(id);
  reserve_rows(pos_ + 1);
  run_step(&id, 1, nullptr);
}

void Session::decode_async(int32_t id) {
  need_idle("decode_async");
  check_decode(id);
  reserve_rows(pos_ + 1);
  Program& p = program(1, Output::last_logits);
  write_step_inputs(&id, 1);
  if (key_calib_) key_calib_->before_step(1);
  async_ = p.parts.get();
  last_ = async_;
  async_->submit(run_costs(*async_, 1, false));
}

bool Session::poll_decode() {
  if (!decode_pending()) return true;
  if (!async_->poll()) return false;
  read_decode_logits();
  return true;
}

bool Session::wait_decode(uint64_t timeout_ns) {
  if (!decode_pending()) return true;
  if (!async_->wait_for(timeout_ns)) return false;
  read_decode_logits();
  return true;
}

std::vector<KernelTiming> Session::last_timings() const {
  return last_ ? last_->timings() : std::vector<KernelTiming>{};
}

Session::RecordCounts Session::last_counts() const {
  if (!last_) return {};
  return {last_->dispatch_count(), last_->barrier_count(), last_->counts().layer_dispatches,
          last_->counts().layer_barriers, uint32_t(last_->size()), last_->longest_ns()};
}

void Session::record_decode(VkCommandBuffer cmd) {
  if (!cmd) throw Error(ErrorCode::invalid_argument, "record_decode: the command buffer is VK_NULL_HANDLE");
  for (const auto& [key, p] : programs_)
    if (p.parts->owns(cmd))
      throw Error(ErrorCode::invalid_argument, "record_decode: that command buffer belongs to the session "
                                               "(its own programs, decode_async)");
  auto& list = recordings_[cmd];
  if (!list) list = std::make_unique<CommandList>(model_.device(), cmd);
  list->begin();   // reuses its descriptor pools: the buffer is not pending (the host reset it)
  record(*list, 1, Output::last_logits);
  list->barrier();   // results visible to the host and to the host's later commands
}

void Session::forget_recording(VkCommandBuffer cmd) { recordings_.erase(cmd); }

void Session::begin_decode_step(int32_t id) {
  need_idle("begin_decode_step");
  check_decode(id);
  reserve_rows(pos_ + 1);
  write_step_inputs(&id, 1);
  if (key_calib_) key_calib_->before_step(1);
}

void Session::check_decode(int32_t id) const {
  if (uint64_t(pos_) + 1 > capacity_)
    throw Error(ErrorCode::context_overflow, "the context of " + tok(capacity_) +
                                                 " is full: raise the context or generate fewer tokens");
  check_ids(std::span<const int32_t>(&id, 1));
}

void Session::finish_decode_step() {
  need_idle("finish_decode_step");
  read_decode_logits();
}

void Session::begin_batch_row(int32_t id) {
  need_idle("a batched decode step");
  check_decode(id);
  reserve_rows(pos_ + 1);
  write_step_inputs(&id, 1);
}

void Session::finish_batch_row(const float* logits) {
  std::memcpy(logits_.data(), logits, size_t(config_.vocab_size) * 4);
  advance(1);
}

void Session::read_decode_logits() {
  Transfer T(model_.allocator());
  T.download(fwd_.logits, 0, logits_.data(), uint64_t(config_.vocab_size) * 4);
  advance(1);
}

std::vector<int32_t> Session::last_expert_ids(uint32_t rows) const {
  if (!config_.is_moe()) return {};
  const uint64_t k = uint64_t(config_.experts_per_token), stride = ForwardScratch::moe_ids_stride(config_, rows);
  std::vector<int32_t> out(size_t(config_.n_layers * rows * k));
  Transfer T(model_.allocator());
  for (int64_t l = 0; l < config_.n_layers; ++l)
    T.download(fwd_.moe_ids, uint64_t(l) * stride * 4, out.data() + size_t(l) * rows * k, rows * k * 4);
  return out;
}

}  // namespace reach
