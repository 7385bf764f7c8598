// Decoders of tokenizer.json (ByteLevel, Metaspace, ByteFallback, Fuse, Strip, Replace,
// WordPiece, BPEDecoder, Sequence): turn the token strings of an id sequence back into text.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace lmx::tok {

class Decoder {
 public:
  virtual ~Decoder() = default;
  // tokenizers' decode_chain: rewrites the list of token strings; the result is concatenated.
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};

// nullptr for JSON null; throws lmx::Error naming the type for an unsupported one.
std::unique_ptr<Decoder> make_decoder(const nlohmann::json& j);

}  // namespace lmx::tok
