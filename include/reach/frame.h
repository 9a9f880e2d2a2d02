/* reach/frame.h - one decode step per frame: async steps and host-recorded commands.
 * Part of the C API: include <reach.h> (this file is included by it and
 * can be included alone). */
#ifndef REACH_FRAME_H
#define REACH_FRAME_H

#include "session.h"

#ifdef __cplusplus
extern "C" {
#endif

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

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* REACH_FRAME_H */
