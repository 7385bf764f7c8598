// Splits a template into text and tag tokens the way jinja2's lexer does with trim_blocks and
// lstrip_blocks on (how transformers configures it): newlines normalized to \n, one trailing
// newline dropped, comments removed, whitespace control (-, +) applied to the text around tags.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace lmx::chat {

struct Token {
  enum Type {
    kData,        // template text, already whitespace-controlled
    kVarBegin,    // {{
    kVarEnd,      // }}
    kBlockBegin,  // {%
    kBlockEnd,    // %}
    kName,
    kString,  // value: the unescaped literal
    kInt,     // value: the digits (underscores removed; 0x/0o/0b kept)
    kFloat,
    kOp,  // + - * / // % ** ~ == != < <= > >= = . : | , ( ) [ ] { } ;
    kEof,
  };
  Type type;
  std::string value;
  int line;
};

// Throws lmx::Error ("chat template: line N: ...") on a malformed tag or literal.
std::vector<Token> tokenize(std::string_view source);

}  // namespace lmx::chat
