/* LMX plugin ABI: the stable C interface a model-server host loads with dlopen().
 *
 * Pure C (C99): opaque handles, fixed-width integers, UTF-8 JSON strings. No exception, abort()
 * or C++ type crosses this boundary: every function catches everything and returns a status.
 *
 *   lmx_handle* h = NULL;
 *   if (lmx_create("/opt/ml/model", NULL, &h) != LMX_STATUS_OK) puts(lmx_last_error());
 *   char* out = NULL;
 *   lmx_predict(h, "{\"inputs\": \"Once upon a time\"}", &out);
 *   puts(out);
 *   lmx_free_string(out);
 *   lmx_destroy(h);
 *
 * The contract with the host (docs/serving.md "The C ABI" says the same at more length):
 *
 * Threads. Every function is thread-safe; many threads may call lmx_predict /
 *   lmx_predict_stream / lmx_cancel / lmx_health on one handle at once (the engine batches the
 *   requests).
 * Handles. An lmx_handle* is an opaque token, not an address. A value that is not a live handle
 *   (NULL, never returned by lmx_create, already destroyed, garbage) is refused with
 *   LMX_STATUS_INVALID_ARGUMENT and a message; it is never dereferenced. Tokens are not reused.
 * NULL arguments. A required pointer that is NULL is LMX_STATUS_INVALID_ARGUMENT with a message
 *   naming it (lmx_last_error). Where a call has a char** result and it is not NULL, a failed
 *   call stores the error body there (see below), whatever the failure.
 * Stream callbacks run on the plugin's delivery threads, never on the caller's thread nor on an
 *   engine thread; the first may run before lmx_predict_stream returns. Each request has its
 *   own queue: a slow callback delays only its own request's chunks, never other requests nor
 *   the engine. One request's callback is never called twice at once and sees its chunks in
 *   order. Chunks waiting for a slow callback are bounded per request by
 *   option.max_stream_buffer_bytes (default 1 MiB of chunk JSON): past it the request is
 *   cancelled, its later chunks are dropped, and its final chunk has "finish_reason":
 *   "cancelled" and an "error" saying so.
 *   From inside a stream callback every function may be called except lmx_destroy (it would
 *   wait for the callback that calls it; it returns LMX_STATUS_INVALID_ARGUMENT there).
 * Logging. The library never writes to standard output. Log lines go to the callback given to
 *   lmx_set_log_callback, or by default to standard error (warnings and errors only). From
 *   inside the log callback no lmx_* function may be called except lmx_abi_version,
 *   lmx_last_error, lmx_last_error_field and lmx_free_string: the others return
 *   LMX_STATUS_INVALID_ARGUMENT there (the callback may run on an engine thread they would wait
 *   for).
 * Shutdown. lmx_destroy finishes every request of the handle (each stream gets its final
 *   chunk), waits for calls in flight on it, and frees it; calls made after it has begun get
 *   LMX_STATUS_UNAVAILABLE or LMX_STATUS_INVALID_ARGUMENT. Once every handle is destroyed no
 *   thread of the library runs and the host may dlclose() it.
 *
 * Request JSON (LMI schema):
 *   {"inputs": "text" | ["text", ...],
 *    "parameters": {"max_new_tokens": 30, "temperature": 1.0, "top_p": 1.0, "top_k": 0,
 *                   "do_sample": false, "repetition_penalty": 1.0, "stop_sequences": ["..."],
 *                   "seed": 0, "details": false, "return_full_text": false},
 *    "stream": false}            (ignored by lmx_predict; the host picks the call)
 * Chat request: {"messages": [{"role", "content"}, ...], "tools"?: [...], "tool_choice"?,
 *   "documents"?: [...], "chat_template_kwargs"?: {...}, "parameters"?: {...}, "stream"?: false}:
 *   the messages are rendered with the model's chat template (add_generation_prompt on) and the
 *   text is tokenized without adding special tokens; tool_choice "required" or {"type":
 *   "function", "function": {"name"}} holds the output to one tool call in the model's format
 *   (constrained decoding; "none" renders no tools); "details.inputs" is the rendered prompt;
 *   without parameters.max_new_tokens it generates up to max_tokens (not 30). No template or a
 *   template error (its raise_exception message verbatim) is LMX_STATUS_INVALID_REQUEST with
 *   field "messages". lmx_health's "config" names "chat_template" and "tool_call_parser".
 * Response JSON of lmx_predict: {"generated_text": "...", "details": {"finish_reason":
 *   "length|eos_token|stop_sequence", "generated_tokens": n, "inputs": "...", "prompt_tokens": n,
 *   "tokens": [{"id", "text", "log_prob", "special"}]}}  ("details" only when requested); a list
 *   of inputs gives a list of such objects, in order.
 * Error body (the char** result of lmx_predict and lmx_health on failure): {"error": "message",
 *   "field": "parameters.x", "status": <lmx_status>}  ("field" is null when no single field is
 *   to blame; "error" is lmx_last_error()).
 *
 * Stream chunks (lmx_predict_stream), one JSON object per call of the callback:
 *   {"token": {"id": 42, "text": " the", "log_prob": -0.7, "special": false}}
 *   ...
 *   last (is_final = 1): {"token": {...} (when the last step produced one),
 *     "generated_text": "...", "details": {"finish_reason": ..., "generated_tokens": n,
 *     "inputs": "...", "prompt_tokens": n, "tokens": [...] (only when details requested)}}
 *   On a failure after the stream started the last chunk has "finish_reason": "error" and an
 *   "error" member with the message. A cancelled request ends with "finish_reason": "cancelled".
 *   The concatenated "text" of the chunks equals "generated_text" (without the prompt); a stop
 *   sequence never appears in it, not even in part.
 */
