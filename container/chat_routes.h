// POST /v1/chat/completions, and LMI's {"messages": [...]} on the invocation paths: n choices as
// n plugin streams (one request each, so a disconnect cancels all), answered as one OpenAI
// chat.completion or as chat.completion.chunk SSE ending in "data: [DONE]".
#pragma once

#include <memory>

namespace lmx::server {

class HttpSession;

void handle_chat(const std::shared_ptr<HttpSession>& session);

}  // namespace lmx::server
