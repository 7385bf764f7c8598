#include "engine/tokenizer/pre_tokenizers.h"

#include <functional>
#include <utility>

#include "engine/core/error.h"
#include "engine/tokenizer/pattern.h"
#include "engine/tokenizer/regex.h"
#include "engine/tokenizer/split_behavior.h"
#include "engine/tokenizer/unicode.h"

namespace lmx::tok {
namespace {

using Matches = std::vector<std::pair<size_t, size_t>>;

// GPT-2's pre-tokenization pattern, used by ByteLevel when use_regex is set.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Runs `find` on every piece and re-splits it with `behavior`.
void resplit(std::vector<std::string>& pieces, const std::function<Matches(std::string_view)>& find,
             SplitBehavior behavior, bool invert) {
  std::vector<std::string> out;
  out.reserve(pieces.size() * 2);
  for (const auto& p : pieces) split_piece(p, find(p), behavior, invert, out);
  pieces = std::move(out);
}

// Matches made of single code points that satisfy `pred`.
Matches char_matches(std::string_view s, bool (*pred)(char32_t)) {
  Matches m;
  for (size_t i = 0; i < s.size();) {
    const size_t b = i;
    if (pred(next_codepoint(s, i))) m.emplace_back(b, i);
  }
  return m;
}

class ByteLevel final : public PreTokenizer {
 public:
  ByteLevel(bool add_prefix_space, bool use_regex)
      : add_prefix_space_(add_prefix_space),
        regex_(use_regex ? std::make_unique<Regex>(kGpt2Pattern) : nullptr) {}
  void split(std::vector<std::string>& pieces, bool) const override {
    if (add_prefix_space_)
      for (auto& p : pieces)
        if (p.empty() || p[0] != ' ') p.insert(0, 1, ' ');
    if (regex_) {
      resplit(
          pieces, [this](std::string_view s) { return regex_->find_all(s); },
          SplitBehavior::kIsolated, false);
    }
    for (auto& p : pieces) {
      std::string mapped;
      mapped.reserve(p.size() * 2);
      for (char c : p) mapped += byte_to_unicode(static_cast<unsigned char>(c));
      p = std::move(mapped);
    }
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<Regex> regex_;
};

class Split final : public PreTokenizer {
 public:
  Split(const nlohmann::json& pattern, SplitBehavior behavior, bool invert)
      : pattern_(pattern, "Split pre-tokenizer"), behavior_(behavior), invert_(invert) {}
  void split(std::vector<std::string>& pieces, bool) const override {
    resplit(
        pieces, [this](std::string_view s) { return pattern_.find_all(s); }, behavior_, invert_);
  }

 private:
  Pattern pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

class Metaspace final : public PreTokenizer {
 public:
  enum class Scheme { kAlways, kFirst, kNever };
  Metaspace(std::string replacement, Scheme scheme, bool split)
      : replacement_(std::move(replacement)), scheme_(scheme), split_(split) {}
  void split(std::vector<std::string>& pieces, bool at_start) const override {
    for (size_t k = 0; k < pieces.size(); ++k) {
      auto& p = pieces[k];
      std::string r;
      r.reserve(p.size() + replacement_.size());
      for (char c : p) {
        if (c == ' ')
          r += replacement_;
        else
          r += c;
      }
      const bool starts = r.compare(0, replacement_.size(), replacement_) == 0;
      if (!starts &&
          (scheme_ == Scheme::kAlways || (scheme_ == Scheme::kFirst && at_start && k == 0)))
        r.insert(0, replacement_);
      p = std::move(r);
    }
    if (split_) {
      const std::string& rep = replacement_;
      resplit(
          pieces,
          [&rep](std::string_view s) {
            Matches m;
            for (size_t p = s.find(rep); p != std::string_view::npos;
                 p = s.find(rep, p + rep.size()))
              m.emplace_back(p, p + rep.size());
            return m;
          },
          SplitBehavior::kMergedWithNext, false);
    }
  }