#ifndef LMX_PLUGIN_H_
#define LMX_PLUGIN_H_

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define LMX_API __declspec(dllexport)
#else
#define LMX_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped on every incompatible change of this header. Hosts compare it with lmx_abi_version(). */
#define LMX_ABI_VERSION 1

/* Status codes. The HTTP status a host should answer with is given in brackets. */
typedef int32_t lmx_status;
#define LMX_STATUS_OK 0               /* success [200] */
#define LMX_STATUS_INVALID_ARGUMENT 1 /* NULL pointer, not a live handle, bad overrides [500] */
#define LMX_STATUS_INVALID_REQUEST 2  /* malformed request JSON or bad parameter [400] */
#define LMX_STATUS_QUEUE_FULL 3       /* job_queue_size requests already wait [503] */
#define LMX_STATUS_UNAVAILABLE 4      /* shutting down / not started [503] */
#define LMX_STATUS_MODEL_ERROR 5      /* the model failed while generating [424] */
#define LMX_STATUS_NOT_FOUND 6        /* lmx_cancel: unknown or finished request id [404] */
#define LMX_STATUS_CONFIG_ERROR 7     /* lmx_create: invalid serving.properties / OPTION_* */
#define LMX_STATUS_LOAD_ERROR 8       /* lmx_create: the model could not be loaded */
#define LMX_STATUS_INTERNAL 9         /* anything else (out of memory, bug) [500] */

/* Log levels (lmx_set_log_callback). */
#define LMX_LOG_TRACE 0
#define LMX_LOG_DEBUG 1
#define LMX_LOG_INFO 2
#define LMX_LOG_WARN 3
#define LMX_LOG_ERROR 4
#define LMX_LOG_CRITICAL 5
#define LMX_LOG_OFF 6

typedef struct lmx_handle lmx_handle; /* one loaded model + its engine; an opaque token */

/* Called once per stream chunk, on a delivery thread of the plugin (see "Stream callbacks"
 * above). `chunk_json` (`len` bytes, NUL-terminated) is valid only during the call. After the
 * call with is_final = 1 the callback is never called again for that request. */
typedef void (*lmx_stream_callback)(void* user_data, const char* chunk_json, size_t len,
                                    int32_t is_final);

/* Called once per log line, on whichever thread logs, possibly on several threads at once.
 * `message` (`len` bytes, NUL-terminated, no trailing newline) is valid only during the call;
 * `level` is one of LMX_LOG_*. See "Logging" above for what it may call. */
typedef void (*lmx_log_callback)(void* user_data, int32_t level, const char* message, size_t len);

/* LMX_ABI_VERSION of the library. */
LMX_API int32_t lmx_abi_version(void);

/* Message of the last failed lmx_* call on this thread ("" when none). Valid until the next
 * lmx_* call on this thread. */
LMX_API const char* lmx_last_error(void);
/* The request field blamed by the last LMX_STATUS_INVALID_REQUEST on this thread, e.g.
 * "parameters.top_p" ("" when none). */
LMX_API const char* lmx_last_error_field(void);

/* Where the library's log lines go, for every handle: `callback` with the lines at `min_level`
 * or above, or with `callback` NULL standard error ("lmx [level] message" lines) at `min_level`
 * or above. Until it is called: standard error, LMX_LOG_WARN. When it returns, the previous
 * callback is not running and will not be called again (the host may free its user_data).
 * LMX_STATUS_INVALID_ARGUMENT for a level outside LMX_LOG_TRACE..LMX_LOG_OFF. */
LMX_API lmx_status lmx_set_log_callback(lmx_log_callback callback, void* user_data,
                                        int32_t min_level);

