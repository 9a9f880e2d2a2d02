/* The C API exercised from C (compiled as C11): every call returns a status,
 * misuse gives codes with messages and never aborts.  Makes a tiny model with
 * tools/make_tiny_model.py (Debian's python3 + numpy).  Prints "N passed, M
 * failed" and exits non-zero on a failure.  Also run under LeakSanitizer
 * (test capi_c_leaks): every handle is freed, nothing may leak.
 *
 *   test_capi_c [MODEL_DIR]     (REACH_SOURCE_ROOT: the repository, for the model script)
 */
#include <reach.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _WIN32
#include <process.h>
#define getpid _getpid
#else
#include <unistd.h>
#endif
#ifdef REACH_TEST_LSAN
#include <dlfcn.h>
#endif

static int g_passed, g_failed, g_vulkan_errors, g_progress_calls;

#define EXPECT(cond)                                                                       \
  do {                                                                                     \
    if (cond) g_passed++;                                                                  \
    else {                                                                                 \
      g_failed++;                                                                          \
      fprintf(stderr, "%s:%d: FAILED: %s\n  last error: %s\n", __FILE__, __LINE__, #cond,  \
              reach_last_error());                                                         \
    }                                                                                      \
  } while (0)

/* A call expected to return `want`, with a non-empty message on failure. */
#define EXPECT_STATUS(call, want)                                                          \
  do {                                                                                     \
    reach_status got_ = (call);                                                            \
    if (got_ == (want) && (got_ == REACH_OK || reach_last_error()[0] != '\0')) g_passed++; \
    else {                                                                                 \
      g_failed++;                                                                          \
      fprintf(stderr, "%s:%d: FAILED: %s returned %s, expected %s\n  last error: %s\n",     \
              __FILE__, __LINE__, #call, reach_status_name(got_), reach_status_name(want), \
              reach_last_error());                                                         \
    }                                                                                      \
  } while (0)

static void on_log(void* user, int level, const char* message) {
  (void)user;
  if (level == REACH_LOG_ERROR && strncmp(message, "vulkan:", 7) == 0) {
    g_vulkan_errors++;
    fprintf(stderr, "validation error: %s\n", message);
  }
}

static int on_progress(void* user, uint64_t done, uint64_t total) {
  g_progress_calls++;
  return done <= total && *(int*)user; /* *user == 0: cancel */
}

/* A reply (reach_reply) fed the tokens of `text` as if they were sampled: the content and reasoning it
 * hands out, concatenated, and whether a stop string ended it.  Each push's content must never show
 * part of a stop string (checked by the callers through the totals). */
typedef struct {
  char content[512], reasoning[512];
  int stopped, pushes_after_stop;
} reply_result;

static reply_result reply_of(reach_model* model, reach_reply* reply, const char* text) {
  reply_result r;
  memset(&r, 0, sizeof r);
  int32_t ids[256];
  size_t n = 0;
  EXPECT_STATUS(reach_tokenize(model, text, strlen(text), 0, ids, 256, &n), REACH_OK);
  reach_reply_text t;
  memset(&t, 0, sizeof t);
  t.size = sizeof t;
  for (size_t i = 0; i < n; ++i) {
    if (r.stopped) r.pushes_after_stop++;
    EXPECT_STATUS(reach_reply_push(reply, ids[i], &t), REACH_OK);
    strncat(r.content, t.content, t.content_len);
    strncat(r.reasoning, t.reasoning, t.reasoning_len);
    r.stopped = t.stopped;
  }
  EXPECT_STATUS(reach_reply_finish(reply, &t), REACH_OK);
  strncat(r.content, t.content, t.content_len);
  strncat(r.reasoning, t.reasoning, t.reasoning_len);
  r.stopped = r.stopped || t.stopped;
  return r;
}

static int argmax(const float* v, size_t n) {
  size_t best = 0;
  for (size_t i = 1; i < n; ++i)
    if (v[i] > v[best]) best = i;
  return (int)best;
}

