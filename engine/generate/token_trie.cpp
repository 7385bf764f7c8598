#include "engine/generate/token_trie.h"

#include <algorithm>

#include "engine/tokenizer/tokenizer.h"

namespace lmx {

TokenTrie::TokenTrie(std::vector<std::optional<std::string>> token_bytes)
    : token_bytes_(std::move(token_bytes)) {
  std::vector<int32_t> order;
  for (size_t id = 0; id < token_bytes_.size(); ++id)
    if (token_bytes_[id] && !token_bytes_[id]->empty()) order.push_back(int32_t(id));
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return *token_bytes_[size_t(a)] < *token_bytes_[size_t(b)];
  });
  // In sorted order each token shares a prefix with the previous one: new nodes are appended
  // for the rest of its bytes (preorder), and the path's nodes are kept to close subtrees.
  std::vector<uint32_t> path;  // node index at each depth - 1
  const std::string* previous = nullptr;
  for (int32_t id : order) {
    const std::string& s = *token_bytes_[size_t(id)];
    size_t common = 0;
    if (previous)
      while (common < previous->size() && common < s.size() && (*previous)[common] == s[common])
        ++common;
    for (size_t d = path.size(); d > common; --d) nodes_[path[d - 1]].end = uint32_t(nodes_.size());
    path.resize(common);
    for (size_t d = common; d < s.size(); ++d) {
      path.push_back(uint32_t(nodes_.size()));
      nodes_.push_back({uint8_t(s[d]), uint16_t(d + 1), 0, uint32_t(ids_.size())});
    }
    // Tokens with equal bytes end on the same node; ids_ follows node order.
    ids_.push_back(id);
    max_depth_ = std::max(max_depth_, s.size());
    previous = &s;
  }
  for (uint32_t n : path) nodes_[n].end = uint32_t(nodes_.size());
  nodes_.push_back({0, 0, 0, uint32_t(ids_.size())});  // sentinel: the last node's ids end
}

TokenTrie TokenTrie::of(const Tokenizer& tokenizer) {
  std::vector<std::optional<std::string>> bytes(size_t(tokenizer.vocab_size()));
  for (size_t id = 0; id < bytes.size(); ++id) bytes[id] = tokenizer.token_bytes(int32_t(id));
  return TokenTrie(std::move(bytes));
}

const std::string* TokenTrie::bytes(int32_t id) const {
  if (id < 0 || size_t(id) >= token_bytes_.size() || !token_bytes_[size_t(id)] ||
      token_bytes_[size_t(id)]->empty())
    return nullptr;
  return &*token_bytes_[size_t(id)];
}

void TokenTrie::allowed(const JsonRecognizer& state, std::span<uint8_t> mask) const {
  std::fill(mask.begin(), mask.end(), uint8_t(0));
  std::vector<JsonRecognizer> states(max_depth_ + 1, state);  // states[d]: after d bytes
  const size_t n = nodes_.size() - 1;                         // without the sentinel
  for (size_t i = 0; i < n;) {
    const Node& node = nodes_[i];
    JsonRecognizer& s = states[node.depth];
    s = states[node.depth - 1u];
    if (!s.advance(node.byte)) {
      i = node.end;
      continue;
    }
    for (uint32_t k = node.ids_begin; k < nodes_[i + 1].ids_begin; ++k)
      if (size_t(ids_[k]) < mask.size()) mask[size_t(ids_[k])] = 1;
    ++i;
  }
}

}  // namespace lmx
