#include "engine/tokenizer/normalizers.h"

#include <vector>

#include "engine/core/error.h"
#include "engine/tokenizer/pattern.h"
#include "engine/tokenizer/unicode.h"

namespace lmx::tok {
namespace {

class UnicodeForm final : public Normalizer {
 public:
  explicit UnicodeForm(NormForm f) : form_(f) {}
  void normalize(std::string& s) const override { s = tok::normalize(s, form_); }

 private:
  NormForm form_;
};

class Lowercase final : public Normalizer {
 public:
  void normalize(std::string& s) const override { s = to_lower(s); }
};

// Removes marks (StripAccents: every mark; BertNormalizer: nonspacing ones only, as tokenizers
// does); meant to follow NFD/NFKD.
void strip_marks(std::string& s, bool (*is_accent)(char32_t)) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t b = i;
    if (!is_accent(next_codepoint(s, i))) out.append(s, b, i - b);
  }
  s = std::move(out);
}

class StripAccents final : public Normalizer {
 public:
  void normalize(std::string& s) const override { strip_marks(s, is_mark); }
};

class Prepend final : public Normalizer {
 public:
  explicit Prepend(std::string p) : prepend_(std::move(p)) {}
  void normalize(std::string& s) const override {
    if (!s.empty()) s.insert(0, prepend_);
  }

 private:
  std::string prepend_;
};

class Replace final : public Normalizer {
 public:
  Replace(const nlohmann::json& pattern, std::string content)
      : pattern_(pattern, "Replace normalizer"), content_(std::move(content)) {}
  void normalize(std::string& s) const override { s = pattern_.replace_all(s, content_); }

 private:
  Pattern pattern_;
  std::string content_;
};

class Strip final : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  void normalize(std::string& s) const override {
    size_t b = 0, e = s.size();
    if (left_) {
      for (size_t i = 0; i < s.size(); b = i)
        if (!is_whitespace(next_codepoint(s, i))) break;
    }
    if (right_) {
      // Walk forward remembering where the trailing whitespace run starts.
      size_t run = s.size();
      for (size_t i = b; i < s.size();) {
        const size_t at = i;
        if (is_whitespace(next_codepoint(s, i))) {
          if (run == s.size()) run = at;
        } else {
          run = s.size();
        }
      }
      e = run;
    }
    s = s.substr(b, e - b);
  }

 private:
  bool left_, right_;
};

class BertNormalizer final : public Normalizer {
 public:
  BertNormalizer(bool clean, bool chinese, bool strip_accents, bool lower)
      : clean_(clean), chinese_(chinese), strip_(strip_accents), lower_(lower) {}
  void normalize(std::string& s) const override {
    std::string out;
    out.reserve(s.size() + 8);
    for (size_t i = 0; i < s.size();) {
      const char32_t cp = next_codepoint(s, i);
      if (clean_) {
        if (cp == 0 || cp == 0xFFFD || is_control(cp)) continue;
        if (is_whitespace(cp)) {
          out += ' ';
          continue;
        }
      }
      if (chinese_ && is_chinese_char(cp)) {
        out += ' ';
        append_utf8(out, cp);
        out += ' ';
        continue;
      }
      append_utf8(out, cp);
    }
    if (strip_) {
      out = tok::normalize(out, NormForm::kNFD);
      strip_marks(out, is_mark_nonspacing);
    }
    if (lower_) out = to_lower(out);
    s = std::move(out);
  }

 private:
  bool clean_, chinese_, strip_, lower_;
};

class Sequence final : public Normalizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Normalizer>> parts) : parts_(std::move(parts)) {}
  void normalize(std::string& s) const override {
    for (const auto& p : parts_) p->normalize(s);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

}  // namespace

std::unique_ptr<Normalizer> make_normalizer(const nlohmann::json& j) {
  if (j.is_null()) return nullptr;
  const std::string type = j.value("type", "");
  if (type == "NFC") return std::make_unique<UnicodeForm>(NormForm::kNFC);
  if (type == "NFD") return std::make_unique<UnicodeForm>(NormForm::kNFD);
  if (type == "NFKC") return std::make_unique<UnicodeForm>(NormForm::kNFKC);
  if (type == "NFKD") return std::make_unique<UnicodeForm>(NormForm::kNFKD);
  if (type == "Lowercase") return std::make_unique<Lowercase>();
  if (type == "StripAccents") return std::make_unique<StripAccents>();
  if (type == "Prepend") return std::make_unique<Prepend>(j.at("prepend").get<std::string>());
  if (type == "Replace")
    return std::make_unique<Replace>(j.at("pattern"), j.at("content").get<std::string>());
  if (type == "Strip")
    return std::make_unique<Strip>(j.value("strip_left", true), j.value("strip_right", true));
  if (type == "BertNormalizer") {
    const bool lower = j.value("lowercase", true);
    const auto& sa = j.contains("strip_accents") ? j.at("strip_accents") : nlohmann::json();
    const bool strip = sa.is_null() ? lower : sa.get<bool>();  // null: follows lowercase
    return std::make_unique<BertNormalizer>(j.value("clean_text", true),
                                            j.value("handle_chinese_chars", true), strip, lower);
  }
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Normalizer>> parts;
    for (const auto& n : j.at("normalizers"))
      if (auto p = make_normalizer(n)) parts.push_back(std::move(p));
    return std::make_unique<Sequence>(std::move(parts));
  }
  throw_error("tokenizer: unsupported normalizer type '{}'", type.empty() ? j.dump() : type);
}

}  // namespace lmx::tok
