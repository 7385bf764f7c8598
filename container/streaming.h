// Streaming: the bridge from the plugin's stream callback (engine thread) onto a connection's
// strand, and the wire formats of a stream (JSON lines, SSE, OpenAI SSE, AWS event stream).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <nlohmann/json.hpp>

#include "container/plugin_loader.h"

namespace lmx::server {

enum class StreamFormat {
  JsonLines,    // application/jsonlines: one chunk JSON per line (LMI default)
  Sse,          // text/event-stream: "data: {chunk}\n\n" (output_formatter=sse)
  OpenAiSse,    // text/event-stream of OpenAI completion chunks, ending "data: [DONE]"
  EventStream,  // application/vnd.amazon.eventstream PayloadPart frames (SageMaker streaming)
};

const char* content_type_of(StreamFormat f);

// The bytes of one JSON-lines chunk wrapped as one AWS event-stream PayloadPart message.
std::string aws_event_stream_payload(const std::string& payload);

// One generation's stream. The callback runs on `executor` (the connection's strand), in order.
class StreamJob : public std::enable_shared_from_this<StreamJob> {
 public:
  using OnChunk = std::function<void(const nlohmann::json& chunk, bool final)>;

  struct StartResult {
    std::shared_ptr<StreamJob> job;  // null on failure
    lmx_status status = LMX_STATUS_OK;
    std::string error;
    std::string field;
  };
  static StartResult start(const Model& model, boost::asio::any_io_executor executor,
                           const std::string& request_json, OnChunk on_chunk);

  // Asks the engine to stop (the final chunk still comes, with "finish_reason": "cancelled").
  void cancel();
  bool finished() const { return finished_; }

 private:
  StreamJob(const Model& model, boost::asio::any_io_executor executor, OnChunk on_chunk)
      : model_(model), executor_(std::move(executor)), on_chunk_(std::move(on_chunk)) {}
  static void on_plugin_chunk(void* user_data, const char* chunk, size_t len, int32_t is_final);

  const Model& model_;
  boost::asio::any_io_executor executor_;
  OnChunk on_chunk_;
  uint64_t id_ = 0;
  bool has_id_ = false;
  std::atomic<bool> finished_{false};
};

}  // namespace lmx::server
