// An incremental byte-level recognizer of: a fixed literal prefix, one JSON value (RFC 8259)
// that satisfies a schema (engine/generate/json_schema.h), a fixed literal suffix. The
// constrained decoder (engine/generate/token_constraint.h) clones it per trie node to find the
// tokens whose bytes it accepts.
//
// The text it accepts, beyond RFC 8259 and the schema:
//  - whitespace (space, \n, \t, \r) only between the tokens of an object or array, at most
//    kMaxJsonWhitespace bytes in a row (so a model cannot loop on whitespace); none right after
//    the prefix or right before the suffix;
//  - strings: any UTF-8 (well-formed: no overlong forms, surrogates or code points past
//    U+10FFFF) except raw control characters; escapes per RFC 8259, a \u high surrogate only
//    followed by a \u low one; at most kMaxJsonStringBytes bytes each (a character or escape
//    begun below the bound may finish past it);
//  - numbers: at most kMaxJsonNumberBytes bytes; "integer" ones are digits only, at most
//    kMaxJsonIntegerBytes bytes with the sign (so they fit a 64-bit integer);
//  - nesting at most kMaxJsonDepth (objects, arrays, and the innermost string / number);
//  - keys: a property may appear once; a key holding an escape never names a declared property
//    (it counts as an additional key, refused when additionalProperties is false); repeated
//    additional keys are not detected.
//
// State: a fixed array of small frames and a few counters, trivially copyable (~0.5 KB): cheap
// to clone. advance() returns false when the byte is refused, and then leaves the state
// unspecified: advance a copy when probing (accepts() does).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/generate/json_schema.h"

namespace lmx {

inline constexpr int kMaxJsonWhitespace = 1;
inline constexpr int kMaxJsonStringBytes = 4096;
inline constexpr int kMaxJsonNumberBytes = 32;
inline constexpr int kMaxJsonIntegerBytes = 18;

// What to recognize. The schema and the grammar must outlive every recognizer made from them.
struct JsonGrammar {
  std::string prefix;
  std::shared_ptr<const JsonSchema> schema;
  std::string suffix;
  // Or one of several (prefix, schema) pairs: the text starts with one of these prefixes and the
  // value follows that branch's schema (e.g. a tool call whose name selects its arguments'
  // schema). Sorted by prefix, none a prefix of another (one_of() checks); when not empty,
  // `prefix` and `schema` above are unused.
  struct Branch {
    std::string prefix;
    std::shared_ptr<const JsonSchema> schema;
  };
  std::vector<Branch> branches = {};
  // A grammar of branches; throws lmx::Error when a prefix is empty or a prefix of another.
  static JsonGrammar one_of(std::vector<Branch> branches, std::string suffix);
};

class JsonRecognizer {
 public:
  explicit JsonRecognizer(const JsonGrammar& grammar);

  bool advance(uint8_t byte);
  bool advance(std::string_view bytes);  // every byte, in order; false at the first refusal
  bool accepts(uint8_t byte) const {
    JsonRecognizer copy = *this;
    return copy.advance(byte);
  }
  // The prefix, the value and the suffix have all been matched; no byte is accepted any more.
  // A number ends at the byte after it: with an empty suffix a top-level number never completes.
  bool complete() const { return phase_ == Phase::Done; }

 private:
  enum class Phase : uint8_t { Prefix, Value, Suffix, Done };
  enum class Kind : uint8_t {
    ObjOpen,
    ObjColon,
    ObjValue,
    ObjNext,
    ObjComma,  // object: after {, key, :, value, ','
    ArrOpen,
    ArrNext,
    ArrComma,  // array: after [, value, ','
    String,
    Key,
    Number,
    Literal,
    Keyword,
  };
  struct Frame {
    const SchemaNode* node;
    uint64_t seen;    // objects: properties seen (bits by index into node->names)
    uint16_t len;     // strings, keys, numbers, literals: bytes so far
    uint16_t lo, hi;  // keys, literals: candidates [lo, hi) matching so far
    uint16_t code;    // strings: the \u escape's value so far
    int16_t prop;     // objects: the property whose value comes next (-1: an additional one)
    Kind kind;
    uint8_t sub;               // strings: escape state; numbers: grammar state; keywords: which
    uint8_t ws;                // containers: whitespace bytes in a row
    uint8_t utf8_left;         // strings: continuation bytes still expected
    uint8_t utf8_lo, utf8_hi;  // strings: the next continuation byte's range
  };

  bool prefix_byte(uint8_t b);
  bool value_byte(uint8_t b);
  bool start_value(const SchemaNode* node, uint8_t b);
  bool string_byte(Frame& f, uint8_t b);
  bool key_closed(Frame& key);
  // Pops the finished top value and moves its parent on (or to the suffix).
  void end_value();
  bool push(const Frame& f);
  Frame& top() { return stack_[size_t(depth_ - 1)]; }

  const JsonGrammar* grammar_;
  const JsonSchema* schema_ = nullptr;  // the value's (the branch's, once it is known)
  Phase phase_ = Phase::Prefix;
  uint32_t pos_ = 0;                        // bytes of the prefix or suffix matched
  uint16_t branch_lo_ = 0, branch_hi_ = 0;  // branches whose prefix matches so far
  int depth_ = 0;
  std::array<Frame, kMaxJsonDepth> stack_{};
};

}  // namespace lmx
