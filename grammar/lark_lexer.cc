// The Lark lexer: grammar text to tokens, as Lark's own lexer splits names,
// directives and modifiers.
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "grammar/lark_internal.h"

namespace maskd::grammar::lark_internal {
namespace {

// The punctuation that is one token of its own, with no text.
constexpr std::pair<char, Tok> kPunctuation[] = {
    {':', Tok::kColon},    {'|', Tok::kOr},       {'(', Tok::kLParen}, {')', Tok::kRParen},
    {'[', Tok::kLBracket}, {']', Tok::kRBracket}, {'{', Tok::kLBrace}, {'}', Tok::kRBrace},
    {',', Tok::kComma},    {'.', Tok::kDot},      {'~', Tok::kTilde},
};

class Lexer {
 public:
  explicit Lexer(std::string_view s) : s_(s) {}

  absl::StatusOr<std::vector<Token>> Run() {
    std::vector<Token> out;
    while (true) {
      SkipBlanks();
      if (AtEnd()) break;
      if (s_[pos_] == '\n' || s_[pos_] == '\r') {
        LexNewline(&out);
        continue;
      }
      Token t;
      t.pos = Here();
      if (absl::Status st = LexToken(out, &t); !st.ok()) return st;
      out.push_back(std::move(t));
    }
    out.push_back({Tok::kEnd, "", "", Here()});
    return out;
  }

 private:
  // A newline ends a definition unless the next significant character is
  // '|' (a continued list of alternatives); a run of them is one kNewline.
  void LexNewline(std::vector<Token>* out) {
    SourcePos p = Here();
    SkipSpaceAndComments();
    if (!AtEnd() && s_[pos_] == '|') return;
    if (out->empty() || out->back().kind != Tok::kNewline) {
      out->push_back({Tok::kNewline, "", "", p});
    }
  }

  // The token at pos_ (not a blank or newline) into *t; `out` holds the
  // tokens before it.
  absl::Status LexToken(const std::vector<Token>& out, Token* t) {
    char c = s_[pos_];
    if (c == '"') return LexString(t);
    if (c == '/') return LexRegexp(t);
    if (IsNameStart(c)) return LexName(t);
    if ((c >= '0' && c <= '9') || ((c == '-' || c == '+') && NumberAllowed(out) &&
                                   pos_ + 1 < s_.size() && s_[pos_ + 1] >= '0' &&
                                   s_[pos_ + 1] <= '9')) {
      LexNumber(t);
      return absl::OkStatus();
    }
    if (c == '%') return LexDirective(t);
    if (c == '-' && pos_ + 1 < s_.size() && s_[pos_ + 1] == '>') {
      Advance();
      Advance();
      t->kind = Tok::kArrow;
      return absl::OkStatus();
    }
    if (c == '.' && pos_ + 1 < s_.size() && s_[pos_ + 1] == '.') {
      Advance();
      Advance();
      t->kind = Tok::kDotDot;
      return absl::OkStatus();
    }
    return LexPunctuation(t);
  }

  // "..." with an optional i flag.
  absl::Status LexString(Token* t) {
    if (absl::Status st = LexQuoted('"', t); !st.ok()) return st;
    t->kind = Tok::kString;
    if (!AtEnd() && s_[pos_] == 'i') {
      t->flags.push_back('i');
      Advance();
    }
    return absl::OkStatus();
  }

  // /.../ with its flags.
  absl::Status LexRegexp(Token* t) {
    if (absl::Status st = LexQuoted('/', t); !st.ok()) return st;
    t->kind = Tok::kRegexp;
    while (!AtEnd() && std::string_view("imslux").find(s_[pos_]) != std::string_view::npos) {
      t->flags += s_[pos_];
      Advance();
    }
    return absl::OkStatus();
  }

  // As Lark's own lexer: RULE is _?[a-z][_a-z0-9]*, TERMINAL is
  // _?[A-Z][_A-Z0-9]*, so "_NLrow" reads as _NL then row.
  absl::Status LexName(Token* t) {
    size_t b = pos_;
    size_t q = pos_ + (s_[pos_] == '_' ? 1 : 0);
    char first = q < s_.size() ? s_[q] : '\0';
    bool lower = first >= 'a' && first <= 'z';
    bool upper = first >= 'A' && first <= 'Z';
    if (!lower && !upper) return ErrorAt(t->pos, "a name needs a letter after '_'");
    while (q < s_.size() &&
           (s_[q] == '_' || (s_[q] >= '0' && s_[q] <= '9') ||
            (lower ? (s_[q] >= 'a' && s_[q] <= 'z') : (s_[q] >= 'A' && s_[q] <= 'Z')))) {
      ++q;
    }
    while (pos_ < q) Advance();
    t->text = std::string(s_.substr(b, pos_ - b));
    t->kind = lower ? Tok::kRule : Tok::kTerminal;
    return absl::OkStatus();
  }

  // Digits, after a sign where NumberAllowed.
  void LexNumber(Token* t) {
    size_t b = pos_;
    Advance();
    while (!AtEnd() && s_[pos_] >= '0' && s_[pos_] <= '9') Advance();
    t->kind = Tok::kNumber;
    t->text = std::string(s_.substr(b, pos_ - b));
  }

