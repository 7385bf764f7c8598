// The generation endpoints: LMI (/invocations, /predictions/{model}, SageMaker runtime paths)
// and OpenAI-style /v1/completions. Every input goes through the plugin's streaming call, a list
// as one stream per input, so a client that disconnects cancels all of its generations.
#pragma once

#include <cstdint>
#include <memory>

namespace lmx::server {

class HttpSession;

// force_stream: the SageMaker response-stream API (always streams); event_stream: frame the
// stream as application/vnd.amazon.eventstream.
void handle_lmi(const std::shared_ptr<HttpSession>& session, bool force_stream, bool event_stream);
void handle_openai(const std::shared_ptr<HttpSession>& session);

// False (and answered 503) unless the model is ready and the server is not draining.
bool check_ready(HttpSession& s);

// Counts a generation the plugin refused with a 503 status (queue full, unavailable) in
// lmx_rejected_total; other statuses are not rejections.
void count_rejection(HttpSession& s, int32_t plugin_status);

}  // namespace lmx::server
