#include "grammar/python_regex.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "automaton/regex.h"
#include "automaton/regex_text.h"
#include "automaton/utf8.h"
#include "grammar/python_re_tables.h"

namespace maskd::grammar {
namespace {

CodepointSet FromTable(const python_re::CodepointRange* r, size_t n) {
  CodepointSet::Ranges ranges;
  ranges.reserve(n);
  for (size_t i = 0; i < n; ++i) ranges.emplace_back(r[i].lo, r[i].hi);
  CodepointSet s;
  s.AddRanges(ranges);  // one sort and merge, not one per range
  return s;
}

// (codepoint, case group) for every member of a case group, sorted: the
// groups of a few codepoints by binary search instead of a scan of all groups.
const std::vector<std::pair<uint32_t, uint32_t>>& CaseGroupOf() {
  static const auto* index = [] {
    using namespace python_re;
    auto* v = new std::vector<std::pair<uint32_t, uint32_t>>;
    for (size_t g = 0; g < kCaseGroupCount; ++g) {
      for (uint32_t i = kCaseGroupStarts[g]; i < kCaseGroupStarts[g + 1]; ++i) {
        v->emplace_back(kCaseGroupMembers[i], static_cast<uint32_t>(g));
      }
    }
    std::sort(v->begin(), v->end());
    return v;
  }();
  return *index;
}

const CodepointSet& Table(int which) {
  static const CodepointSet* sets = [] {
    using namespace python_re;
    auto* s = new CodepointSet[7];
    s[0] = FromTable(kDigit, kDigit_size);
    s[1] = FromTable(kWord, kWord_size);
    s[2] = FromTable(kSpace, kSpace_size);
    s[3] = FromTable(kDigitLowered, kDigitLowered_size);
    s[4] = FromTable(kWordLowered, kWordLowered_size);
    s[5] = FromTable(kSpaceLowered, kSpaceLowered_size);
    s[6] = FromTable(kCased, kCased_size);
    return s;
  }();
  return sets[which];
}

CodepointSet AsciiCategory(char c) {
  CodepointSet s;
  switch (c) {
    case 'd':
      s.AddRange('0', '9');
      break;
    case 'w':
      s.AddRange('0', '9');
      s.AddRange('A', 'Z');
      s.AddRange('a', 'z');
      s.AddRange('_', '_');
      break;
    default:
      s.AddRange('\t', '\r');
      s.AddRange(' ', ' ');
      break;
  }
  return s;
}

// \d \w \s (lowercase letter) or their complements (uppercase), as Python
// reads them; `lowered`: tested on the simple lowercase form (inside a
// case-insensitive class with cased members).
CodepointSet Category(char c, bool ascii, bool lowered) {
  char lower = static_cast<char>(c | 0x20);
  CodepointSet s;
  if (ascii) {
    s = AsciiCategory(lower);
  } else {
    int base = lower == 'd' ? 0 : lower == 'w' ? 1 : 2;
    s = Table(base + (lowered ? 3 : 0));
  }
  return c == lower ? s : s.Complement();
}

bool Intersects(const CodepointSet& a, uint32_t lo, uint32_t hi) {
  for (const auto& [l, h] : a.ranges()) {
    if (l <= hi && lo <= h) return true;
  }
  return false;
}

// The case-insensitive closure of `s`: every codepoint equivalent to one in
// `s` under Python's (?i).
CodepointSet CaseFold(const CodepointSet& s, bool ascii) {
  CodepointSet out = s;
  if (ascii) {
    for (uint32_t c = 'a'; c <= 'z'; ++c) {
      if (s.Contains(c) || s.Contains(c - 32)) {
        out.AddRange(c, c);
        out.AddRange(c - 32, c - 32);
      }
    }
    return out;
  }
  using namespace python_re;
  CodepointSet::Ranges added;
  auto add_group = [&](size_t g) {
    for (uint32_t i = kCaseGroupStarts[g]; i < kCaseGroupStarts[g + 1]; ++i) {
      added.emplace_back(kCaseGroupMembers[i], kCaseGroupMembers[i]);
    }
  };
  uint64_t size = 0;
  for (const auto& [lo, hi] : s.ranges()) size += hi - lo + 1;
  if (size <= 256) {  // a few codepoints: look each one up
    const auto& groups = CaseGroupOf();
    for (const auto& [lo, hi] : s.ranges()) {
      for (uint32_t c = lo; c <= hi; ++c) {
        auto it = std::lower_bound(groups.begin(), groups.end(), std::make_pair(c, uint32_t{0}));
        for (; it != groups.end() && it->first == c; ++it) add_group(it->second);
      }
    }
  } else {
    for (size_t g = 0; g < kCaseGroupCount; ++g) {
      bool hit = false;
      for (uint32_t i = kCaseGroupStarts[g]; i < kCaseGroupStarts[g + 1] && !hit; ++i) {
        hit = s.Contains(kCaseGroupMembers[i]);
      }
      if (hit) add_group(g);
    }
  }
  out.AddRanges(added);
  return out;
}

// How this translator spells a code point (regex_text.h).
constexpr CodepointSpelling kSpelling = CodepointSpelling::kPrintableElseHex;

// `s` in kSpelling; the empty set as a class of nothing.
void AppendSet(std::string* out, const CodepointSet& s) {
  if (s.empty()) {
    out->append("[^\\x{0}-\\x{10FFFF}]");
    return;
  }
  AppendCodepointSet(out, s, kSpelling, kSpelling);
}

bool IsCased(uint32_t c) { return Table(6).Contains(c); }

// Decodes one codepoint at s[*pos] and moves past it; a byte that starts no
// well-formed UTF-8 sequence reads as itself.
uint32_t NextCodepoint(std::string_view s, size_t* pos) {
  if (std::optional<uint32_t> cp = DecodeUtf8(s, pos)) return *cp;
  return static_cast<unsigned char>(s[(*pos)++]);
}

class Translator {
 public:
  Translator(std::string_view p, const PythonRegexFlags& flags) : p_(p), flags_(flags) {}

