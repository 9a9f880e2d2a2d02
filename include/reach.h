/*
 * reach.h - the C API of reach, a Vulkan engine for Llama-family models.
 *
 * Pure C99; usable from C, C++, and any language with a C FFI.
 *
 * Conventions
 *  - Every function returns a reach_status (REACH_OK = 0) unless it is a
 *    getter of a constant (reach_version, reach_status_name, reach_last_error)
 *    or a *_default_params constructor.  On failure reach_last_error() holds a
 *    message for the calling thread that names the file, limit or call at fault.
 *  - No function aborts, exits or throws; no function prints, except warnings
 *    and errors to stderr while no log callback is set (reach_set_log_callback).
 *  - Objects are opaque handles released with an explicit *_free.  A parent
 *    (device -> model -> session) cannot be freed while children are alive:
 *    *_free then fails with REACH_ERROR_INVALID_STATE and frees nothing.
 *    Handles are checked against a registry of live handles, so a freed or
 *    foreign pointer is reported (REACH_ERROR_INVALID_ARGUMENT) rather than
 *    dereferenced, also when a call races the *_free of its handle on another
 *    thread: *_free waits for the calls already running on that handle to
 *    return (so it can block as long as they do), and calls on it that start
 *    while it waits fail with INVALID_ARGUMENT, even if the free then fails
 *    (INVALID_STATE: children alive) and the handle stays live.  Not
 *    covered: a new handle may reuse a freed address, so a call made with a
 *    stale pointer after the free returned may act on the new handle (do not
 *    rely on stale pointers); and memory reach handed out (logits, stream
 *    text) is gone once its handle is freed.  A *_free called from inside a
 *    callback reach is running (log, progress, queue lock) fails with
 *    REACH_ERROR_INVALID_STATE: the call that runs it may hold that handle.
 *  - Parameter structs start with `size`: take them from *_default_params()
 *    (which sets size = sizeof the struct this header declares) and change
 *    fields.  A library built from a newer header reads only `size` bytes, so
 *    binaries built against an older reach.h keep working.  size = 0 is
 *    rejected (a struct that did not come from *_default_params).
 *  - Threads: calls on objects of one device are serialized by a per-device
 *    lock; any thread may call, but a long call (a prefill) blocks the others.
 *    Text calls (reach_tokenize, reach_detokenize, reach_model_is_eos) run
 *    without it, in parallel; calls on one stream are serialized by its own
 *    lock.
 *  - reach reads no environment variable unless the host asks for it
 *    (reach_device_params.use_environment, reach_adopt_params.use_environment):
 *    a program that embeds reach is not changed by a REACH_* variable it did
 *    not opt into.
 *  - A session call that fails its checks (a bad id, the wrong state, a full
 *    context: prefill, decode, step, step_async, begin_decode, rewind,
 *    set_sampling) changes nothing: the position, the logits and the sampler
 *    stay as they were.
 *
 * Vulkan handles cross this header as `void*` (dispatchable: VkInstance,
 * VkPhysicalDevice, VkDevice, VkQueue, VkCommandBuffer) and `uint64_t`
 * (non-dispatchable: VkFence), so programs that never touch Vulkan need no
 * Vulkan headers.  Cast: (void*)vk_device, (VkFence)(uintptr_t)fence on 64-bit
 * (on 32-bit targets VkFence is already a uint64_t).
 */
#ifndef REACH_H
#define REACH_H

#include <stddef.h>
#include <stdint.h>

#define REACH_VERSION_MAJOR 0
#define REACH_VERSION_MINOR 1
#define REACH_VERSION_PATCH 0
#define REACH_VERSION_STRING "0.1.0"
/* MAJOR * 10000 + MINOR * 100 + PATCH, for #if comparisons. */
#define REACH_VERSION_NUMBER (REACH_VERSION_MAJOR * 10000 + REACH_VERSION_MINOR * 100 + REACH_VERSION_PATCH)

/* REACH_API: exported from the shared library.  Windows users of the static
 * library define REACH_STATIC before including this header. */
#if defined(_WIN32) || defined(__CYGWIN__)
#  if defined(REACH_BUILDING_LIBRARY)
#    define REACH_API __declspec(dllexport)
#  elif defined(REACH_STATIC)
#    define REACH_API
#  else
#    define REACH_API __declspec(dllimport)
#  endif
#elif defined(__GNUC__) && __GNUC__ >= 4
#  define REACH_API __attribute__((visibility("default")))
#else
#  define REACH_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ status */

typedef enum reach_status {
  REACH_OK = 0,
  REACH_ERROR_INVALID_ARGUMENT = 1, /* a null / freed handle, a bad value, a bad params struct */
  REACH_ERROR_INVALID_STATE = 2,    /* wrong order: decode before prefill, a step in flight, free with children */
  REACH_ERROR_VULKAN = 3,           /* a Vulkan call failed */
  REACH_ERROR_OUT_OF_MEMORY = 4,    /* host or device memory */
  REACH_ERROR_IO = 5,               /* a file is missing or unreadable */
  REACH_ERROR_FORMAT = 6,           /* a file is malformed (config.json, safetensors, tokenizer.json) */
  REACH_ERROR_UNSUPPORTED = 7,      /* valid input reach does not handle (yet) */
  REACH_ERROR_CONTEXT_OVERFLOW = 8, /* more tokens than the session's context holds */
  REACH_ERROR_CANCELLED = 9,        /* a callback asked to stop */
  REACH_ERROR_BUFFER_TOO_SMALL = 10,/* a caller buffer is too small; the size needed was written */
  REACH_ERROR_INTERNAL = 11,        /* a bug in reach: please report the message */
  /* The GPU was lost (VK_ERROR_DEVICE_LOST: a driver reset, a timeout such as Windows' TDR, or memory
   * running out mid-run).  From then on every call on that device's models and sessions returns it too;
   * *_free still works.  Free the sessions, models and the device, create a new device (or adopt the
   * host's again) and load the model again.  New values are only ever appended. */
  REACH_ERROR_DEVICE_LOST = 12,
  /* A KV pool (reach_kv_pool_create) has no block free for this step: nothing ran, every session is as
   * it was.  Retry when another session of the pool is freed or rewinds, or make the pool larger. */
  REACH_ERROR_KV_POOL_FULL = 13
} reach_status;

