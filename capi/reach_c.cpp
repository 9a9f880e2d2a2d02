// The C API (include/reach.h): status, errors, logging, devices, models, text.
// Sessions are in reach_c_session.cpp.
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <unordered_map>

#include "base/settings.hpp"
#include "capi/capi_internal.hpp"
#include "engine/capabilities.hpp"

using namespace reach;
using namespace reach::capi;

#ifdef REACH_PROJECT_VERSION
static_assert(std::string_view(REACH_PROJECT_VERSION) == REACH_VERSION_STRING,
              "include/reach.h REACH_VERSION_* must match the version in meson.build");
#endif

namespace reach::capi {

thread_local int t_call_depth = 0;

namespace {
struct Entry {
  Kind kind;
  uint32_t calls = 0;     // calls in flight (pins)
  bool freeing = false;   // a *_free claimed it: no new pins
};
std::mutex g_registry_mu;
std::condition_variable g_registry_cv;   // a freeing entry's last pin went
std::unordered_map<const void*, Entry> g_registry;
thread_local std::string t_last_error;

std::mutex g_log_mu;
reach_log_callback g_log_cb = nullptr;
void* g_log_user = nullptr;

std::mutex g_list_mu;
std::vector<PhysicalDeviceInfo> g_list;
bool g_listed = false;

const char* level_name(int level) {
  switch (level) {
    case REACH_LOG_DEBUG: return "debug";
    case REACH_LOG_INFO: return "info";
    case REACH_LOG_WARN: return "warning";
    default: return "error";
  }
}
}  // namespace

void registry_add(const void* p, Kind k) {
  std::lock_guard<std::mutex> l(g_registry_mu);
  g_registry.insert_or_assign(p, Entry{k});
}

namespace {
// The live entry of p, or an ApiError; g_registry_mu is held.
Entry& entry_of(const void* p, Kind k, const char* what) {
  auto it = g_registry.find(p);
  if (it == g_registry.end() || it->second.kind != k)
    throw ApiError{REACH_ERROR_INVALID_ARGUMENT,
                   std::string(what) + " is not a live handle (freed already, or not made by reach?)"};
  if (it->second.freeing)
    throw ApiError{REACH_ERROR_INVALID_ARGUMENT, std::string(what) + " is being freed by another thread"};
  return it->second;
}
}  // namespace

void pin(const void* p, Kind k, const char* what) {
  std::lock_guard<std::mutex> l(g_registry_mu);
  entry_of(p, k, what).calls++;
}

void check_device(const reach_device* d) {
  if (d && d->dev && d->dev->lost())
    throw ApiError{REACH_ERROR_DEVICE_LOST,
                   "this model's device was lost earlier (VK_ERROR_DEVICE_LOST) and nothing on it can run "
                   "again: free its sessions, the model and the device (reach_session_free, reach_model_free, "
                   "reach_device_free), create a new device (or adopt the host's again) and load the model again"};
}

void unpin(const void* p) {
  std::lock_guard<std::mutex> l(g_registry_mu);
  auto it = g_registry.find(p);
  if (it == g_registry.end()) return;
  if (--it->second.calls == 0 && it->second.freeing) g_registry_cv.notify_all();
}

FreeClaim::FreeClaim(const void* p, Kind k, const char* what) : p_(p) {
  need(t_call_depth <= 1, REACH_ERROR_INVALID_STATE,
       std::string(what) + " cannot be freed from inside a reach callback (log, progress, queue lock): free it "
                           "after the call that ran the callback has returned");
  std::unique_lock<std::mutex> l(g_registry_mu);
  Entry& e = entry_of(p, k, what);
  e.freeing = true;
  // The entry stays put while freeing: only commit() erases it.
  g_registry_cv.wait(l, [&] { return e.calls == 0; });
}

FreeClaim::~FreeClaim() {
  if (committed_) return;
  std::lock_guard<std::mutex> l(g_registry_mu);
  auto it = g_registry.find(p_);
  if (it != g_registry.end()) it->second.freeing = false;
}

void FreeClaim::commit() {
  std::lock_guard<std::mutex> l(g_registry_mu);
  g_registry.erase(p_);
  committed_ = true;
}

void log(int level, const std::string& message) {
  reach_log_callback cb;
  void* user;
  {
    std::lock_guard<std::mutex> l(g_log_mu);
    cb = g_log_cb;
    user = g_log_user;
  }
  if (cb) cb(user, level, message.c_str());
  else if (level >= REACH_LOG_WARN) std::fprintf(stderr, "reach %s: %s\n", level_name(level), message.c_str());
}

reach_status fail(const char* fn, reach_status st, const std::string& message) {
  try {
    t_last_error = std::string(fn) + ": " + message;
    log(REACH_LOG_DEBUG, t_last_error + " (" + reach_status_name(st) + ")");
  } catch (...) {
    // Out of memory while reporting: the status still says what happened.
  }
  return st;
}

}  // namespace reach::capi

