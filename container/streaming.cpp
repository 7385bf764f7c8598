#include "container/streaming.h"

#include <boost/asio/post.hpp>
#include <boost/crc.hpp>

namespace lmx::server {

const char* content_type_of(StreamFormat f) {
  switch (f) {
    case StreamFormat::JsonLines:
      return "application/jsonlines";
    case StreamFormat::Sse:
    case StreamFormat::OpenAiSse:
      return "text/event-stream";
    case StreamFormat::EventStream:
      return "application/vnd.amazon.eventstream";
  }
  return "application/octet-stream";
}

namespace {

void put_u32(std::string& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8)
    out.push_back(static_cast<char>((v >> shift) & 0xff));
}

void put_header(std::string& out, const std::string& name, const std::string& value) {
  out.push_back(static_cast<char>(name.size()));
  out += name;
  out.push_back(7);  // type: string
  out.push_back(static_cast<char>((value.size() >> 8) & 0xff));
  out.push_back(static_cast<char>(value.size() & 0xff));
  out += value;
}

uint32_t crc32(const std::string& s) {
  boost::crc_32_type crc;
  crc.process_bytes(s.data(), s.size());
  return crc.checksum();
}

}  // namespace

// Message layout (vnd.amazon.eventstream): total length, headers length, prelude CRC32, headers,
// payload, message CRC32; all integers big-endian.
std::string aws_event_stream_payload(const std::string& payload) {
  std::string headers;
  put_header(headers, ":event-type", "PayloadPart");
  put_header(headers, ":content-type", "application/octet-stream");
  put_header(headers, ":message-type", "event");
  std::string msg;
  put_u32(msg, static_cast<uint32_t>(12 + headers.size() + payload.size() + 4));
  put_u32(msg, static_cast<uint32_t>(headers.size()));
  put_u32(msg, crc32(msg));
  msg += headers;
  msg += payload;
  put_u32(msg, crc32(msg));
  return msg;
}

StreamJob::StartResult StreamJob::start(const Model& model, boost::asio::any_io_executor executor,
                                        const std::string& request_json, OnChunk on_chunk) {
  StartResult r;
  auto job =
      std::shared_ptr<StreamJob>(new StreamJob(model, std::move(executor), std::move(on_chunk)));
  // Owned by the plugin until the final chunk.
  auto* holder = new std::shared_ptr<StreamJob>(job);
  uint64_t id = 0;
  const auto& api = model.api();
  r.status = api.predict_stream(model.handle(), request_json.c_str(), &StreamJob::on_plugin_chunk,
                                holder, &id);
  if (r.status != LMX_STATUS_OK) {
    r.error = api.last_error();
    r.field = api.last_error_field();
    delete holder;
    return r;
  }
  job->id_ = id;
  job->has_id_ = true;
  r.job = std::move(job);
  return r;
}

void StreamJob::on_plugin_chunk(void* user_data, const char* chunk, size_t len, int32_t is_final) {
  auto* holder = static_cast<std::shared_ptr<StreamJob>*>(user_data);
  std::shared_ptr<StreamJob> job = *holder;
  if (is_final) {
    job->finished_ = true;
    delete holder;
  }
  try {
    boost::asio::post(job->executor_, [job, text = std::string(chunk, len), is_final] {
      auto j = nlohmann::json::parse(text, nullptr, false);
      if (j.is_discarded()) {
        j = nlohmann::json{{"generated_text", ""},
                           {"details", {{"finish_reason", "error"}}},
                           {"error", "plugin sent malformed JSON"}};
      }
      job->on_chunk_(j, is_final != 0);
    });
  } catch (...) {
    // Out of memory on the engine thread: nothing sensible left to do for this chunk.
  }
}

void StreamJob::cancel() {
  if (finished_ || !has_id_) return;
  if (model_.handle() != nullptr) model_.api().cancel(model_.handle(), id_);
}

}  // namespace lmx::server