/* Short name of a status ("REACH_ERROR_IO"); never NULL. */
REACH_API const char* reach_status_name(reach_status status);

/* Message of the most recent failed call on this thread ("" if none).  Valid
 * until the next failing call on this thread. */
REACH_API const char* reach_last_error(void);

/* "0.1.0": the library's version (compare with REACH_VERSION_STRING). */
REACH_API const char* reach_version(void);

/* ------------------------------------------------------------------ logging */

typedef enum reach_log_level {
  REACH_LOG_DEBUG = 0,
  REACH_LOG_INFO = 1,
  REACH_LOG_WARN = 2,
  REACH_LOG_ERROR = 3
} reach_log_level;

/* message is NUL-terminated, without a trailing newline, valid during the call. */
typedef void (*reach_log_callback)(void* user, int level, const char* message);

/* Routes every message (device choice, model loads, Vulkan validation
 * messages, failed calls at DEBUG) to `callback`, from the thread that caused
 * it.  NULL restores the default: WARN and ERROR to stderr.  Process-wide. */
REACH_API void reach_set_log_callback(reach_log_callback callback, void* user);

/* ------------------------------------------------------------------ devices */

typedef struct reach_device reach_device;
typedef struct reach_model reach_model;
typedef struct reach_session reach_session;
typedef struct reach_stream reach_stream;

/* Same values as VkPhysicalDeviceType. */
typedef enum reach_device_type {
  REACH_DEVICE_OTHER = 0,
  REACH_DEVICE_INTEGRATED_GPU = 1,
  REACH_DEVICE_DISCRETE_GPU = 2,
  REACH_DEVICE_VIRTUAL_GPU = 3,
  REACH_DEVICE_CPU = 4
} reach_device_type;

typedef struct reach_device_info {
  uint32_t size;              /* set by the caller: sizeof(reach_device_info) */
  uint32_t index;             /* loader order, as reach_device_params.index */
  char name[256];             /* "AMD Radeon RX 7900 XTX", "llvmpipe (LLVM 15.0.6, 256 bits)" */
  char driver[256];           /* driver name and version info */
  int32_t type;               /* reach_device_type */
  uint32_t vendor_id, device_id;
  uint32_t api_version;       /* VK_MAKE_API_VERSION encoding */
  uint64_t vram_bytes;        /* device-local heap bytes */
  int32_t fp16_storage;       /* storageBuffer16BitAccess (f16 weights read natively) */
  int32_t fp16_arithmetic;    /* shaderFloat16 */
  uint32_t subgroup_size;     /* default subgroup size */
  int32_t subgroup_arithmetic;/* subgroup add/max used by reductions */
  uint32_t reserved[16];
} reach_device_info;

/* Number of Vulkan physical devices the loader reports (re-enumerates).  reach links no Vulkan library:
 * it opens the system's loader when first needed (libvulkan.so.1; vulkan-1.dll on Windows;
 * libvulkan.1.dylib, then libMoltenVK.dylib, on macOS) and keeps it open until exit.  Without one,
 * calls that need Vulkan fail with REACH_ERROR_UNSUPPORTED naming the libraries tried. */
REACH_API reach_status reach_device_count(uint32_t* count);
/* Describes device `index` (0 <= index < count); info->size must be set. */
REACH_API reach_status reach_device_get_info(uint32_t index, reach_device_info* info);

typedef struct reach_device_params {
  uint32_t size;
  int32_t index;              /* -1 (default): the best type (discrete > integrated > ... > CPU), or REACH_DEVICE
                                 with use_environment; other negative values are INVALID_ARGUMENT */
  const char* name;           /* case-insensitive substring of the device name; overrides index; NULL = unused */
  int32_t low_priority;       /* 1: lowest queue priority (share the GPU with a renderer) */
  int32_t validation;         /* 1: Khronos validation layer (also REACH_VALIDATION=1 with use_environment); each
                                 message goes to the log (REACH_LOG_WARN / _ERROR, "vulkan: ..."): stderr without
                                 a callback */
  const char* pipeline_cache_dir; /* NULL: no disk cache, or with use_environment REACH_CACHE_DIR, else
                                     $XDG_CACHE_HOME/reach, else ~/.cache/reach; "-" disables the disk cache */
  /* ---- settings from the environment (took reserved[0]: the struct's size and layout are unchanged, and
   * a caller built against an older header passes 0) ---- */
  /* 0 (default): reach reads no environment variable; the device is what these fields say.
   * 1: the REACH_* variables apply as they do to the reach CLI (README, "Environment"): REACH_DEVICE and
   * REACH_VALIDATION (for the fields left at their defaults), REACH_CACHE_DIR (pipeline_cache_dir NULL),
   * REACH_PIPELINE_LOG, the kernel shapes and variants (REACH_MATVEC_*, REACH_GEMM_*, REACH_COOPMAT,
   * REACH_COOPMAT_XSPLIT), REACH_TUNING_FILE (the choices of `reach tune`, which sessions of this device's
   * models then follow; without it they run exact activations) and REACH_VULKAN_LIBRARY (the Vulkan loader
   * to open instead of the system's).  Read once, when the device is made; a value
   * reach does not take is reported to the log (REACH_LOG_WARN) with the reason. */
  int32_t use_environment;
  /* ---- device profile (took reserved[0..]: reserved0 keeps the pointer aligned alike on 32- and 64-bit
   * targets, and reserved shrinks by what the pointer takes, so the struct's size is unchanged; a caller
   * built against an older header passes zeros) ---- */
  uint32_t reserved0;
  /* A Vulkan Profiles JSON file (README, "Device profiles"): the device uses only what both the profile and
   * the real device allow.  NULL: none, or with use_environment REACH_DEVICE_PROFILE.  A file that cannot be
   * read or is malformed fails reach_device_create (REACH_ERROR_IO / REACH_ERROR_FORMAT, naming the key). */
  const char* device_profile;
  uint32_t reserved[(56 - sizeof(const char*)) / 4];
} reach_device_params;

REACH_API reach_device_params reach_device_default_params(void);

/* Creates a Vulkan instance and device owned by reach. */
REACH_API reach_status reach_device_create(const reach_device_params* params, reach_device** out);

