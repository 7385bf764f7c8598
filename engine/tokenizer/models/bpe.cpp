#include "engine/tokenizer/models/bpe.h"

#include <mutex>
#include <queue>
#include <shared_mutex>

#include "engine/core/error.h"
#include "engine/tokenizer/unicode.h"
#include "engine/tokenizer/json_ids.h"

namespace lmx::tok {
namespace {

constexpr size_t kCacheCapacity = 10000;  // as tokenizers: bounded, filled until full
constexpr size_t kCacheMaxWord = 256;     // long "words" (whole SentencePiece inputs) not cached

uint64_t pair_key(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

class Bpe final : public Model {
 public:
  Bpe(Vocab vocab, const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions o)
      : vocab_(std::move(vocab)), o_(std::move(o)) {
    if (o_.unk_token) {
      unk_id_ = vocab_.find(*o_.unk_token);
      if (!unk_id_) throw_error("tokenizer: BPE unk_token '{}' is not in the vocab", *o_.unk_token);
    }
    merges_.reserve(merges.size());
    const std::string& prefix = o_.continuing_subword_prefix;
    for (size_t rank = 0; rank < merges.size(); ++rank) {
      const auto& [a, b] = merges[rank];
      const auto ia = vocab_.find(a), ib = vocab_.find(b);
      if (!ia || !ib)
        throw_error("tokenizer: BPE merge '{} {}' uses a token not in the vocab", a, b);
      const bool strip = !prefix.empty() && b.compare(0, prefix.size(), prefix) == 0;
      const std::string merged = a + (strip ? b.substr(prefix.size()) : b);
      const auto im = vocab_.find(merged);
      if (!im)
        throw_error("tokenizer: BPE merge '{} {}' makes '{}', not in the vocab", a, b, merged);
      merges_[pair_key(*ia, *ib)] = {static_cast<int32_t>(rank), *im};
    }
    if (o_.byte_fallback) {
      for (int b = 0; b < 256; ++b)
        byte_ids_[b] = vocab_.find(fmt::format("<0x{:02X}>", b)).value_or(-1);
    }
  }

  const Vocab& vocab() const override { return vocab_; }

  void tokenize(std::string_view word, std::vector<int32_t>& out) const override {
    if (word.empty()) return;
    if (o_.ignore_merges) {
      if (auto id = vocab_.find(word)) {
        out.push_back(*id);
        return;
      }
    }
    if (word.size() <= kCacheMaxWord) {
      std::shared_lock lock(cache_mutex_);
      auto it = cache_.find(word);
      if (it != cache_.end()) {
        out.insert(out.end(), it->second.begin(), it->second.end());
        return;
      }
    }
    std::vector<int32_t> ids = merge_word(word);
    out.insert(out.end(), ids.begin(), ids.end());
    if (word.size() > kCacheMaxWord) return;
    std::unique_lock lock(cache_mutex_);
    if (cache_.size() < kCacheCapacity) cache_.emplace(std::string(word), std::move(ids));
  }

 private:
  struct Merge {
    int32_t rank, new_id;
  };
  struct Symbol {
    int32_t id;
    int prev, next;
    bool alive;
  };

  // Initial symbols: one per character (with prefix/suffix), byte-fallback or unk as needed.
  std::vector<Symbol> initial_symbols(std::string_view word) const {
    std::vector<Symbol> syms;
    syms.reserve(word.size());
    bool last_unk = false;
    std::string piece;
    for (size_t i = 0; i < word.size();) {
      const size_t b = i;
      i += std::min(utf8_len(static_cast<unsigned char>(word[i])), word.size() - i);
      piece.clear();
      if (b > 0) piece += o_.continuing_subword_prefix;
      piece.append(word.substr(b, i - b));
      if (i == word.size()) piece += o_.end_of_word_suffix;
      if (auto id = vocab_.find(piece)) {
        syms.push_back({*id, 0, 0, true});
        last_unk = false;
        continue;
      }
      if (o_.byte_fallback) {
        bool all = true;
        for (char c : piece) all = all && byte_ids_[static_cast<unsigned char>(c)] >= 0;
        if (all) {
          for (char c : piece)
            syms.push_back({byte_ids_[static_cast<unsigned char>(c)], 0, 0, true});
          last_unk = false;
          continue;
        }
      }
      if (unk_id_) {
        if (!(o_.fuse_unk && last_unk)) syms.push_back({*unk_id_, 0, 0, true});
        last_unk = true;
      }
    }
    for (size_t k = 0; k < syms.size(); ++k) {
      syms[k].prev = static_cast<int>(k) - 1;
      syms[k].next = k + 1 < syms.size() ? static_cast<int>(k) + 1 : -1;
    }
    return syms;
  }

  std::vector<int32_t> merge_word(std::string_view word) const {
    std::vector<Symbol> syms = initial_symbols(word);
    struct Cand {
      int32_t rank;
      int pos;
      int32_t new_id;
      bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
    };
    std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> queue;
    auto push = [&](int pos) {
      if (pos < 0 || syms[static_cast<size_t>(pos)].next < 0) return;
      const int nxt = syms[static_cast<size_t>(pos)].next;
      auto it = merges_.find(
          pair_key(syms[static_cast<size_t>(pos)].id, syms[static_cast<size_t>(nxt)].id));
      if (it != merges_.end()) queue.push({it->second.rank, pos, it->second.new_id});
    };
    for (size_t k = 0; k + 1 < syms.size(); ++k) push(static_cast<int>(k));
    while (!queue.empty()) {
      const Cand c = queue.top();
      queue.pop();
      Symbol& left = syms[static_cast<size_t>(c.pos)];
      if (!left.alive || left.next < 0) continue;
      Symbol& right = syms[static_cast<size_t>(left.next)];
      auto it = merges_.find(pair_key(left.id, right.id));
      if (it == merges_.end() || it->second.new_id != c.new_id) continue;  // stale entry
      left.id = c.new_id;
      right.alive = false;
      left.next = right.next;
      if (right.next >= 0) syms[static_cast<size_t>(right.next)].prev = c.pos;
      push(left.prev);
      push(c.pos);
    }
    std::vector<int32_t> ids;
    for (const Symbol& s : syms)
      if (s.alive) ids.push_back(s.id);
    return ids;
  }

  Vocab vocab_;
  BpeOptions o_;
  std::optional<int32_t> unk_id_;
  std::unordered_map<uint64_t, Merge> merges_;
  int32_t byte_ids_[256] = {};
  mutable std::shared_mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> cache_;
};

std::pair<std::string, std::string> parse_merge(const nlohmann::json& m) {
  if (m.is_array() && m.size() == 2) return {m[0].get<std::string>(), m[1].get<std::string>()};
  if (m.is_string()) {
    const std::string s = m.get<std::string>();
    const size_t sp = s.find(' ');
    if (sp != std::string::npos && s.find(' ', sp + 1) == std::string::npos)
      return {s.substr(0, sp), s.substr(sp + 1)};
  }
  throw_error("tokenizer: BPE merge {} is neither \"a b\" nor [\"a\", \"b\"]", m.dump());
}

std::string opt_string(const nlohmann::json& j, const char* key) {
  return j.contains(key) && j.at(key).is_string() ? j.at(key).get<std::string>() : std::string();
}

}  // namespace

std::unique_ptr<Model> make_bpe(Vocab vocab,
                                const std::vector<std::pair<std::string, std::string>>& merges,
                                BpeOptions options) {
  return std::make_unique<Bpe>(std::move(vocab), merges, std::move(options));
}

std::unique_ptr<Model> make_bpe(const nlohmann::json& j) {
  if (j.contains("dropout") && j.at("dropout").is_number() && j.at("dropout").get<double>() > 0)
    throw_error(
        "tokenizer: BPE dropout is not supported (inference tokenizers must be deterministic)");
  Vocab vocab;
  for (const auto& [piece, id] : j.at("vocab").items())
    vocab.add(piece, tok::token_id(id, "a vocabulary id"));
  std::vector<std::pair<std::string, std::string>> merges;
  merges.reserve(j.at("merges").size());
  for (const auto& m : j.at("merges")) merges.push_back(parse_merge(m));
  BpeOptions o;
  if (j.contains("unk_token") && j.at("unk_token").is_string())
    o.unk_token = j.at("unk_token").get<std::string>();
  o.continuing_subword_prefix = opt_string(j, "continuing_subword_prefix");
  o.end_of_word_suffix = opt_string(j, "end_of_word_suffix");
  o.fuse_unk = j.value("fuse_unk", false);
  o.byte_fallback = j.value("byte_fallback", false);
  o.ignore_merges = j.value("ignore_merges", false);
  return make_bpe(std::move(vocab), merges, std::move(o));
}

}  // namespace lmx::tok