int main(int argc, char** argv) {
  char model_dir[512], cmd[1200];
  if (argc > 1) {
    snprintf(model_dir, sizeof model_dir, "%s", argv[1]);
  } else {
    const char* root = getenv("REACH_SOURCE_ROOT");
    snprintf(model_dir, sizeof model_dir, "/tmp/reach-capi-c-%d", (int)getpid());
    const char* py = getenv("REACH_TEST_PYTHON");
    snprintf(cmd, sizeof cmd, "%s %s/tools/make_tiny_model.py %s > /dev/null", py && *py ? py : "/usr/bin/python3",
             root ? root : ".", model_dir);
    if (system(cmd) != 0) {
      fprintf(stderr, "could not make the tiny model: %s\n0 passed, 1 failed\n", cmd);
      return 1;
    }
  }
#ifdef REACH_TEST_LSAN
  /* The Vulkan loader unloads the driver and layers with each VkInstance, and
   * LeakSanitizer cannot name an unloaded library, so tests/lsan.supp could not
   * match their process-lifetime allocations: keep them loaded. */
  {
    static const char* const libs[] = {"libvulkan_lvp.so", "libVkLayer_khronos_validation.so",
                                       "libVkLayer_MESA_device_select.so"};
    for (size_t i = 0; i < sizeof libs / sizeof libs[0]; ++i) dlopen(libs[i], RTLD_NOW | RTLD_NODELETE);
  }
#endif
  reach_set_log_callback(on_log, NULL);

  /* Version and status names. */
  EXPECT(strcmp(reach_version(), REACH_VERSION_STRING) == 0);
  EXPECT(REACH_VERSION_NUMBER == REACH_VERSION_MAJOR * 10000 + REACH_VERSION_MINOR * 100 + REACH_VERSION_PATCH);
  EXPECT(strcmp(reach_status_name(REACH_ERROR_CONTEXT_OVERFLOW), "REACH_ERROR_CONTEXT_OVERFLOW") == 0);
  EXPECT(reach_status_name((reach_status)999) != NULL);

  /* Devices. */
  uint32_t count = 0;
  EXPECT_STATUS(reach_device_count(&count), REACH_OK);
  EXPECT(count >= 1);
  reach_device_info info;
  memset(&info, 0, sizeof info);
  EXPECT_STATUS(reach_device_get_info(0, &info), REACH_ERROR_INVALID_ARGUMENT); /* size 0 */
  info.size = sizeof info;
  EXPECT_STATUS(reach_device_get_info(0, &info), REACH_OK);
  EXPECT(info.name[0] != '\0');
  EXPECT_STATUS(reach_device_get_info(count + 5, &info), REACH_ERROR_INVALID_ARGUMENT);
  EXPECT(strstr(reach_last_error(), "out of range") != NULL);
  EXPECT_STATUS(reach_device_count(NULL), REACH_ERROR_INVALID_ARGUMENT);

  reach_device* dev = NULL;
  reach_device_params dp = reach_device_default_params();
  dp.name = "no such gpu anywhere";
  EXPECT_STATUS(reach_device_create(&dp, &dev), REACH_ERROR_INVALID_ARGUMENT);
  EXPECT(dev == NULL);
  dp = reach_device_default_params();
  dp.size = 0;
  EXPECT_STATUS(reach_device_create(&dp, &dev), REACH_ERROR_INVALID_ARGUMENT);
  /* Adopting: get_instance_proc_addr was appended to reach_adopt_params.  A caller built against the
   * older header passes the older size: the field then reads as NULL (reach's own loader) and the call
   * goes on to check the handles, as before. */
  reach_adopt_params ap = reach_adopt_default_params();
  EXPECT(ap.size == sizeof ap);
  EXPECT(ap.get_instance_proc_addr == NULL);
  EXPECT(offsetof(reach_adopt_params, get_instance_proc_addr) >= offsetof(reach_adopt_params, reserved) + sizeof ap.reserved);
  ap.size = (uint32_t)offsetof(reach_adopt_params, get_instance_proc_addr);
  EXPECT_STATUS(reach_device_adopt(&ap, &dev), REACH_ERROR_INVALID_ARGUMENT);
  EXPECT(strstr(reach_last_error(), "VkInstance") != NULL);
  EXPECT(dev == NULL);
  dp = reach_device_default_params();
  dp.low_priority = 1;
  dp.use_environment = 1; /* the suite's REACH_VALIDATION=1 applies */
  EXPECT_STATUS(reach_device_create(&dp, &dev), REACH_OK);
  if (!dev) {
    fprintf(stderr, "no device: cannot go on\n%d passed, %d failed\n", g_passed, g_failed + 1);
    return 1;
  }
  reach_device_info dinfo;
  dinfo.size = sizeof dinfo;
  EXPECT_STATUS(reach_device_describe(dev, &dinfo), REACH_OK);
  EXPECT(strcmp(dinfo.name, info.name) == 0 || count > 1);

  /* Models: bad paths, cancel, load. */
  reach_model* model = NULL;
  EXPECT_STATUS(reach_model_load(dev, "/nonexistent/model/dir", NULL, &model), REACH_ERROR_IO);
  EXPECT(strstr(reach_last_error(), "/nonexistent/model/dir") != NULL);
  EXPECT_STATUS(reach_model_load(dev, NULL, NULL, &model), REACH_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(reach_model_load(NULL, model_dir, NULL, &model), REACH_ERROR_INVALID_ARGUMENT);
  int keep_going = 0;
  reach_model_params mp = reach_model_default_params();
  mp.progress = on_progress;
  mp.progress_user = &keep_going;
  EXPECT_STATUS(reach_model_load(dev, model_dir, &mp, &model), REACH_ERROR_CANCELLED);
  EXPECT(model == NULL);
  keep_going = 1;
  g_progress_calls = 0;
  EXPECT_STATUS(reach_model_load(dev, model_dir, &mp, &model), REACH_OK);
  EXPECT(g_progress_calls > 0);
  if (!model) {
    reach_device_free(dev);
    fprintf(stderr, "no model: cannot go on\n%d passed, %d failed\n", g_passed, g_failed + 1);
    return 1;
  }
  EXPECT_STATUS(reach_device_free(dev), REACH_ERROR_INVALID_STATE); /* a model is alive */

  reach_model_info mi;
  mi.size = sizeof mi;
  EXPECT_STATUS(reach_model_get_info(model, &mi), REACH_OK);
  EXPECT(mi.vocab_size > 0 && mi.n_layers > 0 && mi.has_tokenizer);

  /* Text. */
  const char* text = "The quick brown fox jumps over the lazy dog.";
  size_t n_ids = 0;
  EXPECT_STATUS(reach_tokenize(model, text, strlen(text), 1, NULL, 0, &n_ids), REACH_OK);
  EXPECT(n_ids > 1);
  int32_t ids[256];
  size_t got = 0;
  EXPECT_STATUS(reach_tokenize(model, text, strlen(text), 1, ids, 1, &got), REACH_ERROR_BUFFER_TOO_SMALL);
  EXPECT(got == n_ids);
  EXPECT_STATUS(reach_tokenize(model, text, strlen(text), 1, ids, 256, &got), REACH_OK);
  char back[512];
  size_t len = 0;
  EXPECT_STATUS(reach_detokenize(model, ids, got, 1, NULL, 0, &len), REACH_OK);
  EXPECT_STATUS(reach_detokenize(model, ids, got, 1, back, len, &len), REACH_ERROR_BUFFER_TOO_SMALL);
  EXPECT_STATUS(reach_detokenize(model, ids, got, 1, back, sizeof back, &len), REACH_OK);
  EXPECT(strcmp(back, text) == 0);

  /* Sessions: wrong order first. */
  reach_session* s = NULL;
  reach_session_params sp = reach_session_default_params();
  sp.scheme_flags = "--no-such-flag 3";
  EXPECT_STATUS(reach_session_create(model, &sp, &s), REACH_ERROR_INVALID_ARGUMENT);
  EXPECT(strstr(reach_last_error(), "--no-such-flag") != NULL);
  sp = reach_session_default_params();
  sp.rope_scaling = "warp_drive";
  EXPECT(reach_session_create(model, &sp, &s) != REACH_OK && s == NULL);
  sp = reach_session_default_params();
  sp.context = 64;
  sp.sampling.temperature = 0; /* greedy */
  EXPECT_STATUS(reach_session_create(model, &sp, &s), REACH_OK);
  int32_t tok = -1;
  int eos = 0;
  const float* logits = NULL;
  size_t n_logits = 0;
  EXPECT_STATUS(reach_session_decode(s, 1), REACH_ERROR_INVALID_STATE);
  EXPECT_STATUS(reach_session_sample(s, &tok, &eos), REACH_ERROR_INVALID_STATE);
  EXPECT_STATUS(reach_session_logits(s, &logits, &n_logits), REACH_ERROR_INVALID_STATE);
  EXPECT_STATUS(reach_session_step_async(s, 1), REACH_ERROR_INVALID_STATE);
  EXPECT_STATUS(reach_session_prefill(s, NULL, 3), REACH_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(reach_session_prefill(NULL, ids, got), REACH_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(reach_model_free(model), REACH_ERROR_INVALID_STATE); /* a session is alive */

  /* Prefill, greedy generation. */
  EXPECT_STATUS(reach_session_prefill(s, ids, got), REACH_OK);
  EXPECT_STATUS(reach_session_logits(s, &logits, &n_logits), REACH_OK);
  EXPECT(n_logits == (size_t)mi.vocab_size);
  EXPECT_STATUS(reach_session_sample(s, &tok, &eos), REACH_OK);
  EXPECT(tok == argmax(logits, n_logits));
  int32_t gen[8];
  gen[0] = tok;
  for (int i = 1; i < 8; ++i) EXPECT_STATUS(reach_session_step(s, gen[i - 1], &gen[i], &eos), REACH_OK);
  uint32_t pos = 0, cap = 0;
  EXPECT_STATUS(reach_session_position(s, &pos, &cap), REACH_OK);
  EXPECT(pos == got + 7 && cap == 64);
  EXPECT_STATUS(reach_session_decode(s, mi.vocab_size + 10), REACH_ERROR_INVALID_ARGUMENT);

  /* Rewind to the prompt: the same tokens come again; logits are gone until a decode. */
  EXPECT_STATUS(reach_session_rewind(s, (uint32_t)got + 100), REACH_ERROR_INVALID_ARGUMENT);
  EXPECT_STATUS(reach_session_rewind(s, (uint32_t)got), REACH_OK);
  EXPECT_STATUS(reach_session_sample(s, &tok, &eos), REACH_ERROR_INVALID_STATE);
  int same = 1;
  for (int i = 1; i < 8; ++i) {
    EXPECT_STATUS(reach_session_step(s, gen[i - 1], &tok, &eos), REACH_OK);
    same = same && tok == gen[i];
  }
  EXPECT(same);

  /* Frame-budget mode: step_async + poll gives the same chain. */
  EXPECT_STATUS(reach_session_rewind(s, (uint32_t)got), REACH_OK);
  same = 1;
  for (int i = 1; i < 8; ++i) {
    int done = 0;
    EXPECT_STATUS(reach_session_step_async(s, gen[i - 1]), REACH_OK);
    if (i == 1) {
      EXPECT_STATUS(reach_session_step_async(s, gen[i - 1]), REACH_ERROR_INVALID_STATE);
      EXPECT_STATUS(reach_session_prefill(s, ids, 1), REACH_ERROR_INVALID_STATE);
      uint64_t fence = 0;
      EXPECT_STATUS(reach_session_fence(s, &fence), REACH_OK);
      EXPECT(fence != 0);
    }
    EXPECT_STATUS(reach_session_poll(s, &done), REACH_OK);
    if (!done) EXPECT_STATUS(reach_session_wait(s, UINT64_MAX, &done), REACH_OK);
    EXPECT(done == 1);
    EXPECT_STATUS(reach_session_sample(s, &tok, &eos), REACH_OK);
    same = same && tok == gen[i];
  }
  EXPECT(same);
  EXPECT_STATUS(reach_session_end_decode(s), REACH_ERROR_INVALID_STATE);
  EXPECT_STATUS(reach_session_begin_decode(s, gen[0]), REACH_ERROR_INVALID_STATE); /* nothing recorded */

  /* Sampling with temperature is reproducible from the seed. */
  reach_sampling_params smp = reach_sampling_default_params();
  smp.temperature = 1.0f;
  smp.seed = 7;
  int32_t a[4], b[4];
  EXPECT_STATUS(reach_session_set_sampling(s, &smp), REACH_OK);
  for (int i = 0; i < 4; ++i) EXPECT_STATUS(reach_session_sample(s, &a[i], NULL), REACH_OK);
  EXPECT_STATUS(reach_session_set_sampling(s, &smp), REACH_OK);
  for (int i = 0; i < 4; ++i) EXPECT_STATUS(reach_session_sample(s, &b[i], NULL), REACH_OK);
  EXPECT(memcmp(a, b, sizeof a) == 0);

  /* Streaming detokenizer. */
  reach_stream* st = NULL;
  EXPECT_STATUS(reach_stream_create(model, 1, &st), REACH_OK);
  char streamed[512] = "";
  for (size_t i = 0; i < got; ++i) {
    const char* piece;
    size_t plen;
    EXPECT_STATUS(reach_stream_push(st, ids[i], &piece, &plen), REACH_OK);
    strncat(streamed, piece, plen);
  }
  {
    const char* piece;
    size_t plen;
    EXPECT_STATUS(reach_stream_flush(st, &piece, &plen), REACH_OK);
    strncat(streamed, piece, plen);
  }
  EXPECT(strcmp(streamed, text) == 0);
  EXPECT_STATUS(reach_stream_free(st), REACH_OK);

  /* Replies: stop strings (held back while they may still complete) and harmony's channels. */
  {
    const char* plain = "Hello there. STOP and more";
    const char* harmony = "<|channel|>analysis<|message|>Think: STOP? no.<|end|>"
                          "<|start|>assistant<|channel|>final<|message|>The answer. STOP here";
    const char* stops[] = {"STOP", "never seen"};
    reach_reply* reply = NULL;
    reach_reply_params rp = reach_reply_default_params();
    EXPECT(rp.size == sizeof rp && rp.n_stop == 0 && rp.channels == 0);
    EXPECT_STATUS(reach_reply_create(model, NULL, &reply), REACH_OK);   /* no stops, no channels */
    reply_result r = reply_of(model, reply, plain);
    EXPECT(strcmp(r.content, plain) == 0 && r.reasoning[0] == '\0' && !r.stopped);
    EXPECT_STATUS(reach_reply_free(reply), REACH_OK);

    rp.stop = stops;
    rp.n_stop = 2;
    EXPECT_STATUS(reach_reply_create(model, &rp, &reply), REACH_OK);
    r = reply_of(model, reply, plain);
    EXPECT(strcmp(r.content, "Hello there. ") == 0);
    EXPECT(r.stopped);
    EXPECT(r.pushes_after_stop > 0);   /* pushes after the stop add nothing */
    EXPECT_STATUS(reach_reply_reset(reply), REACH_OK);   /* the next generation: same stops */
    r = reply_of(model, reply, "no stop in this one, ST");
    EXPECT(strcmp(r.content, "no stop in this one, ST") == 0 && !r.stopped);   /* the tail comes at finish */
    EXPECT_STATUS(reach_reply_free(reply), REACH_OK);

    /* Harmony: the final channel is the content, the analysis the reasoning; stops end the final
     * channel only, and the headers are in neither. */
    rp.channels = 1;
    EXPECT_STATUS(reach_reply_create(model, &rp, &reply), REACH_OK);
    r = reply_of(model, reply, harmony);
    EXPECT(strcmp(r.reasoning, "Think: STOP? no.") == 0);
    EXPECT(strcmp(r.content, "The answer. ") == 0);
    EXPECT(r.stopped);
    EXPECT_STATUS(reach_reply_free(reply), REACH_OK);
    rp.n_stop = 0;
    EXPECT_STATUS(reach_reply_create(model, &rp, &reply), REACH_OK);
    r = reply_of(model, reply, harmony);
    EXPECT(strcmp(r.content, "The answer. STOP here") == 0 && !r.stopped);
    EXPECT_STATUS(reach_reply_free(reply), REACH_OK);
    /* AUTO: this model's chat format has no channels: the text is all content, markers included. */
    rp.channels = REACH_REPLY_CHANNELS_AUTO;
    EXPECT_STATUS(reach_reply_create(model, &rp, &reply), REACH_OK);
    r = reply_of(model, reply, harmony);
    EXPECT(strcmp(r.content, harmony) == 0 && r.reasoning[0] == '\0');
    /* Misuse: codes with messages, the reply unchanged. */
    reach_reply_text t;
    memset(&t, 0, sizeof t);
    EXPECT_STATUS(reach_reply_push(reply, ids[0], &t), REACH_ERROR_INVALID_ARGUMENT);   /* size 0 */
    t.size = sizeof t;
    EXPECT_STATUS(reach_reply_push(reply, ids[0], NULL), REACH_ERROR_INVALID_ARGUMENT);
    EXPECT_STATUS(reach_reply_push(reply, -1, &t), REACH_ERROR_INVALID_ARGUMENT);
    EXPECT_STATUS(reach_reply_push(reply, 1 << 30, &t), REACH_ERROR_INVALID_ARGUMENT);
    EXPECT_STATUS(reach_reply_push(NULL, ids[0], &t), REACH_ERROR_INVALID_ARGUMENT);
    EXPECT_STATUS(reach_reply_free(reply), REACH_OK);
    EXPECT_STATUS(reach_reply_push(reply, ids[0], &t), REACH_ERROR_INVALID_ARGUMENT);   /* freed */
    EXPECT_STATUS(reach_reply_free(NULL), REACH_OK);
    const char* empty[] = {""};
    rp = reach_reply_default_params();
    rp.stop = empty;
    rp.n_stop = 1;
    EXPECT_STATUS(reach_reply_create(model, &rp, &reply), REACH_ERROR_INVALID_ARGUMENT);
    rp.n_stop = REACH_REPLY_MAX_STOP + 1;
    EXPECT_STATUS(reach_reply_create(model, &rp, &reply), REACH_ERROR_INVALID_ARGUMENT);
    rp.stop = NULL;
    rp.n_stop = 1;
    EXPECT_STATUS(reach_reply_create(model, &rp, &reply), REACH_ERROR_INVALID_ARGUMENT);
    rp = reach_reply_default_params();
    rp.channels = 2;
    EXPECT_STATUS(reach_reply_create(model, &rp, &reply), REACH_ERROR_INVALID_ARGUMENT);
    EXPECT(reply == NULL);
    EXPECT_STATUS(reach_reply_create(NULL, NULL, &reply), REACH_ERROR_INVALID_ARGUMENT);
    EXPECT_STATUS(reach_reply_create(model, NULL, NULL), REACH_ERROR_INVALID_ARGUMENT);
  }

  /* Context overflow. */
  reach_session* small = NULL;
  sp = reach_session_default_params();
  sp.context = 4;
  EXPECT_STATUS(reach_session_create(model, &sp, &small), REACH_OK);
  EXPECT_STATUS(reach_session_prefill(small, ids, 5), REACH_ERROR_CONTEXT_OVERFLOW);
  EXPECT(strstr(reach_last_error(), "context") != NULL);
  EXPECT_STATUS(reach_session_prefill(small, ids, 4), REACH_OK);
  EXPECT_STATUS(reach_session_decode(small, ids[0]), REACH_ERROR_CONTEXT_OVERFLOW);
  EXPECT_STATUS(reach_session_step_async(small, ids[0]), REACH_ERROR_CONTEXT_OVERFLOW);
  EXPECT_STATUS(reach_session_reset(small), REACH_OK);
  EXPECT_STATUS(reach_session_prefill(small, ids, 2), REACH_OK);
  EXPECT_STATUS(reach_session_free(small), REACH_OK);
  EXPECT_STATUS(reach_session_prefill(small, ids, 1), REACH_ERROR_INVALID_ARGUMENT); /* freed */
  EXPECT(strstr(reach_last_error(), "not a live handle") != NULL);

  /* Structured output: an NPC's answer is always one of the documents the schema allows (every
   * property required, enums only: the whole set is known), even from random weights at temperature 1. */
  {
    static const char* const schema =
        "{\"type\": \"object\", \"properties\": {"
        "\"action\": {\"enum\": [\"greet\", \"trade\", \"attack\", \"flee\"]},"
        "\"target\": {\"enum\": [\"player\", \"guard\"]}, \"loud\": {\"type\": \"boolean\"}},"
        "\"required\": [\"action\", \"target\", \"loud\"], \"additionalProperties\": false}";
    static const char* const actions[] = {"greet", "trade", "attack", "flee"};
    static const char* const targets[] = {"player", "guard"};
    reach_session* npc = NULL;
    sp = reach_session_default_params();
    sp.sampling.temperature = 1.0f;
    sp.sampling.top_k = 0;
    sp.sampling.top_p = 1.0f;
    EXPECT_STATUS(reach_session_create(model, &sp, &npc), REACH_OK);
    EXPECT_STATUS(reach_session_set_json_schema(NULL, schema), REACH_ERROR_INVALID_ARGUMENT);
    EXPECT_STATUS(reach_session_set_json_schema(npc, "{\"type\": \"string\", \"pattern\": \"^a\"}"),
                  REACH_ERROR_INVALID_ARGUMENT);
    EXPECT(strstr(reach_last_error(), "'pattern'") != NULL && strstr(reach_last_error(), " at #") != NULL);
    EXPECT_STATUS(reach_session_set_json_schema(npc, "{\"type\": "), REACH_ERROR_INVALID_ARGUMENT);
    EXPECT(strstr(reach_last_error(), "not valid JSON") != NULL);
    EXPECT_STATUS(reach_session_set_json_schema_ws(npc, schema, 2), REACH_ERROR_INVALID_ARGUMENT);
    EXPECT(strstr(reach_last_error(), "REACH_JSON_PRETTY") != NULL);
    EXPECT_STATUS(reach_session_set_json_schema_ws(npc, schema, REACH_JSON_PRETTY), REACH_OK);
    EXPECT_STATUS(reach_session_set_json_schema(npc, schema), REACH_OK);
    for (int round = 0; round < 3; ++round) {
      sp.sampling.seed = (uint64_t)round + 1;
      EXPECT_STATUS(reach_session_set_sampling(npc, &sp.sampling), REACH_OK);
      EXPECT_STATUS(reach_session_reset(npc), REACH_OK);   /* a new document */
      EXPECT_STATUS(reach_session_prefill(npc, ids, 4), REACH_OK);
      int32_t out[400];
      size_t n = 0;
      int end = 0;
      EXPECT_STATUS(reach_session_sample(npc, &tok, &end), REACH_OK);
      while (!end && n < 400) {
        out[n++] = tok;
        if (reach_session_step(npc, tok, &tok, &end) != REACH_OK) break;
      }
      EXPECT(end);
      char doc[2048];
      size_t dlen = 0;
      EXPECT_STATUS(reach_detokenize(model, out, n, 1, doc, sizeof doc - 1, &dlen), REACH_OK);
      doc[dlen < sizeof doc ? dlen : sizeof doc - 1] = '\0';
      char compact[2048];
      size_t c = 0;
      for (size_t i = 0; doc[i]; ++i)
        if (!strchr(" \n\t\r", doc[i])) compact[c++] = doc[i];
      compact[c] = '\0';
      EXPECT(strchr(doc, '\n') == NULL && strstr(doc, "  ") == NULL);   /* compact: one space at most */
      int matches = 0;
      for (int a = 0; a < 4; ++a)
        for (int t = 0; t < 2; ++t)
          for (int l = 0; l < 2; ++l) {
            char want[128];
            snprintf(want, sizeof want, "{\"action\":\"%s\",\"target\":\"%s\",\"loud\":%s}", actions[a], targets[t],
                     l ? "true" : "false");
            matches += strcmp(compact, want) == 0;
          }
      EXPECT(matches == 1);
      if (matches != 1) fprintf(stderr, "  the NPC wrote: %s\n", doc);
      /* The document is whole: no more tokens until a reset or a new schema. */
      EXPECT_STATUS(reach_session_sample(npc, &tok, &end), REACH_ERROR_INVALID_ARGUMENT);
    }
    EXPECT_STATUS(reach_session_set_json_schema(npc, NULL), REACH_OK);   /* free text again */
    EXPECT_STATUS(reach_session_sample(npc, &tok, NULL), REACH_OK);
    EXPECT_STATUS(reach_session_free(npc), REACH_OK);
  }

  /* Embeddings from C: the tiny model says nothing of pooling, so the last token, normalized. */
  {
    size_t dims = 0;
    EXPECT_STATUS(reach_embedding_dims(model, &dims), REACH_OK);
    EXPECT(dims == 64);
    float v[64];
    double sq = 0;
    EXPECT_STATUS(reach_embed(model, ids, 4, v, dims, NULL), REACH_OK);
    for (size_t i = 0; i < 64; ++i) sq += (double)v[i] * v[i];
    EXPECT(sq > 0.99999 && sq < 1.00001);
    reach_embed_params ep = reach_embed_default_params();
    ep.normalize = 0;
    ep.pooling = REACH_POOLING_MEAN;
    EXPECT_STATUS(reach_embed(model, ids, 4, v, dims, &ep), REACH_OK);
    EXPECT_STATUS(reach_embed(model, ids, 4, v, 32, NULL), REACH_ERROR_INVALID_ARGUMENT);
  }

  /* Free in order; freeing NULL is fine. */
  EXPECT_STATUS(reach_session_free(s), REACH_OK);
  EXPECT_STATUS(reach_model_free(model), REACH_OK);
  EXPECT_STATUS(reach_model_free(model), REACH_ERROR_INVALID_ARGUMENT); /* twice */
  EXPECT_STATUS(reach_device_free(dev), REACH_OK);
  EXPECT_STATUS(reach_session_free(NULL), REACH_OK);
  EXPECT_STATUS(reach_model_free(NULL), REACH_OK);
  EXPECT_STATUS(reach_device_free(NULL), REACH_OK);
  EXPECT(g_vulkan_errors == 0);

  reach_set_log_callback(NULL, NULL);
  if (argc <= 1) {
    snprintf(cmd, sizeof cmd, "rm -rf %s", model_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", model_dir);
  }
  printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed ? 1 : 0;
}