/* queue_lock(user, 1) is called before and queue_lock(user, 0) after every
 * use of the adopted VkQueue by reach (vkQueueSubmit, vkQueueWaitIdle), so the
 * host can hold its own queue mutex. */
typedef void (*reach_queue_lock_callback)(void* user, int lock);

typedef struct reach_adopt_params {
  uint32_t size;
  void* instance;             /* VkInstance (Vulkan 1.2+) */
  void* physical_device;      /* VkPhysicalDevice */
  void* device;               /* VkDevice */
  uint32_t queue_family;      /* must support compute */
  void* queue;                /* VkQueue of that family */
  reach_queue_lock_callback queue_lock;  /* NULL: reach serializes only its own submits */
  void* queue_lock_user;
  /* Features the host enabled on its VkDevice (reach cannot query them);
   * kernels needing one that is off fall back to f32. */
  int32_t storage_16bit_enabled;          /* storageBuffer16BitAccess */
  int32_t fp16_arithmetic_enabled;        /* shaderFloat16 */
  int32_t subgroup_size_control_enabled;  /* subgroupSizeControl + computeFullSubgroups */
  const char* pipeline_cache_dir;         /* as in reach_device_params */
  /* 1: the host enabled VK_EXT_debug_utils on its VkInstance; reach then
   * registers a messenger there and sends validation messages to the log as
   * reach_device_params.validation does.  The messenger sees the whole
   * instance, so the host's own validation messages arrive too.  0: reach
   * receives none (the host's own messenger, if any, still does). */
  int32_t debug_utils_enabled;
  /* 1: the host enabled VK_KHR_cooperative_matrix and its cooperativeMatrix
   * feature (and shaderFloat16 and vulkanMemoryModel): prefill GEMMs may then use cooperative
   * matrices (`reach info` lists the variant). */
  int32_t cooperative_matrix_enabled;
  /* ---- settings from the environment (took reserved[0]; size and layout unchanged) ---- */
  /* As reach_device_params.use_environment, without REACH_DEVICE and REACH_VALIDATION (the host chose
   * the device and its layers): 0 (default) reads no environment variable. */
  int32_t use_environment;
  uint32_t reserved[13];
  /* ---- appended after reserved (the struct grew; a caller built against an older header passes a
   * smaller size, and reach reads this field as NULL) ---- */
  /* The host's vkGetInstanceProcAddr (PFN_vkGetInstanceProcAddr cast to void*): the one of its loader,
   * of volk, or of its own dispatch.  reach then takes every instance function from it (for `instance`)
   * and every device function through the vkGetDeviceProcAddr it returns (for `device`), and opens no
   * Vulkan library of its own.  NULL (default): reach opens the system's Vulkan loader (libvulkan.so.1,
   * vulkan-1.dll, libvulkan.1.dylib then libMoltenVK.dylib; REACH_VULKAN_LIBRARY with use_environment),
   * which must be the loader the host's handles came from. */
  void* get_instance_proc_addr;
} reach_adopt_params;

REACH_API reach_adopt_params reach_adopt_default_params(void);

/* Wraps the host's instance / device / queue.  reach never destroys them; free
 * the reach_device (after its models) before destroying the VkDevice.
 * reach_device_free waits for the device to be idle (vkDeviceWaitIdle). */
REACH_API reach_status reach_device_adopt(const reach_adopt_params* params, reach_device** out);

/* The chosen / adopted device's description (info->size must be set). */
REACH_API reach_status reach_device_describe(const reach_device* device, reach_device_info* info);

/* Frees the device (and the VkDevice / VkInstance when reach created them).
 * NULL is a no-op (REACH_OK); INVALID_STATE while models are alive. */
REACH_API reach_status reach_device_free(reach_device* device);

/* ------------------------------------------------------------------ models */

/* Load progress in bytes; return 0 to cancel the load (REACH_ERROR_CANCELLED). */
typedef int (*reach_progress_callback)(void* user, uint64_t done, uint64_t total);

/* Weight types a safetensors model can be quantized to at load (GGML block
 * formats, byte-identical to llama.cpp's reference quantizers). */
typedef enum reach_quantize_type {
  REACH_QUANTIZE_NONE = 0,   /* keep the file's weight type (default) */
  REACH_QUANTIZE_Q8_0 = 1,
  REACH_QUANTIZE_Q4_0 = 2,
  REACH_QUANTIZE_Q4_K = 3
} reach_quantize_type;

typedef struct reach_model_params {
  uint32_t size;
  reach_progress_callback progress;   /* NULL: none (nothing is printed either way) */
  void* progress_user;
  int32_t require_tokenizer;          /* 1 (default): fail without tokenizer.json; 0: token ids only */
  int32_t quantize;                   /* a reach_quantize_type; other values: INVALID_ARGUMENT */
  uint32_t reserved[15];              /* quantize took reserved[0]: the struct's size and layout are unchanged */
} reach_model_params;

REACH_API reach_model_params reach_model_default_params(void);

/* Loads a Hugging Face style folder (config.json, *.safetensors,
 * tokenizer.json) onto the device.  params may be NULL (defaults). */
REACH_API reach_status reach_model_load(reach_device* device, const char* dir, const reach_model_params* params,
                                        reach_model** out);

typedef struct reach_model_info {
  uint32_t size;             /* set by the caller: sizeof(reach_model_info) */
  int32_t vocab_size;
  int32_t n_layers;
  int32_t hidden_size;
  int32_t n_heads, n_kv_heads, head_dim;
  int64_t max_position_embeddings;
  uint64_t n_params;
  uint64_t weight_bytes;     /* device memory the weights use */
  int32_t bos_id;            /* -1: none */
  int32_t eos_id;            /* the first end-of-sequence id; -1: none */
  int32_t has_tokenizer;
  uint32_t reserved[16];
} reach_model_info;

/* Shapes and special ids of a loaded model (info->size must be set). */
REACH_API reach_status reach_model_get_info(const reach_model* model, reach_model_info* info);

/* *is_eos = 1 when token ends a sequence for this model (config.json or tokenizer). */
REACH_API reach_status reach_model_is_eos(const reach_model* model, int32_t token, int* is_eos);

/* NULL is a no-op; INVALID_STATE while sessions are alive (streams may outlive it). */
REACH_API reach_status reach_model_free(reach_model* model);