namespace {

Capabilities list_entry(uint32_t index) {
  std::lock_guard<std::mutex> l(g_list_mu);
  if (!g_listed) {
    g_list = Device::list(false);
    g_listed = true;
  }
  need(index < g_list.size(), REACH_ERROR_INVALID_ARGUMENT,
       "device index " + std::to_string(index) + " is out of range: " + std::to_string(g_list.size()) + " device(s)");
  return g_list[index].caps;
}

reach_device_info info_of(const Capabilities& c, uint32_t index) {
  reach_device_info i{};
  i.size = sizeof i;
  i.index = index;
  std::snprintf(i.name, sizeof i.name, "%s", c.device_name.c_str());
  std::snprintf(i.driver, sizeof i.driver, "%s%s%s", c.driver_name.c_str(), c.driver_info.empty() ? "" : " ",
                c.driver_info.c_str());
  i.type = int32_t(c.type);
  i.vendor_id = c.vendor_id;
  i.device_id = c.device_id;
  i.api_version = c.api_version;
  i.vram_bytes = c.device_local_bytes;
  i.fp16_storage = c.storage_16bit;
  i.fp16_arithmetic = c.fp16_arithmetic;
  i.subgroup_size = c.subgroup_size;
  i.subgroup_arithmetic = c.has_subgroup_arithmetic();
  return i;
}

LogCallback validation_to_log() {
  return [](int severity, const std::string& message) {
    log(severity >= 2 ? REACH_LOG_ERROR : severity == 1 ? REACH_LOG_WARN : REACH_LOG_DEBUG, "vulkan: " + message);
  };
}

// The host asked for the REACH_* variables (use_environment): read them now, the one place the C API
// reads the environment, and say in the log which values were not taken.
Settings settings_from_environment() {
  Settings s = settings_from(std::getenv);
  for (const std::string& why : s.ignored) log(REACH_LOG_WARN, why);
  return s;
}

std::unique_lock<std::recursive_mutex> lock(reach_device* d) { return std::unique_lock<std::recursive_mutex>(d->mu); }

}  // namespace

