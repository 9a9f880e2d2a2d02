#pragma once
// Shared by the C API translation units: handle structs, the live-handle
// registry, the exception -> status guard, logging.
#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "engine/device.hpp"
#include "engine/memory.hpp"
#include "include/reach.h"
#include "runtime/model/model.hpp"
#include "runtime/serve/reply_text.hpp"
#include "runtime/serve/tool_calls.hpp"
#include "runtime/session/decode_batch.hpp"
#include "runtime/session/embedding.hpp"
#include "runtime/session/generation.hpp"
#include "runtime/session/kv_pool.hpp"
#include "runtime/text/tokenizer.hpp"

struct reach_device {
  std::unique_ptr<reach::Device> dev;
  std::recursive_mutex mu;   // serializes every call on this device's objects
  int models = 0;            // live reach_model on it
  reach_queue_lock_callback lock_cb = nullptr;
  void* lock_user = nullptr;
};

struct reach_model {
  reach_device* device = nullptr;
  std::unique_ptr<reach::Allocator> alloc;   // declared first: destroyed after the model
  std::unique_ptr<reach::Model> model;
  std::unique_ptr<reach::DecodeBatch> batch;   // reach_batch_decode's, made on first use; dies before the model
  std::unique_ptr<reach::Embedder> embedder;   // reach_embed's, made on first use; dies before the model
  int sessions = 0;
  int pools = 0;   // live reach_kv_pool of this model
};

struct reach_kv_pool {
  reach_model* model = nullptr;
  std::shared_ptr<reach::KvPool> pool;   // its sessions share it; freed only when none is left
  int sessions = 0;
  uint64_t prefix_hits = 0, prefix_hit_tokens = 0;   // reach_kv_pool_info's counters
};

struct reach_stream {
  std::mutex mu;   // streams belong to no device: their own lock
  std::unique_ptr<reach::Tokenizer::StreamDecoder> dec;   // shares the tokenizer: may outlive the model
  std::string text;
};

struct reach_reply {
  std::mutex mu;   // replies belong to no device: their own lock
  reach::Tokenizer tokenizer;   // a copy (shares the vocabulary): may outlive the model
  std::vector<std::string> stops;
  bool channels = false;
  std::unique_ptr<reach::Tokenizer::StreamDecoder> dec;
  std::unique_ptr<reach::serve::ReplyText> text;
  std::string content, reasoning;   // the last call's texts
  // reach_reply_set_tools: the calls are parsed out of the text (reach_c_tools.cpp).
  std::optional<reach::serve::ToolSyntax> tools;
  std::string tool_prefix;     // harmony: the forced call's header the prompt ended with
  bool tool_in_call = false;   // the reply starts inside a call (ToolCallStream's in_call)
  std::unique_ptr<reach::serve::ToolCallStream> tool_stream;
  std::vector<std::pair<std::string, std::string>> calls;   // name, arguments
  explicit reach_reply(const reach::Tokenizer& t) : tokenizer(t) {}
};

namespace reach::capi {
// A reply's next piece with its tool calls taken out (reach_c_tools.cpp); the piece as it is without tools.
reach::serve::ReplyPiece take_tool_calls(reach_reply* r, reach::serve::ReplyPiece piece, bool end);
// The reply's text assembly for a new generation, its tool stream included.
void restart_reply(reach_reply* r);
}  // namespace reach::capi

struct reach_session {
  reach_model* model = nullptr;
  // The session (it owns step_async's program and fence: Session::decode_async), the sampler and
  // the model's EOS ids (is_eos).
  std::unique_ptr<reach::Generation> gen;
  reach::Session& session() const { return gen->session(); }
  reach_kv_pool* pool = nullptr;   // the pool its KV cache is in (reach_session_create_in_pool)
  bool logits_valid = false;
  bool host_pending = false;               // between begin_decode and end_decode
  std::vector<VkCommandBuffer> recorded;   // host buffers recorded into
};

namespace reach::capi {

// An error raised by the API layer itself (bad handle, wrong order).
struct ApiError {
  reach_status status;
  std::string message;
};

// The registry of live handles.  A handle is only dereferenced while it is
// pinned: a call pins it (live()) for its whole duration, and *_free claims
// it (FreeClaim), which refuses new pins and waits until the pins in flight
// are released before the object is deleted.  So a call racing a free of the
// same handle on another thread either completes first or is rejected; it
// never touches freed memory.
enum class Kind { device, model, session, stream, reply, kv_pool };
void registry_add(const void* p, Kind k);
// Throws ApiError(INVALID_ARGUMENT) for a pointer that is not a live handle of
// kind k, or one being freed; else counts a call in flight on it.
void pin(const void* p, Kind k, const char* what);
void unpin(const void* p);

// Calls of the C API running on this thread (nested: reach_session_reset ->
// rewind, or a callback calling back into reach).
extern thread_local int t_call_depth;

// A handle pinned for the duration of one call.
template <class T>
class Pinned {
 public:
  explicit Pinned(T* p) : p_(p) {}
  ~Pinned() { unpin(p_); }
  Pinned(const Pinned&) = delete;
  Pinned& operator=(const Pinned&) = delete;
  T* get() const { return p_; }
  T* operator->() const { return p_; }
  T& operator*() const { return *p_; }

