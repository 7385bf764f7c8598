// Normalizers of tokenizer.json: NFC/NFD/NFKC/NFKD, Lowercase, StripAccents, Prepend, Replace,
// Strip, BertNormalizer and Sequence. Only the normalized text matters to LMX (no offsets).
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace lmx::tok {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void normalize(std::string& s) const = 0;
};

// nullptr for JSON null; throws lmx::Error naming the type for an unsupported one.
std::unique_ptr<Normalizer> make_normalizer(const nlohmann::json& j);

}  // namespace lmx::tok
