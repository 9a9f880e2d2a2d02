// The C API (include/reach.h): sessions, sampling, and the frame-budget modes
// (step_async: Session::decode_async on its own program; record_decode into the host's).
#include <sstream>

#include "capi/capi_internal.hpp"

using namespace reach;
using namespace reach::capi;

namespace {

std::unique_lock<std::recursive_mutex> lock(reach_session* s) {
  return std::unique_lock<std::recursive_mutex>(s->model->device->mu);
}

SamplerParams sampler_params(const reach_sampling_params& p) {
  need(p.top_p > 0, REACH_ERROR_INVALID_ARGUMENT, "top_p must be > 0 (>= 1 turns the nucleus cut off)");
  SamplerParams sp;
  sp.temperature = p.temperature;
  sp.top_k = p.top_k;
  sp.top_p = p.top_p;
  sp.seed = p.seed;
  return sp;
}

void need_idle(const reach_session* s) {
  if (s->s->decode_pending())
    throw ApiError{REACH_ERROR_INVALID_STATE,
                   "a step_async is in flight: reach_session_poll / reach_session_wait until done first"};
  if (s->host_pending)
    throw ApiError{REACH_ERROR_INVALID_STATE,
                   "a host-submitted decode is pending: call reach_session_end_decode after it completed"};
}

void need_started(const reach_session* s) {
  need(s->s->position() > 0, REACH_ERROR_INVALID_STATE,
       "the session is empty: prefill a prompt (at least one token, e.g. BOS) before decoding");
}

void need_logits(const reach_session* s) {
  need(s->logits_valid, REACH_ERROR_INVALID_STATE,
       s->s->position() == 0 ? "no logits yet: prefill a prompt first"
                             : "no logits since the last rewind: prefill or decode a token first");
}

void sample(reach_session* s, int32_t* token, int* is_eos) {
  need(token, REACH_ERROR_INVALID_ARGUMENT, "token is NULL");
  need_idle(s);
  need_logits(s);
  *token = s->sampler->sample(s->s->logits());
  if (is_eos) {
    const auto& e = s->model->model->eos_ids();
    *is_eos = std::find(e.begin(), e.end(), *token) != e.end();
  }
}

void decode(reach_session* s, int32_t token) {
  need_idle(s);
  need_started(s);
  s->logits_valid = false;
  s->s->decode(token);
  s->logits_valid = true;
}

// Completes a finished async step (Session::poll_decode / wait_decode); returns whether none is in flight.
bool complete_async(reach_session* s, bool wait, uint64_t timeout_ns) {
  need(!s->host_pending, REACH_ERROR_INVALID_STATE,
       "a host-submitted decode is pending: the host waits for it and calls reach_session_end_decode");
  if (!s->s->decode_pending()) return true;
  if (!(wait ? s->s->wait_decode(timeout_ns) : s->s->poll_decode())) return false;
  s->logits_valid = true;
  return true;
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
  return p;
}

reach_status reach_session_create(reach_model* model, const reach_session_params* params, reach_session** out) {
  return guard(__func__, [&] {
    need(out, REACH_ERROR_INVALID_ARGUMENT, "out is NULL");
    *out = nullptr;
    reach_model* m = live(model, Kind::model, "model");
    const reach_session_params p = read_params(params, reach_session_default_params(), "reach_session");
    const reach_sampling_params sp =
        read_params(&p.sampling, reach_sampling_default_params(), "reach_session_params.sampling");
    SessionOptions so;
    so.context = p.context;
    so.chunk = p.chunk;
    so.l_test = p.l_test;
    so.profile = p.profile != 0;
    SchemeOverrides& o = so.overrides;
    if (p.rope_scaling) o.rope_scaling = std::string(p.rope_scaling);
    if (p.rope_factor != 0) o.rope_factor = p.rope_factor;
    if (p.original_ctx >= 0) o.original_ctx = p.original_ctx;
    if (p.rerope_window >= 0) o.rerope_window = p.rerope_window;
    if (p.leaky_k != 0) o.leaky_k = p.leaky_k;
    if (p.self_extend_group >= 0) o.se_group = p.self_extend_group;
    if (p.self_extend_window >= 0) o.se_window = p.self_extend_window;
    if (p.logn >= 0) o.logn = p.logn;
    if (p.qk_norm) o.qk_norm = std::string(p.qk_norm);
    if (p.cos_n != 0) o.cos_n = p.cos_n;
    if (p.attn_window >= 0) o.attn_window = p.attn_window;
    if (p.attn_sinks >= 0) o.attn_sinks = p.attn_sinks;
    if (p.scheme_flags) {
      std::istringstream in(p.scheme_flags);
      std::vector<std::string> args;
      for (std::string w; in >> w;) args.push_back(w);
      for (size_t i = 0; i < args.size(); ++i)
        need(parse_scheme_flag(args, i, o), REACH_ERROR_INVALID_ARGUMENT,
             "scheme_flags: unknown flag '" + args[i] + "' (the flags are those named beside the fields of "
             "reach_session_params in reach.h)");
    }
    std::unique_lock<std::recursive_mutex> l(m->device->mu);
    auto s = std::make_unique<reach_session>();
    s->model = m;
    s->sampler = std::make_unique<Sampler>(sampler_params(sp));
    s->s = std::make_unique<Session>(*m->model, so);
    if (!o.empty()) log(REACH_LOG_INFO, "session scheme: " + s->s->schemes().describe());
    m->sessions++;
    registry_add(s.get(), Kind::session);
    *out = s.release();
  });
}

reach_status reach_session_free(reach_session* session) {
  if (!session) return REACH_OK;
  return guard(__func__, [&] {
    reach_session* s = live(session, Kind::session, "session");
    reach_model* m = s->model;
    auto l = lock(s);
    registry_remove(s);
    delete s;
    m->sessions--;
  });
}

reach_status reach_session_prefill(reach_session* session, const int32_t* tokens, size_t n) {
  return guard(__func__, [&] {
    reach_session* s = live(session, Kind::session, "session");
    need(tokens || n == 0, REACH_ERROR_INVALID_ARGUMENT, "tokens is NULL");
    auto l = lock(s);
    need_idle(s);
    s->logits_valid = false;
    s->s->prefill(std::span<const int32_t>(tokens, n));
    s->logits_valid = true;
  });
}

reach_status reach_session_decode(reach_session* session, int32_t token) {
  return guard(__func__, [&] {
    reach_session* s = live(session, Kind::session, "session");
    auto l = lock(s);
    decode(s, token);
  });
}

reach_status reach_session_sample(reach_session* session, int32_t* token, int* is_eos) {
  return guard(__func__, [&] {
    reach_session* s = live(session, Kind::session, "session");
    auto l = lock(s);
    sample(s, token, is_eos);
  });
}

reach_status reach_session_step(reach_session* session, int32_t token, int32_t* next, int* is_eos) {
  return guard(__func__, [&] {
    reach_session* s = live(session, Kind::session, "session");
    need(next, REACH_ERROR_INVALID_ARGUMENT, "next is NULL");
    auto l = lock(s);
    decode(s, token);
    sample(s, next, is_eos);
  });
}

reach_status reach_session_set_sampling(reach_session* session, const reach_sampling_params* params) {
  return guard(__func__, [&] {
    reach_session* s = live(session, Kind::session, "session");
    need(params, REACH_ERROR_INVALID_ARGUMENT, "params is NULL");
    const reach_sampling_params p = read_params(params, reach_sampling_default_params(), "reach_sampling");
    auto l = lock(s);
    s->sampler = std::make_unique<Sampler>(sampler_params(p));
  });
}

reach_status reach_session_logits(reach_session* session, const float** logits, size_t* count) {
  return guard(__func__, [&] {
    reach_session* s = live(session, Kind::session, "session");
    need(logits && count, REACH_ERROR_INVALID_ARGUMENT, "logits and count must not be NULL");
    auto l = lock(s);
    need_idle(s);
    need_logits(s);
    *logits = s->s->logits().data();
    *count = s->s->logits().size();
  });
}

reach_status reach_session_position(const reach_session* session, uint32_t* position, uint32_t* capacity) {
  return guard(__func__, [&] {
    reach_session* s = live(session, Kind::session, "session");
    auto l = lock(s);
    if (position) *position = s->s->position();
    if (capacity) *capacity = s->s->capacity();
  });
}

reach_status reach_session_rewind(reach_session* session, uint32_t position) {
  return guard(__func__, [&] {
    reach_session* s = live(session, Kind::session, "session");
    auto l = lock(s);
    need_idle(s);
    s->s->rewind(position);
    s->logits_valid = false;
  });
}

reach_status reach_session_reset(reach_session* session) { return reach_session_rewind(session, 0); }

// ------------------------------------------------------------------ frame budget

reach_status reach_session_step_async(reach_session* session, int32_t token) {
  return guard(__func__, [&] {
    reach_session* s = live(session, Kind::session, "session");
    auto l = lock(s);
    need_idle(s);
    need_started(s);
    s->s->decode_async(token);   // checks the token and the capacity before it submits
    s->logits_valid = false;
  });
}

reach_status reach_session_poll(reach_session* session, int* done) {
  return guard(__func__, [&] {
    reach_session* s = live(session, Kind::session, "session");
    need(done, REACH_ERROR_INVALID_ARGUMENT, "done is NULL");
    auto l = lock(s);
    *done = complete_async(s, false, 0);
  });
}

reach_status reach_session_wait(reach_session* session, uint64_t timeout_ns, int* done) {
  return guard(__func__, [&] {
    reach_session* s = live(session, Kind::session, "session");
    need(done, REACH_ERROR_INVALID_ARGUMENT, "done is NULL");
    auto l = lock(s);
    *done = complete_async(s, true, timeout_ns);
  });
}

reach_status reach_session_fence(reach_session* session, uint64_t* vk_fence) {
  return guard(__func__, [&] {
    reach_session* s = live(session, Kind::session, "session");
    need(vk_fence, REACH_ERROR_INVALID_ARGUMENT, "vk_fence is NULL");
    auto l = lock(s);
    *vk_fence = (uint64_t)(uintptr_t)s->s->decode_fence();
  });
}

reach_status reach_session_record_decode(reach_session* session, void* vk_command_buffer) {
  return guard(__func__, [&] {
    reach_session* s = live(session, Kind::session, "session");
    need(vk_command_buffer, REACH_ERROR_INVALID_ARGUMENT, "vk_command_buffer is NULL");
    auto cmd = static_cast<VkCommandBuffer>(vk_command_buffer);
    auto l = lock(s);
    s->s->record_decode(cmd);   // refuses the session's own command buffers
    if (std::find(s->recorded.begin(), s->recorded.end(), cmd) == s->recorded.end()) s->recorded.push_back(cmd);
  });
}

reach_status reach_session_begin_decode(reach_session* session, int32_t token) {
  return guard(__func__, [&] {
    reach_session* s = live(session, Kind::session, "session");
    auto l = lock(s);
    need_idle(s);
    need_started(s);
    need(!s->recorded.empty(), REACH_ERROR_INVALID_STATE,
         "nothing recorded: call reach_session_record_decode into the host's command buffer first");
    s->s->begin_decode_step(token);
    s->logits_valid = false;
    s->host_pending = true;
  });
}

reach_status reach_session_end_decode(reach_session* session) {
  return guard(__func__, [&] {
    reach_session* s = live(session, Kind::session, "session");
    auto l = lock(s);
    need(s->host_pending, REACH_ERROR_INVALID_STATE,
         "no host decode is pending: call reach_session_begin_decode before submitting the recording");
    s->host_pending = false;
    s->s->finish_decode_step();
    s->logits_valid = true;
  });
}

reach_status reach_session_release_recording(reach_session* session, void* vk_command_buffer) {
  return guard(__func__, [&] {
    reach_session* s = live(session, Kind::session, "session");
    auto cmd = static_cast<VkCommandBuffer>(vk_command_buffer);
    auto l = lock(s);
    auto it = std::find(s->recorded.begin(), s->recorded.end(), cmd);
    if (it == s->recorded.end()) return;
    s->s->forget_recording(cmd);
    s->recorded.erase(it);
  });
}

}  // extern "C"
