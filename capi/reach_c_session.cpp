// The C API (include/reach.h): sessions, sampling, and the frame-budget modes
// (step_async: Session::decode_async on its own program; record_decode into the host's).
#include <cstdio>
#include <sstream>
#include <tuple>

#include "capi/capi_internal.hpp"
#include "base/kv_type.hpp"

static_assert(REACH_KV_F32 == int(reach::KvType::f32) && REACH_KV_F16 == int(reach::KvType::f16) &&
              REACH_KV_Q8_0 == int(reach::KvType::q8_0) && REACH_KV_Q4_0 == int(reach::KvType::q4_0));

using namespace reach;
using namespace reach::capi;

namespace {

std::unique_lock<std::recursive_mutex> lock(reach_session* s) {
  return std::unique_lock<std::recursive_mutex>(s->model->device->mu);
}

// The library checks the ranges (validate_sampler_params: NaN, infinities,
// negative values), naming the field.
SamplerParams sampler_params(const reach_sampling_params& p) {
  SamplerParams sp;
  sp.temperature = p.temperature;
  sp.top_k = p.top_k;
  sp.top_p = p.top_p;
  sp.seed = p.seed;
  validate_sampler_params(sp);
  return sp;
}

std::string number_text(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// The scheme fields of reach_session_params as command-line flags, so that
// they pass the flag parser's checks (NaN, infinities, ranges) and its errors
// name the flag.  Integers: -1 means "not set"; any other negative value is
// an error, not "not set".
std::vector<std::string> scheme_field_flags(const reach_session_params& p) {
  std::vector<std::string> args;
  auto str = [&](const char* flag, const char* v) {
    if (v) args.insert(args.end(), {flag, v});
  };
  auto real = [&](const char* flag, double v) {   // NaN != 0: the parser refuses it
    if (v != 0) args.insert(args.end(), {flag, number_text(v)});
  };
  auto integer = [&](const char* flag, int64_t v) {
    if (v != -1) args.insert(args.end(), {flag, std::to_string(v)});
  };
  str("--rope-scaling", p.rope_scaling);
  real("--rope-factor", p.rope_factor);
  integer("--original-ctx", p.original_ctx);
  integer("--rerope-window", p.rerope_window);
  real("--leaky-k", p.leaky_k);
  integer("--self-extend-group", p.self_extend_group);
  integer("--self-extend-window", p.self_extend_window);
  integer("--logn", p.logn);
  str("--qk-norm", p.qk_norm);
  real("--cos-n", p.cos_n);
  integer("--attn-window", p.attn_window);
  integer("--attn-sinks", p.attn_sinks);
  return args;
}

void need_idle(const reach_session* s) {
  if (s->session().decode_pending())
    throw ApiError{REACH_ERROR_INVALID_STATE,
                   "a step_async is in flight: reach_session_poll / reach_session_wait until done first"};
  if (s->host_pending)
    throw ApiError{REACH_ERROR_INVALID_STATE,
                   "a host-submitted decode is pending: call reach_session_end_decode after it completed"};
}

void need_started(const reach_session* s) {
  need(s->session().position() > 0, REACH_ERROR_INVALID_STATE,
       "the session is empty: prefill a prompt (at least one token, e.g. BOS) before decoding");
}

void need_logits(const reach_session* s) {
  need(s->logits_valid, REACH_ERROR_INVALID_STATE,
       s->session().position() == 0 ? "no logits yet: prefill a prompt first"
                                    : "no logits since the last rewind: prefill or decode a token first");
}

void sample(reach_session* s, int32_t* token, int* is_eos) {
  need(token, REACH_ERROR_INVALID_ARGUMENT, "token is NULL");
  need_idle(s);
  need_logits(s);
  *token = s->gen->sample();
  if (is_eos) *is_eos = s->gen->is_stop(*token);   // the model's EOS ids: no others are given
}

// A call rejected by the checks changes nothing: the previous logits stay
// readable.  Only a failure while the step runs (device lost) drops them.
void decode(reach_session* s, int32_t token) {
  need_idle(s);
  need_started(s);
  s->session().check_decode(token);
  const bool had_logits = s->logits_valid;
  s->logits_valid = false;
  try {
    s->session().decode(token);
  } catch (const Error& e) {
    if (e.code() == ErrorCode::kv_pool_full) s->logits_valid = had_logits;   // refused before it ran
    throw;
  }
  s->logits_valid = true;
}

void prefill(reach_session* s, std::span<const int32_t> ids) {
  need_idle(s);
  s->session().check_prefill(ids);
  const bool had_logits = s->logits_valid;
  s->logits_valid = false;
  try {
    s->session().prefill(ids);
  } catch (const Error& e) {
    // A full pool refuses the step before it runs: the session and its logits are as they were.
    if (e.code() == ErrorCode::kv_pool_full) s->logits_valid = had_logits;
    throw;
  }
  s->logits_valid = true;
  if (s->pool && s->session().last_prefix_rows() > 0) {
    s->pool->prefix_hits++;
    s->pool->prefix_hit_tokens += s->session().last_prefix_rows();
  }
}

// Completes a finished async step (Session::poll_decode / wait_decode); returns whether none is in flight.
bool complete_async(reach_session* s, bool wait, uint64_t timeout_ns) {
  need(!s->host_pending, REACH_ERROR_INVALID_STATE,
       "a host-submitted decode is pending: the host waits for it and calls reach_session_end_decode");
  if (!s->session().decode_pending()) return true;
  if (!(wait ? s->session().wait_decode(timeout_ns) : s->session().poll_decode())) return false;
  s->logits_valid = true;
  return true;
}

// A session on `m` with the checked params: its own KV cache, or `pool`'s blocks (with the pool's cache
// types; the ring of sliding-window layers needs a cache of its own, so they keep every position).
reach_session* create_session(reach_model* m, reach_kv_pool* pool, const reach_session_params& p) {
  const reach_sampling_params sp = read_params(&p.sampling, reach_sampling_default_params(), "reach_session_params.sampling");
  need(p.l_test >= 0, REACH_ERROR_INVALID_ARGUMENT,
       "l_test is " + std::to_string(p.l_test) + ": it must be >= 0 (0 = the context)");
  SessionOptions so;
  so.context = p.context;
  so.chunk = p.chunk;
  so.l_test = p.l_test;
  so.profile = p.profile != 0;
  so.full_kv = p.full_kv != 0;
  for (auto [value, field, out] : {std::tuple{p.cache_type_k, "cache_type_k", &so.cache_type_k},
                                   std::tuple{p.cache_type_v, "cache_type_v", &so.cache_type_v}}) {
    need(value >= REACH_KV_F32 && value <= REACH_KV_Q4_0, REACH_ERROR_INVALID_ARGUMENT,
         std::string(field) + " is " + std::to_string(value) + ": it must be a reach_kv_type (REACH_KV_F32 .. REACH_KV_Q4_0)");
    *out = KvType(value);
  }
  SchemeOverrides& o = so.overrides;
  const std::vector<std::string> fields = scheme_field_flags(p);
  for (size_t i = 0; i < fields.size(); ++i) parse_scheme_flag(fields, i, o);   // each is a known flag
  if (p.scheme_flags) {
    std::istringstream in(p.scheme_flags);
    std::vector<std::string> args;
    for (std::string w; in >> w;) args.push_back(w);
    for (size_t i = 0; i < args.size(); ++i)
      need(parse_scheme_flag(args, i, o), REACH_ERROR_INVALID_ARGUMENT,
           "scheme_flags: unknown flag '" + args[i] + "' (the flags are those named beside the fields of "
           "reach_session_params in reach.h)");
  }
  if (pool) {
    so.kv_pool = pool->pool;
    so.cache_type_k = pool->pool->options().cache_type_k;
    so.cache_type_v = pool->pool->options().cache_type_v;
  }
  std::unique_lock<std::recursive_mutex> l(m->device->mu);
  auto s = std::make_unique<reach_session>();
  s->model = m;
  s->pool = pool;
  GenerationOptions go;
  go.session = so;
  go.sampling = sampler_params(sp);   // checked before the session is made
  s->gen = std::make_unique<Generation>(*m->model, go);
  if (!o.empty()) log(REACH_LOG_INFO, "session scheme: " + s->session().schemes().describe());
  m->sessions++;
  if (pool) pool->sessions++;
  registry_add(s.get(), Kind::session);
  return s.release();
}

}  // namespace

extern "C" {

reach_sampling_params reach_sampling_default_params(void) {
  reach_sampling_params p{};
  p.size = sizeof p;
  SamplerParams d;
  p.temperature = d.temperature;
  p.top_k = d.top_k;
  p.top_p = d.top_p;
  p.seed = d.seed;
  return p;
}

reach_session_params reach_session_default_params(void) {
  reach_session_params p{};
  p.size = sizeof p;
  p.context = 0;
  p.chunk = reach::kDefaultPrefillChunk;
  p.l_test = 0;
  p.original_ctx = p.rerope_window = p.self_extend_group = p.self_extend_window = -1;
  p.logn = p.attn_window = p.attn_sinks = -1;
  p.sampling = reach_sampling_default_params();
  // f16, as every front end (cli/options.hpp kFrontEndKvType); SessionOptions itself keeps f32.
  p.cache_type_k = p.cache_type_v = REACH_KV_F16;
  return p;
}

reach_status reach_session_create(reach_model* model, const reach_session_params* params, reach_session** out) {
  return guard(__func__, [&] {
    need(out, REACH_ERROR_INVALID_ARGUMENT, "out is NULL");
    *out = nullptr;
    auto m = live(model, Kind::model, "model");
    const reach_session_params p = read_params(params, reach_session_default_params(), "reach_session");
    *out = create_session(m.get(), nullptr, p);
  });
}

reach_status reach_session_create_in_pool(reach_kv_pool* pool, const reach_session_params* params,
                                          reach_session** out) {
  return guard(__func__, [&] {
    need(out, REACH_ERROR_INVALID_ARGUMENT, "out is NULL");
    *out = nullptr;
    auto kp = live(pool, Kind::kv_pool, "pool");
    const reach_session_params p = read_params(params, reach_session_default_params(), "reach_session");
    *out = create_session(kp->model, kp.get(), p);
  });
}

reach_status reach_session_free(reach_session* session) {
  if (!session) return REACH_OK;
  return guard(__func__, [&] {
    FreeClaim claim(session, Kind::session, "session");
    reach_model* m = session->model;
    reach_kv_pool* pool = session->pool;
    auto l = lock(session);
    claim.commit();
    delete session;   // its blocks go back to the pool
    m->sessions--;
    if (pool) pool->sessions--;
  });
}

reach_status reach_session_prefill(reach_session* session, const int32_t* tokens, size_t n) {
  return guard(__func__, [&] {
    auto s = live(session, Kind::session, "session");
    need(tokens || n == 0, REACH_ERROR_INVALID_ARGUMENT, "tokens is NULL");
    auto l = lock(s.get());
    prefill(s.get(), std::span<const int32_t>(tokens, n));
  });
}

reach_status reach_session_decode(reach_session* session, int32_t token) {
  return guard(__func__, [&] {
    auto s = live(session, Kind::session, "session");
    auto l = lock(s.get());
    decode(s.get(), token);
  });
}

reach_status reach_session_sample(reach_session* session, int32_t* token, int* is_eos) {
  return guard(__func__, [&] {
    auto s = live(session, Kind::session, "session");
    auto l = lock(s.get());
    sample(s.get(), token, is_eos);
  });
}

reach_status reach_session_step(reach_session* session, int32_t token, int32_t* next, int* is_eos) {
  return guard(__func__, [&] {
    auto s = live(session, Kind::session, "session");
    need(next, REACH_ERROR_INVALID_ARGUMENT, "next is NULL");
    auto l = lock(s.get());
    decode(s.get(), token);
    sample(s.get(), next, is_eos);
  });
}

reach_status reach_session_set_sampling(reach_session* session, const reach_sampling_params* params) {
  return guard(__func__, [&] {
    auto s = live(session, Kind::session, "session");
    need(params, REACH_ERROR_INVALID_ARGUMENT, "params is NULL");
    const reach_sampling_params p = read_params(params, reach_sampling_default_params(), "reach_sampling");
    auto l = lock(s.get());
    s->gen->set_sampling(sampler_params(p));
  });
}

reach_status reach_session_logits(reach_session* session, const float** logits, size_t* count) {
  return guard(__func__, [&] {
    auto s = live(session, Kind::session, "session");
    need(logits && count, REACH_ERROR_INVALID_ARGUMENT, "logits and count must not be NULL");
    auto l = lock(s.get());
    need_idle(s.get());
    need_logits(s.get());
    *logits = s->session().logits().data();
    *count = s->session().logits().size();
  });
}

reach_status reach_session_position(const reach_session* session, uint32_t* position, uint32_t* capacity) {
  return guard(__func__, [&] {
    auto s = live(session, Kind::session, "session");
    auto l = lock(s.get());
    if (position) *position = s->session().position();
    if (capacity) *capacity = s->session().capacity();
  });
}

reach_status reach_session_rewind(reach_session* session, uint32_t position) {
  return guard(__func__, [&] {
    auto s = live(session, Kind::session, "session");
    auto l = lock(s.get());
    need_idle(s.get());
    s->session().rewind(position);
    s->logits_valid = false;
    s->gen->restart_constraint();   // the next sample starts a new document
  });
}

reach_status reach_session_set_json_schema(reach_session* session, const char* schema_json) {
  return reach_session_set_json_schema_ws(session, schema_json, REACH_JSON_COMPACT);
}

reach_status reach_session_set_json_schema_ws(reach_session* session, const char* schema_json, int whitespace) {
  return guard(__func__, [&] {
    auto s = live(session, Kind::session, "session");
    need(whitespace == REACH_JSON_COMPACT || whitespace == REACH_JSON_PRETTY, REACH_ERROR_INVALID_ARGUMENT,
         "whitespace must be REACH_JSON_COMPACT or REACH_JSON_PRETTY");
    const JsonWhitespace ws = whitespace == REACH_JSON_PRETTY ? JsonWhitespace::pretty : JsonWhitespace::compact;
    std::shared_ptr<const JsonConstraint> c;
    if (schema_json && *schema_json) {
      const Tokenizer* tk = s->model->model->tokenizer();
      need(tk, REACH_ERROR_INVALID_STATE, "the model was loaded without a tokenizer: it has no token bytes to constrain");
      c = std::make_shared<JsonConstraint>(JsonGrammar::from_schema_text(schema_json, ws), TokenTrie::for_tokenizer(*tk));
    }
    auto l = lock(s.get());
    s->gen->set_constraint(std::move(c));
  });
}

reach_status reach_session_reset(reach_session* session) { return reach_session_rewind(session, 0); }

// ------------------------------------------------------------------ frame budget

reach_status reach_session_step_async(reach_session* session, int32_t token) {
  return guard(__func__, [&] {
    auto s = live(session, Kind::session, "session");
    auto l = lock(s.get());
    need_idle(s.get());
    need_started(s.get());
    s->session().decode_async(token);   // checks the token and the capacity before it submits
    s->logits_valid = false;
  });
}

reach_status reach_session_poll(reach_session* session, int* done) {
  return guard(__func__, [&] {
    auto s = live(session, Kind::session, "session");
    need(done, REACH_ERROR_INVALID_ARGUMENT, "done is NULL");
    auto l = lock(s.get());
    *done = complete_async(s.get(), false, 0);
  });
}

reach_status reach_session_wait(reach_session* session, uint64_t timeout_ns, int* done) {
  return guard(__func__, [&] {
    auto s = live(session, Kind::session, "session");
    need(done, REACH_ERROR_INVALID_ARGUMENT, "done is NULL");
    auto l = lock(s.get());
    *done = complete_async(s.get(), true, timeout_ns);
  });
}

reach_status reach_session_fence(reach_session* session, uint64_t* vk_fence) {
  return guard(__func__, [&] {
    auto s = live(session, Kind::session, "session");
    need(vk_fence, REACH_ERROR_INVALID_ARGUMENT, "vk_fence is NULL");
    auto l = lock(s.get());
    *vk_fence = (uint64_t)(uintptr_t)s->session().decode_fence();
  });
}

reach_status reach_session_record_decode(reach_session* session, void* vk_command_buffer) {
  return guard(__func__, [&] {
    auto s = live(session, Kind::session, "session");
    need(vk_command_buffer, REACH_ERROR_INVALID_ARGUMENT, "vk_command_buffer is NULL");
    auto cmd = static_cast<VkCommandBuffer>(vk_command_buffer);
    auto l = lock(s.get());
    s->session().record_decode(cmd);   // refuses the session's own command buffers
    if (std::find(s->recorded.begin(), s->recorded.end(), cmd) == s->recorded.end()) s->recorded.push_back(cmd);
  });
}

reach_status reach_session_begin_decode(reach_session* session, int32_t token) {
  return guard(__func__, [&] {
    auto s = live(session, Kind::session, "session");
    auto l = lock(s.get());
    need_idle(s.get());
    need_started(s.get());
    need(!s->recorded.empty(), REACH_ERROR_INVALID_STATE,
         "nothing recorded: call reach_session_record_decode into the host's command buffer first");
    s->session().begin_decode_step(token);
    s->logits_valid = false;
    s->host_pending = true;
  });
}

reach_status reach_session_end_decode(reach_session* session) {
  return guard(__func__, [&] {
    auto s = live(session, Kind::session, "session");
    auto l = lock(s.get());
    need(s->host_pending, REACH_ERROR_INVALID_STATE,
         "no host decode is pending: call reach_session_begin_decode before submitting the recording");
    s->host_pending = false;
    s->session().finish_decode_step();
    s->logits_valid = true;
  });
}

reach_status reach_session_release_recording(reach_session* session, void* vk_command_buffer) {
  return guard(__func__, [&] {
    auto s = live(session, Kind::session, "session");
    auto cmd = static_cast<VkCommandBuffer>(vk_command_buffer);
    auto l = lock(s.get());
    auto it = std::find(s->recorded.begin(), s->recorded.end(), cmd);
    if (it == s->recorded.end()) return;
    s->session().forget_recording(cmd);
    s->recorded.erase(it);
  });
}

}  // extern "C"