/* ------------------------------------------------------------------ text */

/* Text (UTF-8, text_len bytes; invalid UTF-8 becomes U+FFFD) to token ids.
 * add_special adds what the tokenizer's post-processor adds (BOS for Llama).
 * *n_tokens receives the count needed.  tokens = NULL asks only for the count
 * (REACH_OK); a capacity too small gives REACH_ERROR_BUFFER_TOO_SMALL. */
REACH_API reach_status reach_tokenize(const reach_model* model, const char* text, size_t text_len, int add_special,
                                      int32_t* tokens, size_t capacity, size_t* n_tokens);

/* Token ids to UTF-8 text, NUL-terminated.  skip_special drops BOS/EOS/....
 * *length receives the byte length without the NUL; capacity must be at least
 * *length + 1 (else REACH_ERROR_BUFFER_TOO_SMALL); text = NULL asks the length. */
REACH_API reach_status reach_detokenize(const reach_model* model, const int32_t* tokens, size_t n_tokens,
                                        int skip_special, char* text, size_t capacity, size_t* length);

/* Incremental detokenizer for streaming output: never splits a UTF-8 character. */
REACH_API reach_status reach_stream_create(const reach_model* model, int skip_special, reach_stream** out);
/* Appends token; *text / *length: the text now final (may be empty).  The
 * pointer stays valid until the next call on this stream. */
REACH_API reach_status reach_stream_push(reach_stream* stream, int32_t token, const char** text, size_t* length);
/* The remaining text (at the end of a generation); the stream starts over. */
REACH_API reach_status reach_stream_flush(reach_stream* stream, const char** text, size_t* length);
/* NULL is a no-op. */
REACH_API reach_status reach_stream_free(reach_stream* stream);

/* ------------------------------------------------------------------ chat
 *
 * A conversation as the model was tuned to read it: the prompt `reach run --chat` and `reach serve`'s
 * /v1/chat/completions build.  reach recognises the template's family (tokenizer_config.json's
 * chat_template, a GGUF's tokenizer.chat_template, or without one the turn tokens of the vocabulary:
 * ChatML, Gemma, Llama 2 / 3 / 3.1, Mistral, Phi-3 / 4, OLMo 2, Qwen3, SmolLM3, harmony) and renders
 * it itself; it runs no Jinja.
 *
 *   reach_chat_message chat[] = {{"system", "You are Brom, the village smith."}, {"user", "Hello!"}};
 *   reach_chat_tokenize(model, chat, 2, ids, capacity, &n);     // then prefill them
 *   reach_chat_end_tokens(model, ends, 8, &n_ends);              // the reply ends at one of these
 *   ... sample / step until is_eos or the token is in ends; a reply with
 *   REACH_REPLY_CHANNELS_AUTO splits a harmony (gpt-oss) reply into its channels.
 */
typedef struct reach_chat_message {
  const char* role;     /* "system", "user" or "assistant" (UTF-8, NUL-terminated, non-empty) */
  const char* content;  /* UTF-8, NUL-terminated; may be empty */
} reach_chat_message;

/* The n_messages messages through the model's chat template with the assistant's turn opened, as
 * token ids (BOS included once).  *n_tokens receives the count; tokens = NULL asks only the count
 * (REACH_OK); a capacity too small gives REACH_ERROR_BUFFER_TOO_SMALL.  UNSUPPORTED without a
 * tokenizer or with a template reach does not recognise; INVALID_ARGUMENT for no messages, a NULL or
 * empty role, or a conversation the template itself refuses (roles out of turn, a system message it
 * has no place for), naming why. */
REACH_API reach_status reach_chat_tokenize(const reach_model* model, const reach_chat_message* messages,
                                           size_t n_messages, int32_t* tokens, size_t capacity, size_t* n_tokens);

/* The tokens that end the assistant's turn: the template's end-of-turn token (<|im_end|>,
 * <end_of_turn>, <|eot_id|>, ...; harmony: <|return|> and <|call|>) and the model's EOS, where the
 * vocabulary has them.  reach_session_sample's is_eos says only the model's EOS ids, which
 * need not hold the end-of-turn token (reach_model_is_eos): stop at either.  Counts and buffers as reach_chat_tokenize. */
REACH_API reach_status reach_chat_end_tokens(const reach_model* model, int32_t* tokens, size_t capacity,
                                             size_t* n_tokens);

/* ------------------------------------------------------------------ replies
 *
 * A reply's text as its reader should see it, fed token by token (the same
 * assembly `reach serve` and `reach run` use):
 *  - stop strings end it: the text before the first one is the reply, and
 *    text that may still become a stop string is held back until it cannot
 *    (so a stop string split over tokens is never shown in part);
 *  - a reply in harmony's channels (gpt-oss's chat format) is split into its
 *    final channel (the answer: `content`) and its analysis channel (the
 *    model's reasoning: `reasoning`); stop strings are looked for in the
 *    final channel only, and message headers are in neither.
 * The tokens pushed are the sampled ones, end tokens excluded (stop when
 * is_eos is 1).  A reply is independent of any session: one per generation,
 * reach_reply_reset for the next.
 *
 *   const char* stops[] = {"\nUser:"};
 *   reach_reply_params rp = reach_reply_default_params();
 *   rp.stop = stops;
 *   rp.n_stop = 1;
 *   rp.channels = REACH_REPLY_CHANNELS_AUTO;
 *   reach_reply_create(model, &rp, &reply);
 *   reach_reply_text t = {sizeof t};
 *   for (reach_session_sample(s, &tok, &eos); !eos; reach_session_step(s, tok, &tok, &eos)) {
 *     reach_reply_push(reply, tok, &t);
 *     show(t.content, t.content_len);        // and t.reasoning, t.reasoning_len, if wanted
 *     if (t.stopped) break;                  // a stop string: the reply is over
 *   }
 *   reach_reply_finish(reply, &t);           // the held-back tail
 *   show(t.content, t.content_len);
 */
typedef struct reach_reply reach_reply;

#define REACH_REPLY_MAX_STOP 16      /* stop strings per reply at most */
#define REACH_REPLY_CHANNELS_AUTO -1 /* channels as the model's chat template says (harmony: 1) */

