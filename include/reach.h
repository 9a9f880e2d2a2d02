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

/* One header per area, in the order they build on each other; each can be
 * included alone. */
#include "reach/common.h"
#include "reach/device.h"
#include "reach/model.h"
#include "reach/chat.h"
#include "reach/reply.h"
#include "reach/session.h"
#include "reach/kv_pool.h"
#include "reach/frame.h"
#include "reach/embed.h"
#include "reach/tools.h"

#endif /* REACH_H */
