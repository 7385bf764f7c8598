#include "engine/generate/json_recognizer.h"

#include <algorithm>

#include <fmt/format.h>

#include "engine/core/error.h"

namespace lmx {
namespace {

bool is_space(uint8_t b) { return b == ' ' || b == '\n' || b == '\t' || b == '\r'; }
bool is_digit(uint8_t b) { return b >= '0' && b <= '9'; }

int hex_value(uint8_t b) {
  if (is_digit(b)) return b - '0';
  if (b >= 'a' && b <= 'f') return b - 'a' + 10;
  if (b >= 'A' && b <= 'F') return b - 'A' + 10;
  return -1;
}

// Number grammar states: 1 after '-', 2 a leading 0, 3 integer digits, 4 after '.', 5 fraction
// digits, 6 after e/E, 7 after the exponent's sign, 8 exponent digits. -1: the byte does not
// continue the number.
int number_next(uint8_t state, uint8_t b, bool integer) {
  const bool exp = !integer && (b == 'e' || b == 'E');
  switch (state) {
    case 1:
      return b == '0' ? 2 : is_digit(b) ? 3 : -1;
    case 2:
      return !integer && b == '.' ? 4 : exp ? 6 : -1;
    case 3:
      return is_digit(b) ? 3 : !integer && b == '.' ? 4 : exp ? 6 : -1;
    case 4:
      return is_digit(b) ? 5 : -1;
    case 5:
      return is_digit(b) ? 5 : exp ? 6 : -1;
    case 6:
      return b == '+' || b == '-' ? 7 : is_digit(b) ? 8 : -1;
    case 7:
    case 8:
      return is_digit(b) ? 8 : -1;
    default:
      return -1;
  }
}
bool number_can_end(uint8_t state) { return state == 2 || state == 3 || state == 5 || state == 8; }

constexpr const char* kKeywords[] = {"true", "false", "null"};

// Within [lo, hi) of sorted strings sharing their first `pos` bytes, the sub-range whose byte
// at `pos` is b (contiguous, since the strings are sorted). Empty: lo == hi.
void narrow(const std::vector<std::string>& list, uint16_t& lo, uint16_t& hi, size_t pos,
            uint8_t b) {
  uint16_t first = hi, last = hi;
  for (uint16_t i = lo; i < hi; ++i) {
    const bool match = list[i].size() > pos && uint8_t(list[i][pos]) == b;
    if (match && first == hi) first = i;
    if (match) last = uint16_t(i + 1);
  }
  if (first == hi) last = first;
  lo = first, hi = last;
}

}  // namespace

JsonGrammar JsonGrammar::one_of(std::vector<Branch> branches, std::string suffix) {
  std::sort(branches.begin(), branches.end(),
            [](const Branch& a, const Branch& b) { return a.prefix < b.prefix; });
  for (size_t i = 0; i < branches.size(); ++i) {
    if (branches[i].prefix.empty()) throw Error("a grammar branch has an empty prefix");
    if (i > 0 && branches[i].prefix.rfind(branches[i - 1].prefix, 0) == 0)
      throw Error(fmt::format("grammar branch prefix '{}' is a prefix of '{}'",
                              branches[i - 1].prefix, branches[i].prefix));
  }
  if (branches.size() > 0xFFFF) throw Error("too many grammar branches");
  JsonGrammar g;
  g.branches = std::move(branches);
  g.suffix = std::move(suffix);
  return g;
}

JsonRecognizer::JsonRecognizer(const JsonGrammar& grammar)
    : grammar_(&grammar), branch_hi_(uint16_t(grammar.branches.size())) {
  if (grammar.branches.empty()) {
    schema_ = grammar.schema.get();
    if (grammar.prefix.empty()) phase_ = Phase::Value;
  }
}

bool JsonRecognizer::prefix_byte(uint8_t b) {
  if (grammar_->branches.empty()) {
    if (uint8_t(grammar_->prefix[pos_]) != b) return false;
    if (++pos_ == grammar_->prefix.size()) phase_ = Phase::Value, pos_ = 0;
    return true;
  }
  // Narrow the branches (sorted: the matching ones are contiguous); no prefix is a prefix of
  // another, so a finished one is the only one left.
  const auto& br = grammar_->branches;
  uint16_t lo = branch_hi_, hi = branch_hi_;
  for (uint16_t i = branch_lo_; i < branch_hi_; ++i) {
    if (uint8_t(br[i].prefix[pos_]) != b) continue;
    if (lo == branch_hi_) lo = i;
    hi = uint16_t(i + 1);
  }
  if (lo == branch_hi_) return false;
  branch_lo_ = lo, branch_hi_ = hi;
  if (++pos_ == br[lo].prefix.size()) {
    schema_ = br[lo].schema.get();
    phase_ = Phase::Value, pos_ = 0;
  }
  return true;
}

bool JsonRecognizer::advance(std::string_view bytes) {
  for (char c : bytes)
    if (!advance(uint8_t(c))) return false;
  return true;
}

bool JsonRecognizer::advance(uint8_t b) {
  switch (phase_) {
    case Phase::Prefix:
      return prefix_byte(b);
    case Phase::Value:
      return value_byte(b);
    case Phase::Suffix: {
      if (uint8_t(grammar_->suffix[pos_]) != b) return false;
      if (++pos_ == grammar_->suffix.size()) phase_ = Phase::Done;
      return true;
    }
    case Phase::Done:
      return false;
  }
  return false;
}

bool JsonRecognizer::push(const Frame& f) {
  if (depth_ >= kMaxJsonDepth) return false;
  stack_[size_t(depth_++)] = f;
  return true;
}

void JsonRecognizer::end_value() {
  // A container parent already moved on to "after a value" when the value started.
  if (--depth_ > 0) return;
  phase_ = grammar_->suffix.empty() ? Phase::Done : Phase::Suffix;
  pos_ = 0;
}

bool JsonRecognizer::start_value(const SchemaNode* node, uint8_t b) {
  Frame f{};
  f.node = node;
  f.prop = -1;
  f.len = 1;
  if (node->has_enum) {
    f.kind = Kind::Literal;
    f.lo = 0, f.hi = uint16_t(node->literals.size());
    narrow(node->literals, f.lo, f.hi, 0, b);
    if (f.lo == f.hi || !push(f)) return false;
    if (f.hi - f.lo == 1 && node->literals[f.lo].size() == 1) end_value();
    return true;
  }
  const uint8_t t = node->types;
  switch (b) {
    case '"':
      f.kind = Kind::String, f.len = 0;
      return (t & kJsonString) && push(f);
    case '{':
      f.kind = Kind::ObjOpen;
      return (t & kJsonObject) && push(f);
    case '[':
      f.kind = Kind::ArrOpen;
      return (t & kJsonArray) && push(f);
    case 't':
    case 'f':
      f.kind = Kind::Keyword, f.sub = b == 't' ? 0 : 1;
      return (t & kJsonBoolean) && push(f);
    case 'n':
      f.kind = Kind::Keyword, f.sub = 2;
      return (t & kJsonNull) && push(f);
    default:
      if (!(t & (kJsonNumber | kJsonInteger)) || !(b == '-' || is_digit(b))) return false;
      f.kind = Kind::Number, f.sub = b == '-' ? 1 : b == '0' ? 2 : 3;
      return push(f);
  }
}

bool JsonRecognizer::value_byte(uint8_t b) {
  if (depth_ == 0) return start_value(schema_->root(), b);
  Frame& f = top();
  const SchemaNode* n = f.node;
  const auto space = [&] {
    if (f.ws >= kMaxJsonWhitespace) return false;
    ++f.ws;
    return true;
  };
  const auto required_seen = [&] { return (f.seen & n->required) == n->required; };
  const auto key_possible = [&] {  // another key may come
    if (n->additional) return true;
    for (size_t i = 0; i < n->names.size(); ++i)
      if (!(f.seen >> i & 1)) return true;
    return false;
  };
  switch (f.kind) {
    case Kind::String:
    case Kind::Key:
      return string_byte(f, b);
    case Kind::Number: {
      const bool integer = !(n->types & kJsonNumber);
      const int bound = integer ? kMaxJsonIntegerBytes : kMaxJsonNumberBytes;
      const int next = number_next(f.sub, b, integer);
      if (next < 0) {
        if (!number_can_end(f.sub)) return false;
        end_value();
        return advance(b);  // the byte after the number belongs to what follows
      }
      // Never enter a state that cannot end at the bound (no dead end).
      if (f.len + 1 > bound || (f.len + 1 == bound && !number_can_end(uint8_t(next)))) return false;
      f.sub = uint8_t(next), ++f.len;
      return true;
    }
    case Kind::Literal: {
      uint16_t lo = f.lo, hi = f.hi;
      narrow(n->literals, lo, hi, f.len, b);
      if (lo < hi) {
        f.lo = lo, f.hi = hi, ++f.len;
        if (hi - lo == 1 && n->literals[lo].size() == f.len) end_value();
        return true;
      }
      // A literal that another one extends ends at the first byte that extends none.
      if (n->literals[f.lo].size() != f.len) return false;
      end_value();
      return advance(b);
    }
    case Kind::Keyword: {
      const char* word = kKeywords[f.sub];
      if (uint8_t(word[f.len]) != b) return false;
      if (word[++f.len] == '\0') end_value();
      return true;
    }
    case Kind::ObjOpen:
    case Kind::ObjComma:
      if (is_space(b)) return space();
      if (b == '"' && key_possible()) {
        Frame key{};
        key.node = n;
        key.kind = Kind::Key;
        key.prop = -1;
        key.hi = uint16_t(n->names.size());
        f.ws = 0;
        return push(key);
      }
      if (b == '}' && f.kind == Kind::ObjOpen && required_seen()) {
        end_value();
        return true;
      }
      return false;
    case Kind::ObjColon:
      if (is_space(b)) return space();
      if (b != ':') return false;
      f.kind = Kind::ObjValue, f.ws = 0;
      return true;
    case Kind::ObjValue: {
      if (is_space(b)) return space();
      f.kind = Kind::ObjNext, f.ws = 0;
      return start_value(f.prop >= 0 ? n->properties[size_t(f.prop)] : schema_->any(), b);
    }
    case Kind::ObjNext:
      if (is_space(b)) return space();
      if (b == ',' && key_possible()) {
        f.kind = Kind::ObjComma, f.ws = 0;
        return true;
      }
      if (b == '}' && required_seen()) {
        end_value();
        return true;
      }
      return false;
    case Kind::ArrOpen:
    case Kind::ArrComma:
      if (is_space(b)) return space();
      if (b == ']' && f.kind == Kind::ArrOpen) {
        end_value();
        return true;
      }
      f.kind = Kind::ArrNext, f.ws = 0;
      return start_value(n->items, b);
    case Kind::ArrNext:
      if (is_space(b)) return space();
      if (b == ',') {
        f.kind = Kind::ArrComma, f.ws = 0;
        return true;
      }
      if (b == ']') {
        end_value();
        return true;
      }
      return false;
  }
  return false;
}

bool JsonRecognizer::string_byte(Frame& f, uint8_t b) {
  const bool key = f.kind == Kind::Key;
  // Keys: narrow the declared names by the raw byte; without additional keys some name not yet
  // seen must stay possible.
  const auto name_byte = [&] {
    if (!key) return true;
    narrow(f.node->names, f.lo, f.hi, f.len, b);
    if (f.node->additional) return true;
    const uint64_t seen = stack_[size_t(depth_ - 2)].seen;
    for (uint16_t i = f.lo; i < f.hi; ++i)
      if (!(seen >> i & 1)) return true;
    return false;
  };
  if (f.utf8_left > 0) {
    if (b < f.utf8_lo || b > f.utf8_hi || !name_byte()) return false;
    --f.utf8_left, f.utf8_lo = 0x80, f.utf8_hi = 0xBF, ++f.len;
    return true;
  }
  switch (f.sub) {
    case 0: {
      if (b == '"') {
        if (key) return key_closed(f);
        end_value();
        return true;
      }
      if (b < 0x20 || f.len >= kMaxJsonStringBytes) return false;
      if (b == '\\') {
        if (key && !f.node->additional) return false;  // an escaped key names no property
        f.lo = f.hi, f.sub = 1, ++f.len;
        return true;
      }
      uint8_t left = 0, lo = 0x80, hi = 0xBF;
      if (b < 0x80)
        left = 0;
      else if (b >= 0xC2 && b <= 0xDF)
        left = 1;
      else if (b == 0xE0)
        left = 2, lo = 0xA0;
      else if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF)
        left = 2;
      else if (b == 0xED)
        left = 2, hi = 0x9F;  // no surrogates
      else if (b == 0xF0)
        left = 3, lo = 0x90;
      else if (b >= 0xF1 && b <= 0xF3)
        left = 3;
      else if (b == 0xF4)
        left = 3, hi = 0x8F;  // up to U+10FFFF
      else
        return false;
      if (!name_byte()) return false;
      f.utf8_left = left, f.utf8_lo = lo, f.utf8_hi = hi, ++f.len;
      return true;
    }
    case 1:  // after a backslash
      if (b == 'u') {
        f.sub = 2, f.code = 0, ++f.len;
        return true;
      }
      if (b != '"' && b != '\\' && b != '/' && b != 'b' && b != 'f' && b != 'n' && b != 'r' &&
          b != 't')
        return false;
      f.sub = 0, ++f.len;
      return true;
    case 6:  // a high surrogate was escaped: a \u low one must follow
      if (b != '\\') return false;
      f.sub = 7, ++f.len;
      return true;
    case 7:
      if (b != 'u') return false;
      f.sub = 12, f.code = 0, ++f.len;
      return true;
    default: {  // hex digits: sub 2..5 a \u escape, 12..15 the low surrogate after a high one
      const int h = hex_value(b);
      if (h < 0) return false;
      const bool low = f.sub >= 12;
      const int index = f.sub - (low ? 12 : 2);
      f.code = uint16_t(f.code * 16 + h);
      if (index == 1) {  // the top byte is known
        const bool low_surrogate = f.code >= 0xDC && f.code <= 0xDF;
        if (low != low_surrogate) return false;
      }
      ++f.len;
      if (index < 3) {
        ++f.sub;
        return true;
      }
      f.sub = !low && f.code >= 0xD800 && f.code <= 0xDBFF ? 6 : 0;
      return true;
    }
  }
}

bool JsonRecognizer::key_closed(Frame& key) {
  const SchemaNode* n = key.node;
  Frame& obj = stack_[size_t(depth_ - 2)];
  // Sorted names: an exact match is the first of the remaining candidates.
  const int prop = key.lo < key.hi && n->names[key.lo].size() == key.len ? key.lo : -1;
  if (prop < 0 && !n->additional) return false;
  if (prop >= 0 && (obj.seen >> prop & 1)) return false;  // a property appears once
  --depth_;
  obj.kind = Kind::ObjColon, obj.ws = 0, obj.prop = int16_t(prop);
  if (prop >= 0) obj.seen |= uint64_t(1) << prop;
  return true;
}

}  // namespace lmx
