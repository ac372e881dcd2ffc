// The lexical level of the BNF front ends: source positions, blanks and
// comments, rule names, counts, code points (UTF-8 or escapes, per dialect).
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "automaton/utf8.h"
#include "grammar/bnf_internal.h"

namespace maskd::grammar::bnf_internal {

SourcePos BnfParser::PosAt(size_t offset) const {
  auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
  size_t line = static_cast<size_t>(it - line_starts_.begin());  // >= 1
  size_t col = offset - line_starts_[line - 1] + 1;
  return {static_cast<uint32_t>(line), static_cast<uint32_t>(col)};
}

void BnfParser::SkipSpace(bool newlines) {
  while (!AtEnd()) {
    char c = Peek();
    if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r'))) {
      ++pos_;
    } else if (c == '#') {
      while (!AtEnd() && Peek() != '\n' && Peek() != '\r') ++pos_;
    } else {
      break;
    }
  }
}

std::string_view BnfParser::ParseName() {
  size_t start = pos_;
  while (!AtEnd() && IsNameChar(Peek(), pos_ == start)) ++pos_;
  return text_.substr(start, pos_ - start);
}

bool BnfParser::AtRuleDefinition() const {
  size_t p = pos_;
  if (p >= text_.size() || !IsNameChar(text_[p], true)) return false;
  size_t start = p;
  while (p < text_.size() && IsNameChar(text_[p], p == start)) ++p;
  while (p < text_.size()) {
    char c = text_[p];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      ++p;
    } else if (c == '#') {
      while (p < text_.size() && text_[p] != '\n' && text_[p] != '\r') ++p;
    } else {
      break;
    }
  }
  return text_.substr(p, 3) == "::=";
}

absl::StatusOr<uint64_t> BnfParser::ParseCount() {
  if (AtEnd() || !IsDigit(Peek())) return Error(pos_, "expecting an integer");
  uint64_t v = 0;
  while (!AtEnd() && IsDigit(Peek())) {
    v = std::min<uint64_t>(v * 10 + (Peek() - '0'), uint64_t{1} << 40);
    ++pos_;
  }
  return v;
}

absl::StatusOr<uint32_t> BnfParser::ParseEscape(bool in_class) {
  size_t start = pos_;
  ++pos_;  // the backslash
  if (AtEnd()) return Error(start, "unterminated escape");
  char c = Peek();
  ++pos_;
  if (dialect_ == Dialect::kGbnf) return GbnfEscape(c, start);
  return EbnfEscape(c, in_class, start);
}

absl::StatusOr<uint32_t> BnfParser::ParseHexEscape(int min_digits, int max_digits, size_t start) {
  uint64_t v = 0;
  int n = 0;
  while (n < max_digits && !AtEnd()) {
    char h = Peek();
    int d = IsDigit(h)                ? h - '0'
            : (h >= 'a' && h <= 'f') ? h - 'a' + 10
            : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                     : -1;
    if (d < 0) break;
    v = std::min<uint64_t>(v * 16 + d, uint64_t{1} << 40);
    ++pos_;
    ++n;
  }
  if (n < min_digits) {
    return Error(start, min_digits == max_digits
                            ? absl::StrCat("bad escape: expecting ", min_digits, " hex digits")
                            : std::string("bad escape: expecting hex digits"));
  }
  if (v > kMaxCodepoint || (v >= 0xD800 && v <= 0xDFFF)) {
    return Error(start, absl::StrFormat("bad escape: U+%04X is not a Unicode scalar value", v));
  }
  return static_cast<uint32_t>(v);
}

absl::StatusOr<uint32_t> BnfParser::GbnfEscape(char c, size_t start) {
  switch (c) {
    case 'x': return ParseHexEscape(2, 2, start);
    case 'u': return ParseHexEscape(4, 4, start);
    case 'U': return ParseHexEscape(8, 8, start);
    case 't': return '\t';
    case 'r': return '\r';
    case 'n': return '\n';
    case '\\': case '"': case '[': case ']': return static_cast<uint32_t>(c);
    default: return BadEscape(c, start);
  }
}

absl::StatusOr<uint32_t> BnfParser::EbnfEscape(char c, bool in_class, size_t start) {
  switch (c) {
    case 'x': return ParseHexEscape(1, 8, start);
    case 'u': return ParseHexEscape(4, 4, start);
    case 'U': return ParseHexEscape(8, 8, start);
    case '\'': case '"': case '?': case '\\': return static_cast<uint32_t>(c);
    case 'a': return '\a';
    case 'b': return '\b';
    case 'f': return '\f';
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    case 'v': return '\v';
    case '0': return 0;
    case 'e': return 0x1B;
    default: break;
  }
  if (in_class) {
    if (std::string_view("^$.*+?()[]{}|/-").find(c) != std::string_view::npos) {
      return static_cast<uint32_t>(c);
    }
    if (std::string_view("dDsSwW").find(c) != std::string_view::npos) {
      return Error(start, absl::StrCat("class escape \\", std::string(1, c),
                                       " is not supported (write the range out)"));
    }
  }
  return BadEscape(c, start);
}

absl::Status BnfParser::BadEscape(char c, size_t start) const {
  std::string shown = (static_cast<unsigned char>(c) >= 0x20 && static_cast<unsigned char>(c) < 0x7F)
                          ? std::string(1, c)
                          : absl::StrCat("\\x", absl::Hex(static_cast<unsigned char>(c)));
  return Error(start, absl::StrCat("bad escape \\", shown));
}

absl::StatusOr<uint32_t> BnfParser::ParseCodepoint(bool in_class) {
  if (Peek() == '\\') return ParseEscape(in_class);
  size_t start = pos_;
  std::optional<uint32_t> cp = DecodeUtf8(text_, &pos_);
  if (!cp) return Error(start, "invalid UTF-8");
  return *cp;
}

}  // namespace maskd::grammar::bnf_internal
