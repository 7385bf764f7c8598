#include "engine/tokenizer/models/unigram.h"

#include <algorithm>
#include <limits>

#include "engine/core/error.h"
#include "engine/tokenizer/unicode.h"
#include "engine/tokenizer/json_ids.h"

namespace lmx::tok {
namespace {

constexpr double kUnkPenalty = 10.0;  // as sentencepiece/tokenizers

class Unigram final : public Model {
 public:
  Unigram(Vocab vocab, std::vector<double> scores, int32_t unk_id, bool byte_fallback)
      : vocab_(std::move(vocab)),
        scores_(std::move(scores)),
        unk_id_(unk_id),
        byte_fallback_(byte_fallback) {
    double min_score = std::numeric_limits<double>::max();
    for (int32_t id = 0; id < static_cast<int32_t>(scores_.size()); ++id) {
      min_score = std::min(min_score, scores_[static_cast<size_t>(id)]);
      if (const std::string* t = vocab_.token(id))
        max_piece_bytes_ = std::max(max_piece_bytes_, t->size());
    }
    unk_score_ = min_score - kUnkPenalty;
  }

  const Vocab& vocab() const override { return vocab_; }

  void tokenize(std::string_view s, std::vector<int32_t>& out) const override {
    if (s.empty()) return;
    const size_t n = s.size();
    std::vector<Best> best(n + 1);
    best[0].score = 0;
    best[0].set = true;
    for (size_t b = 0; b < n; b = next_char(s, b)) {
      if (!best[b].set) continue;
      bool single = false;
      const size_t one = next_char(s, b);
      for (size_t e = one; e <= n && e - b <= max_piece_bytes_; e = next_char(s, e)) {
        if (auto id = vocab_.find(s.substr(b, e - b))) {
          single = single || e == one;
          relax(best, b, e, *id, scores_[static_cast<size_t>(*id)]);
        }
        if (e == n) break;
      }
      if (!single) relax(best, b, one, -1, unk_score_);
    }
    // Backtrack, then fuse runs of unknown characters into one unk.
    std::vector<std::pair<size_t, size_t>> spans;
    std::vector<int32_t> ids;
    for (size_t e = n; e > 0; e = best[e].from) {
      spans.emplace_back(best[e].from, e);
      ids.push_back(best[e].id);
    }
    std::reverse(spans.begin(), spans.end());
    std::reverse(ids.begin(), ids.end());
    for (size_t k = 0; k < ids.size(); ++k) {
      if (ids[k] >= 0) {
        out.push_back(ids[k]);
        continue;
      }
      size_t end = spans[k].second;
      while (k + 1 < ids.size() && ids[k + 1] < 0) end = spans[++k].second;
      emit_unknown(s.substr(spans[k].first, end - spans[k].first), out);
    }
  }

 private:
  struct Best {  // best path ending at a byte offset
    double score = -std::numeric_limits<double>::infinity();
    size_t from = 0;
    int32_t id = -1;  // -1: unknown character
    bool set = false;
  };
  static size_t next_char(std::string_view s, size_t i) {
    return std::min(s.size(), i + utf8_len(static_cast<unsigned char>(s[i])));
  }
  static void relax(std::vector<Best>& best, size_t b, size_t e, int32_t id, double score) {
    const double total = best[b].score + score;
    if (!best[e].set || total > best[e].score) {
      best[e].score = total;
      best[e].from = b;
      best[e].id = id;
      best[e].set = true;
    }
  }
  void emit_unknown(std::string_view text, std::vector<int32_t>& out) const {
    if (byte_fallback_) {
      std::vector<int32_t> bytes;
      for (char c : text) {
        auto id = vocab_.find(fmt::format("<0x{:02X}>", static_cast<unsigned char>(c)));
        if (!id) break;
        bytes.push_back(*id);
      }
      if (bytes.size() == text.size()) {
        out.insert(out.end(), bytes.begin(), bytes.end());
        return;
      }
    }
    out.push_back(unk_id_);
  }

  Vocab vocab_;
  std::vector<double> scores_;
  int32_t unk_id_;
  bool byte_fallback_;
  double unk_score_ = 0;
  size_t max_piece_bytes_ = 1;
};

}  // namespace

std::unique_ptr<Model> make_unigram(const nlohmann::json& j) {
  Vocab vocab;
  std::vector<double> scores;
  int32_t id = 0;
  for (const auto& entry : j.at("vocab")) {
    vocab.add(entry.at(0).get<std::string>(), id++);
    scores.push_back(entry.at(1).get<double>());
  }
  if (!j.contains("unk_id") || j.at("unk_id").is_null())
    throw_error("tokenizer: Unigram without unk_id is not supported");
  return std::make_unique<Unigram>(std::move(vocab), std::move(scores),
                                   tok::token_id(j.at("unk_id"), "unk_id"), j.value("byte_fallback", false));
}

}  // namespace lmx::tok