extern "C" {

const char* reach_status_name(reach_status status) {
  switch (status) {
    case REACH_OK: return "REACH_OK";
    case REACH_ERROR_INVALID_ARGUMENT: return "REACH_ERROR_INVALID_ARGUMENT";
    case REACH_ERROR_INVALID_STATE: return "REACH_ERROR_INVALID_STATE";
    case REACH_ERROR_VULKAN: return "REACH_ERROR_VULKAN";
    case REACH_ERROR_OUT_OF_MEMORY: return "REACH_ERROR_OUT_OF_MEMORY";
    case REACH_ERROR_IO: return "REACH_ERROR_IO";
    case REACH_ERROR_FORMAT: return "REACH_ERROR_FORMAT";
    case REACH_ERROR_UNSUPPORTED: return "REACH_ERROR_UNSUPPORTED";
    case REACH_ERROR_CONTEXT_OVERFLOW: return "REACH_ERROR_CONTEXT_OVERFLOW";
    case REACH_ERROR_CANCELLED: return "REACH_ERROR_CANCELLED";
    case REACH_ERROR_BUFFER_TOO_SMALL: return "REACH_ERROR_BUFFER_TOO_SMALL";
    case REACH_ERROR_INTERNAL: return "REACH_ERROR_INTERNAL";
    case REACH_ERROR_DEVICE_LOST: return "REACH_ERROR_DEVICE_LOST";
    case REACH_ERROR_KV_POOL_FULL: return "REACH_ERROR_KV_POOL_FULL";
  }
  return "REACH_ERROR_UNKNOWN";
}

const char* reach_last_error(void) { return t_last_error.c_str(); }

const char* reach_version(void) { return REACH_VERSION_STRING; }

void reach_set_log_callback(reach_log_callback callback, void* user) {
  std::lock_guard<std::mutex> l(g_log_mu);
  g_log_cb = callback;
  g_log_user = callback ? user : nullptr;
}

// ------------------------------------------------------------------ devices

reach_status reach_device_count(uint32_t* count) {
  return guard(__func__, [&] {
    need(count, REACH_ERROR_INVALID_ARGUMENT, "count is NULL");
    std::lock_guard<std::mutex> l(g_list_mu);
    g_list = Device::list(false);
    g_listed = true;
    *count = uint32_t(g_list.size());
  });
}

reach_status reach_device_get_info(uint32_t index, reach_device_info* info) {
  return guard(__func__, [&] {
    need(info, REACH_ERROR_INVALID_ARGUMENT, "info is NULL");
    write_info(info, info_of(list_entry(index), index), "info");
  });
}

reach_device_params reach_device_default_params(void) {
  reach_device_params p{};
  p.size = sizeof p;
  p.index = -1;
  return p;
}

reach_status reach_device_create(const reach_device_params* params, reach_device** out) {
  return guard(__func__, [&] {
    need(out, REACH_ERROR_INVALID_ARGUMENT, "out is NULL");
    *out = nullptr;
    const reach_device_params p = read_params(params, reach_device_default_params(), "reach_device");
    need(p.index >= -1, REACH_ERROR_INVALID_ARGUMENT,
         "index is " + std::to_string(p.index) + ": it must be -1 (choose) or a device index >= 0");
    DeviceOptions o;
    if (p.use_environment) o.settings = settings_from_environment();
    o.index = p.index;
    if (p.name) o.name = p.name;
    o.validation = p.validation != 0;
    o.low_priority = p.low_priority != 0;
    if (p.pipeline_cache_dir) o.pipeline_cache_dir = p.pipeline_cache_dir;
    if (p.device_profile) o.settings.device_profile = p.device_profile;
    o.on_validation = validation_to_log();
    auto d = std::make_unique<reach_device>();
    d->dev = Device::create(o);
    log(REACH_LOG_INFO, "device: " + d->dev->caps().summary() + (o.low_priority ? " (low queue priority)" : ""));
    registry_add(d.get(), Kind::device);
    *out = d.release();
  });
}

reach_adopt_params reach_adopt_default_params(void) {
  reach_adopt_params p{};
  p.size = sizeof p;
  return p;
}

reach_status reach_device_adopt(const reach_adopt_params* params, reach_device** out) {
  return guard(__func__, [&] {
    need(out, REACH_ERROR_INVALID_ARGUMENT, "out is NULL");
    *out = nullptr;
    need(params, REACH_ERROR_INVALID_ARGUMENT, "params is NULL: the host's Vulkan handles are required");
    const reach_adopt_params p = read_params(params, reach_adopt_default_params(), "reach_adopt");
    auto d = std::make_unique<reach_device>();
    AdoptedDevice h;
    h.get_instance_proc_addr = reinterpret_cast<PFN_vkGetInstanceProcAddr>(p.get_instance_proc_addr);
    h.instance = static_cast<VkInstance>(p.instance);
    h.physical_device = static_cast<VkPhysicalDevice>(p.physical_device);
    h.device = static_cast<VkDevice>(p.device);
    h.queue_family = p.queue_family;
    h.queue = static_cast<VkQueue>(p.queue);
    if (p.queue_lock) {
      d->lock_cb = p.queue_lock;
      d->lock_user = p.queue_lock_user;
      reach_device* raw = d.get();
      h.queue_lock = [raw](bool on) { raw->lock_cb(raw->lock_user, on ? 1 : 0); };
    }
    h.storage_16bit_enabled = p.storage_16bit_enabled != 0;
    h.fp16_arithmetic_enabled = p.fp16_arithmetic_enabled != 0;
    h.subgroup_size_control_enabled = p.subgroup_size_control_enabled != 0;
    h.debug_utils_enabled = p.debug_utils_enabled != 0;
    h.cooperative_matrix_enabled = p.cooperative_matrix_enabled != 0;
    if (p.pipeline_cache_dir) h.pipeline_cache_dir = p.pipeline_cache_dir;
    h.on_validation = validation_to_log();
    if (p.use_environment) h.settings = settings_from_environment();
    d->dev = Device::adopt(h);
    log(REACH_LOG_INFO, "adopted device: " + d->dev->caps().summary());
    registry_add(d.get(), Kind::device);
    *out = d.release();
  });
}

reach_status reach_device_describe(const reach_device* device, reach_device_info* info) {
  return guard(__func__, [&] {
    auto d = live(device, Kind::device, "device");
    auto l = lock(d.get());
    write_info(info, info_of(d->dev->caps(), 0), "info");
  });
}

reach_status reach_device_free(reach_device* device) {
  if (!device) return REACH_OK;
  return guard(__func__, [&] {
    FreeClaim claim(device, Kind::device, "device");
    {
      auto l = lock(device);
      need(device->models == 0, REACH_ERROR_INVALID_STATE,
           std::to_string(device->models) + " model(s) still use this device: free them first");
      claim.commit();
    }
    delete device;
  });
}

// ------------------------------------------------------------------ models

reach_model_params reach_model_default_params(void) {
  reach_model_params p{};
  p.size = sizeof p;
  p.require_tokenizer = 1;
  return p;
}

reach_status reach_model_load(reach_device* device, const char* dir, const reach_model_params* params,
                              reach_model** out) {
  return guard(__func__, [&] {
    need(out, REACH_ERROR_INVALID_ARGUMENT, "out is NULL");
    *out = nullptr;
    auto d = live(device, Kind::device, "device");
    need(dir && *dir, REACH_ERROR_INVALID_ARGUMENT,
         "no model given (a folder with config.json, *.safetensors and tokenizer.json, or a .gguf file)");
    const reach_model_params p = read_params(params, reach_model_default_params(), "reach_model");
    auto l = lock(d.get());
    auto m = std::make_unique<reach_model>();
    m->device = d.get();
    m->alloc = std::make_unique<Allocator>(*d->dev);
    LoadOptions lo;
    lo.require_tokenizer = p.require_tokenizer != 0;
    switch (p.quantize) {
      case REACH_QUANTIZE_NONE: break;
      case REACH_QUANTIZE_Q8_0: lo.quantize = WType::q8_0; break;
      case REACH_QUANTIZE_Q4_0: lo.quantize = WType::q4_0; break;
      case REACH_QUANTIZE_Q4_K: lo.quantize = WType::q4_k; break;
      default:
        need(false, REACH_ERROR_INVALID_ARGUMENT,
             "reach_model_params.quantize is " + std::to_string(p.quantize) +
                 ": use REACH_QUANTIZE_NONE, REACH_QUANTIZE_Q8_0, REACH_QUANTIZE_Q4_0 or REACH_QUANTIZE_Q4_K");
    }
    if (p.progress) {
      auto cb = p.progress;
      void* user = p.progress_user;
      lo.on_progress = [cb, user](uint64_t done, uint64_t total) { return cb(user, done, total) != 0; };
    }
    m->model = Model::load(*d->dev, *m->alloc, dir, lo);
    log(REACH_LOG_INFO, std::string("model: ") + dir + " (" + std::to_string(m->model->n_params()) + " params, " +
                            m->model->weight_types() + " weights)");
    d->models++;
    registry_add(m.get(), Kind::model);
    *out = m.release();
  });
}

reach_status reach_model_get_info(const reach_model* model, reach_model_info* info) {
  return guard(__func__, [&] {
    auto m = live(model, Kind::model, "model");
    auto l = lock(m->device);
    const Model& M = *m->model;
    const ModelConfig& c = M.config();
    reach_model_info i{};
    i.size = sizeof i;
    i.vocab_size = int32_t(c.vocab_size);
    i.n_layers = int32_t(c.n_layers);
    i.hidden_size = int32_t(c.hidden_size);
    i.n_heads = int32_t(c.n_heads);
    i.n_kv_heads = int32_t(c.n_kv_heads);
    i.head_dim = int32_t(c.head_dim);
    i.max_position_embeddings = int64_t(c.max_position_embeddings);
    i.n_params = M.n_params();
    i.weight_bytes = M.weight_bytes();
    i.bos_id = M.bos_id() ? *M.bos_id() : -1;
    i.eos_id = M.eos_ids().empty() ? -1 : M.eos_ids().front();
    i.has_tokenizer = M.tokenizer() != nullptr;
    write_info(info, i, "info");
  });
}

reach_status reach_model_is_eos(const reach_model* model, int32_t token, int* is_eos) {
  return guard(__func__, [&] {
    auto m = live(model, Kind::model, "model");
    need(is_eos, REACH_ERROR_INVALID_ARGUMENT, "is_eos is NULL");
    const auto& e = m->model->eos_ids();
    *is_eos = std::find(e.begin(), e.end(), token) != e.end();
  });
}

reach_status reach_model_free(reach_model* model) {
  if (!model) return REACH_OK;
  return guard(__func__, [&] {
    FreeClaim claim(model, Kind::model, "model");
    reach_device* d = model->device;
    auto l = lock(d);
    need(model->sessions == 0, REACH_ERROR_INVALID_STATE,
         std::to_string(model->sessions) + " session(s) still use this model: free them first");
    need(model->pools == 0, REACH_ERROR_INVALID_STATE,
         std::to_string(model->pools) + " KV pool(s) of this model are alive: free them first (reach_kv_pool_free)");
    claim.commit();
    delete model;
    d->models--;
  });
}

// ------------------------------------------------------------------ text

namespace {
const Tokenizer& tokenizer_of(const reach_model* m) {
  const Tokenizer* t = m->model->tokenizer();
  need(t != nullptr, REACH_ERROR_UNSUPPORTED,
       "the model was loaded without a tokenizer (require_tokenizer = 0 and no tokenizer.json)");
  return *t;
}
}  // namespace

reach_status reach_tokenize(const reach_model* model, const char* text, size_t text_len, int add_special,
                            int32_t* tokens, size_t capacity, size_t* n_tokens) {
  return guard(__func__, [&] {
    auto m = live(model, Kind::model, "model");
    const Tokenizer& t = tokenizer_of(m.get());
    need(text || text_len == 0, REACH_ERROR_INVALID_ARGUMENT, "text is NULL");
    need(n_tokens, REACH_ERROR_INVALID_ARGUMENT, "n_tokens is NULL");
    const std::vector<int32_t> ids = t.encode(std::string_view(text ? text : "", text_len), add_special != 0);
    *n_tokens = ids.size();
    if (!tokens) return;
    need(capacity >= ids.size(), REACH_ERROR_BUFFER_TOO_SMALL,
         "the text needs " + std::to_string(ids.size()) + " tokens, the buffer holds " + std::to_string(capacity));
    std::copy(ids.begin(), ids.end(), tokens);
  });
}

reach_status reach_detokenize(const reach_model* model, const int32_t* tokens, size_t n_tokens, int skip_special,
                              char* text, size_t capacity, size_t* length) {
  return guard(__func__, [&] {
    auto m = live(model, Kind::model, "model");
    const Tokenizer& t = tokenizer_of(m.get());
    need(tokens || n_tokens == 0, REACH_ERROR_INVALID_ARGUMENT, "tokens is NULL");
    need(length, REACH_ERROR_INVALID_ARGUMENT, "length is NULL");
    const std::string s = t.decode(std::span<const int32_t>(tokens, n_tokens), skip_special != 0);
    *length = s.size();
    if (!text) return;
    need(capacity >= s.size() + 1, REACH_ERROR_BUFFER_TOO_SMALL,
         "the text needs " + std::to_string(s.size() + 1) + " bytes with its NUL, the buffer holds " +
             std::to_string(capacity));
    std::memcpy(text, s.data(), s.size());
    text[s.size()] = '\0';
  });
}

reach_status reach_stream_create(const reach_model* model, int skip_special, reach_stream** out) {
  return guard(__func__, [&] {
    need(out, REACH_ERROR_INVALID_ARGUMENT, "out is NULL");
    *out = nullptr;
    auto m = live(model, Kind::model, "model");
    const Tokenizer& t = tokenizer_of(m.get());
    auto s = std::make_unique<reach_stream>();
    s->dec = std::make_unique<Tokenizer::StreamDecoder>(t, skip_special != 0);
    registry_add(s.get(), Kind::stream);
    *out = s.release();
  });
}

reach_status reach_stream_push(reach_stream* stream, int32_t token, const char** text, size_t* length) {
  return guard(__func__, [&] {
    auto s = live(stream, Kind::stream, "stream");
    need(text && length, REACH_ERROR_INVALID_ARGUMENT, "text and length must not be NULL");
    std::lock_guard<std::mutex> l(s->mu);
    s->text = s->dec->push(token);
    *text = s->text.c_str();
    *length = s->text.size();
  });
}

reach_status reach_stream_flush(reach_stream* stream, const char** text, size_t* length) {
  return guard(__func__, [&] {
    auto s = live(stream, Kind::stream, "stream");
    need(text && length, REACH_ERROR_INVALID_ARGUMENT, "text and length must not be NULL");
    std::lock_guard<std::mutex> l(s->mu);
    s->text = s->dec->flush();
    s->dec->reset();
    *text = s->text.c_str();
    *length = s->text.size();
  });
}

reach_status reach_stream_free(reach_stream* stream) {
  if (!stream) return REACH_OK;
  return guard(__func__, [&] {
    FreeClaim claim(stream, Kind::stream, "stream");
    claim.commit();
    delete stream;
  });
}

}  // extern "C"