 private:
  T* p_;
};

// A model or session whose device was lost is unusable: every call on it but *_free fails with
// REACH_ERROR_DEVICE_LOST, saying what to do.  Other handles have no device to lose.
void check_device(const reach_device* d);
inline void check_usable(const reach_model* m) { check_device(m->device); }
inline void check_usable(const reach_session* s) { check_device(s->model->device); }
inline void check_usable(const reach_kv_pool* p) { check_device(p->model->device); }
inline void check_usable(const void*) {}

// Throws ApiError(INVALID_ARGUMENT) for NULL or a pointer that is not a live
// handle of kind k (REACH_ERROR_DEVICE_LOST for a model or session of a lost
// device); else pins it until the result goes out of scope.
template <class T>
Pinned<T> live(const T* h, Kind k, const char* what) {
  if (!h) throw ApiError{REACH_ERROR_INVALID_ARGUMENT, std::string(what) + " is NULL"};
  pin(h, k, what);
  try {
    check_usable(h);
  } catch (...) {
    unpin(h);
    throw;
  }
  return Pinned<T>(const_cast<T*>(h));
}

// *_free's hold on a handle: the constructor fails for a pointer that is not a
// live handle, one already being freed, or a call from inside a reach
// callback (the call that runs the callback may hold that handle, and the
// device lock); else it stops new calls on the handle and waits until the
// calls in flight have returned.  commit() removes the handle from the
// registry (then delete it); without commit the handle stays live.
class FreeClaim {
 public:
  FreeClaim(const void* p, Kind k, const char* what);
  ~FreeClaim();
  FreeClaim(const FreeClaim&) = delete;
  FreeClaim& operator=(const FreeClaim&) = delete;
  void commit();

 private:
  const void* p_;
  bool committed_ = false;
};

inline void need(bool ok, reach_status st, const std::string& message) {
  if (!ok) throw ApiError{st, message};
}

void log(int level, const std::string& message);
reach_status fail(const char* fn, reach_status st, const std::string& message);

// Runs f; turns every exception into a status and a thread-local message.
template <class F>
reach_status guard(const char* fn, F&& f) noexcept {
  struct Depth {
    Depth() { ++t_call_depth; }
    ~Depth() { --t_call_depth; }
  } depth;
  try {
    f();
    return REACH_OK;
  } catch (const ApiError& e) {
    return fail(fn, e.status, e.message);
  } catch (const reach::Error& e) {
    reach_status st = REACH_ERROR_INTERNAL;
    switch (e.code()) {
      case ErrorCode::vulkan: st = REACH_ERROR_VULKAN; break;
      case ErrorCode::out_of_memory: st = REACH_ERROR_OUT_OF_MEMORY; break;
      case ErrorCode::invalid_argument: st = REACH_ERROR_INVALID_ARGUMENT; break;
      case ErrorCode::io: st = REACH_ERROR_IO; break;
      case ErrorCode::format: st = REACH_ERROR_FORMAT; break;
      case ErrorCode::unsupported: st = REACH_ERROR_UNSUPPORTED; break;
      case ErrorCode::context_overflow: st = REACH_ERROR_CONTEXT_OVERFLOW; break;
      case ErrorCode::cancelled: st = REACH_ERROR_CANCELLED; break;
      case ErrorCode::internal: st = REACH_ERROR_INTERNAL; break;
      case ErrorCode::device_lost: st = REACH_ERROR_DEVICE_LOST; break;
      case ErrorCode::kv_pool_full: st = REACH_ERROR_KV_POOL_FULL; break;
    }
    return fail(fn, st, e.what());
  } catch (const std::bad_alloc&) {
    return fail(fn, REACH_ERROR_OUT_OF_MEMORY, "out of host memory");
  } catch (const std::exception& e) {
    return fail(fn, REACH_ERROR_INTERNAL, e.what());
  } catch (...) {
    return fail(fn, REACH_ERROR_INTERNAL, "unknown exception");
  }
}

// Copies a caller's params struct over the defaults, reading at most p->size bytes.
template <class T>
T read_params(const T* p, const T& defaults, const char* what) {
  if (!p) return defaults;
  need(p->size != 0, REACH_ERROR_INVALID_ARGUMENT,
       std::string(what) + ".size is 0: start from " + what + "_default_params()");
  T out = defaults;
  std::memcpy(&out, p, std::min<size_t>(p->size, sizeof(T)));
  out.size = sizeof(T);
  return out;
}

// Writes a filled struct back into the caller's, at most out->size bytes.
template <class T>
void write_info(T* out, const T& full, const char* what) {
  need(out != nullptr, REACH_ERROR_INVALID_ARGUMENT, std::string(what) + " is NULL");
  need(out->size != 0, REACH_ERROR_INVALID_ARGUMENT, std::string(what) + "->size is 0: set it to sizeof(*" + what + ")");
  const uint32_t size = out->size;
  std::memcpy(out, &full, std::min<size_t>(size, sizeof(T)));
  out->size = size;
}

}  // namespace reach::capi