typedef struct reach_reply_params {
  uint32_t size;
  const char* const* stop;   /* n_stop stop strings: UTF-8, NUL-terminated, non-empty; copied.  NULL: none */
  size_t n_stop;             /* 0..REACH_REPLY_MAX_STOP */
  int32_t channels;          /* 0 (default): plain text, all of it content; 1: harmony channels;
                                REACH_REPLY_CHANNELS_AUTO: 1 when the model's chat template is harmony's */
  uint32_t reserved[16];
} reach_reply_params;

/* What a push or a finish adds to the reply (either text may be empty).  Each
 * text is NUL-terminated, its byte length beside it; the pointers stay valid
 * until the next call on this reply. */
typedef struct reach_reply_text {
  uint32_t size;             /* set by the caller: sizeof(reach_reply_text) */
  const char* content;       /* the answer's text now final (the final channel with channels) */
  size_t content_len;
  const char* reasoning;     /* the analysis channel's text now final; always empty without channels */
  size_t reasoning_len;
  int32_t stopped;           /* 1: a stop string ended the reply; nothing more comes, stop generating */
  uint32_t reserved[8];
} reach_reply_text;

REACH_API reach_reply_params reach_reply_default_params(void);

/* A reply over the model's tokenizer (UNSUPPORTED without one).  params may
 * be NULL (no stop strings, no channels).  An empty stop string, more than
 * REACH_REPLY_MAX_STOP, or channels outside {-1, 0, 1} are INVALID_ARGUMENT.
 * The reply may outlive the model, as a stream does. */
REACH_API reach_status reach_reply_create(const reach_model* model, const reach_reply_params* params,
                                          reach_reply** out);

/* Appends a sampled token; *text (text->size set) receives what is now safe
 * to show.  After a stop string, pushes add nothing (stopped stays 1). */
REACH_API reach_status reach_reply_push(reach_reply* reply, int32_t token, reach_reply_text* text);

/* The end of the reply: the text still held back (an incomplete character,
 * the start of a stop string that never completed, a harmony tail). */
REACH_API reach_status reach_reply_finish(reach_reply* reply, reach_reply_text* text);

/* Empties the reply for the next generation, with the same stop strings and channels. */
REACH_API reach_status reach_reply_reset(reach_reply* reply);

/* NULL is a no-op. */
REACH_API reach_status reach_reply_free(reach_reply* reply);

/* ------------------------------------------------------------------ sessions */

/* Values outside the ranges below (NaN, infinities, negative values) are
 * REACH_ERROR_INVALID_ARGUMENT with a message naming the field. */
typedef struct reach_sampling_params {
  uint32_t size;
  float temperature;   /* 0.8; finite and >= 0; 0: greedy (argmax) */
  int32_t top_k;       /* 40; >= 0; 0: no top-k cut */
  float top_p;         /* 0.95; in (0, 1]; 1: no nucleus cut */
  uint64_t seed;       /* 0 */
  uint32_t reserved[8];
} reach_sampling_params;

REACH_API reach_sampling_params reach_sampling_default_params(void);

/* Position-scheme overrides are those of the CLI (`reach run --help`):
 * strings NULL, integers -1 and reals 0 mean "not set" (config.json rules).
 * Any other value goes through the flag's checks, so NaN, infinities and
 * other negative integers are INVALID_ARGUMENT naming the flag; so are
 * attn_sinks > 0 without any attention window (set attn_window too). */
typedef struct reach_session_params {
  uint32_t size;
  uint32_t context;           /* KV-cache capacity in tokens; 0 = min(max_position_embeddings, 4096) */
  uint32_t chunk;             /* prefill chunk length (256) */
  int64_t l_test;             /* dynamic scaling's expected length (prompt + new tokens); 0 = context; >= 0 */
  const char* rope_scaling;   /* --rope-scaling: default|none|linear|dynamic|yarn|llama3|ntk|rerope|leaky_rerope|self_extend */
  double rope_factor;         /* --rope-factor */
  int64_t original_ctx;       /* --original-ctx */
  int64_t rerope_window;      /* --rerope-window */
  double leaky_k;             /* --leaky-k */
  int64_t self_extend_group;  /* --self-extend-group */
  int64_t self_extend_window; /* --self-extend-window */
  int64_t logn;               /* --logn (train length; 0 = off) */
  const char* qk_norm;        /* --qk-norm: none|key|query|cos */
  double cos_n;               /* --cos-n */
  int64_t attn_window;        /* --attn-window */
  int64_t attn_sinks;         /* --attn-sinks */
  /* More flags as on the command line, applied after the fields above, e.g.
   * "--rope-scaling yarn --rope-factor 4"; NULL = none.  Flags newer than this
   * header work here without a struct change. */
  const char* scheme_flags;
  reach_sampling_params sampling; /* initial sampler (reach_session_set_sampling changes it) */
  int32_t profile;            /* 1: GPU timestamps per dispatch (slower) */
  /* 1: sliding-window layers keep every position (--full-kv).  0 (default): they
   * keep a ring of window + chunk - 1 rows, so their memory does not grow with
   * the context, and reach_session_rewind cannot go back past what it overwrote. */
  int32_t full_kv;
  /* How the KV cache stores keys and values (-ctk / -ctv): a reach_kv_type.  f16, the default as on the
   * command line, halves f32's memory (REACH_KV_F32 for an exact f32 cache); q8_0 and q4_0 store blocks of
   * 32 values with an f16 scale (about 0.53x and 0.28x of f16), quantized as they are written, and need a
   * head_dim that is a multiple of 32 (else reach_session_create is UNSUPPORTED). */
  int32_t cache_type_k;       /* REACH_KV_F16 (default) */
  int32_t cache_type_v;       /* REACH_KV_F16 (default) */
  uint32_t reserved[13];      /* cache_type_k / _v took reserved[0..1]: the struct's size is unchanged */
} reach_session_params;

/* The KV cache's storage types (reach_session_params.cache_type_k / _v). */
typedef enum reach_kv_type {
  REACH_KV_F32 = 0,
  REACH_KV_F16 = 1,
  REACH_KV_Q8_0 = 2,
  REACH_KV_Q4_0 = 3
} reach_kv_type;

REACH_API reach_session_params reach_session_default_params(void);

