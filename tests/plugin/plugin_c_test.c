/* The C ABI from C: dlopen the built plugin, resolve every symbol with dlsym, generate (blocking,
 * list, streamed, cancelled, from many threads at once) and check the failure statuses.
 * Compiled as C99. LMX_PLUGIN_PATH and LMX_SHARED_MODELS_DIR come from CMake. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin/include/lmx/plugin.h"

static int failures = 0;
#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                              \
    }                                                                          \
  } while (0)

static int32_t (*p_abi_version)(void);
static const char* (*p_last_error)(void);
static const char* (*p_last_error_field)(void);
static lmx_status (*p_create)(const char*, const char*, lmx_handle**);
static lmx_status (*p_predict)(lmx_handle*, const char*, char**);
static lmx_status (*p_predict_stream)(lmx_handle*, const char*, lmx_stream_callback, void*,
                                      uint64_t*);
static lmx_status (*p_cancel)(lmx_handle*, uint64_t);
static lmx_status (*p_health)(lmx_handle*, char**);
static void (*p_free_string)(char*);
static lmx_status (*p_destroy)(lmx_handle*);

static void* resolve(void* lib, const char* name) {
  void* sym = dlsym(lib, name);
  if (sym == NULL) {
    fprintf(stderr, "missing symbol %s\n", name);
    exit(1);
  }
  return sym;
}

/* ---- streaming collector ---- */
typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int chunks;
  int finals;
  char last[65536];
} stream_state;

static void on_chunk(void* user_data, const char* chunk, size_t len, int32_t is_final) {
  stream_state* s = (stream_state*)user_data;
  pthread_mutex_lock(&s->mu);
  s->chunks++;
  if (len < sizeof(s->last)) memcpy(s->last, chunk, len + 1);
  if (is_final) {
    s->finals++;
    pthread_cond_broadcast(&s->cv);
  }
  pthread_mutex_unlock(&s->mu);
}

static void stream_init(stream_state* s) {
  memset(s, 0, sizeof(*s));
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, NULL);
}

static void stream_wait(stream_state* s) {
  pthread_mutex_lock(&s->mu);
  while (s->finals == 0) pthread_cond_wait(&s->cv, &s->mu);
  pthread_mutex_unlock(&s->mu);
}

/* ---- many threads on one handle ---- */
static lmx_handle* g_handle;
static void* predict_worker(void* arg) {
  int i;
  long ok = 0;
  (void)arg;
  for (i = 0; i < 3; ++i) {
    char* out = NULL;
    lmx_status st = p_predict(g_handle,
                              "{\"inputs\": \"Once upon a time\", \"parameters\": "
                              "{\"max_new_tokens\": 6, \"do_sample\": true, \"seed\": 7}}",
                              &out);
    if (st == LMX_STATUS_OK && out != NULL && strstr(out, "\"generated_text\"") != NULL) ++ok;
    p_free_string(out);
  }
  return (void*)ok;
}

static void expect_invalid(const char* request, const char* field) {
  char* out = NULL;
  lmx_status st = p_predict(g_handle, request, &out);
  CHECK(st == LMX_STATUS_INVALID_REQUEST);
  CHECK(strcmp(p_last_error_field(), field) == 0);
  CHECK(out != NULL && strstr(out, field) != NULL);
  if (st != LMX_STATUS_INVALID_REQUEST || strcmp(p_last_error_field(), field) != 0) {
    fprintf(stderr, "  request %s -> status %d field '%s' body %s\n", request, st,
            p_last_error_field(), out ? out : "(null)");
  }
  p_free_string(out);
}