/* Loads the model store `model_dir` (serving.properties + OPTION_* environment + `overrides_json`,
 * a JSON object of property keys to values, e.g. {"option.max_tokens": 512}; NULL or "" for none;
 * overrides win over everything). Blocks until the model is loaded. In a process other than 0 of
 * an mpirun group (lmx_process_rank) it loads nothing: LMX_STATUS_INVALID_ARGUMENT saying that
 * such a process runs lmx_run_follower instead. */
LMX_API lmx_status lmx_create(const char* model_dir, const char* overrides_json,
                              lmx_handle** out_handle);

/* Tensor-parallel ranks as processes (docs/tensor-parallel.md). When mpirun starts the host N
 * times for option.tensor_parallel_degree=N, process 0 serves the model as a lone host does
 * (lmx_create, its engine drives every rank), and each other process calls lmx_run_follower
 * instead: it never serves, it runs its rank of process 0's steps. A host asks lmx_process_rank
 * first, before it binds a port or loads anything. (Added without a change of LMX_ABI_VERSION:
 * nothing earlier changed; a host that needs them resolves them by name.) */

/* This process's rank among the processes that mpirun (or another MPI launcher) started together,
 * *rank in 0..*processes-1, or 0 of 1 when it was not started as one of several. Read from the
 * launcher's environment: starts nothing. LMX_STATUS_INVALID_ARGUMENT for a NULL pointer,
 * LMX_STATUS_CONFIG_ERROR when that environment is inconsistent (a size but no rank in it). */
LMX_API lmx_status lmx_process_rank(int32_t* rank, int32_t* processes);

/* A process other than 0: loads its rank of `model_dir` with the configuration lmx_create reads
 * (serving.properties, OPTION_* environment, `overrides_json`; every process must be given the
 * same), and runs process 0's steps. Blocks until process 0 destroys its handle (then
 * LMX_STATUS_OK, and the host exits) or the group fails: LMX_STATUS_CONFIG_ERROR, or
 * LMX_STATUS_LOAD_ERROR when a rank fails to build or the processes disagree ("mpirun started 2
 * processes but the tensor-parallel degree is 3": every process gets the same message). On
 * process 0, or in a process not started by mpirun as one of several:
 * LMX_STATUS_INVALID_ARGUMENT. A process joins one group: it exits after this returns. */
LMX_API lmx_status lmx_run_follower(const char* model_dir, const char* overrides_json);

/* Generates for `request_json` and blocks until done. On success *response_json is the LMI
 * response; on failure it is the error body (or NULL when even that failed, out of memory).
 * Free it with lmx_free_string. May be called from a stream callback. */
LMX_API lmx_status lmx_predict(lmx_handle* handle, const char* request_json, char** response_json);

/* Starts a streaming generation of one input. Returns at once; chunks go to `callback`. On
 * success *request_id identifies the request for lmx_cancel (the callback may already run before
 * this returns) and the callback will be called at least once, ending with is_final = 1. On
 * failure the callback is never called. A list "inputs" is LMX_STATUS_INVALID_REQUEST. */
LMX_API lmx_status lmx_predict_stream(lmx_handle* handle, const char* request_json,
                                      lmx_stream_callback callback, void* user_data,
                                      uint64_t* request_id);

/* Stops a streaming request: its resources are freed within one engine step and its last chunk
 * says "finish_reason": "cancelled". LMX_STATUS_NOT_FOUND when unknown or already finished. */
LMX_API lmx_status lmx_cancel(lmx_handle* handle, uint64_t request_id);

/* Health and statistics: {"state": "ready"|"shutting_down", "abi_version", "model": {...},
 * "config": {"output_formatter", "max_tokens", "job_queue_size", ...}, "streams":
 * {"open_streams", "delivery_threads", "buffered_bytes", "slow_consumers_cancelled",
 * "max_stream_buffer_bytes"}, "engine": {stats}}. On failure *json is the error body. Free
 * *json with lmx_free_string. */
LMX_API lmx_status lmx_health(lmx_handle* handle, char** json);

/* Frees a string returned by this library. NULL is fine; any other pointer is undefined
 * behaviour, as with free(). */
LMX_API void lmx_free_string(char* s);

/* Finishes every queued and running request (their final chunks are delivered), waits for the
 * calls in flight on the handle, stops the engine and frees the handle. Blocks until done.
 * NULL: LMX_STATUS_OK, nothing done. A handle that is not live (already destroyed, or being
 * destroyed by another thread): LMX_STATUS_INVALID_ARGUMENT. From a stream callback or the log
 * callback: LMX_STATUS_INVALID_ARGUMENT, nothing done. The handle is invalid afterwards: calls
 * with it return LMX_STATUS_INVALID_ARGUMENT.
 * (Returned void up to this header revision; callers that ignore the status are unaffected.) */
LMX_API lmx_status lmx_destroy(lmx_handle* handle);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* LMX_PLUGIN_H_ */
