#include "engine/tokenizer/decoders.h"

#include "engine/core/error.h"
#include "engine/tokenizer/pattern.h"
#include "engine/tokenizer/unicode.h"

namespace lmx::tok {
namespace {

using Tokens = std::vector<std::string>;

std::string join(const Tokens& t) {
  std::string out;
  for (const auto& s : t) out += s;
  return out;
}

// Builds a new string rather than replacing in place (GCC 12 -Wrestrict false positive).
void replace_all(std::string& s, std::string_view from, std::string_view to) {
  if (s.find(from) == std::string::npos) return;
  std::string out;
  size_t last = 0;
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, last)) {
    out.append(s, last, p - last);
    out.append(to);
    last = p + from.size();
  }
  out.append(s, last, std::string::npos);
  s = std::move(out);
}

class ByteLevel final : public Decoder {
 public:
  void decode_chain(Tokens& tokens) const override {
    std::string bytes;
    for (const auto& t : tokens) {
      const size_t mark = bytes.size();
      bool ok = true;
      for (size_t i = 0; i < t.size() && ok;) {
        const int b = unicode_to_byte(next_codepoint(t, i));
        if (b < 0)
          ok = false;
        else
          bytes += static_cast<char>(b);
      }
      if (!ok) {  // a token outside the byte alphabet (an added token) goes through as is
        bytes.resize(mark);
        bytes += t;
      }
    }
    tokens.assign(1, utf8_lossy(bytes));
  }
};

class Metaspace final : public Decoder {
 public:
  Metaspace(std::string replacement, bool strip_first)
      : replacement_(std::move(replacement)), strip_first_(strip_first) {}
  void decode_chain(Tokens& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      // As tokenizers: in the first token every replacement character is dropped, not only
      // the prepended one.
      replace_all(tokens[i], replacement_, i == 0 && strip_first_ ? "" : " ");
    }
  }

 private:
  std::string replacement_;
  bool strip_first_;
};

// <0xAB> tokens -> bytes; a run that is not valid UTF-8 becomes one U+FFFD per byte.
class ByteFallback final : public Decoder {
 public:
  void decode_chain(Tokens& tokens) const override {
    Tokens out;
    std::string bytes;
    size_t nbytes = 0;
    auto flush = [&] {
      if (!nbytes) return;
      if (utf8_lossy(bytes) == bytes) {
        out.push_back(bytes);
      } else {
        std::string rep;
        for (size_t k = 0; k < nbytes; ++k) rep += "\xEF\xBF\xBD";
        out.push_back(rep);
      }
      bytes.clear();
      nbytes = 0;
    };
    for (auto& t : tokens) {
      if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' && isxdigit(t[3]) &&
          isxdigit(t[4])) {
        bytes += static_cast<char>(std::stoi(t.substr(3, 2), nullptr, 16));
        ++nbytes;
        continue;
      }
      flush();
      out.push_back(std::move(t));
    }
    flush();
    tokens = std::move(out);
  }
};

class Fuse final : public Decoder {
 public:
  void decode_chain(Tokens& tokens) const override { tokens.assign(1, join(tokens)); }
};

class Strip final : public Decoder {
 public:
  Strip(std::string content, size_t start, size_t stop)
      : content_(std::move(content)), start_(start), stop_(stop) {}
  void decode_chain(Tokens& tokens) const override {
    for (auto& t : tokens) {
      size_t b = 0, e = t.size();
      for (size_t k = 0; k < start_ && t.compare(b, content_.size(), content_) == 0 && b < e; ++k)
        b += content_.size();
      for (size_t k = 0; k < stop_ && e >= b + content_.size() &&
                         t.compare(e - content_.size(), content_.size(), content_) == 0;
           ++k)
        e -= content_.size();
      t = t.substr(b, e - b);
    }
  }

 private:
  std::string content_;
  size_t start_, stop_;
};

class Replace final : public Decoder {
 public:
  Replace(const nlohmann::json& pattern, std::string content)
      : pattern_(pattern, "Replace decoder"), content_(std::move(content)) {}
  void decode_chain(Tokens& tokens) const override {
    for (auto& t : tokens) t = pattern_.replace_all(t, content_);
  }

 private:
  Pattern pattern_;
  std::string content_;
};

// BERT's detokenization cleanup (" ." -> ".", " n't" -> "n't", ...).
void cleanup(std::string& s) {
  static const std::pair<const char*, const char*> kRules[] = {
      {" .", "."},   {" ?", "?"},     {" !", "!"},    {" ,", ","},
      {" ' ", "'"},  {" n't", "n't"}, {" 'm", "'m"},  {" do not", " don't"},
      {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto& [from, to] : kRules) replace_all(s, from, to);
}

class WordPiece final : public Decoder {
 public:
  WordPiece(std::string prefix, bool cleanup) : prefix_(std::move(prefix)), cleanup_(cleanup) {}
  void decode_chain(Tokens& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      auto& t = tokens[i];
      if (i > 0) {
        if (t.compare(0, prefix_.size(), prefix_) == 0)
          t.erase(0, prefix_.size());
        else
          t = ' ' + t;
      }
      if (cleanup_) cleanup(t);
    }
  }

 private:
  std::string prefix_;
  bool cleanup_;
};

class BpeDecoder final : public Decoder {
 public:
  explicit BpeDecoder(std::string suffix) : suffix_(std::move(suffix)) {}
  void decode_chain(Tokens& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i)
      replace_all(tokens[i], suffix_, i + 1 == tokens.size() ? "" : " ");
  }

 private:
  std::string suffix_;
};

class Sequence final : public Decoder {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Decoder>> parts) : parts_(std::move(parts)) {}
  void decode_chain(Tokens& tokens) const override {
    for (const auto& p : parts_) p->decode_chain(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> parts_;
};

}  // namespace

std::unique_ptr<Decoder> make_decoder(const nlohmann::json& j) {
  if (j.is_null()) return nullptr;
  const std::string type = j.value("type", "");
  if (type == "ByteLevel") return std::make_unique<ByteLevel>();
  if (type == "Metaspace") {
    bool strip_first = j.value("add_prefix_space", true);
    if (j.contains("prepend_scheme"))
      strip_first = j.at("prepend_scheme").get<std::string>() != "never";
    return std::make_unique<Metaspace>(j.value("replacement", std::string("\u2581")), strip_first);
  }
  if (type == "ByteFallback") return std::make_unique<ByteFallback>();
  if (type == "Fuse") return std::make_unique<Fuse>();
  if (type == "Strip")
    return std::make_unique<Strip>(j.at("content").get<std::string>(), j.value("start", size_t{0}),
                                   j.value("stop", size_t{0}));
  if (type == "Replace")
    return std::make_unique<Replace>(j.at("pattern"), j.at("content").get<std::string>());
  if (type == "WordPiece")
    return std::make_unique<WordPiece>(j.value("prefix", std::string("##")),
                                       j.value("cleanup", true));
  if (type == "BPEDecoder")
    return std::make_unique<BpeDecoder>(j.value("suffix", std::string("</w>")));
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Decoder>> parts;
    for (const auto& d : j.at("decoders"))
      if (auto made = make_decoder(d)) parts.push_back(std::move(made));
    return std::make_unique<Sequence>(std::move(parts));
  }
  throw_error("tokenizer: unsupported decoder type '{}'", type.empty() ? j.dump() : type);
}

}  // namespace lmx::tok
