// Post-processors of tokenizer.json (TemplateProcessing, BertProcessing, RobertaProcessing,
// ByteLevel, Sequence): add the special tokens around one encoded sequence when
// add_special_tokens is set.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

namespace lmx::tok {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  virtual void process(std::vector<int32_t>& ids) const = 0;
};

// nullptr for JSON null; throws lmx::Error naming the type for an unsupported one.
std::unique_ptr<PostProcessor> make_post_processor(const nlohmann::json& j);
// "[bos] $A [eos]" as tokenizer_config.json's add_bos_token/add_eos_token ask.
std::unique_ptr<PostProcessor> make_bos_eos_processor(std::vector<int32_t> before,
                                                      std::vector<int32_t> after);

}  // namespace lmx::tok