/* A sequence on a model: KV cache, recorded programs, logits, sampler.
 * params may be NULL (defaults).  Scheme errors name the flag at fault. */
REACH_API reach_status reach_session_create(reach_model* model, const reach_session_params* params,
                                            reach_session** out);

/* Waits for a step in flight, then frees.  NULL is a no-op. */
REACH_API reach_status reach_session_free(reach_session* session);

/* Appends n tokens (a prompt, or more text later) at the current position;
 * the logits of the last one become readable.  CONTEXT_OVERFLOW if they do
 * not fit, INVALID_ARGUMENT for an id outside the vocabulary (every id is
 * checked first): then nothing was appended and the previous logits remain. */
REACH_API reach_status reach_session_prefill(reach_session* session, const int32_t* tokens, size_t n);

/* Appends one token (usually the last sampled one) with the decode program.
 * INVALID_STATE before anything was prefilled; CONTEXT_OVERFLOW when full;
 * INVALID_ARGUMENT for an id outside the vocabulary.  Rejected: no change. */
REACH_API reach_status reach_session_decode(reach_session* session, int32_t token);

/* Samples the next token from the current logits with the session's sampler;
 * *is_eos (may be NULL) = 1 when it ends the sequence.  Does not append it. */
REACH_API reach_status reach_session_sample(reach_session* session, int32_t* token, int* is_eos);

/* decode(token) then sample(): one generation step. */
REACH_API reach_status reach_session_step(reach_session* session, int32_t token, int32_t* next, int* is_eos);

/* Continuous batching: appends tokens[i] to sessions[i] (i < n) in one
 * decode step.  The linear layers run once over the n rows; each session's
 * attention runs over its own cache at its own position.  Afterwards each
 * session's logits and position are those reach_session_decode(sessions[i],
 * tokens[i]) would give (up to float rounding: the rows share one
 * matrix-matrix product).  The sessions must be of one model, distinct,
 * prefilled and idle (no step_async or host-submitted decode in flight);
 * n at most REACH_BATCH_MAX.  Every session and token is checked first:
 * INVALID_ARGUMENT (NULL, n == 0 or too large, a repeated session, sessions
 * of different models, a bad id), INVALID_STATE (empty or busy session),
 * CONTEXT_OVERFLOW (a full session) leave every session as it was. */
#define REACH_BATCH_MAX 64
REACH_API reach_status reach_batch_decode(reach_session* const* sessions, const int32_t* tokens, size_t n);

/* ------------------------------------------------------------------ KV pool
 * One paged KV cache that many sessions of a model share, as a server's
 * slots do (reach serve --kv-size).  Memory is reserved once, for the pool,
 * instead of a whole context per session; a session takes blocks of
 * block_rows positions as it grows and gives them back when it rewinds or is
 * freed.  A prompt whose leading blocks another session of the pool already
 * computed (the same tokens under the same position scheme) maps them instead
 * of computing them; a session that writes into a shared block copies it
 * first.  Blocks no session holds stay cached for their prefix until the pool
 * needs them (least recently used first).  When no block is free, prefill,
 * decode and reach_batch_decode return REACH_ERROR_KV_POOL_FULL before
 * anything runs, every session (and its logits) as it was.
 *
 *   reach_kv_pool_params pp = reach_kv_pool_default_params();
 *   pp.tokens = 16384;                              // or pp.bytes = 512 << 20
 *   reach_kv_pool_create(model, &pp, &pool);
 *   reach_session_create_in_pool(pool, NULL, &npc1);   // as many as wanted
 *   ...
 *   reach_session_free(npc1); ...; reach_kv_pool_free(pool);
 *
 * Calls on a pool and its sessions take the device's lock, like every call. */
typedef struct reach_kv_pool reach_kv_pool;

typedef struct reach_kv_pool_params {
  uint32_t size;
  uint32_t tokens;        /* positions the pool holds (rounded up to whole blocks); 0: bytes says */
  uint64_t bytes;         /* with tokens 0: the device bytes the pool may take (the whole blocks that fit) */
  uint32_t block_rows;    /* positions per block, a power of two; 0 = the device's
                             widest subgroup, 16 to 64 (16 on lavapipe) */
  int32_t cache_type_k;   /* a reach_kv_type, for every session of the pool (REACH_KV_F16) */
  int32_t cache_type_v;   /* REACH_KV_F16 */
  /* 1: keep each key before rotation too, for sessions of ReRoPE, Leaky ReRoPE or Self-Extend (their
   * window branch reads them; such a session in a pool without them is INVALID_ARGUMENT).  Costs one
   * more K per position. */
  int32_t rotated_keys;
  uint32_t reserved[8];
} reach_kv_pool_params;

REACH_API reach_kv_pool_params reach_kv_pool_default_params(void);

/* Allocates the pool on the model's device.  OUT_OF_MEMORY, naming the size
 * that fits, when the device or one of its bindings cannot hold it;
 * UNSUPPORTED for a quantized type the model's head_dim does not allow. */
REACH_API reach_status reach_kv_pool_create(reach_model* model, const reach_kv_pool_params* params,
                                            reach_kv_pool** out);

/* INVALID_STATE while sessions of the pool are alive.  NULL is a no-op. */
REACH_API reach_status reach_kv_pool_free(reach_kv_pool* pool);

typedef struct reach_kv_pool_info {
  uint32_t size;
  uint32_t block_rows;       /* positions per block */
  uint32_t blocks;           /* all blocks */
  uint32_t blocks_used;      /* held by a live session (a shared block counts once) */
  uint32_t blocks_cached;    /* held by none, kept for their prefix until needed */
  uint32_t sessions;         /* live sessions in the pool */
  uint64_t bytes;            /* device bytes of the pool */
  uint64_t bytes_per_token;  /* device bytes of one position, every layer */
  uint64_t prefix_hits;      /* prefills that mapped blocks instead of computing them */
  uint64_t prefix_hit_tokens;/* the positions they mapped */
} reach_kv_pool_info;

/* info->size = sizeof(*info) first. */
REACH_API reach_status reach_kv_pool_get_info(const reach_kv_pool* pool, reach_kv_pool_info* info);

