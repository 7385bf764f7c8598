// The exported C functions: each one catches everything and turns it into a status code plus the
// thread-local last error (see include/lmx/plugin.h for the contract with the host). Only lmx_*
// symbols leave this library. Handles are tokens of plugin/handle_registry.h; stream callbacks
// run on plugin/stream_delivery.h's threads; logging is plugin/log_sink.h.
#include "plugin/include/lmx/plugin.h"

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/api/engine.h"
#include "engine/api/process_group.h"
#include "engine/core/log.h"
#include "plugin/chat_prompt.h"
#include "plugin/handle.h"
#include "plugin/handle_registry.h"
#include "plugin/lmi_request.h"
#include "plugin/lmi_response.h"
#include "plugin/log_sink.h"
#include "plugin/stream_delivery.h"
#include "properties/serving_config.h"

using lmx::plugin::GenerationState;
using lmx::plugin::Handle;
using lmx::plugin::HandleRegistry;
using lmx::plugin::StreamDelivery;
using nlohmann::json;

namespace {

thread_local std::string t_error;
thread_local std::string t_field;

lmx_status fail(lmx_status status, std::string message, std::string field = {}) {
  t_error = std::move(message);
  t_field = std::move(field);
  return status;
}

// Every call starts with a clean last error.
void clear_error() {
  t_error.clear();
  t_field.clear();
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

char* copy_string(const std::string& s) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  if (out == nullptr) return nullptr;
  std::memcpy(out, s.data(), s.size());
  out[s.size()] = '\0';
  return out;
}

// Runs `fn`, mapping every exception onto a status. `generic` is the status for lmx::Error that
// is not one of the request/queue kinds (model error at predict time, load error at create).
template <typename Fn>
lmx_status guarded(lmx_status generic, Fn&& fn) noexcept {
  try {
    return fn();
  } catch (const lmx::RequestError& e) {
    return fail(LMX_STATUS_INVALID_REQUEST, e.what(), e.field());
  } catch (const lmx::QueueFullError& e) {
    return fail(LMX_STATUS_QUEUE_FULL, e.what());
  } catch (const lmx::EngineUnavailableError& e) {
    return fail(LMX_STATUS_UNAVAILABLE, e.what());
  } catch (const lmx::Error& e) {
    return fail(generic, e.what());
  } catch (const std::bad_alloc&) {
    return fail(LMX_STATUS_INTERNAL, "out of memory");
  } catch (const std::exception& e) {
    return fail(LMX_STATUS_INTERNAL, std::string("internal error: ") + e.what());
  } catch (...) {
    return fail(LMX_STATUS_INTERNAL, "internal error (unknown exception)");
  }
}

// The error body of a failed call with a char** result: {"error", "field", "status"}.
char* error_body(lmx_status status) noexcept {
  try {
    json j{{"error", t_error},
           {"field", t_field.empty() ? json(nullptr) : json(t_field)},
           {"status", status}};
    return copy_string(dump(j));
  } catch (...) {
    return nullptr;
  }
}

// Stores the error body in *out (when out is not NULL) if the call failed.
lmx_status with_error_body(lmx_status status, char** out) noexcept {
  if (status != LMX_STATUS_OK && out != nullptr) {
    std::free(*out);  // a result made before a later step failed
    *out = error_body(status);
  }
  return status;
}

// The checks every call makes before it touches anything: not from the log callback, required
// pointers present. Returns OK or the failure it recorded.
lmx_status refuse_from_log_callback(const char* fn) {
  if (!lmx::plugin::in_log_callback()) return LMX_STATUS_OK;
  return fail(LMX_STATUS_INVALID_ARGUMENT,
              fmt::format("{}: called from inside the log callback, where only lmx_abi_version, "
                          "lmx_last_error, lmx_last_error_field and lmx_free_string may be called",
                          fn));
}

lmx_status require(const void* p, const char* fn, const char* arg) {
  if (p != nullptr) return LMX_STATUS_OK;
  return fail(LMX_STATUS_INVALID_ARGUMENT, fmt::format("{}: {} is NULL", fn, arg));
}

// The live handle behind `token`, leased for this call, or an INVALID_ARGUMENT failure.
HandleRegistry::Lease lease(const lmx_handle* token, const char* fn, lmx_status& st) {
  if (token == nullptr) {
    st = fail(LMX_STATUS_INVALID_ARGUMENT, fmt::format("{}: handle is NULL", fn));
    return {};
  }
  HandleRegistry::Lease h = HandleRegistry::instance().acquire(token);
  if (!h) {
    st = fail(LMX_STATUS_INVALID_ARGUMENT,
              fmt::format("{}: handle {} is not a live handle (never returned by lmx_create, or "
                          "already destroyed)",
                          fn, static_cast<const void*>(token)));
  }
  return h;
}

// This process's place in an mpirun group (lmx::process_group_place), or a CONFIG_ERROR failure
// when the launcher's environment is inconsistent.
lmx_status read_process_group_place(lmx::ProcessGroupPlace& place) {
  return guarded(LMX_STATUS_CONFIG_ERROR, [&]() -> lmx_status {
    place = lmx::process_group_place();
    return LMX_STATUS_OK;
  });
}

// serving.properties + OPTION_* + overrides_json, as lmx_create and lmx_run_follower read them.
lmx_status load_config(const char* model_dir, const char* overrides_json,
                       lmx::properties::ServingConfig& config) {
  std::vector<lmx::properties::Override> overrides;
  lmx_status st = guarded(LMX_STATUS_INVALID_ARGUMENT, [&]() -> lmx_status {
    overrides = lmx::plugin::parse_overrides(overrides_json);
    return LMX_STATUS_OK;
  });
  if (st != LMX_STATUS_OK) return st;
  return guarded(LMX_STATUS_CONFIG_ERROR, [&]() -> lmx_status {
    config = lmx::properties::load_serving_config(
        model_dir, lmx::properties::Environment::from_process(),
        lmx::properties::EngineCapabilities::this_build(), overrides);
    return LMX_STATUS_OK;
  });
}

// Waits for the final updates of a lmx_predict call's requests.
struct PredictWait {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<GenerationState> states;
  size_t pending = 0;
};

lmx_status predict(Handle& handle, const char* request_json, char** response_json) {
  auto req = lmx::plugin::parse_request(*handle.chat, request_json);
  // More inputs than the queue holds could never be admitted: not a retryable QUEUE_FULL.
  const int queue = handle.engine->config().job_queue_size;
  if (req.inputs.size() > static_cast<size_t>(queue)) {
    throw lmx::RequestError("inputs", "inputs: " + std::to_string(req.inputs.size()) +
                                          " inputs exceed job_queue_size (" +
                                          std::to_string(queue) + ")");
  }
  auto wait = std::make_shared<PredictWait>();
  for (const auto& input : req.inputs) {
    wait->states.emplace_back(input, req.details, req.return_full_text);
  }
  std::vector<uint64_t> ids;
  try {
    for (size_t i = 0; i < req.inputs.size(); ++i) {
      lmx::EngineRequest er;
      er.prompt = req.inputs[i];
      er.add_special_tokens = req.add_special_tokens;
      er.params = req.params;
      {
        std::lock_guard lock(wait->mu);
        ++wait->pending;
      }
      try {
        // Runs on an engine thread: records the update, nothing else.
        ids.push_back(
            handle.engine->enqueue(std::move(er), [wait, i](const lmx::RequestUpdate& u) noexcept {
              std::lock_guard lock(wait->mu);
              try {
                wait->states[i].apply(u);
              } catch (...) {
              }
              if (u.finished) {
                --wait->pending;
                wait->cv.notify_all();
              }
            }));
      } catch (...) {
        std::lock_guard lock(wait->mu);
        --wait->pending;
        throw;
      }
    }
  } catch (...) {
    // One input of a list was refused: stop the ones already queued, wait for them.
    for (uint64_t id : ids) handle.engine->cancel(id);
    std::unique_lock lock(wait->mu);
    wait->cv.wait(lock, [&] { return wait->pending == 0; });
    throw;
  }
  std::unique_lock lock(wait->mu);
  wait->cv.wait(lock, [&] { return wait->pending == 0; });
  json out = json::array();
  for (const auto& s : wait->states) {
    if (s.finish_status() == lmx::FinishStatus::Error) {
      return fail(LMX_STATUS_MODEL_ERROR, s.error().empty() ? "generation failed" : s.error());
    }
    if (s.finish_status() == lmx::FinishStatus::Cancelled) {
      return fail(LMX_STATUS_UNAVAILABLE, "the request was cancelled (engine shutting down)");
    }
    out.push_back(s.response());
  }
  *response_json = copy_string(dump(req.batched ? out : out[0]));
  if (*response_json == nullptr) return fail(LMX_STATUS_INTERNAL, "out of memory");
  return LMX_STATUS_OK;
}

// One engine update of a streaming request -> its chunks, queued for the host's callback. Runs on
// an engine thread, so it never calls the host. A request whose consumer fell more than
// option.max_stream_buffer_bytes behind is cancelled; its final chunk says why.
void queue_update(GenerationState& state, StreamDelivery::Stream& stream, lmx::Engine& engine,
                  const lmx::RequestUpdate& u) noexcept {
  std::vector<std::string> chunks;
  try {
    std::vector<json> js = state.apply(u);
    if (u.finished && stream.over_bound() && !js.empty()) {
      json last = std::move(js.back());
      last["details"]["finish_reason"] = "cancelled";
      last["error"] = fmt::format(
          "the stream callback fell behind: more than {} bytes of chunks "
          "(option.max_stream_buffer_bytes) waited for it, so the request was cancelled and "
          "the chunks after that point were dropped",
          stream.limit());
      js.assign(1, std::move(last));
    }
    for (const json& c : js) chunks.push_back(dump(c));
  } catch (...) {
    if (!u.finished) return;
    chunks.assign(
        1,
        R"({"generated_text":"","details":{"finish_reason":"error"},"error":"internal error while formatting the response"})");
  }
  if (stream.push(std::move(chunks), u.finished) == StreamDelivery::Push::Overflowed) {
    engine.cancel(u.id);  // its final update comes back here
  }
}

lmx_status predict_stream(Handle& handle, const char* request_json, lmx_stream_callback callback,
                          void* user_data, uint64_t* request_id) {
  auto req = lmx::plugin::parse_request(*handle.chat, request_json);
  if (req.batched) {
    throw lmx::RequestError("inputs", "inputs: streaming takes one string, not a list");
  }
  auto state = std::make_shared<GenerationState>(req.inputs[0], req.details, req.return_full_text);
  lmx::EngineRequest er;
  er.prompt = req.inputs[0];
  er.add_special_tokens = req.add_special_tokens;
  er.params = req.params;
  std::shared_ptr<StreamDelivery::Stream> stream = handle.streams->open(callback, user_data);
  lmx::Engine* engine = handle.engine.get();
  uint64_t id = 0;
  try {
    id = engine->enqueue(std::move(er),
                         [state, stream, engine](const lmx::RequestUpdate& u) noexcept {
                           queue_update(*state, *stream, *engine, u);
                         });
  } catch (...) {
    handle.streams->abandon(*stream);
    throw;
  }
  if (request_id != nullptr) *request_id = id;
  return LMX_STATUS_OK;
}

}  // namespace

