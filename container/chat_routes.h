// POST /v1/chat/completions, and LMI's {"messages": [...]} on the invocation paths: n choices as
// n plugin streams (one request each, so a disconnect cancels all), answered as one OpenAI
// chat.completion or as chat.completion.chunk SSE ending in "data: [DONE]".
#pragma once

#include <memory>

namespace lmx::server {

class HttpSession;

struct OpenAiRequest;

void handle_chat(const std::shared_ptr<HttpSession>& session);

// /v1/completions of one prompt with n choices or logprobs, answered as text_completion objects
// by the same machinery.
void handle_completion_choices(const std::shared_ptr<HttpSession>& session,
                               const OpenAiRequest& req);

}  // namespace lmx::server
