/* reach/common.h - what every part of the C API uses: the version, REACH_API,
 * reach_status with the last error, logging, and the handles of the device,
 * model, session and stream.  Part of the C API: include <reach.h>. */
#ifndef REACH_COMMON_H
#define REACH_COMMON_H

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

/* ------------------------------------------------------------------ handles */

typedef struct reach_device reach_device;
typedef struct reach_model reach_model;
typedef struct reach_session reach_session;
typedef struct reach_stream reach_stream;

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* REACH_COMMON_H */