extern "C" {

LMX_API int32_t lmx_abi_version(void) { return LMX_ABI_VERSION; }

LMX_API const char* lmx_last_error(void) { return t_error.c_str(); }

LMX_API const char* lmx_last_error_field(void) { return t_field.c_str(); }

LMX_API lmx_status lmx_set_log_callback(lmx_log_callback callback, void* user_data,
                                        int32_t min_level) {
  clear_error();
  if (lmx_status st = refuse_from_log_callback("lmx_set_log_callback")) return st;
  return guarded(LMX_STATUS_INVALID_ARGUMENT, [&]() -> lmx_status {
    lmx::plugin::set_log_callback(callback, user_data, min_level);
    return LMX_STATUS_OK;
  });
}

LMX_API lmx_status lmx_create(const char* model_dir, const char* overrides_json,
                              lmx_handle** out_handle) {
  clear_error();
  if (out_handle != nullptr) *out_handle = nullptr;
  if (lmx_status st = refuse_from_log_callback("lmx_create")) return st;
  if (lmx_status st = require(model_dir, "lmx_create", "model_dir")) return st;
  if (lmx_status st = require(out_handle, "lmx_create", "out_handle")) return st;
  lmx::ProcessGroupPlace place;
  if (lmx_status st = read_process_group_place(place)) return st;
  if (place.follower())
    return fail(LMX_STATUS_INVALID_ARGUMENT,
                fmt::format("lmx_create: this process is rank {} of {} processes started by "
                            "mpirun; only process 0 serves the model, the others run their rank "
                            "with lmx_run_follower",
                            place.rank, place.processes));
  lmx::properties::ServingConfig config;
  if (lmx_status st = load_config(model_dir, overrides_json, config)) return st;
  return guarded(LMX_STATUS_LOAD_ERROR, [&]() -> lmx_status {
    auto handle = std::make_shared<Handle>();
    handle->engine = lmx::Engine::create(config);
    handle->model_dir = model_dir;
    handle->chat = lmx::plugin::load_chat_setup(
        config.model_path.string(),
        config.chat_template.empty() ? std::nullopt : std::optional(config.chat_template),
        config.tool_call_parser);
    handle->streams = std::make_unique<StreamDelivery>(config.max_stream_buffer_bytes);
    *out_handle = HandleRegistry::instance().add(std::move(handle));
    return LMX_STATUS_OK;
  });
}

LMX_API lmx_status lmx_process_rank(int32_t* rank, int32_t* processes) {
  clear_error();
  if (lmx_status st = refuse_from_log_callback("lmx_process_rank")) return st;
  if (lmx_status st = require(rank, "lmx_process_rank", "rank")) return st;
  if (lmx_status st = require(processes, "lmx_process_rank", "processes")) return st;
  lmx::ProcessGroupPlace place;
  if (lmx_status st = read_process_group_place(place)) return st;
  *rank = place.rank;
  *processes = place.processes;
  return LMX_STATUS_OK;
}

LMX_API lmx_status lmx_run_follower(const char* model_dir, const char* overrides_json) {
  clear_error();
  if (lmx_status st = refuse_from_log_callback("lmx_run_follower")) return st;
  if (lmx_status st = require(model_dir, "lmx_run_follower", "model_dir")) return st;
  lmx::ProcessGroupPlace place;
  if (lmx_status st = read_process_group_place(place)) return st;
  if (!place.follower())
    return fail(LMX_STATUS_INVALID_ARGUMENT,
                fmt::format("lmx_run_follower: this process is rank 0 of {}, which serves the "
                            "model with lmx_create; only the other processes of an mpirun group "
                            "follow it",
                            place.processes));
  lmx::properties::ServingConfig config;
  if (lmx_status st = load_config(model_dir, overrides_json, config)) return st;
  return guarded(LMX_STATUS_LOAD_ERROR, [&]() -> lmx_status {
    lmx::run_follower(config);
    return LMX_STATUS_OK;
  });
}

LMX_API lmx_status lmx_predict(lmx_handle* handle, const char* request_json, char** response_json) {
  clear_error();
  if (response_json != nullptr) *response_json = nullptr;
  lmx_status st = LMX_STATUS_OK;
  if ((st = refuse_from_log_callback("lmx_predict")) != LMX_STATUS_OK)
    return with_error_body(st, response_json);
  HandleRegistry::Lease h = lease(handle, "lmx_predict", st);
  if (!h) return with_error_body(st, response_json);
  if ((st = require(request_json, "lmx_predict", "request_json")) != LMX_STATUS_OK ||
      (st = require(response_json, "lmx_predict", "response_json")) != LMX_STATUS_OK)
    return with_error_body(st, response_json);
  st = guarded(LMX_STATUS_MODEL_ERROR,
               [&]() -> lmx_status { return predict(*h, request_json, response_json); });
  return with_error_body(st, response_json);
}

LMX_API lmx_status lmx_predict_stream(lmx_handle* handle, const char* request_json,
                                      lmx_stream_callback callback, void* user_data,
                                      uint64_t* request_id) {
  clear_error();
  if (request_id != nullptr) *request_id = 0;
  lmx_status st = LMX_STATUS_OK;
  if ((st = refuse_from_log_callback("lmx_predict_stream")) != LMX_STATUS_OK) return st;
  HandleRegistry::Lease h = lease(handle, "lmx_predict_stream", st);
  if (!h) return st;
  if ((st = require(request_json, "lmx_predict_stream", "request_json")) != LMX_STATUS_OK)
    return st;
  if (callback == nullptr)
    return fail(LMX_STATUS_INVALID_ARGUMENT, "lmx_predict_stream: callback is NULL");
  return guarded(LMX_STATUS_MODEL_ERROR, [&]() -> lmx_status {
    return predict_stream(*h, request_json, callback, user_data, request_id);
  });
}

LMX_API lmx_status lmx_cancel(lmx_handle* handle, uint64_t request_id) {
  clear_error();
  lmx_status st = LMX_STATUS_OK;
  if ((st = refuse_from_log_callback("lmx_cancel")) != LMX_STATUS_OK) return st;
  HandleRegistry::Lease h = lease(handle, "lmx_cancel", st);
  if (!h) return st;
  return guarded(LMX_STATUS_INTERNAL, [&]() -> lmx_status {
    if (!h->engine->cancel(request_id)) {
      return fail(LMX_STATUS_NOT_FOUND,
                  "request " + std::to_string(request_id) + " is unknown or already finished");
    }
    return LMX_STATUS_OK;
  });
}

LMX_API lmx_status lmx_health(lmx_handle* handle, char** out) {
  clear_error();
  if (out != nullptr) *out = nullptr;
  lmx_status st = LMX_STATUS_OK;
  if ((st = refuse_from_log_callback("lmx_health")) != LMX_STATUS_OK)
    return with_error_body(st, out);
  HandleRegistry::Lease h = lease(handle, "lmx_health", st);
  if (!h) return with_error_body(st, out);
  if ((st = require(out, "lmx_health", "json")) != LMX_STATUS_OK) return st;
  st = guarded(LMX_STATUS_INTERNAL, [&]() -> lmx_status {
    *out = copy_string(dump(lmx::plugin::health_json(*h)));
    if (*out == nullptr) return fail(LMX_STATUS_INTERNAL, "out of memory");
    return LMX_STATUS_OK;
  });
  return with_error_body(st, out);
}

LMX_API void lmx_free_string(char* s) { std::free(s); }

LMX_API lmx_status lmx_destroy(lmx_handle* handle) {
  clear_error();
  if (handle == nullptr) return LMX_STATUS_OK;
  if (lmx_status st = refuse_from_log_callback("lmx_destroy")) return st;
  if (lmx::plugin::in_stream_callback()) {
    return fail(LMX_STATUS_INVALID_ARGUMENT,
                "lmx_destroy: called from inside a stream callback, where it would wait for that "
                "callback to return; call it from another thread");
  }
  std::shared_ptr<Handle> h;
  try {
    h = HandleRegistry::instance().remove(handle);
  } catch (...) {
  }
  if (!h) {
    return fail(LMX_STATUS_INVALID_ARGUMENT,
                fmt::format("lmx_destroy: handle {} is not a live handle (never returned by "
                            "lmx_create, already destroyed, or being destroyed by another thread)",
                            static_cast<const void*>(handle)));
  }
  // In this order: every request finishes and its final update reaches its stream; calls that
  // leased the handle before it left the registry return; every final chunk is delivered and
  // the delivery threads are joined; then the handle is freed. A step that fails is reported,
  // and the later steps still run, so nothing is freed under a call.
  lmx_status st = LMX_STATUS_OK;
  const auto step = [&](const char* what, auto&& fn) {
    try {
      fn();
    } catch (const std::exception& e) {
      st = fail(LMX_STATUS_INTERNAL, fmt::format("lmx_destroy: {} failed: {}", what, e.what()));
      lmx::logger().error("{}", t_error);
    } catch (...) {
      st = fail(LMX_STATUS_INTERNAL, fmt::format("lmx_destroy: {} failed", what));
      lmx::logger().error("{}", t_error);
    }
  };
  h->shutting_down = true;
  step("stopping the engine", [&] { h->engine->shutdown(); });
  step("waiting for calls in flight", [&] { h->wait_for_calls(); });
  step("delivering the last stream chunks", [&] { h->streams->stop(); });
  step("freeing the handle", [&] { h.reset(); });
  return st;
}

}  // extern "C"