/* A session whose KV cache is the pool's blocks: as reach_session_create on
 * the pool's model, except that cache_type_k / _v are the pool's (params'
 * are not read).  When every layer is windowed (attn_window, without full_kv)
 * the blocks behind the window go back to the pool as the session moves on,
 * so a long prompt needs only a window and a prefill chunk of blocks; otherwise
 * sliding-window layers keep every position, as full_kv. */
REACH_API reach_status reach_session_create_in_pool(reach_kv_pool* pool, const reach_session_params* params,
                                                    reach_session** out);

/* Replaces the sampler (and reseeds it). */
REACH_API reach_status reach_session_set_sampling(reach_session* session, const reach_sampling_params* params);

/* Logits of the last appended token: *logits points to *count (= vocab) floats
 * owned by the session, valid until the next call on this session. */
REACH_API reach_status reach_session_logits(reach_session* session, const float** logits, size_t* count);

/* Tokens held (*position) and the context capacity (*capacity); either may be NULL. */
REACH_API reach_status reach_session_position(const reach_session* session, uint32_t* position, uint32_t* capacity);

/* Forgets everything after `position` (<= the current position).  The logits
 * are unavailable until the next prefill / decode.  INVALID_ARGUMENT, with no
 * change, for a position above 0 whose keys a sliding-window ring has already
 * overwritten (full_kv in reach_session_params keeps them). */
REACH_API reach_status reach_session_rewind(reach_session* session, uint32_t position);

/* rewind(0): an empty sequence, same KV cache and programs. */
REACH_API reach_status reach_session_reset(reach_session* session);

/* Structured output: from the next reach_session_sample / reach_session_step
 * on, the sampled tokens always spell a JSON document that `schema_json`
 * accepts, and is_eos comes only once the document is whole (and is then
 * the only choice, unless a top-level number could still go on).  "{\"type\": \"object\"}" asks for any JSON object.  NULL or
 * "" removes the constraint.  Setting it, and any rewind or reset, starts a
 * new document.  The schema subset: type (object, array, string, number,
 * integer, boolean, null, or a list), properties (written in the schema's
 * order; those not in required may be left out), required,
 * additionalProperties (true/false), items, minItems, maxItems, enum, const,
 * anyOf (alternatives that start with different characters), $ref to
 * #/$defs/NAME; annotations (description, title, default, ...) are ignored.
 * Any other keyword is INVALID_ARGUMENT naming it and where it is, e.g.
 * "JSON schema: the keyword 'pattern' at #/properties/line: ...", and the
 * session keeps its previous constraint.
 *
 * A game asks an NPC what to do and always gets something it can parse:
 *
 *   reach_session_set_json_schema(npc,
 *     "{\"type\": \"object\", \"properties\": {"
 *     "  \"action\": {\"enum\": [\"greet\", \"trade\", \"attack\", \"flee\"]},"
 *     "  \"line\": {\"type\": \"string\"}},"
 *     " \"required\": [\"action\", \"line\"], \"additionalProperties\": false}");
 *   reach_session_reset(npc);
 *   reach_session_prefill(npc, prompt, n_prompt);
 *   for (reach_session_sample(npc, &tok, &eos); !eos; reach_session_step(npc, tok, &tok, &eos))
 *     reach_stream_push(text, tok, ...);   // {"action":"trade","line":"Fine wares, traveller!"}
 */
REACH_API reach_status reach_session_set_json_schema(reach_session* session, const char* schema_json);

/* The whitespace a constrained document may hold.  reach_session_set_json_schema
 * writes compact JSON: one space after ':' and ',' at most, and nothing else,
 * so that a model at a high temperature cannot spend its tokens on gaps.
 * REACH_JSON_PRETTY also allows, after '{' '[' ',' and before '}' ']', a
 * newline and then up to 4 spaces of indentation per open object or array.
 * Any other value is INVALID_ARGUMENT. */
#define REACH_JSON_COMPACT 0
#define REACH_JSON_PRETTY 1
REACH_API reach_status reach_session_set_json_schema_ws(reach_session* session, const char* schema_json,
                                                        int whitespace);

/* ----------------------------------------- frame budget: one step per frame
 *
 * (a) reach submits, the host polls.  Once per frame:
 *       reach_session_poll(s, &done);                  // cheap, never blocks
 *       if (done) { reach_session_sample(s, &tok, &eos); ...; reach_session_step_async(s, tok); }
 *     The step runs on the device's queue (the host's when adopted, under its
 *     queue lock).  Only one step is in flight per session; other session
 *     calls meanwhile fail with INVALID_STATE (free waits).
 *
 * (b) the host submits (as VkFFT): reach appends its dispatches to a command
 *     buffer of the host, which submits it with its own frame work:
 *       reach_session_record_decode(s, cmd);   // cmd in the recording state; re-record freely
 *       reach_session_begin_decode(s, tok);    // before vkQueueSubmit of cmd
 *       ... vkQueueSubmit, wait for the host's fence ...
 *       reach_session_end_decode(s);           // logits readable, position + 1
 *     A recording stays executable until it is re-recorded, released with
 *     reach_session_release_recording, or the session is freed. */

/* Submits decode(token) and returns without waiting. */
REACH_API reach_status reach_session_step_async(reach_session* session, int32_t token);

/* *done = 1 when no step is in flight (a finished step is completed: logits
 * readable, position advanced); 0 while the GPU still works.  Never blocks. */
REACH_API reach_status reach_session_poll(reach_session* session, int* done);

/* As poll, waiting up to timeout_ns (UINT64_MAX: until done). */
REACH_API reach_status reach_session_wait(reach_session* session, uint64_t timeout_ns, int* done);

/* The VkFence signalled by step_async (as uint64_t; 0 before the first step),
 * for hosts that wait on it themselves.  Do not reset or destroy it; call
 * reach_session_poll afterwards so the step is completed. */
REACH_API reach_status reach_session_fence(reach_session* session, uint64_t* vk_fence);

/* Records the one-token decode into the host's VkCommandBuffer (recording
 * state, a queue family with compute, same VkDevice).  reach never submits it. */
REACH_API reach_status reach_session_record_decode(reach_session* session, void* vk_command_buffer);

/* Before each submission of a recording: checks token and capacity, writes the inputs. */
REACH_API reach_status reach_session_begin_decode(reach_session* session, int32_t token);

/* After that submission completed (the host waited for it): reads the logits, position + 1. */
REACH_API reach_status reach_session_end_decode(reach_session* session);

