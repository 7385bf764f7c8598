// The exported C functions: each one catches everything and turns it into a status code plus the
// thread-local last error (see include/lmx/plugin.h). Only lmx_* symbols leave this library.
#include "plugin/include/lmx/plugin.h"

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <string>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "engine/api/engine.h"
#include "plugin/chat_prompt.h"
#include "plugin/handle.h"
#include "plugin/lmi_request.h"
#include "plugin/lmi_response.h"
#include "properties/serving_config.h"

using lmx::plugin::GenerationState;
using nlohmann::json;

namespace {

thread_local std::string t_error;
thread_local std::string t_field;

lmx_status fail(lmx_status status, std::string message, std::string field = {}) {
  t_error = std::move(message);
  t_field = std::move(field);
  return status;
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
    t_error.clear();
    t_field.clear();
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

// The error body lmx_predict returns on failure.
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

// Waits for the final updates of a lmx_predict call's requests.
struct PredictWait {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<GenerationState> states;
  size_t pending = 0;
};

}  // namespace

extern "C" {

LMX_API int32_t lmx_abi_version(void) { return LMX_ABI_VERSION; }

LMX_API const char* lmx_last_error(void) { return t_error.c_str(); }

LMX_API const char* lmx_last_error_field(void) { return t_field.c_str(); }

LMX_API lmx_status lmx_create(const char* model_dir, const char* overrides_json,
                              lmx_handle** out_handle) {
  if (out_handle != nullptr) *out_handle = nullptr;
  if (model_dir == nullptr || out_handle == nullptr) {
    return fail(LMX_STATUS_INVALID_ARGUMENT, "lmx_create: model_dir and out_handle are required");
  }
  std::vector<lmx::properties::Override> overrides;
  lmx_status st = guarded(LMX_STATUS_INVALID_ARGUMENT, [&]() -> lmx_status {
    overrides = lmx::plugin::parse_overrides(overrides_json);
    return LMX_STATUS_OK;
  });
  if (st != LMX_STATUS_OK) return st;
  lmx::properties::ServingConfig config;
  st = guarded(LMX_STATUS_CONFIG_ERROR, [&]() -> lmx_status {
    config = lmx::properties::load_serving_config(
        model_dir, lmx::properties::Environment::from_process(),
        lmx::properties::EngineCapabilities::this_build(), overrides);
    return LMX_STATUS_OK;
  });
  if (st != LMX_STATUS_OK) return st;
  return guarded(LMX_STATUS_LOAD_ERROR, [&]() -> lmx_status {
    auto handle = std::make_unique<lmx_handle>();
    handle->engine = lmx::Engine::create(config);
    handle->model_dir = model_dir;
    handle->chat = lmx::plugin::load_chat_setup(
        config.model_path.string(),
        config.chat_template.empty() ? std::nullopt : std::optional(config.chat_template),
        config.tool_call_parser);
    *out_handle = handle.release();
    return LMX_STATUS_OK;
  });
}

LMX_API lmx_status lmx_predict(lmx_handle* handle, const char* request_json, char** response_json) {
  if (response_json != nullptr) *response_json = nullptr;
  if (handle == nullptr || request_json == nullptr || response_json == nullptr) {
    return fail(LMX_STATUS_INVALID_ARGUMENT,
                "lmx_predict: handle, request_json and response_json are required");
  }
  std::shared_ptr<PredictWait> wait;
  lmx_status st = guarded(LMX_STATUS_MODEL_ERROR, [&]() -> lmx_status {
    auto req = lmx::plugin::parse_request(*handle->chat, request_json);
    // More inputs than the queue holds could never be admitted: not a retryable QUEUE_FULL.
    const int queue = handle->engine->config().job_queue_size;
    if (req.inputs.size() > static_cast<size_t>(queue)) {
      throw lmx::RequestError("inputs", "inputs: " + std::to_string(req.inputs.size()) +
                                            " inputs exceed job_queue_size (" +
                                            std::to_string(queue) + ")");
    }
    wait = std::make_shared<PredictWait>();
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
          ids.push_back(handle->engine->enqueue(std::move(er),
                                                [wait, i](const lmx::RequestUpdate& u) noexcept {
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
      for (uint64_t id : ids) handle->engine->cancel(id);
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
    std::string text = dump(req.batched ? out : out[0]);
    *response_json = copy_string(text);
    if (*response_json == nullptr) return fail(LMX_STATUS_INTERNAL, "out of memory");
    return LMX_STATUS_OK;
  });
  if (st != LMX_STATUS_OK) *response_json = error_body(st);
  return st;
}

LMX_API lmx_status lmx_predict_stream(lmx_handle* handle, const char* request_json,
                                      lmx_stream_callback callback, void* user_data,
                                      uint64_t* request_id) {
  if (request_id != nullptr) *request_id = 0;
  if (handle == nullptr || request_json == nullptr || callback == nullptr) {
    return fail(LMX_STATUS_INVALID_ARGUMENT,
                "lmx_predict_stream: handle, request_json and callback are required");
  }
  return guarded(LMX_STATUS_MODEL_ERROR, [&]() -> lmx_status {
    auto req = lmx::plugin::parse_request(*handle->chat, request_json);
    if (req.batched) {
      throw lmx::RequestError("inputs", "inputs: streaming takes one string, not a list");
    }
    auto state =
        std::make_shared<GenerationState>(req.inputs[0], req.details, req.return_full_text);
    lmx::EngineRequest er;
    er.prompt = req.inputs[0];
    er.add_special_tokens = req.add_special_tokens;
    er.params = req.params;
    uint64_t id = handle->engine->enqueue(std::move(er), [state, callback, user_data](
                                                             const lmx::RequestUpdate& u) noexcept {
      std::vector<std::string> chunks;
      bool failed = false;
      try {
        for (const auto& c : state->apply(u)) chunks.push_back(dump(c));
      } catch (...) {
        failed = true;
      }
      if (failed && u.finished) {
        chunks.clear();
        chunks.emplace_back(
            R"({"generated_text":"","details":{"finish_reason":"error"},"error":"internal error while formatting the response"})");
      }
      for (size_t i = 0; i < chunks.size(); ++i) {
        int32_t final_chunk = (u.finished && i + 1 == chunks.size()) ? 1 : 0;
        callback(user_data, chunks[i].c_str(), chunks[i].size(), final_chunk);
      }
    });
    if (request_id != nullptr) *request_id = id;
    return LMX_STATUS_OK;
  });
}

LMX_API lmx_status lmx_cancel(lmx_handle* handle, uint64_t request_id) {
  if (handle == nullptr) return fail(LMX_STATUS_INVALID_ARGUMENT, "lmx_cancel: handle is null");
  return guarded(LMX_STATUS_INTERNAL, [&]() -> lmx_status {
    if (!handle->engine->cancel(request_id)) {
      return fail(LMX_STATUS_NOT_FOUND,
                  "request " + std::to_string(request_id) + " is unknown or already finished");
    }
    return LMX_STATUS_OK;
  });
}

LMX_API lmx_status lmx_health(lmx_handle* handle, char** out) {
  if (out != nullptr) *out = nullptr;
  if (handle == nullptr || out == nullptr) {
    return fail(LMX_STATUS_INVALID_ARGUMENT, "lmx_health: handle and json are required");
  }
  return guarded(LMX_STATUS_INTERNAL, [&]() -> lmx_status {
    *out = copy_string(dump(lmx::plugin::health_json(*handle)));
    if (*out == nullptr) return fail(LMX_STATUS_INTERNAL, "out of memory");
    return LMX_STATUS_OK;
  });
}

LMX_API void lmx_free_string(char* s) { std::free(s); }

LMX_API void lmx_destroy(lmx_handle* handle) {
  if (handle == nullptr) return;
  try {
    handle->shutting_down = true;
    handle->engine->shutdown();
  } catch (const std::exception& e) {
    spdlog::error("lmx_destroy: engine shutdown failed: {}", e.what());
  } catch (...) {
    spdlog::error("lmx_destroy: engine shutdown failed");
  }
  try {
    delete handle;
  } catch (...) {
  }
}

}  // extern "C"
