/* complete.c - stream a completion with the reach C API.
 *
 *   cc complete.c $(pkg-config --cflags --libs reach) -o complete
 *   ./complete MODEL_DIR "Once upon a time" [N_TOKENS] [TEMPERATURE]
 */
#include <reach.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                                   \
  do {                                                                                \
    reach_status st_ = (call);                                                        \
    if (st_ != REACH_OK) {                                                            \
      fprintf(stderr, "%s failed: %s\n  %s\n", #call, reach_status_name(st_),         \
              reach_last_error());                                                    \
      goto done;                                                                      \
    }                                                                                 \
  } while (0)

static int on_progress(void* user, uint64_t done, uint64_t total) {
  (void)user;
  fprintf(stderr, "\rloading %3d%%", total ? (int)(100 * done / total) : 100);
  if (done == total) fprintf(stderr, "\n");
  return 1; /* 0 would cancel the load */
}

static void on_log(void* user, int level, const char* message) {
  (void)user;
  if (level >= REACH_LOG_INFO) fprintf(stderr, "[reach] %s\n", message);
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s MODEL_DIR PROMPT [N_TOKENS] [TEMPERATURE]\n", argv[0]);
    return 2;
  }
  const char* dir = argv[1];
  const char* prompt = argv[2];
  int n_predict = argc > 3 ? atoi(argv[3]) : 32;
  float temperature = argc > 4 ? (float)atof(argv[4]) : 0.0f;

  int rc = 1;
  reach_device* device = NULL;
  reach_model* model = NULL;
  reach_session* session = NULL;
  reach_stream* stream = NULL;
  int32_t* ids = NULL;
  size_t n_ids = 0;

  fprintf(stderr, "reach %s\n", reach_version());
  reach_set_log_callback(on_log, NULL);

  reach_device_params dp = reach_device_default_params();
  /* A command-line program: let REACH_DEVICE, REACH_VALIDATION, REACH_CACHE_DIR, ... choose, as they do for
   * the reach CLI.  Without this line reach reads no environment variable. */
  dp.use_environment = 1;
  CHECK(reach_device_create(&dp, &device));

  reach_model_params mp = reach_model_default_params();
  mp.progress = on_progress;
  CHECK(reach_model_load(device, dir, &mp, &model));

  /* Tokenize: ask for the size, then fill. */
  CHECK(reach_tokenize(model, prompt, strlen(prompt), 1, NULL, 0, &n_ids));
  ids = (int32_t*)malloc(n_ids * sizeof *ids);
  if (!ids) goto done;
  CHECK(reach_tokenize(model, prompt, strlen(prompt), 1, ids, n_ids, &n_ids));

  reach_session_params sp = reach_session_default_params();
  sp.context = (uint32_t)(n_ids + (size_t)n_predict);
  sp.sampling.temperature = temperature;
  sp.sampling.seed = 42;
  CHECK(reach_session_create(model, &sp, &session));
  CHECK(reach_stream_create(model, 1, &stream));

  CHECK(reach_session_prefill(session, ids, n_ids));
  printf("%s", prompt);
  int32_t token;
  int is_eos = 0;
  CHECK(reach_session_sample(session, &token, &is_eos));
  for (int i = 0; i < n_predict && !is_eos; ++i) {
    const char* piece;
    size_t len;
    CHECK(reach_stream_push(stream, token, &piece, &len));
    fwrite(piece, 1, len, stdout);
    fflush(stdout);
    if (i + 1 < n_predict) CHECK(reach_session_step(session, token, &token, &is_eos));
  }
  {
    const char* rest;
    size_t len;
    CHECK(reach_stream_flush(stream, &rest, &len));
    fwrite(rest, 1, len, stdout);
  }
  printf("\n");
  uint32_t pos = 0, cap = 0;
  CHECK(reach_session_position(session, &pos, &cap));
  fprintf(stderr, "%u of %u context positions used\n", pos, cap);
  rc = 0;

done:
  free(ids);
  reach_stream_free(stream);
  reach_session_free(session);
  reach_model_free(model);
  reach_device_free(device);
  return rc;
}
