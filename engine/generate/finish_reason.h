// Why a request stopped.
#pragma once

namespace lmx {

enum class FinishReason { Length, EosToken, StopSequence, Cancelled, Error };

// "length", "eos_token", "stop_sequence", "cancelled", "error" (LMI's spelling)
const char* finish_reason_name(FinishReason reason);

}  // namespace lmx