 private:
  std::string replacement_;
  Scheme scheme_;
  bool split_;
};

// Splits on single code points matching a predicate (Punctuation, WhitespaceSplit, Digits).
class CharSplit final : public PreTokenizer {
 public:
  CharSplit(bool (*pred)(char32_t), SplitBehavior behavior) : pred_(pred), behavior_(behavior) {}
  void split(std::vector<std::string>& pieces, bool) const override {
    auto* pred = pred_;
    resplit(
        pieces, [pred](std::string_view s) { return char_matches(s, pred); }, behavior_, false);
  }

 private:
  bool (*pred_)(char32_t);
  SplitBehavior behavior_;
};

class RegexSplit final : public PreTokenizer {
 public:
  RegexSplit(const char* pattern, SplitBehavior behavior, bool invert)
      : regex_(pattern), behavior_(behavior), invert_(invert) {}
  void split(std::vector<std::string>& pieces, bool) const override {
    resplit(
        pieces, [this](std::string_view s) { return regex_.find_all(s); }, behavior_, invert_);
  }

 private:
  Regex regex_;
  SplitBehavior behavior_;
  bool invert_;
};

class Sequence final : public PreTokenizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<PreTokenizer>> parts) : parts_(std::move(parts)) {}
  void split(std::vector<std::string>& pieces, bool at_start) const override {
    for (const auto& p : parts_) p->split(pieces, at_start);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

}  // namespace

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const nlohmann::json& j) {
  if (j.is_null()) return nullptr;
  const std::string type = j.value("type", "");
  if (type == "ByteLevel")
    return std::make_unique<ByteLevel>(j.value("add_prefix_space", true),
                                       j.value("use_regex", true));
  if (type == "Split") {
    return std::make_unique<Split>(j.at("pattern"),
                                   parse_split_behavior(j.at("behavior").get<std::string>()),
                                   j.value("invert", false));
  }
  if (type == "Metaspace") {
    Metaspace::Scheme scheme = Metaspace::Scheme::kAlways;
    if (j.contains("prepend_scheme")) {
      const std::string s = j.at("prepend_scheme").get<std::string>();
      if (s == "first")
        scheme = Metaspace::Scheme::kFirst;
      else if (s == "never")
        scheme = Metaspace::Scheme::kNever;
      else if (s != "always")
        throw_error("tokenizer: Metaspace prepend_scheme '{}' unknown", s);
    } else if (!j.value("add_prefix_space", true)) {
      scheme = Metaspace::Scheme::kNever;
    }
    return std::make_unique<Metaspace>(j.value("replacement", std::string("\u2581")), scheme,
                                       j.value("split", true));
  }
  if (type == "Digits") {
    return std::make_unique<RegexSplit>(
        R"(\p{N})",
        j.value("individual_digits", false) ? SplitBehavior::kIsolated : SplitBehavior::kContiguous,
        false);
  }
  if (type == "Punctuation") {
    return std::make_unique<CharSplit>(is_punctuation,
                                       parse_split_behavior(j.value("behavior", "Isolated")));
  }
  if (type == "Whitespace") {
    // Rust's Unicode \w (UTS #18: Alphabetic, marks, decimal digits, connectors, join controls)
    // and \s (White_Space); PCRE2's UCP \w is narrower, so spell the classes out.
    return std::make_unique<RegexSplit>(
        R"([\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}]+)"
        R"(|[^\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}\p{White_Space}]+)",
        SplitBehavior::kRemoved, true);
  }
  if (type == "WhitespaceSplit")
    return std::make_unique<CharSplit>(is_whitespace, SplitBehavior::kRemoved);
  if (type == "BertPreTokenizer") {
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    parts.push_back(std::make_unique<CharSplit>(is_whitespace, SplitBehavior::kRemoved));
    parts.push_back(std::make_unique<CharSplit>(is_punctuation, SplitBehavior::kIsolated));
    return std::make_unique<Sequence>(std::move(parts));
  }
  if (type == "Sequence") {
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    for (const auto& p : j.at("pretokenizers"))
      if (auto made = make_pre_tokenizer(p)) parts.push_back(std::move(made));
    return std::make_unique<Sequence>(std::move(parts));
  }
  throw_error("tokenizer: unsupported pre_tokenizer type '{}'", type.empty() ? j.dump() : type);
}

}  // namespace lmx::tok
