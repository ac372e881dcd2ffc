// A Lark terminal's definition inlined into one maskd regex: names of other
// terminals expand to their regexes, strings to literals, Python regexes are
// translated (grammar/python_regex.h).
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "automaton/regex_text.h"
#include "grammar/lark_internal.h"
#include "grammar/python_regex.h"

namespace maskd::grammar::lark_internal {
namespace {

// A Lark range "a".."z" as a regex class: [\x{61}-\x{7A}].
std::string RangeRegex(uint32_t lo, uint32_t hi) {
  std::string out = "[";
  AppendHexEscape(&out, lo, HexDigits::kUpper);
  out.push_back('-');
  AppendHexEscape(&out, hi, HexDigits::kUpper);
  out.push_back(']');
  return out;
}

absl::Status CheckSize(const std::string& regex, SourcePos pos) {
  if (regex.size() > kMaxTerminalRegexBytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat(At(pos), "a terminal expands to a regex over ", kMaxTerminalRegexBytes,
                     " bytes (the regex pattern limit)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Piece> TerminalRegexes::Named(const std::string& name, SourcePos use, int depth) {
  if (auto it = cache_.find(name); it != cache_.end()) return it->second;
  auto d = syntax_.by_name.find(name);
  if (d == syntax_.by_name.end()) {
    return ErrorAt(use, absl::StrCat("terminal '", name, "' is not defined"));
  }
  const Definition& def = syntax_.defs[d->second];
  if (def.common_regex != nullptr) {
    Piece piece{def.common_regex, std::nullopt};
    if (name == "CR") piece.literal.emplace("\r");
    if (name == "LF") piece.literal.emplace("\n");
    cache_[name] = piece;
    return piece;
  }
  if (in_progress_.count(name)) {
    return ErrorAt(def.pos, absl::StrCat("terminal '", name, "' is defined in terms of itself"));
  }
  if (absl::Status st = CheckLoweringDepth(depth, use, limits_); !st.ok()) return st;
  in_progress_[name] = true;
  auto piece = Build(*def.body, depth + 1);
  in_progress_.erase(name);
  if (!piece.ok()) return piece.status();
  cache_[name] = *piece;
  return piece;
}

absl::StatusOr<Piece> TerminalRegexes::Build(uint32_t id, int depth) {
  const Node& n = N(id);
  if (absl::Status st = CheckLoweringDepth(depth, n.pos, limits_); !st.ok()) return st;
  switch (n.kind) {
    case Node::Kind::kAlt:
      return Alternation(n, depth);
    case Node::Kind::kSeq:
      return Sequence(n, depth);
    case Node::Kind::kRepeat:
      return Repetition(n, depth);
    case Node::Kind::kName:
      return Reference(n, depth);
    case Node::Kind::kString:
      if (n.flags == "i") return Piece{LiteralRegex(n.text, true), std::nullopt};
      return Piece{LiteralRegex(n.text, false), n.text};
    case Node::Kind::kRegex:
      return PythonRegex(n);
    case Node::Kind::kRange:
      return Piece{RangeRegex(n.lo, n.hi), std::nullopt};
    case Node::Kind::kTemplateUse:
      return ErrorAt(n.pos, "templates cannot be used in terminals");
  }
  return ErrorAt(n.pos, "internal: unknown node");
}

absl::StatusOr<Piece> TerminalRegexes::Alternation(const Node& n, int depth) {
  if (n.kids.size() == 1) return Build(n.kids[0], depth + 1);
  Piece out{"(?:", std::nullopt};
  for (size_t k = 0; k < n.kids.size(); ++k) {
    auto p = Build(n.kids[k], depth + 1);
    if (!p.ok()) return p.status();
    if (k) out.regex += '|';
    out.regex += p->regex;
    if (absl::Status st = CheckSize(out.regex, n.pos); !st.ok()) return st;
  }
  out.regex += ')';
  return out;
}

// The literal survives only while every item has one.
absl::StatusOr<Piece> TerminalRegexes::Sequence(const Node& n, int depth) {
  Piece out{"", std::string()};
  for (uint32_t k : n.kids) {
    auto p = Build(k, depth + 1);
    if (!p.ok()) return p.status();
    out.regex += p->regex;
    if (out.literal && p->literal) {
      *out.literal += *p->literal;
    } else {
      out.literal.reset();
    }
    if (absl::Status st = CheckSize(out.regex, n.pos); !st.ok()) return st;
  }
  if (n.kids.empty()) out.literal.reset();
  return out;
}

absl::StatusOr<Piece> TerminalRegexes::Repetition(const Node& n, int depth) {
  auto p = Build(n.kids[0], depth + 1);
  if (!p.ok()) return p.status();
  Piece out{absl::StrCat("(?:", p->regex, ")"), std::nullopt};
  if (n.min == 0 && n.max == 1) {
    out.regex += '?';
  } else if (n.min == 0 && n.max == kUnbounded) {
    out.regex += '*';
  } else if (n.min == 1 && n.max == kUnbounded) {
    out.regex += '+';
  } else if (n.min == n.max) {
    absl::StrAppend(&out.regex, "{", n.min, "}");
  } else {
    absl::StrAppend(&out.regex, "{", n.min, ",", n.max, "}");
  }
  if (absl::Status st = CheckSize(out.regex, n.pos); !st.ok()) return st;
  return out;
}

// A name in a terminal's definition: another terminal, never a rule.
absl::StatusOr<Piece> TerminalRegexes::Reference(const Node& n, int depth) {
  auto d = syntax_.by_name.find(n.text);
  if (d != syntax_.by_name.end() && !syntax_.defs[d->second].terminal) {
    return ErrorAt(n.pos, absl::StrCat("terminals cannot contain rules ('", n.text, "')"));
  }
  if (d == syntax_.by_name.end() && n.text[0] >= 'a') {
    return ErrorAt(n.pos, absl::StrCat("terminals cannot contain rules ('", n.text, "')"));
  }
  auto p = Named(n.text, n.pos, depth + 1);
  if (!p.ok()) return p.status();
  return Piece{absl::StrCat("(?:", p->regex, ")"), p->literal};
}

// Lark applies flags by wrapping, (?f:pattern) once per flag letter, and
// compiles that; translating the same text keeps its quirks (an
// unterminated x-mode comment swallows the closing parenthesis).
absl::StatusOr<Piece> TerminalRegexes::PythonRegex(const Node& n) {
  std::string wrapped = n.text;
  for (char c : n.flags) wrapped = absl::StrCat("(?", std::string(1, c), ":", wrapped, ")");
  size_t prefix = 4 * n.flags.size();
  size_t off = 0;
  auto r = TranslatePythonRegex(wrapped, PythonRegexFlags{}, &off);
  if (!r.ok()) {
    return ErrorAt(n.pos, absl::StrCat("regex ", n.raw, ": ", r.status().message(), " at offset ",
                                       off > prefix ? off - prefix : 0));
  }
  return Piece{absl::StrCat("(?:", *r, ")"), std::nullopt};
}

}  // namespace maskd::grammar::lark_internal