/* Frees what a recording into vk_command_buffer holds (descriptor sets); the
 * buffer must not be pending.  Unknown buffers are ignored. */
REACH_API reach_status reach_session_release_recording(reach_session* session, void* vk_command_buffer);

/* ------------------------------------------------------------- embeddings
 *
 * One vector for a run of tokens: the model's final hidden state (after the
 * final norm, before the head) of each token, with the model's own causal
 * attention, pooled into `dims` floats.  The model says how (its folder's
 * sentence-transformers modules.json and 1_Pooling/config.json, or its GGUF's
 * <arch>.pooling_type): the mean over the tokens, the first token (CLS) or the
 * last token, L2-normalized where it has a Normalize module (a GGUF: always).
 * A model that says nothing is pooled as Qwen3-Embedding is: the last token,
 * normalized.  Give the tokens as the model expects them (reach_tokenize with
 * add_special = 1; Qwen3-Embedding also wants its end-of-text token last).
 *
 *   size_t dims = 0;
 *   reach_embedding_dims(model, &dims);
 *   float* v = malloc(dims * sizeof(float));
 *   reach_embed(model, ids, n_ids, v, dims, NULL);   // v: unit length
 *
 * Each call runs the tokens from the start (nothing is kept between calls),
 * on a session of the model's own (min(its context, 4096) tokens; more is
 * CONTEXT_OVERFLOW), under the device's lock.  A model whose vocabulary is
 * smaller than its hidden size is UNSUPPORTED. */
#define REACH_POOLING_MODEL 0   /* as the model says (above) */
#define REACH_POOLING_MEAN 1
#define REACH_POOLING_CLS 2
#define REACH_POOLING_LAST 3
typedef struct reach_embed_params {
  uint32_t size;    /* sizeof(reach_embed_params): from reach_embed_default_params() */
  int pooling;      /* REACH_POOLING_*; default REACH_POOLING_MODEL */
  int normalize;    /* -1 (default): as the model says; 0: not; 1: L2-normalized */
} reach_embed_params;
REACH_API reach_embed_params reach_embed_default_params(void);

/* The length of the model's embeddings (its hidden size). */
REACH_API reach_status reach_embedding_dims(const reach_model* model, size_t* dims);

/* Writes the embedding of tokens[0..n) into out[0..dims): dims must be
 * reach_embedding_dims's (else INVALID_ARGUMENT saying it); params NULL: the
 * defaults.  n = 0 or a token outside the vocabulary: INVALID_ARGUMENT. */
REACH_API reach_status reach_embed(reach_model* model, const int32_t* tokens, size_t n, float* out, size_t dims,
                                   const reach_embed_params* params);

/* ---------------------------------------------------------- function calling
 *
 * The model may call functions the host declares, as `reach serve` lets it
 * (the OpenAI API's tools): tools_json is the API's `tools` array,
 *   [{"type": "function", "function": {"name": "get_weather",
 *     "description": "...", "parameters": {JSON schema}}}, ...]
 * and tool_choice one of "auto" (NULL: the same; text or calls), "none" (no
 * tools: the prompt leaves them out), "required" (one call of one of them) or
 * a tool's name (one call of that one).  Chat templates with tool calls:
 * Qwen 2.5, Qwen3, Llama 3.1/3.2, Mistral v3 / Nemo, SmolLM3, Phi-4-mini and
 * gpt-oss (harmony); others are UNSUPPORTED.
 *
 * Three calls take the same tools_json and tool_choice:
 *  - reach_chat_tokenize_tools: the prompt with the tools, ending where a
 *    forced call opens (its tag, or harmony's call header);
 *  - reach_session_set_tools: the sampler's constraint.  A forced call's
 *    arguments follow the tool's parameters schema (the keywords of
 *    reach_session_set_json_schema; another is INVALID_ARGUMENT naming
 *    tools_json[i].function.parameters), then only an end token may come.
 *    Under "auto" the reply is free text until the model opens a call; from
 *    there the function's name is one of the tools' and its arguments follow
 *    that tool's schema (a schema the grammar cannot follow: any object);
 *    a family whose reply is the call (Llama 3.1, Mistral, Phi-4-mini) ends
 *    after it.  tools_json NULL or "" removes the constraint; rewind / reset
 *    start over;
 *  - reach_reply_set_tools: the reply (reach_reply_create; a harmony model's
 *    with channels) reads the calls out of the text: content then holds the
 *    text around them, and reach_reply_tool_calls_json gives the calls so
 *    far, all of them after reach_reply_finish, as
 *      [{"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}]
 *    (arguments as a JSON text, as the API carries them).
 *
 *   reach_chat_tokenize_tools(model, chat, 1, tools, "auto", ids, cap, &n);
 *   reach_session_set_tools(s, tools, "auto");
 *   reach_reply_set_tools(reply, tools, "auto");
 *   ... prefill ids, sample and push to the reply until an end token ...
 *   reach_reply_finish(reply, &t);
 *   reach_reply_tool_calls_json(reply, buf, sizeof buf, &len);   // "[]": a text answer
 *
 * Errors: tools_json not an array of such tools (a name of other than
 * letters, digits, '_' and '-', a name used twice), a tool_choice that is
 * none of the forms: INVALID_ARGUMENT naming it.  The tool history of a
 * conversation (assistant calls, tool results) is not taken here. */
REACH_API reach_status reach_chat_tokenize_tools(const reach_model* model, const reach_chat_message* messages,
                                                 size_t n_messages, const char* tools_json, const char* tool_choice,
                                                 int32_t* tokens, size_t capacity, size_t* n_tokens);
REACH_API reach_status reach_session_set_tools(reach_session* session, const char* tools_json,
                                               const char* tool_choice);
/* Starts the reply over (as reach_reply_reset) with the tools; NULL or "" tools_json: none. */
REACH_API reach_status reach_reply_set_tools(reach_reply* reply, const char* tools_json, const char* tool_choice);
/* The calls' JSON, NUL-terminated: *length its byte length; capacity at least *length + 1 (else
 * BUFFER_TOO_SMALL); json = NULL asks the length. */
REACH_API reach_status reach_reply_tool_calls_json(reach_reply* reply, char* json, size_t capacity, size_t* length);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* REACH_H */