  absl::StatusOr<std::string> Run(size_t* error_offset) {
    absl::Status st = Translate();
    if (!st.ok()) {
      if (error_offset) *error_offset = err_at_;
      return st;
    }
    return std::move(out_);
  }

 private:
  absl::Status Error(size_t at, std::string_view what) {
    err_at_ = at;
    return absl::InvalidArgumentError(std::string(what));
  }
  bool AtEnd() const { return pos_ >= p_.size(); }
  bool Starts(std::string_view s) const { return p_.substr(pos_, s.size()) == s; }

  // Skips whitespace and comments in verbose mode.
  void SkipVerbose() {
    while (flags_.verbose && !AtEnd()) {
      char c = p_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f') {
        ++pos_;
      } else if (c == '#') {
        while (!AtEnd() && p_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  // Parses "(?flags" after "(?": on return *add/*del hold the flags; stops at
  // ':' or ')'.
  absl::Status ParseFlags(size_t start, PythonRegexFlags* f, bool* scoped) {
    bool minus = false;
    while (!AtEnd() && p_[pos_] != ':' && p_[pos_] != ')') {
      char c = p_[pos_++];
      bool on = !minus;
      switch (c) {
        case '-':
          if (minus) return Error(start, "bad inline flags");
          minus = true;
          break;
        case 'i':
          f->ignore_case = on;
          break;
        case 's':
          f->dot_all = on;
          break;
        case 'x':
          f->verbose = on;
          break;
        case 'm':
          break;  // only ^ and $ read it; both are refused
        case 'u':
          if (minus) return Error(start, "bad inline flags");
          f->ascii = false;
          break;
        case 'a':
          if (minus) return Error(start, "bad inline flags");
          f->ascii = true;
          break;
        case 'L':
          return Error(start, "the L (locale) flag is not supported");
        default:
          return Error(start, "unknown inline flag");
      }
    }
    if (AtEnd()) return Error(start, "missing ')' after inline flags");
    *scoped = p_[pos_] == ':';
    if (!*scoped && minus) return Error(start, "bad inline flags: '-' needs a scoped group");
    ++pos_;
    return absl::OkStatus();
  }

  absl::Status Translate() {
    while (true) {
      SkipVerbose();
      if (AtEnd()) break;
      size_t start = pos_;
      char c = p_[pos_];
      int prev_quantifier = quantifier_;
      quantifier_ = 0;
      bool was_start = at_start_;
      at_start_ = false;
      switch (c) {
        case '(':
          if (absl::Status st = OpenGroup(start, was_start); !st.ok()) return st;
          break;
        case ')':
          if (groups_.empty()) return Error(start, "unbalanced parenthesis");
          flags_ = groups_.back();
          groups_.pop_back();
          ++pos_;
          out_ += ')';
          break;
        case '|':
          ++pos_;
          out_ += c;
          break;
        case '*':
        case '+':
        case '?':
          // '+' right after a quantifier is Python's possessive form; '?'
          // after one makes it lazy (same language).
          if (c == '+' && prev_quantifier == 1) {
            return Error(start, "possessive quantifiers are not supported");
          }
          ++pos_;
          out_ += c;
          quantifier_ = (c == '?' && prev_quantifier == 1) ? 2 : 1;
          break;
        case '{':
          TranslateBrace();
          break;
        case '^':
        case '$':
          return Error(start, "anchors (^, $) are not supported: a terminal is matched whole");
        case '.':
          ++pos_;
          if (flags_.dot_all) {
            out_ += "[\\x{0}-\\x{10FFFF}]";
          } else {
            out_ += '.';
          }
          break;
        case '[': {
          auto set = ParseClass();
          if (!set.ok()) return set.status();
          AppendSet(&out_, *set);
          break;
        }
        case '\\': {
          std::optional<CodepointSet> set;
          uint32_t cp = 0;
          if (absl::Status st = ParseEscape(false, &set, &cp); !st.ok()) return st;
          if (set) {
            AppendSet(&out_, *set);
          } else {
            AppendLiteral(cp);
          }
          break;
        }
        default:
          AppendLiteral(NextCodepoint(p_, &pos_));
          break;
      }
    }
    if (!groups_.empty()) return Error(p_.size(), "missing ')'");
    return absl::OkStatus();
  }

  // At '(' (offset `start`): opens a group, or reads a comment or inline
  // flags. `was_start`: only global flags and comments came before.
  absl::Status OpenGroup(size_t start, bool was_start) {
    ++pos_;
    if (!Starts("?")) {
      groups_.push_back(flags_);
      out_ += '(';
      return absl::OkStatus();
    }
    ++pos_;
    if (Starts(":")) {
      ++pos_;
      groups_.push_back(flags_);
      out_ += "(?:";
    } else if (Starts("P<")) {
      size_t close = p_.find('>', pos_);
      if (close == std::string_view::npos || close == pos_ + 2)
        return Error(start, "bad group name");
      pos_ = close + 1;
      groups_.push_back(flags_);
      out_ += "(?:";
    } else if (Starts("P=")) {
      return Error(start, "backreference is not supported");
    } else if (Starts("=") || Starts("!") || Starts("<=") || Starts("<!")) {
      return Error(start, "lookaround is not supported");
    } else if (Starts("#")) {
      size_t close = p_.find(')', pos_);
      if (close == std::string_view::npos) return Error(start, "missing ')' after comment");
      pos_ = close + 1;
      at_start_ = was_start;
    } else if (Starts(">")) {
      return Error(start, "atomic group is not supported");
    } else if (Starts("(")) {
      return Error(start, "conditional group is not supported");
    } else {
      return InlineFlags(start, was_start);
    }
    return absl::OkStatus();
  }

  // After "(?" of inline flags: "(?flags:" opens a group under them,
  // "(?flags)" sets them for the whole pattern (only at its start).
  absl::Status InlineFlags(size_t start, bool was_start) {
    PythonRegexFlags f = flags_;
    bool scoped = false;
    if (absl::Status st = ParseFlags(start, &f, &scoped); !st.ok()) return st;
    if (scoped) {
      groups_.push_back(flags_);
      flags_ = f;
      out_ += "(?:";
      return absl::OkStatus();
    }
    if (!was_start) return Error(start, "global flags not at the start of the expression");
    flags_ = f;
    at_start_ = true;
    return absl::OkStatus();
  }

  // At '{': a quantifier when it reads {m}, {m,}, {,n}, {m,n} or {,}; else
  // a literal '{'.
  void TranslateBrace() {
    size_t q = pos_ + 1;
    std::string lo, hi;
    while (q < p_.size() && p_[q] >= '0' && p_[q] <= '9') lo += p_[q++];
    bool comma = q < p_.size() && p_[q] == ',';
    if (comma) {
      ++q;
      while (q < p_.size() && p_[q] >= '0' && p_[q] <= '9') hi += p_[q++];
    }
    if (q < p_.size() && p_[q] == '}' && (comma || !lo.empty())) {
      pos_ = q + 1;
      out_ += '{';
      out_ += lo.empty() ? "0" : lo;
      if (comma) out_ += ',';
      out_ += hi;
      out_ += '}';
      quantifier_ = 1;
    } else {
      ++pos_;
      AppendLiteral('{');
    }
  }

  void AppendLiteral(uint32_t cp) {
    if (flags_.ignore_case &&
        (flags_.ascii ? ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') : IsCased(cp))) {
      CodepointSet s;
      s.AddRange(cp, cp);
      AppendSet(&out_, CaseFold(s, flags_.ascii));
    } else {
      AppendCodepoint(&out_, cp, kSpelling);
    }
  }

  // At a backslash. Sets *set for a class escape (\d ...), else *cp.
  absl::Status ParseEscape(bool in_class, std::optional<CodepointSet>* set, uint32_t* cp) {
    size_t start = pos_;
    ++pos_;
    if (AtEnd()) return Error(start, "bad escape (end of pattern)");
    char c = p_[pos_];
    if (static_cast<unsigned char>(c) >= 0x80) {
      *cp = NextCodepoint(p_, &pos_);
      return absl::OkStatus();
    }
    ++pos_;
    switch (c) {
      case 'd':
      case 'D':
      case 'w':
      case 'W':
      case 's':
      case 'S':
        *set = Category(c, flags_.ascii, false);
        class_escape_ = c;
        return absl::OkStatus();
      case 'n':
        *cp = '\n';
        return absl::OkStatus();
      case 't':
        *cp = '\t';
        return absl::OkStatus();
      case 'r':
        *cp = '\r';
        return absl::OkStatus();
      case 'f':
        *cp = '\f';
        return absl::OkStatus();
      case 'v':
        *cp = '\v';
        return absl::OkStatus();
      case 'a':
        *cp = '\a';
        return absl::OkStatus();
      case 'x':
        return ParseHex(start, 2, cp);
      case 'u':
        return ParseHex(start, 4, cp);
      case 'U':
        return ParseHex(start, 8, cp);
      case 'b':
        if (in_class) {
          *cp = '\b';
          return absl::OkStatus();
        }
        return Error(start, "word boundary \\b is not supported");
      case 'B':
        return Error(start, "\\B is not supported");
      case 'A':
      case 'Z':
        return Error(start, "anchors (\\A, \\Z) are not supported: a terminal is matched whole");
      case 'N':
        return Error(start, "named characters \\N{...} are not supported");
      case '0':
        return ParseOctal(start, 0, 2, cp);
      default:
        break;
    }
    if (c >= '1' && c <= '9') {
      if (in_class) {
        if (c >= '8') return Error(start, "bad escape");
        return ParseOctal(start, c - '0', 2, cp);
      }
      if (c <= '7' && pos_ + 1 < p_.size() && p_[pos_] >= '0' && p_[pos_] <= '7' &&
          p_[pos_ + 1] >= '0' && p_[pos_ + 1] <= '7') {
        return ParseOctal(start, c - '0', 2, cp);
      }
      return Error(start, "backreference is not supported");
    }
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      return Error(start, absl::StrCat("bad escape \\", std::string(1, c)));
    }
    *cp = static_cast<unsigned char>(c);
    return absl::OkStatus();
  }

  // The `n` hex digits of an escape begun at `start`, as a codepoint.
  absl::Status ParseHex(size_t start, int n, uint32_t* cp) {
    uint32_t v = 0;
    for (int i = 0; i < n; ++i) {
      if (AtEnd()) return Error(start, "incomplete hex escape");
      char h = p_[pos_];
      int d = (h >= '0' && h <= '9')   ? h - '0'
              : (h >= 'a' && h <= 'f') ? h - 'a' + 10
              : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                       : -1;
      if (d < 0) return Error(start, "incomplete hex escape");
      v = v * 16 + d;
      ++pos_;
    }
    if (v > kMaxCodepoint) return Error(start, "escape beyond U+10FFFF");
    if (v >= 0xD800 && v <= 0xDFFF) return Error(start, "escape of a surrogate codepoint");
    *cp = v;
    return absl::OkStatus();
  }

  // An octal escape begun at `start` whose digits so far make `v`: up to
  // `more` further octal digits, at most \377.
  absl::Status ParseOctal(size_t start, uint32_t v, int more, uint32_t* cp) {
    for (int i = 0; i < more && !AtEnd() && p_[pos_] >= '0' && p_[pos_] <= '7'; ++i) {
      v = v * 8 + (p_[pos_++] - '0');
    }
    if (v > 0377) return Error(start, "octal escape beyond \\377");
    *cp = v;
    return absl::OkStatus();
  }

  // At '['. Python's class syntax: ']' first is literal, '-' at either end is
  // literal, '[' inside is literal, escapes as ParseEscape(in_class).
  absl::StatusOr<CodepointSet> ParseClass() {
    size_t start = pos_;
    ++pos_;
    bool negate = false;
    if (Starts("^")) {
      negate = true;
      ++pos_;
    }
    CodepointSet chars;
    std::vector<char> categories;
    bool first = true;
    while (true) {
      if (AtEnd()) return Error(start, "unterminated character set");
      size_t item = pos_;
      if (p_[pos_] == ']' && !first) {
        ++pos_;
        break;
      }
      first = false;
      std::optional<CodepointSet> set;
      uint32_t lo = 0;
      if (p_[pos_] == '\\') {
        if (absl::Status st = ParseEscape(true, &set, &lo); !st.ok()) return st;
      } else {
        lo = NextCodepoint(p_, &pos_);
      }
      if (Starts("-") && pos_ + 1 < p_.size() && p_[pos_ + 1] != ']') {
        ++pos_;
        std::optional<CodepointSet> hi_set;
        uint32_t hi = 0;
        if (p_[pos_] == '\\') {
          if (absl::Status st = ParseEscape(true, &hi_set, &hi); !st.ok()) return st;
        } else {
          hi = NextCodepoint(p_, &pos_);
        }
        if (set || hi_set) return Error(item, "bad character range");
        if (hi < lo) return Error(item, "bad character range (reversed)");
        chars.AddRange(lo, hi);
      } else if (set) {
        categories.push_back(class_escape_);
      } else {
        chars.AddRange(lo, lo);
      }
    }
    bool hascased = false;
    if (flags_.ignore_case) {
      if (flags_.ascii) {
        hascased = true;
      } else {
        for (const auto& [l, h] : chars.ranges()) {
          if (h >= 0x10000) hascased = true;
          if (Intersects(Table(6), l, h)) hascased = true;
        }
        for (const auto& [l, h] : Table(6).ranges()) {
          if (h >= 0x10000 && Intersects(chars, std::max<uint32_t>(l, 0x10000), h)) {
            return Error(
                start,
                "case-insensitive class with a cased character beyond U+FFFF is not supported");
          }
        }
      }
    }
    CodepointSet out = hascased ? CaseFold(chars, flags_.ascii) : chars;
    for (char c : categories) out.Add(Category(c, flags_.ascii, hascased && !flags_.ascii));
    return negate ? out.Complement() : out;
  }

  std::string_view p_;
  PythonRegexFlags flags_;
  size_t pos_ = 0;
  size_t err_at_ = 0;
  char class_escape_ = 0;  // the letter of the last class escape ParseEscape read
  int quantifier_ = 0;     // the last item: 1 a quantifier, 2 a lazy one, 0 anything else
  // No item read yet, only global flags and comments (global flags may
  // still come).
  bool at_start_ = true;
  // Per open group, innermost last: the flags to restore at its ')'.
  std::vector<PythonRegexFlags> groups_;
  std::string out_;
};

}  // namespace

absl::StatusOr<std::string> TranslatePythonRegex(std::string_view pattern,
                                                 const PythonRegexFlags& flags,
                                                 size_t* error_offset) {
  return Translator(pattern, flags).Run(error_offset);
}

std::string LiteralRegex(std::string_view text, bool ignore_case) {
  std::string out;
  size_t pos = 0;
  while (pos < text.size()) {
    uint32_t cp = NextCodepoint(text, &pos);
    if (ignore_case && IsCased(cp)) {
      CodepointSet s;
      s.AddRange(cp, cp);
      AppendSet(&out, CaseFold(s, false));
    } else {
      AppendCodepoint(&out, cp, kSpelling);
    }
  }
  return out;
}

}  // namespace maskd::grammar
