// See regex_text.h.
#include "automaton/regex_text.h"

#include <cstdio>

#include "absl/strings/str_format.h"
#include "automaton/utf8.h"

namespace maskd {
namespace {

bool IsControl(uint32_t c) { return c < 0x20 || c == 0x7F; }

void AppendByteEscape(std::string* out, unsigned char c) {
  char b[8];
  std::snprintf(b, sizeof(b), "\\x%02x", c);
  out->append(b);
}

std::string Utf8(uint32_t cp) {
  std::string s;
  AppendUtf8(&s, cp);
  return s;
}

bool IsAsciiAlnum(uint32_t c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

// The characters kPrintableElseHex escapes among printable ASCII.
bool IsPythonSpellingMeta(uint32_t c) {
  switch (c) {
    case '\\': case '.': case '^': case '$': case '|': case '?': case '*': case '+': case '(':
    case ')': case '[': case ']': case '{': case '}': case '-': case '#': case ' ':
      return true;
    default:
      return false;
  }
}

}  // namespace

std::string RegexEscape(std::string_view literal) {
  std::string out;
  out.reserve(literal.size() + 8);
  for (char c : literal) {
    switch (c) {
      case '.': case '^': case '$': case '|': case '?': case '*': case '+': case '(': case ')':
      case '[': case ']': case '{': case '}': case '\\':
        out.push_back('\\');
        out.push_back(c);
        break;
      default:
        if (IsControl(static_cast<unsigned char>(c))) {
          AppendByteEscape(&out, static_cast<unsigned char>(c));
        } else {
          out.push_back(c);
        }
    }
  }
  return out;
}

std::string RegexClassEscape(std::string_view literal) {
  std::string out;
  for (char c : literal) {
    if (c == '\\' || c == ']' || c == '[' || c == '^' || c == '-') out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

void AppendHexEscape(std::string* out, uint32_t cp, HexDigits digits) {
  if (digits == HexDigits::kUpper) {
    absl::StrAppendFormat(out, "\\x{%X}", cp);
  } else {
    absl::StrAppendFormat(out, "\\x{%x}", cp);
  }
}

void AppendCodepoint(std::string* out, uint32_t cp, CodepointSpelling spelling) {
  switch (spelling) {
    case CodepointSpelling::kLiteral:
      out->append(RegexEscape(Utf8(cp)));
      return;
    case CodepointSpelling::kClassMember:
      if (IsControl(cp)) {
        AppendByteEscape(out, static_cast<unsigned char>(cp));
      } else {
        out->append(RegexClassEscape(Utf8(cp)));
      }
      return;
    case CodepointSpelling::kAlnumElseEscaped:
      if (IsAsciiAlnum(cp)) {
        out->push_back(static_cast<char>(cp));
      } else if (cp >= 0x20 && cp < 0x7F) {
        out->push_back('\\');
        out->push_back(static_cast<char>(cp));
      } else {
        AppendHexEscape(out, cp, HexDigits::kLower);
      }
      return;
    case CodepointSpelling::kPrintableElseHex:
      if (cp >= 0x21 && cp < 0x7F && !IsPythonSpellingMeta(cp)) {
        out->push_back(static_cast<char>(cp));
      } else if (cp >= 0xA0 && cp != 0x2028 && cp != 0x2029) {
        AppendUtf8(out, cp);
      } else {
        AppendHexEscape(out, cp, HexDigits::kUpper);
      }
      return;
  }
}

void AppendCodepointSet(std::string* out, const CodepointSet& set, CodepointSpelling alone,
                        CodepointSpelling in_class) {
  const CodepointSet::Ranges& r = set.ranges();
  if (r.size() == 1 && r[0].first == r[0].second) {
    AppendCodepoint(out, r[0].first, alone);
    return;
  }
  out->push_back('[');
  for (const auto& [lo, hi] : r) {
    AppendCodepoint(out, lo, in_class);
    if (hi != lo) {
      if (hi != lo + 1) out->push_back('-');
      AppendCodepoint(out, hi, in_class);
    }
  }
  out->push_back(']');
}

}  // namespace maskd
