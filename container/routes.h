// URL routing: GET /ping, GET /models, GET /metrics, POST /invocations,
// POST /predictions/{model}, POST /endpoints/{name}/invocations[-response-stream] (what the AWS
// SDK's sagemaker-runtime client calls), POST /v1/completions. Unknown paths are 404, a known
// path with the wrong method 405.
#pragma once

#include <memory>

namespace lmx::server {

class HttpSession;

void route(const std::shared_ptr<HttpSession>& session);

}  // namespace lmx::server
