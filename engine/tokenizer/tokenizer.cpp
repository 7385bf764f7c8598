// Encode/decode pipeline: added tokens -> normalizer -> pre-tokenizer -> model ->
// post-processor, and ids -> token strings -> decoder.
#include "engine/tokenizer/tokenizer.h"

#include "engine/tokenizer/tokenizer_impl.h"
#include "engine/tokenizer/unicode.h"

namespace lmx {

std::vector<int32_t> Tokenizer::Impl::encode(std::string_view text, bool add_special_tokens) const {
  std::string repaired;
  if (!tok::valid_utf8(text)) {  // tokenizers only sees valid strings; repair like from_utf8_lossy
    repaired = tok::utf8_lossy(text);
    text = repaired;
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  std::vector<tok::AddedTokenMatcher::Part> raw, normalized;
  raw_matcher.split(text, raw);
  std::vector<std::string> pieces;
  std::string norm;
  for (const auto& part : raw) {
    if (part.id >= 0) {
      ids.push_back(part.id);
      continue;
    }
    const bool part_at_start = part.text.data() == text.data();
    norm.assign(part.text);
    if (normalizer) normalizer->normalize(norm);
    normalized.clear();
    normalized_matcher.split(norm, normalized);
    for (const auto& sub : normalized) {
      if (sub.id >= 0) {
        ids.push_back(sub.id);
        continue;
      }
      pieces.assign(1, std::string(sub.text));
      if (pre_tokenizer)
        pre_tokenizer->split(pieces, part_at_start && sub.text.data() == norm.data());
      for (const auto& p : pieces) model->tokenize(p, ids);
    }
  }
  if (add_special_tokens && post_processor) post_processor->process(ids);
  return ids;
}

std::string Tokenizer::Impl::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    auto it = added_by_id.find(id);
    if (it != added_by_id.end()) {
      const tok::AddedToken& a = added[it->second];
      if (!(skip_special_tokens && a.skip_as_special)) tokens.push_back(a.decoded);
      continue;
    }
    if (const std::string* t = model->vocab().token(id)) tokens.push_back(*t);
  }
  if (!decoder) {
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
    return out;
  }
  decoder->decode_chain(tokens);
  std::string out;
  for (const auto& t : tokens) out += t;
  return out;
}

std::optional<int32_t> Tokenizer::Impl::token_to_id(std::string_view token) const {
  auto it = added_by_content.find(token);
  if (it != added_by_content.end()) return it->second;
  return model->vocab().find(token);
}

const std::string* Tokenizer::Impl::id_to_token(int32_t id) const {
  auto it = added_by_id.find(id);
  if (it != added_by_id.end()) return &added[it->second].content;
  return model->vocab().token(id);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  return impl_->encode(text, add_special_tokens);
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  return impl_->decode(ids, skip_special_tokens);
}

int32_t Tokenizer::vocab_size() const {
  int32_t n = 0;
  for (const auto& [id, index] : impl_->added_by_id) n = std::max(n, id + 1);
  // Model ids are dense in practice; find the largest one cheaply from the top.
  for (int32_t id = impl_->model->vocab().size() + static_cast<int32_t>(impl_->added.size());
       id >= n; --id)
    if (impl_->model->vocab().token(id)) return std::max(n, id + 1);
  return n;
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  return impl_->token_to_id(token);
}

std::string Tokenizer::id_to_token(int32_t id) const {
  const std::string* t = impl_->id_to_token(id);
  return t ? *t : std::string();
}

std::optional<int32_t> Tokenizer::bos_id() const { return impl_->bos; }
std::optional<int32_t> Tokenizer::eos_id() const { return impl_->eos; }
std::optional<int32_t> Tokenizer::pad_id() const { return impl_->pad; }

bool Tokenizer::is_special(int32_t id) const {
  auto it = impl_->added_by_id.find(id);
  return it != impl_->added_by_id.end() && impl_->added[it->second].special;
}

const std::string& Tokenizer::chat_template() const { return impl_->chat_template; }

}  // namespace lmx