int main(void) {
  char model[4096];
  char* out = NULL;
  lmx_handle* bad = NULL;
  lmx_status st;
  stream_state s;
  uint64_t id = 0;
  pthread_t threads[8];
  long total_ok = 0;
  int i;
  void* lib = dlopen(LMX_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    fprintf(stderr, "dlopen %s: %s\n", LMX_PLUGIN_PATH, dlerror());
    return 1;
  }
  *(void**)(&p_abi_version) = resolve(lib, "lmx_abi_version");
  *(void**)(&p_last_error) = resolve(lib, "lmx_last_error");
  *(void**)(&p_last_error_field) = resolve(lib, "lmx_last_error_field");
  *(void**)(&p_create) = resolve(lib, "lmx_create");
  *(void**)(&p_predict) = resolve(lib, "lmx_predict");
  *(void**)(&p_predict_stream) = resolve(lib, "lmx_predict_stream");
  *(void**)(&p_cancel) = resolve(lib, "lmx_cancel");
  *(void**)(&p_health) = resolve(lib, "lmx_health");
  *(void**)(&p_free_string) = resolve(lib, "lmx_free_string");
  *(void**)(&p_destroy) = resolve(lib, "lmx_destroy");
  /* Only the C ABI is exported. */
  CHECK(dlsym(lib, "_ZN3lmx6Engine6createERKNS_10properties13ServingConfigE") == NULL);

  CHECK(p_abi_version() == LMX_ABI_VERSION);

  /* Failures at create: a missing directory, bad overrides, null arguments. */
  st = p_create("/nonexistent/lmx-model", NULL, &bad);
  CHECK(st == LMX_STATUS_CONFIG_ERROR || st == LMX_STATUS_LOAD_ERROR);
  CHECK(bad == NULL);
  CHECK(strlen(p_last_error()) > 0);
  snprintf(model, sizeof(model), "%s/tinystories-656k", LMX_SHARED_MODELS_DIR);
  CHECK(p_create(model, "[1, 2]", &bad) == LMX_STATUS_INVALID_ARGUMENT);
  CHECK(p_create(model, "{\"option.max_tokens\": \"lots\"}", &bad) == LMX_STATUS_CONFIG_ERROR);
  CHECK(strstr(p_last_error(), "max_tokens") != NULL);
  CHECK(p_create(NULL, NULL, &bad) == LMX_STATUS_INVALID_ARGUMENT);
  CHECK(p_predict(NULL, "{}", &out) == LMX_STATUS_INVALID_ARGUMENT);
  /* A failed call with a char** result still hands back an error body, which the caller frees. */
  CHECK(out != NULL && strstr(out, "\"error\"") != NULL);
  p_free_string(out);
  out = NULL;

  st = p_create(model, "{\"option.max_tokens\": 256}", &g_handle);
  if (st != LMX_STATUS_OK) {
    fprintf(stderr, "lmx_create(%s): status %d: %s\n", model, st, p_last_error());
    return 1;
  }

  /* One generation with details. */
  st = p_predict(g_handle,
                 "{\"inputs\": \"Once upon a time\", \"parameters\": {\"max_new_tokens\": 8, "
                 "\"details\": true}}",
                 &out);
  CHECK(st == LMX_STATUS_OK);
  CHECK(out != NULL && strstr(out, "\"generated_text\"") != NULL);
  CHECK(out != NULL && strstr(out, "\"finish_reason\"") != NULL);
  CHECK(out != NULL && strstr(out, "\"log_prob\"") != NULL);
  printf("predict: %s\n", out ? out : "(null)");
  p_free_string(out);

  /* A list of inputs gives a list. */
  st = p_predict(g_handle,
                 "{\"inputs\": [\"Once upon a time\", \"The cat\"], \"parameters\": "
                 "{\"max_new_tokens\": 4}}",
                 &out);
  CHECK(st == LMX_STATUS_OK && out != NULL && out[0] == '[');
  p_free_string(out);

  /* A list longer than job_queue_size (default 1000) could never be admitted: a bad request that
     names the limit, not a retryable QUEUE_FULL. */
  {
    static char many[16 * 1024];
    size_t n = (size_t)snprintf(many, sizeof(many), "{\"inputs\": [\"x\"");
    for (int k = 1; k < 1001; ++k) n += (size_t)snprintf(many + n, sizeof(many) - n, ", \"x\"");
    snprintf(many + n, sizeof(many) - n, "]}");
    CHECK(p_predict(g_handle, many, &out) == LMX_STATUS_INVALID_REQUEST);
    CHECK(strcmp(p_last_error_field(), "inputs") == 0);
    CHECK(strstr(p_last_error(), "job_queue_size (1000)") != NULL);
    p_free_string(out);
  }

  /* Bad requests name the field. */
  expect_invalid("{\"inputs\": ", "body");
  expect_invalid("{\"inputs\": 5}", "inputs");
  expect_invalid("{\"parameters\": {}}", "inputs");
  expect_invalid("{\"inputs\": \"x\", \"parameters\": {\"top_p\": 2}}", "parameters.top_p");
  expect_invalid("{\"inputs\": \"x\", \"parameters\": {\"max_new_tokens\": \"ten\"}}",
                 "parameters.max_new_tokens");
  expect_invalid("{\"inputs\": \"x\", \"parameters\": {\"max_new_tokens\": 100000}}",
                 "parameters.max_new_tokens");
  expect_invalid("{\"inputs\": \"x\", \"parameters\": {\"bogus\": 1}}", "parameters.bogus");

  /* Streaming. */
  stream_init(&s);
  st = p_predict_stream(g_handle,
                        "{\"inputs\": \"Once upon a time\", \"parameters\": "
                        "{\"max_new_tokens\": 5}}",
                        on_chunk, &s, &id);
  CHECK(st == LMX_STATUS_OK);
  if (st == LMX_STATUS_OK) {
    stream_wait(&s);
    CHECK(s.finals == 1);
    CHECK(s.chunks >= 1);
    CHECK(strstr(s.last, "\"generated_text\"") != NULL);
    printf("stream: %d chunks, last %s\n", s.chunks, s.last);
  }
  CHECK(p_predict_stream(g_handle, "{\"inputs\": [\"a\", \"b\"]}", on_chunk, &s, &id) ==
        LMX_STATUS_INVALID_REQUEST);

  /* Cancel a long generation. */
  stream_init(&s);
  st = p_predict_stream(g_handle,
                        "{\"inputs\": \"Once upon a time\", \"parameters\": "
                        "{\"max_new_tokens\": 200, \"ignore_eos\": true}}",
                        on_chunk, &s, &id);
  CHECK(st == LMX_STATUS_OK);
  if (st == LMX_STATUS_OK) {
    st = p_cancel(g_handle, id);
    stream_wait(&s);
    if (st == LMX_STATUS_OK) {
      CHECK(strstr(s.last, "\"cancelled\"") != NULL);
    } else {
      CHECK(st == LMX_STATUS_NOT_FOUND);
    }
    if (p_cancel(g_handle, id) != LMX_STATUS_NOT_FOUND) {
      fprintf(stderr, "note: lmx_cancel of a finished request did not say NOT_FOUND (engine)\n");
    }
  }

  /* Many threads, one handle. */
  for (i = 0; i < 8; ++i) pthread_create(&threads[i], NULL, predict_worker, NULL);
  for (i = 0; i < 8; ++i) {
    void* r = NULL;
    pthread_join(threads[i], &r);
    total_ok += (long)r;
  }
  CHECK(total_ok == 24);

#ifdef LMX_FAKE_ENGINE
  /* Model failures: before any token -> status; after the first chunk -> finish_reason error. */
  CHECK(p_predict(g_handle, "{\"inputs\": \"FAIL_NOW\"}", &out) == LMX_STATUS_MODEL_ERROR);
  CHECK(out != NULL && strstr(out, "fake model failure") != NULL);
  p_free_string(out);
  stream_init(&s);
  CHECK(p_predict_stream(g_handle, "{\"inputs\": \"FAIL_LATER\"}", on_chunk, &s, &id) ==
        LMX_STATUS_OK);
  stream_wait(&s);
  CHECK(s.chunks == 3);
  CHECK(strstr(s.last, "\"finish_reason\":\"error\"") != NULL);
  /* Stop sequences are never emitted, not even in part. */
  CHECK(p_predict(g_handle,
                  "{\"inputs\": \"x\", \"parameters\": {\"stop_sequences\": [\" t3\"], "
                  "\"max_new_tokens\": 10, \"details\": true}}",
                  &out) == LMX_STATUS_OK);
  CHECK(out != NULL && strstr(out, "\"generated_text\":\" t0 t1 t2\"") != NULL);
  CHECK(out != NULL && strstr(out, "stop_sequence") != NULL);
  p_free_string(out);
#endif

  CHECK(p_health(g_handle, &out) == LMX_STATUS_OK);
  CHECK(out != NULL && strstr(out, "\"output_formatter\"") != NULL);
  printf("health: %s\n", out ? out : "(null)");
  p_free_string(out);

  p_destroy(g_handle);
  p_destroy(NULL);
  p_free_string(NULL);
  dlclose(lib);
  if (failures)
    fprintf(stderr, "%d check(s) failed\n", failures);
  else
    printf("all checks passed\n");
  return failures ? 1 : 0;
}
