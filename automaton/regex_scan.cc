#include "automaton/regex_scan.h"

namespace maskd {
namespace {

bool IsHex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

size_t EscapeEnd(std::string_view p, size_t i) {
  if (i + 1 >= p.size()) return std::string_view::npos;
  const char e = p[i + 1];
  size_t j = i + 2;
  if ((e == 'p' || e == 'P' || e == 'x' || e == 'u') && j < p.size() && p[j] == '{') {
    const size_t close = p.find('}', j);
    return close == std::string_view::npos ? close : close + 1;
  }
  if (e == 'x' || e == 'u') {
    for (int k = 0; k < (e == 'x' ? 2 : 4) && j < p.size() && IsHex(p[j]); ++k) ++j;
  }
  return j;
}

}  // namespace

size_t RegexEscapeOrClassEnd(std::string_view p, size_t i) {
  if (p[i] == '\\') return EscapeEnd(p, i);
  size_t j = i + 1;
  if (j < p.size() && p[j] == '^') ++j;
  if (j < p.size() && p[j] == ']') ++j;  // a leading ']' is itself
  while (j < p.size() && p[j] != ']') j += p[j] == '\\' ? 2 : 1;
  return j >= p.size() ? std::string_view::npos : j + 1;
}

}  // namespace maskd
