// reach_batch_decode: one decode step over several sessions (continuous batching).
#include <string>

#include "capi/capi_internal.hpp"

using namespace reach;
using namespace reach::capi;

namespace {

// Pins every handle for the call (unpinned in reverse on the way out, also on an error).
struct PinnedList {
  std::vector<const reach_session*> pinned;
  ~PinnedList() {
    for (auto it = pinned.rbegin(); it != pinned.rend(); ++it) unpin(*it);
  }
};

std::string nth(size_t i) { return "sessions[" + std::to_string(i) + "]"; }

}  // namespace

extern "C" reach_status reach_batch_decode(reach_session* const* sessions, const int32_t* tokens, size_t n) {
  return guard(__func__, [&] {
    need(sessions, REACH_ERROR_INVALID_ARGUMENT, "sessions is NULL");
    need(tokens, REACH_ERROR_INVALID_ARGUMENT, "tokens is NULL");
    need(n > 0, REACH_ERROR_INVALID_ARGUMENT, "n is 0: give at least one session");
    need(n <= REACH_BATCH_MAX, REACH_ERROR_INVALID_ARGUMENT,
         "n is " + std::to_string(n) + ", more than REACH_BATCH_MAX (" + std::to_string(REACH_BATCH_MAX) +
             "): step the sessions in several batches");
    PinnedList pins;
    for (size_t i = 0; i < n; ++i) {
      need(sessions[i], REACH_ERROR_INVALID_ARGUMENT, nth(i) + " is NULL");
      for (size_t j = 0; j < i; ++j)
        need(sessions[j] != sessions[i], REACH_ERROR_INVALID_ARGUMENT,
             nth(i) + " is the same session as " + nth(j) + ": each session takes one token per step");
      pin(sessions[i], Kind::session, nth(i).c_str());
      pins.pinned.push_back(sessions[i]);
    }
    reach_model* m = sessions[0]->model;
    for (size_t i = 1; i < n; ++i)
      need(sessions[i]->model == m, REACH_ERROR_INVALID_ARGUMENT,
           nth(i) + " belongs to another model than sessions[0]: batch only sessions of one model");
    std::unique_lock<std::recursive_mutex> lock(m->device->mu);
    std::vector<Session*> rows;
    for (size_t i = 0; i < n; ++i) {
      reach_session* s = sessions[i];
      need(!s->session().decode_pending(), REACH_ERROR_INVALID_STATE,
           nth(i) + " has a step_async in flight: reach_session_poll / reach_session_wait until done first");
      need(!s->host_pending, REACH_ERROR_INVALID_STATE,
           nth(i) + " has a host-submitted decode pending: call reach_session_end_decode after it completed");
      need(s->session().position() > 0, REACH_ERROR_INVALID_STATE,
           nth(i) + " is empty: prefill a prompt (at least one token, e.g. BOS) before decoding");
      try {
        s->session().check_decode(tokens[i]);
      } catch (const Error& e) {
        throw Error(e.code(), nth(i) + ": " + e.what());
      }
      rows.push_back(&s->session());
    }
    if (!m->batch || m->batch->max_rows() < n) {
      // Grown in steps of 8 so that a host adding one session at a time rarely re-allocates.
      m->batch.reset();
      m->batch = std::make_unique<DecodeBatch>(*m->model, uint32_t((n + 7) / 8 * 8));
    }
    for (size_t i = 0; i < n; ++i) sessions[i]->logits_valid = false;
    m->batch->step(rows, std::span<const int32_t>(tokens, n));
    for (size_t i = 0; i < n; ++i) sessions[i]->logits_valid = true;
  });
}