  // Lark matches its directives as fixed strings: "%importcommon" is
  // %import then common.
  absl::Status LexDirective(Token* t) {
    static constexpr std::string_view kDirectives[] = {"%ignore", "%import", "%declare",
                                                       "%override", "%extend"};
    std::string_view rest = s_.substr(pos_);
    size_t len = 0;
    for (std::string_view d : kDirectives) {
      if (rest.substr(0, d.size()) == d) len = d.size();
    }
    if (len == 0) {
      len = 1;
      while (len < rest.size() && rest[len] >= 'a' && rest[len] <= 'z') ++len;
      return ErrorAt(t->pos,
                     absl::StrCat("unknown directive '", std::string(rest.substr(0, len)), "'"));
    }
    for (size_t k = 0; k < len; ++k) Advance();
    t->kind = Tok::kDirective;
    t->text = std::string(rest.substr(0, len));
    return absl::OkStatus();
  }

  // One character of punctuation, an operator or a rule modifier.
  absl::Status LexPunctuation(Token* t) {
    char c = s_[pos_];
    for (const auto& [ch, kind] : kPunctuation) {
      if (c != ch) continue;
      Advance();
      t->kind = kind;
      return absl::OkStatus();
    }
    if (c != '!' && c != '?' && c != '+' && c != '*') return UnexpectedCharacter(t->pos);
    Advance();
    t->text = std::string(1, c);
    // As Lark: '?' before [_a-z] is a rule modifier, not an operator.
    bool modifier = c == '!' || (c == '?' && !AtEnd() &&
                                 (s_[pos_] == '_' || (s_[pos_] >= 'a' && s_[pos_] <= 'z')));
    t->kind = modifier ? Tok::kBang : Tok::kOp;
    return absl::OkStatus();
  }

  // The error for the character at pos_, shown whole (the text is valid
  // UTF-8).
  absl::Status UnexpectedCharacter(SourcePos p) const {
    size_t len = 1;
    while (pos_ + len < s_.size() && (static_cast<unsigned char>(s_[pos_ + len]) & 0xC0) == 0x80) {
      ++len;
    }
    return ErrorAt(p,
                   absl::StrCat("unexpected character '", std::string(s_.substr(pos_, len)), "'"));
  }

  static bool IsNameStart(char c) {
    return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  }
  static bool NumberAllowed(const std::vector<Token>& out) {
    return !out.empty() && (out.back().kind == Tok::kDot || out.back().kind == Tok::kTilde ||
                            out.back().kind == Tok::kDotDot);
  }
  bool AtEnd() const { return pos_ >= s_.size(); }
  SourcePos Here() const { return {line_, static_cast<uint32_t>(pos_ - line_start_ + 1)}; }
  void Advance() {
    if (s_[pos_] == '\n') {
      ++line_;
      line_start_ = pos_ + 1;
    }
    ++pos_;
  }
  void SkipComment() {
    while (!AtEnd() && s_[pos_] != '\n') Advance();
  }
  bool AtComment() const {
    return s_[pos_] == '#' || (s_[pos_] == '/' && pos_ + 1 < s_.size() && s_[pos_ + 1] == '/');
  }
  // Spaces, tabs, comments and backslash-newline continuations.
  void SkipBlanks() {
    while (!AtEnd()) {
      char c = s_[pos_];
      if (c == ' ' || c == '\t' || c == '\f') {
        Advance();
      } else if (AtComment()) {
        SkipComment();
      } else if (c == '\\') {
        size_t q = pos_ + 1;
        while (q < s_.size() && s_[q] == ' ') ++q;
        if (q < s_.size() && s_[q] == '\n') {
          while (pos_ <= q) Advance();
        } else {
          break;
        }
      } else {
        break;
      }
    }
  }
  void SkipSpaceAndComments() {
    while (!AtEnd()) {
      char c = s_[pos_];
      if (c == ' ' || c == '\t' || c == '\f' || c == '\n' || c == '\r') {
        Advance();
      } else if (AtComment()) {
        SkipComment();
      } else {
        break;
      }
    }
  }
  // A "..." string or /.../ regex: the body as written, escaped delimiters and
  // doubled backslashes kept.
  absl::Status LexQuoted(char delim, Token* t) {
    SourcePos p = Here();
    Advance();
    size_t b = pos_;
    while (true) {
      if (AtEnd()) return ErrorAt(p, delim == '"' ? "unterminated string" : "unterminated regex");
      char c = s_[pos_];
      if (c == '\n' && delim == '"') return ErrorAt(p, "newline in a string literal");
      if (c == '\\' && pos_ + 1 < s_.size() && (s_[pos_ + 1] == delim || s_[pos_ + 1] == '\\')) {
        Advance();
        Advance();
        continue;
      }
      if (c == delim) break;
      Advance();
    }
    t->text = std::string(s_.substr(b, pos_ - b));
    Advance();
    return absl::OkStatus();
  }

  std::string_view s_;
  size_t pos_ = 0;
  uint32_t line_ = 1;
  size_t line_start_ = 0;
};

}  // namespace

absl::StatusOr<std::vector<Token>> Lex(std::string_view text) { return Lexer(text).Run(); }

}  // namespace maskd::grammar::lark_internal
