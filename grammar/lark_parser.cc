#include "grammar/lark_parser.h"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "automaton/regex.h"
#include "grammar/python_regex.h"

namespace maskd::grammar {
namespace {

// Lark's common terminals (`%import common.NAME`), written as maskd regexes
// from what each means under Lark's dynamic_complete lexer: lazy patterns
// such as ESCAPED_STRING's and C_COMMENT's stop at the first closing
// delimiter, so they are written as the languages that shortest match gives.
struct CommonTerminal {
  const char* name;
  const char* regex;
};
constexpr char kFloat[] =
    "(?:[0-9]+[eE][+\\-]?[0-9]+|(?:[0-9]+\\.[0-9]*|\\.[0-9]+)(?:[eE][+\\-]?[0-9]+)?)";
const CommonTerminal kCommon[] = {
    {"DIGIT", "[0-9]"},
    {"HEXDIGIT", "[0-9A-Fa-f]"},
    {"INT", "[0-9]+"},
    {"SIGNED_INT", "[+\\-]?[0-9]+"},
    {"DECIMAL", "(?:[0-9]+\\.[0-9]*|\\.[0-9]+)"},
    {"_EXP", "[eE][+\\-]?[0-9]+"},
    {"FLOAT", kFloat},
    {"SIGNED_FLOAT",
     "[+\\-]?(?:[0-9]+[eE][+\\-]?[0-9]+|(?:[0-9]+\\.[0-9]*|\\.[0-9]+)(?:[eE][+\\-]?[0-9]+)?)"},
    {"NUMBER",
     "(?:[0-9]+[eE][+\\-]?[0-9]+|(?:[0-9]+\\.[0-9]*|\\.[0-9]+)(?:[eE][+\\-]?[0-9]+)?|[0-9]+)"},
    {"SIGNED_NUMBER",
     "[+\\-]?(?:[0-9]+[eE][+\\-]?[0-9]+|(?:[0-9]+\\.[0-9]*|\\.[0-9]+)(?:[eE][+\\-]?[0-9]+)?"
     "|[0-9]+)"},
    {"_STRING_INNER", ".*"},
    // Outlines' common.lark adds this one (no escapes: a string ends at its
    // second quote).
    {"UNESCAPED_STRING", "\"[^\"]*\""},
    {"_STRING_ESC_INNER", "(?:[^\\\\\\n]|\\\\.)*"},
    {"ESCAPED_STRING", "\"(?:[^\"\\\\\\n]|\\\\.)*\""},
    {"LCASE_LETTER", "[a-z]"},
    {"UCASE_LETTER", "[A-Z]"},
    {"LETTER", "[A-Za-z]"},
    {"WORD", "[A-Za-z]+"},
    {"CNAME", "[_A-Za-z][_A-Za-z0-9]*"},
    {"WS_INLINE", "[ \\t]+"},
    {"WS", "[ \\t\\f\\r\\n]+"},
    {"CR", "\\r"},
    {"LF", "\\n"},
    {"NEWLINE", "(?:\\r?\\n)+"},
    {"SH_COMMENT", "#[^\\n]*"},
    {"CPP_COMMENT", "//[^\\n]*"},
    {"C_COMMENT", "/\\*(?:[^*]|\\*+[^*/])*\\*+/"},
    {"SQL_COMMENT", "--[^\\n]*"},
};

const char* CommonRegex(std::string_view name) {
  for (const auto& t : kCommon) {
    if (name == t.name) return t.regex;
  }
  return nullptr;
}

// Group nesting never exceeds this, whatever GrammarLimits::max_nesting says:
// it bounds the parser's and the lowering's recursion (up to about 8 KiB of
// stack per level under AddressSanitizer: 1,000 levels overflowed its 8 MiB).
constexpr uint32_t kMaxNesting = 500;

uint32_t Nesting(const GrammarLimits& limits) { return std::min(limits.max_nesting, kMaxNesting); }

// The largest regex one terminal may expand to (maskd's pattern limit).
constexpr size_t kMaxTerminalRegexBytes = RegexLimits{}.max_pattern_bytes;

// ---------------------------------------------------------------- lexing --

enum class Tok {
  kEnd,
  kNewline,
  kRule,
  kTerminal,
  kString,
  kRegexp,
  kNumber,
  kColon,
  kOr,
  kLParen,
  kRParen,
  kLBracket,
  kRBracket,
  kLBrace,
  kRBrace,
  kComma,
  kDot,
  kDotDot,
  kTilde,
  kArrow,
  kOp,
  kBang,
  kDirective,
};

struct Token {
  Tok kind = Tok::kEnd;
  std::string text;  // as written; for kString/kRegexp the body, flags apart
  std::string flags;
  SourcePos pos;
};

std::string At(SourcePos p) { return absl::StrFormat("line %d, column %d: ", p.line, p.column); }

absl::Status ErrorAt(SourcePos p, std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(At(p), std::string(what)));
}

class Lexer {
 public:
  explicit Lexer(std::string_view s) : s_(s) {}

  absl::StatusOr<std::vector<Token>> Run() {
    std::vector<Token> out;
    while (true) {
      SkipBlanks();
      if (AtEnd()) break;
      char c = s_[pos_];
      SourcePos p = Here();
      if (c == '\n' || c == '\r') {
        // A newline ends a definition unless the next significant character
        // is '|' (a continued list of alternatives).
        SkipSpaceAndComments();
        if (!AtEnd() && s_[pos_] == '|') continue;
        if (out.empty() || out.back().kind != Tok::kNewline)
          out.push_back({Tok::kNewline, "", "", p});
        continue;
      }
      Token t;
      t.pos = p;
      if (c == '"') {
        if (absl::Status st = LexQuoted('"', &t); !st.ok()) return st;
        t.kind = Tok::kString;
        if (!AtEnd() && s_[pos_] == 'i') {
          t.flags = "i";
          Advance();
        }
      } else if (c == '/') {
        if (absl::Status st = LexQuoted('/', &t); !st.ok()) return st;
        t.kind = Tok::kRegexp;
        while (!AtEnd() && std::string_view("imslux").find(s_[pos_]) != std::string_view::npos) {
          t.flags += s_[pos_];
          Advance();
        }
      } else if (IsNameStart(c)) {
        // As Lark's own lexer: RULE is _?[a-z][_a-z0-9]*, TERMINAL is
        // _?[A-Z][_A-Z0-9]*, so "_NLrow" reads as _NL then row.
        size_t b = pos_;
        size_t q = pos_ + (c == '_' ? 1 : 0);
        char first = q < s_.size() ? s_[q] : '\0';
        bool lower = first >= 'a' && first <= 'z';
        bool upper = first >= 'A' && first <= 'Z';
        if (!lower && !upper) return ErrorAt(p, "a name needs a letter after '_'");
        while (q < s_.size() &&
               (s_[q] == '_' || (s_[q] >= '0' && s_[q] <= '9') ||
                (lower ? (s_[q] >= 'a' && s_[q] <= 'z') : (s_[q] >= 'A' && s_[q] <= 'Z')))) {
          ++q;
        }
        while (pos_ < q) Advance();
        t.text = std::string(s_.substr(b, pos_ - b));
        t.kind = lower ? Tok::kRule : Tok::kTerminal;
      } else if ((c >= '0' && c <= '9') ||
                 ((c == '-' || c == '+') && NumberAllowed(out) && pos_ + 1 < s_.size() &&
                  s_[pos_ + 1] >= '0' && s_[pos_ + 1] <= '9')) {
        size_t b = pos_;
        Advance();
        while (!AtEnd() && s_[pos_] >= '0' && s_[pos_] <= '9') Advance();
        t.kind = Tok::kNumber;
        t.text = std::string(s_.substr(b, pos_ - b));
      } else if (c == '%') {
        // Lark matches its directives as fixed strings: "%importcommon" is
        // %import then common.
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
          return ErrorAt(
              p, absl::StrCat("unknown directive '", std::string(rest.substr(0, len)), "'"));
        }
        for (size_t k = 0; k < len; ++k) Advance();
        t.kind = Tok::kDirective;
        t.text = std::string(rest.substr(0, len));
      } else if (c == '-' && pos_ + 1 < s_.size() && s_[pos_ + 1] == '>') {
        Advance();
        Advance();
        t.kind = Tok::kArrow;
      } else if (c == '.' && pos_ + 1 < s_.size() && s_[pos_ + 1] == '.') {
        Advance();
        Advance();
        t.kind = Tok::kDotDot;
      } else {
        Advance();
        switch (c) {
          case ':':
            t.kind = Tok::kColon;
            break;
          case '|':
            t.kind = Tok::kOr;
            break;
          case '(':
            t.kind = Tok::kLParen;
            break;
          case ')':
            t.kind = Tok::kRParen;
            break;
          case '[':
            t.kind = Tok::kLBracket;
            break;
          case ']':
            t.kind = Tok::kRBracket;
            break;
          case '{':
            t.kind = Tok::kLBrace;
            break;
          case '}':
            t.kind = Tok::kRBrace;
            break;
          case ',':
            t.kind = Tok::kComma;
            break;
          case '.':
            t.kind = Tok::kDot;
            break;
          case '~':
            t.kind = Tok::kTilde;
            break;
          case '!':
            t.kind = Tok::kBang;
            t.text = "!";
            break;
          case '?':
            // As Lark: '?' before [_a-z] is a rule modifier, not an operator.
            if (!AtEnd() && (s_[pos_] == '_' || (s_[pos_] >= 'a' && s_[pos_] <= 'z'))) {
              t.kind = Tok::kBang;
              t.text = "?";
              break;
            }
            t.kind = Tok::kOp;
            t.text = "?";
            break;
          case '+':
          case '*':
            t.kind = Tok::kOp;
            t.text = std::string(1, c);
            break;
          default: {
            // The whole character (the text is valid UTF-8).
            size_t len = 1;
            while (pos_ - 1 + len < s_.size() &&
                   (static_cast<unsigned char>(s_[pos_ - 1 + len]) & 0xC0) == 0x80)
              ++len;
            return ErrorAt(p, absl::StrCat("unexpected character '",
                                           std::string(s_.substr(pos_ - 1, len)), "'"));
          }
        }
      }
      out.push_back(std::move(t));
    }
    out.push_back({Tok::kEnd, "", "", Here()});
    return out;
  }

 private:
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

// Lark's eval_escaping: backslash pairs, \" and the escapes \n \t \r \f \xHH \uHHHH
// \UHHHHHHHH are read as Python reads them in a string literal; any other
// backslash stays. Done the way Lark does it (build a Python literal, then
// evaluate it), so its quirks hold: in a regex /\\"/ stands for \".
absl::StatusOr<std::string> EvalEscaping(std::string_view raw, SourcePos p) {
  std::string w;
  for (size_t i = 0; i < raw.size(); ++i) {
    char n = raw[i];
    w += n;
    if (n != '\\') continue;
    if (i + 1 >= raw.size()) return ErrorAt(p, "literal ended unexpectedly (bad escaping)");
    char n2 = raw[++i];
    if (n2 == '\\') {
      w += "\\\\";
    } else if (std::string_view("Uuxnftr").find(n2) == std::string_view::npos) {
      w += '\\';
    }
    w += n2;
  }
  std::string w2;
  for (size_t i = 0; i < w.size(); ++i) {
    if (w[i] == '\\' && i + 1 < w.size() && w[i + 1] == '"') {
      w2 += '"';
      ++i;
    } else if (w[i] == '\'') {
      w2 += "\\'";
    } else {
      w2 += w[i];
    }
  }
  // Evaluate w2 as the body of a Python u'''...''' literal.
  std::string out;
  auto put = [&](uint32_t c) {
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (c < 0x800) {
      out += static_cast<char>(0xC0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      out += static_cast<char>(0xE0 | (c >> 12));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (c >> 18));
      out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    }
  };
  for (size_t i = 0; i < w2.size(); ++i) {
    if (w2[i] != '\\' || i + 1 >= w2.size()) {
      out += w2[i];
      continue;
    }
    char e = w2[++i];
    auto hex = [&](int digits) -> absl::Status {
      uint32_t v = 0;
      for (int k = 0; k < digits; ++k) {
        if (i + 1 >= w2.size()) return ErrorAt(p, "truncated \\x, \\u or \\U escape");
        char h = w2[++i];
        int d = (h >= '0' && h <= '9')   ? h - '0'
                : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                         : -1;
        if (d < 0) return ErrorAt(p, "truncated \\x, \\u or \\U escape");
        v = v * 16 + d;
      }
      if (v > kMaxCodepoint) return ErrorAt(p, "escape beyond U+10FFFF");
      if (v >= 0xD800 && v <= 0xDFFF) return ErrorAt(p, "escape of a surrogate codepoint");
      put(v);
      return absl::OkStatus();
    };
    absl::Status st;
    switch (e) {
      case '\\':
        out += '\\';
        break;
      case '\'':
        out += '\'';
        break;
      case '"':
        out += '"';
        break;
      case 'a':
        out += '\a';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'v':
        out += '\v';
        break;
      case '\n':
        break;
      case 'x':
        st = hex(2);
        break;
      case 'u':
        st = hex(4);
        break;
      case 'U':
        st = hex(8);
        break;
      case 'N':
        return ErrorAt(p, "named characters \\N{...} are not supported");
      default:
        if (e >= '0' && e <= '7') {
          uint32_t v = e - '0';
          for (int k = 0; k < 2 && i + 1 < w2.size() && w2[i + 1] >= '0' && w2[i + 1] <= '7'; ++k) {
            v = v * 8 + (w2[++i] - '0');
          }
          put(v);
        } else {
          out += '\\';
          out += e;
        }
    }
    if (!st.ok()) return st;
  }
  return out;
}

// ---------------------------------------------------------------- syntax --

struct Node {
  enum class Kind : uint8_t { kAlt, kSeq, kRepeat, kName, kString, kRegex, kRange, kTemplateUse };
  Kind kind = Kind::kSeq;
  SourcePos pos;
  std::vector<uint32_t>
      kids;  // kAlt: kSeq alternatives; kSeq: items; kRepeat: one; kTemplateUse: args
  uint32_t min = 0, max = 0;  // kRepeat; max == kUnbounded: none
  std::string text;           // kName, kTemplateUse: the name; kString, kRegex: evaluated text
  std::string flags;          // kString: "" or "i"; kRegex: its flags
  std::string raw;            // kRegex: as written, for messages
  uint32_t lo = 0, hi = 0;    // kRange
};
constexpr uint32_t kUnbounded = RegexNode::kUnbounded;

struct Definition {
  std::string name;
  bool terminal = false;
  SourcePos pos;
  std::optional<uint32_t> body;        // a kAlt node; none for a common import
  const char* common_regex = nullptr;  // set for a common import
  int priority = 0;
  std::vector<std::string> params;  // a template's parameters
};

class Parser {
 public:
  Parser(std::vector<Token> toks, const GrammarLimits& limits)
      : t_(std::move(toks)), limits_(limits) {}

  absl::Status Run() {
    while (Peek().kind != Tok::kEnd) {
      if (Peek().kind == Tok::kNewline) {
        ++i_;
        continue;
      }
      absl::Status st = Peek().kind == Tok::kDirective ? Directive() : ParseDefinition();
      if (!st.ok()) return st;
    }
    return absl::OkStatus();
  }

  std::vector<Node> nodes;
  std::vector<struct Definition> defs;
  std::map<std::string, size_t> by_name;                // into defs
  std::vector<std::pair<uint32_t, SourcePos>> ignores;  // kAlt nodes

 private:
  const Token& Peek() const { return t_[i_]; }
  const Token& Next() { return t_[i_ < t_.size() - 1 ? i_++ : i_]; }
  bool Accept(Tok k) {
    if (Peek().kind != k) return false;
    ++i_;
    return true;
  }
  absl::Status Expect(Tok k, std::string_view what) {
    if (Accept(k)) return absl::OkStatus();
    return Unexpected(what);
  }
  absl::Status Unexpected(std::string_view expected) {
    const Token& t = Peek();
    std::string got = t.kind == Tok::kEnd       ? "end of grammar"
                      : t.kind == Tok::kNewline ? "end of line"
                      : t.text.empty()          ? "a symbol"
                                                : absl::StrCat("'", t.text, "'");
    if (t.kind == Tok::kString) got = absl::StrCat("\"", t.text, "\"");
    if (t.kind == Tok::kRegexp) got = absl::StrCat("/", t.text, "/");
    static const char* kPunct[] = {"",    "",     "",    "",     "",    "",    "",    "':'",
                                   "'|'", "'('",  "')'", "'['",  "']'", "'{'", "'}'", "','",
                                   "'.'", "'..'", "'~'", "'->'", "",    "",    ""};
    const char* punct = kPunct[static_cast<int>(t.kind)];
    if (*punct) got = punct;
    return ErrorAt(t.pos, absl::StrCat("expected ", std::string(expected), ", got ", got));
  }
  bool EndOfStatement() const { return Peek().kind == Tok::kNewline || Peek().kind == Tok::kEnd; }
  absl::Status EndStatement() {
    if (EndOfStatement()) {
      Accept(Tok::kNewline);
      return absl::OkStatus();
    }
    return Unexpected("end of line");
  }

  uint32_t Add(Node n) {
    nodes.push_back(std::move(n));
    return static_cast<uint32_t>(nodes.size() - 1);
  }

  absl::Status Declare(struct Definition d) {
    auto [it, fresh] = by_name.emplace(d.name, defs.size());
    if (!fresh) {
      return ErrorAt(d.pos, absl::StrCat(d.terminal ? "terminal '" : "rule '", d.name,
                                         "' is defined more than once (first at line ",
                                         defs[it->second].pos.line, ")"));
    }
    defs.push_back(std::move(d));
    return absl::OkStatus();
  }

  absl::StatusOr<int> Priority() {
    if (!Accept(Tok::kDot)) return 0;
    if (Peek().kind != Tok::kNumber) return Unexpected("a priority number after '.'");
    const Token& n = Next();
    if (n.text.size() > 6) return ErrorAt(n.pos, "priority out of range");
    return std::stoi(n.text);
  }

  // kOverride replaces an earlier definition, kExtend adds alternatives to it.
  enum class Mode { kNew, kOverride, kExtend };

  absl::Status ParseDefinition(Mode mode = Mode::kNew, SourcePos directive = {}) {
    struct Definition d;
    d.pos = Peek().pos;
    // Lark's modifiers: "!", "?", "!?" or "?!".
    std::string modifiers;
    while (Peek().kind == Tok::kBang || (Peek().kind == Tok::kOp && Peek().text == "?")) {
      if (modifiers.find(Peek().text) != std::string::npos) return Unexpected("a rule name");
      modifiers += Next().text;
    }
    if (Peek().kind != Tok::kRule && Peek().kind != Tok::kTerminal) {
      return Unexpected("a rule or terminal definition, or a % directive");
    }
    const Token& name = Next();
    d.name = name.text;
    d.terminal = name.kind == Tok::kTerminal;
    if (d.terminal && d.pos.column != name.pos.column) {
      return ErrorAt(d.pos, "rule modifiers (? !) apply to rules, not terminals");
    }
    if (!d.terminal && Accept(Tok::kLBrace)) {
      do {
        if (Peek().kind != Tok::kRule) return Unexpected("a template parameter (a lowercase name)");
        d.params.push_back(Next().text);
      } while (Accept(Tok::kComma));
      if (absl::Status st = Expect(Tok::kRBrace, "'}'"); !st.ok()) return st;
    }
    auto prio = Priority();
    if (!prio.ok()) return prio.status();
    d.priority = *prio;
    if (absl::Status st = Expect(Tok::kColon, "':'"); !st.ok()) return st;
    auto body = Expansions(0, d.terminal);
    if (!body.ok()) return body.status();
    d.body = *body;
    if (absl::Status st = EndStatement(); !st.ok()) return st;
    if (mode == Mode::kNew) return Declare(std::move(d));
    auto it = by_name.find(d.name);
    const char* what = mode == Mode::kOverride ? "%override" : "%extend";
    if (it == by_name.end()) {
      return ErrorAt(directive, absl::StrCat(what, " of '", d.name, "', which is not defined"));
    }
    struct Definition& old = defs[it->second];
    if (old.params.size() != d.params.size()) {
      return ErrorAt(directive,
                     absl::StrCat(what, " of '", d.name, "' with other template parameters"));
    }
    if (mode == Mode::kOverride) {
      old.body = d.body;
      old.common_regex = nullptr;
      old.priority = d.priority;
      old.params = d.params;
      return absl::OkStatus();
    }
    if (!old.body) {
      return ErrorAt(directive, absl::StrCat("%extend of the imported terminal '", d.name,
                                             "' is not supported"));
    }
    for (uint32_t alt : nodes[*d.body].kids) nodes[*old.body].kids.push_back(alt);
    return absl::OkStatus();
  }

  absl::Status Directive() {
    const Token& dir = Next();
    if (dir.text == "%ignore") {
      auto body = Expansions(0, true);
      if (!body.ok()) return body.status();
      ignores.push_back({*body, dir.pos});
      return EndStatement();
    }
    if (dir.text == "%import") return Import(dir.pos);
    if (dir.text == "%declare") {
      return ErrorAt(dir.pos,
                     "%declare is not supported: declared terminals need an external lexer");
    }
    if (dir.text == "%override") return ParseDefinition(Mode::kOverride, dir.pos);
    if (dir.text == "%extend") return ParseDefinition(Mode::kExtend, dir.pos);
    return ErrorAt(dir.pos, absl::StrCat("unknown directive '", dir.text, "'"));
  }

  absl::Status ImportOne(const Token& name, std::string alias, SourcePos at) {
    if (name.kind != Tok::kTerminal) {
      return ErrorAt(name.pos, absl::StrCat("common defines no rule '", name.text, "'"));
    }
    const char* re = CommonRegex(name.text);
    if (re == nullptr) {
      return ErrorAt(name.pos, absl::StrCat("common defines no terminal '", name.text, "'"));
    }
    struct Definition d;
    d.name = alias.empty() ? name.text : alias;
    d.terminal = true;
    d.pos = at;
    d.common_regex = re;
    if (by_name.count(d.name) && defs[by_name[d.name]].common_regex == re) return absl::OkStatus();
    return Declare(std::move(d));
  }

  absl::Status Import(SourcePos at) {
    if (Peek().kind == Tok::kDot)
      return ErrorAt(Peek().pos, "relative %import is not supported (only common)");
    if (Peek().kind != Tok::kRule || Peek().text != "common") {
      if (Peek().kind == Tok::kRule || Peek().kind == Tok::kTerminal) {
        return ErrorAt(Peek().pos, absl::StrCat("%import from '", Peek().text,
                                                "' is not supported (only common)"));
      }
      return Unexpected("a module name after %import");
    }
    ++i_;
    if (Accept(Tok::kLParen)) {
      do {
        if (Peek().kind != Tok::kRule && Peek().kind != Tok::kTerminal) return Unexpected("a name");
        const Token& n = Next();
        if (absl::Status st = ImportOne(n, "", n.pos); !st.ok()) return st;
      } while (Accept(Tok::kComma));
      if (absl::Status st = Expect(Tok::kRParen, "')'"); !st.ok()) return st;
      return EndStatement();
    }
    if (absl::Status st = Expect(Tok::kDot, "'.' after common"); !st.ok()) return st;
    if (Peek().kind != Tok::kRule && Peek().kind != Tok::kTerminal)
      return Unexpected("a name after 'common.'");
    const Token& n = Next();
    if (Peek().kind == Tok::kDot)
      return ErrorAt(Peek().pos, "nested module paths are not supported");
    std::string alias;
    if (Accept(Tok::kArrow)) {
      if (Peek().kind != Tok::kTerminal) return Unexpected("a terminal name after '->'");
      alias = Next().text;
    }
    if (absl::Status st = ImportOne(n, alias, n.pos); !st.ok()) return st;
    return EndStatement();
  }

  absl::Status Deeper(int depth) {
    if (depth >= static_cast<int>(Nesting(limits_))) {
      return absl::ResourceExhaustedError(absl::StrCat(At(Peek().pos),
                                                       "groups nested too deeply (more than ",
                                                       Nesting(limits_), " levels: max_nesting)"));
    }
    return absl::OkStatus();
  }

  // expansions: alias ('|' alias)*; returns a kAlt node.
  absl::StatusOr<uint32_t> Expansions(int depth, bool terminal) {
    Node alt;
    alt.kind = Node::Kind::kAlt;
    alt.pos = Peek().pos;
    do {
      auto seq = Expansion(depth, terminal);
      if (!seq.ok()) return seq.status();
      alt.kids.push_back(*seq);
      if (Peek().kind == Tok::kArrow) {
        if (terminal) return ErrorAt(Peek().pos, "aliases (->) are not allowed in terminals");
        ++i_;
        if (Peek().kind != Tok::kRule) return Unexpected("a rule name after '->'");
        ++i_;
      }
    } while (Accept(Tok::kOr));
    return Add(std::move(alt));
  }

  absl::StatusOr<uint32_t> Expansion(int depth, bool terminal) {
    Node seq;
    seq.kind = Node::Kind::kSeq;
    seq.pos = Peek().pos;
    while (true) {
      Tok k = Peek().kind;
      if (k != Tok::kLParen && k != Tok::kLBracket && k != Tok::kString && k != Tok::kRegexp &&
          k != Tok::kRule && k != Tok::kTerminal) {
        break;
      }
      auto e = Expr(depth, terminal);
      if (!e.ok()) return e.status();
      seq.kids.push_back(*e);
    }
    return Add(std::move(seq));
  }

  absl::StatusOr<uint32_t> Expr(int depth, bool terminal) {
    SourcePos p = Peek().pos;
    auto atom = Atom(depth, terminal);
    if (!atom.ok()) return atom.status();
    Node rep;
    rep.kind = Node::Kind::kRepeat;
    rep.pos = p;
    rep.kids = {*atom};
    if (Peek().kind == Tok::kOp) {
      char op = Next().text[0];
      rep.min = op == '+' ? 1 : 0;
      rep.max = op == '?' ? 1 : kUnbounded;
    } else if (Accept(Tok::kTilde)) {
      if (Peek().kind != Tok::kNumber) return Unexpected("a count after '~'");
      const Token& a = Next();
      auto count = [&](const Token& t) -> absl::StatusOr<uint32_t> {
        if (t.text[0] == '-') return ErrorAt(t.pos, "negative repeat count");
        std::string digits = t.text[0] == '+' ? t.text.substr(1) : t.text;
        if (digits.size() > 9 || std::stoul(digits) > limits_.max_repeat) {
          return absl::ResourceExhaustedError(absl::StrCat(At(t.pos), "repeat count ", t.text,
                                                           " is over max_repeat (",
                                                           limits_.max_repeat, ")"));
        }
        return static_cast<uint32_t>(std::stoul(digits));
      };
      auto lo = count(a);
      if (!lo.ok()) return lo.status();
      rep.min = rep.max = *lo;
      if (Accept(Tok::kDotDot)) {
        if (Peek().kind != Tok::kNumber) return Unexpected("a count after '..'");
        const Token& b = Next();
        auto hi = count(b);
        if (!hi.ok()) return hi.status();
        if (*hi < *lo) return ErrorAt(b.pos, absl::StrCat("bad repeat range ", *lo, "..", *hi));
        rep.max = *hi;
      }
    } else {
      return atom;
    }
    return Add(std::move(rep));
  }

  absl::StatusOr<uint32_t> Atom(int depth, bool terminal) {
    const Token& t = Peek();
    SourcePos p = t.pos;
    if (t.kind == Tok::kLParen || t.kind == Tok::kLBracket) {
      if (absl::Status st = Deeper(depth); !st.ok()) return st;
      bool maybe = t.kind == Tok::kLBracket;
      ++i_;
      auto inner = Expansions(depth + 1, terminal);
      if (!inner.ok()) return inner.status();
      if (absl::Status st = Expect(maybe ? Tok::kRBracket : Tok::kRParen, maybe ? "']'" : "')'");
          !st.ok()) {
        return st;
      }
      if (!maybe) return *inner;
      Node rep;
      rep.kind = Node::Kind::kRepeat;
      rep.pos = p;
      rep.min = 0;
      rep.max = 1;
      rep.kids = {*inner};
      return Add(std::move(rep));
    }
    return Value(depth, terminal);
  }

  absl::StatusOr<uint32_t> Value(int depth, bool terminal) {
    const Token& t = Next();
    Node n;
    n.pos = t.pos;
    switch (t.kind) {
      case Tok::kString: {
        auto s = EvalEscaping(t.text, t.pos);
        if (!s.ok()) return s.status();
        if (Accept(Tok::kDotDot)) {
          if (Peek().kind != Tok::kString) return Unexpected("a string after '..'");
          const Token& e = Next();
          auto s2 = EvalEscaping(e.text, e.pos);
          if (!s2.ok()) return s2.status();
          auto one = [](const std::string& x, uint32_t* cp) {
            size_t pos = 0;
            if (x.empty()) return false;
            auto b = static_cast<unsigned char>(x[0]);
            int len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : 4;
            if (static_cast<int>(x.size()) != len) return false;
            uint32_t c = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
            for (pos = 1; pos < x.size(); ++pos)
              c = (c << 6) | (static_cast<unsigned char>(x[pos]) & 0x3F);
            *cp = c;
            return true;
          };
          if (!t.flags.empty() || !e.flags.empty()) return ErrorAt(t.pos, "a range takes no flags");
          if (!one(*s, &n.lo) || !one(*s2, &n.hi)) {
            return ErrorAt(t.pos, "a range's ends must be single characters");
          }
          if (n.hi < n.lo) return ErrorAt(t.pos, "bad character range (reversed)");
          n.kind = Node::Kind::kRange;
          return Add(std::move(n));
        }
        // Lark reads "\\" in a string as one backslash.
        std::string v;
        for (size_t k = 0; k < s->size(); ++k) {
          v += (*s)[k];
          if ((*s)[k] == '\\' && k + 1 < s->size() && (*s)[k + 1] == '\\') ++k;
        }
        if (v.empty()) return ErrorAt(t.pos, "empty terminals are not allowed (\"\")");
        n.kind = Node::Kind::kString;
        n.text = std::move(v);
        n.flags = t.flags;
        return Add(std::move(n));
      }
      case Tok::kRegexp: {
        if (t.text.find('\n') != std::string::npos && t.flags.find('x') == std::string::npos) {
          return ErrorAt(t.pos, "newlines in a regex need the x (verbose) flag");
        }
        auto s = EvalEscaping(t.text, t.pos);
        if (!s.ok()) return s.status();
        if (s->empty()) return ErrorAt(t.pos, "empty regex");
        n.kind = Node::Kind::kRegex;
        n.raw = absl::StrCat("/", t.text, "/", t.flags);
        n.text = std::move(*s);
        n.flags = t.flags;
        return Add(std::move(n));
      }
      case Tok::kRule:
      case Tok::kTerminal:
        n.text = t.text;
        if (t.kind == Tok::kRule && Peek().kind == Tok::kLBrace) {
          if (terminal) return ErrorAt(t.pos, "templates cannot be used in terminals");
          if (absl::Status st = Deeper(depth); !st.ok()) return st;
          ++i_;
          n.kind = Node::Kind::kTemplateUse;
          do {
            if (Peek().kind == Tok::kLParen || Peek().kind == Tok::kLBracket) {
              return Unexpected("a name, string or regex as a template argument");
            }
            auto arg = Value(depth + 1, terminal);
            if (!arg.ok()) return arg.status();
            n.kids.push_back(*arg);
          } while (Accept(Tok::kComma));
          if (absl::Status st = Expect(Tok::kRBrace, "'}'"); !st.ok()) return st;
          return Add(std::move(n));
        }
        n.kind = Node::Kind::kName;
        return Add(std::move(n));
      default:
        --i_;
        return Unexpected("a name, string, regex, '(' or '['");
    }
  }

  std::vector<Token> t_;
  size_t i_ = 0;
  const GrammarLimits& limits_;
};

// -------------------------------------------------------------- lowering --

class Lowerer {
 public:
  Lowerer(const Parser& p, const GrammarLimits& limits) : p_(p), limits_(limits) {}

  absl::StatusOr<Grammar> Run(std::string_view start) {
    // Every named terminal compiles (as Lark does), used or not.
    for (const auto& d : p_.defs) {
      if (!d.terminal) continue;
      auto r = TerminalRegex(d.name, d.pos, 0);
      if (!r.ok()) return r.status();
    }
    // Rules keep their definition order; templates instantiate on use.
    for (const auto& d : p_.defs) {
      if (d.terminal || !d.params.empty()) continue;
      rule_ids_[d.name] = static_cast<uint32_t>(g_.rules.size());
      Rule r;
      r.name = d.name;
      r.where = d.pos;
      g_.rules.push_back(std::move(r));
    }
    auto s = p_.by_name.find(std::string(start));
    if (s == p_.by_name.end() || p_.defs[s->second].terminal ||
        !p_.defs[s->second].params.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("no start rule '", std::string(start), "' in the grammar"));
    }
    g_.start = rule_ids_[std::string(start)];
    if (absl::Status st = CheckRuleCount(); !st.ok()) return st;
    for (const auto& d : p_.defs) {
      if (d.terminal || !d.params.empty()) continue;
      pending_.push_back({rule_ids_[d.name], *d.body, nullptr});
    }
    while (!pending_.empty()) {
      Pending job = pending_.front();
      pending_.pop_front();
      std::vector<std::vector<Symbol>> alts;
      std::string origin = g_.rules[job.rule].name;
      if (absl::Status st = LowerAlts(job.body, job.env, origin, 0, &alts); !st.ok()) return st;
      if (absl::Status st = AddAlternatives(job.rule, std::move(alts)); !st.ok()) return st;
    }
    for (const auto& [node, pos] : p_.ignores) {
      auto id = IgnoreTerminal(node, pos);
      if (!id.ok()) return id.status();
      bool seen = false;
      for (uint32_t x : g_.ignore) seen |= x == *id;
      if (!seen) g_.ignore.push_back(*id);
    }
    if (absl::Status st = Normalize(&g_); !st.ok()) return st;
    return std::move(g_);
  }

 private:
  // A template instantiation's parameter bindings: a parameter names an
  // argument node, read in the environment of the use.
  struct Env {
    std::map<std::string, std::pair<uint32_t, const Env*>> bind;
  };
  struct Pending {
    uint32_t rule;
    uint32_t body;
    const Env* env;
  };
  // A terminal's regex, and its text when it is one fixed string.
  struct Piece {
    std::string regex;
    std::optional<std::string> literal;
  };

  const Node& N(uint32_t i) const { return p_.nodes[i]; }

  absl::Status CheckRuleCount() {
    if (g_.rules.size() > limits_.max_rules) {
      return absl::ResourceExhaustedError(absl::StrCat("the grammar lowers to more than ",
                                                       limits_.max_rules, " rules (max_rules)"));
    }
    return absl::OkStatus();
  }

  absl::Status AddAlternatives(uint32_t rule, std::vector<std::vector<Symbol>> alts) {
    for (const auto& a : alts) symbols_ += a.size();
    if (symbols_ > limits_.max_symbols) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the grammar lowers to more than ", limits_.max_symbols, " symbols (max_symbols)"));
    }
    auto& dst = g_.rules[rule].alternatives;
    for (auto& a : alts) dst.push_back(std::move(a));
    return absl::OkStatus();
  }

  absl::StatusOr<uint32_t> NewRule(const std::string& origin, SourcePos pos) {
    Rule r;
    r.name = absl::StrCat(origin, "__", ++helper_count_[origin]);
    r.where = pos;
    g_.rules.push_back(std::move(r));
    if (absl::Status st = CheckRuleCount(); !st.ok()) return st;
    return static_cast<uint32_t>(g_.rules.size() - 1);
  }

  absl::Status Deeper(int depth, SourcePos pos) {
    if (depth > 4 * static_cast<int>(Nesting(limits_)) + 64) {
      return absl::ResourceExhaustedError(absl::StrCat(
          At(pos), "definitions nested too deeply (max_nesting ", Nesting(limits_), ")"));
    }
    return absl::OkStatus();
  }

  // ---- terminals

  absl::StatusOr<Piece> TerminalRegex(const std::string& name, SourcePos use, int depth) {
    if (auto it = term_cache_.find(name); it != term_cache_.end()) return it->second;
    auto d = p_.by_name.find(name);
    if (d == p_.by_name.end())
      return ErrorAt(use, absl::StrCat("terminal '", name, "' is not defined"));
    const Definition& def = p_.defs[d->second];
    if (def.common_regex != nullptr) {
      Piece piece{def.common_regex, std::nullopt};
      if (name == "CR") piece.literal = "\r";
      if (name == "LF") piece.literal = "\n";
      term_cache_[name] = piece;
      return piece;
    }
    if (in_progress_.count(name)) {
      return ErrorAt(def.pos, absl::StrCat("terminal '", name, "' is defined in terms of itself"));
    }
    if (absl::Status st = Deeper(depth, use); !st.ok()) return st;
    in_progress_[name] = true;
    auto piece = BuildRegex(*def.body, depth + 1);
    in_progress_.erase(name);
    if (!piece.ok()) return piece.status();
    term_cache_[name] = *piece;
    return piece;
  }

  absl::Status CheckSize(const std::string& regex, SourcePos pos) {
    if (regex.size() > kMaxTerminalRegexBytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat(At(pos), "a terminal expands to a regex over ", kMaxTerminalRegexBytes,
                       " bytes (the regex pattern limit)"));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<Piece> BuildRegex(uint32_t id, int depth) {
    const Node& n = N(id);
    if (absl::Status st = Deeper(depth, n.pos); !st.ok()) return st;
    switch (n.kind) {
      case Node::Kind::kAlt: {
        if (n.kids.size() == 1) return BuildRegex(n.kids[0], depth + 1);
        Piece out{"(?:", std::nullopt};
        for (size_t k = 0; k < n.kids.size(); ++k) {
          auto p = BuildRegex(n.kids[k], depth + 1);
          if (!p.ok()) return p.status();
          if (k) out.regex += '|';
          out.regex += p->regex;
          if (absl::Status st = CheckSize(out.regex, n.pos); !st.ok()) return st;
        }
        out.regex += ')';
        return out;
      }
      case Node::Kind::kSeq: {
        Piece out{"", std::string()};
        for (uint32_t k : n.kids) {
          auto p = BuildRegex(k, depth + 1);
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
      case Node::Kind::kRepeat: {
        auto p = BuildRegex(n.kids[0], depth + 1);
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
      case Node::Kind::kName: {
        auto d = p_.by_name.find(n.text);
        if (d != p_.by_name.end() && !p_.defs[d->second].terminal) {
          return ErrorAt(n.pos, absl::StrCat("terminals cannot contain rules ('", n.text, "')"));
        }
        if (d == p_.by_name.end() && n.text[0] >= 'a') {
          return ErrorAt(n.pos, absl::StrCat("terminals cannot contain rules ('", n.text, "')"));
        }
        auto p = TerminalRegex(n.text, n.pos, depth + 1);
        if (!p.ok()) return p.status();
        return Piece{absl::StrCat("(?:", p->regex, ")"), p->literal};
      }
      case Node::Kind::kString:
        if (n.flags == "i") return Piece{LiteralRegex(n.text, true), std::nullopt};
        return Piece{LiteralRegex(n.text, false), n.text};
      case Node::Kind::kRegex: {
        // Lark applies flags by wrapping, (?f:pattern) once per flag letter,
        // and compiles that; translating the same text keeps its quirks (an
        // unterminated x-mode comment swallows the closing parenthesis).
        std::string wrapped = n.text;
        for (char c : n.flags) wrapped = absl::StrCat("(?", std::string(1, c), ":", wrapped, ")");
        size_t prefix = 4 * n.flags.size();
        size_t off = 0;
        auto r = TranslatePythonRegex(wrapped, PythonRegexFlags{}, &off);
        if (!r.ok()) {
          return ErrorAt(n.pos, absl::StrCat("regex ", n.raw, ": ", r.status().message(),
                                             " at offset ", off > prefix ? off - prefix : 0));
        }
        return Piece{absl::StrCat("(?:", *r, ")"), std::nullopt};
      }
      case Node::Kind::kRange:
        return Piece{absl::StrFormat("[\\x{%X}-\\x{%X}]", n.lo, n.hi), std::nullopt};
      case Node::Kind::kTemplateUse:
        return ErrorAt(n.pos, "templates cannot be used in terminals");
    }
    return ErrorAt(n.pos, "internal: unknown node");
  }

  // Checks a finished terminal regex with maskd's parser: it must parse and
  // must not match the empty string.
  absl::Status CheckTerminal(const Terminal& t) {
    auto re = Regex::Parse(t.regex);
    if (!re.ok()) {
      return absl::Status(re.status().code(), absl::StrCat(At(t.where), "terminal ", t.name, ": ",
                                                           re.status().message()));
    }
    if (Nullable(re->root())) {
      return ErrorAt(t.where,
                     absl::StrCat("terminal ", t.name,
                                  " matches the empty string (Lark's Earley parser refuses "
                                  "zero-width terminals)"));
    }
    return absl::OkStatus();
  }

  static bool Nullable(const RegexNode& n) {
    switch (n.kind) {
      case RegexNode::Kind::kEmpty:
        return true;
      case RegexNode::Kind::kSet:
        return false;
      case RegexNode::Kind::kConcat:
        for (const auto& c : n.children) {
          if (!Nullable(*c)) return false;
        }
        return true;
      case RegexNode::Kind::kAlternate:
        for (const auto& c : n.children) {
          if (Nullable(*c)) return true;
        }
        return false;
      case RegexNode::Kind::kRepeat:
        return n.min == 0 || Nullable(*n.children[0]);
    }
    return false;
  }

  absl::StatusOr<uint32_t> AddTerminal(const std::string& key, Terminal t) {
    if (auto it = term_ids_.find(key); it != term_ids_.end()) return it->second;
    if (absl::Status st = CheckTerminal(t); !st.ok()) return st;
    if (g_.terminals.size() >= limits_.max_terminals) {
      return absl::ResourceExhaustedError(absl::StrCat(At(t.where), "the grammar has more than ",
                                                       limits_.max_terminals,
                                                       " terminals (max_terminals)"));
    }
    g_.terminals.push_back(std::move(t));
    uint32_t id = static_cast<uint32_t>(g_.terminals.size() - 1);
    term_ids_[key] = id;
    return id;
  }

  absl::StatusOr<uint32_t> NamedTerminal(const std::string& name, SourcePos use) {
    auto piece = TerminalRegex(name, use, 0);
    if (!piece.ok()) return piece.status();
    const Definition& def = p_.defs[p_.by_name.at(name)];
    Terminal t;
    t.name = name;
    t.regex = piece->regex;
    t.literal = piece->literal;
    t.priority = def.priority;
    t.where = def.pos;
    return AddTerminal(absl::StrCat("N", name), std::move(t));
  }

  // A string, regex or range written in a rule or %ignore.
  absl::StatusOr<uint32_t> AnonymousTerminal(uint32_t id) {
    const Node& n = N(id);
    auto piece = BuildRegex(id, 0);
    if (!piece.ok()) return piece.status();
    Terminal t;
    switch (n.kind) {
      case Node::Kind::kString:
        t.name = absl::StrCat("\"", n.text, "\"", n.flags);
        break;
      case Node::Kind::kRegex:
        t.name = n.raw;
        break;
      default:
        t.name = absl::StrFormat("\"\\x{%X}\"..\"\\x{%X}\"", n.lo, n.hi);
        break;
    }
    t.regex = piece->regex;
    t.literal = piece->literal;
    t.where = n.pos;
    std::string key = absl::StrCat("A", t.name);
    return AddTerminal(key, std::move(t));
  }

  absl::StatusOr<uint32_t> IgnoreTerminal(uint32_t alt, SourcePos pos) {
    // A single name or literal is that terminal; anything else becomes one.
    const Node& a = N(alt);
    if (a.kids.size() == 1 && N(a.kids[0]).kids.size() == 1) {
      const Node& item = N(N(a.kids[0]).kids[0]);
      if (item.kind == Node::Kind::kName) {
        auto d = p_.by_name.find(item.text);
        if (d == p_.by_name.end() || !p_.defs[d->second].terminal) {
          return ErrorAt(item.pos,
                         absl::StrCat("%ignore needs terminals; '", item.text,
                                      d == p_.by_name.end() ? "' is not defined" : "' is a rule"));
        }
        return NamedTerminal(item.text, item.pos);
      }
      if (item.kind == Node::Kind::kString || item.kind == Node::Kind::kRegex ||
          item.kind == Node::Kind::kRange) {
        return AnonymousTerminal(N(a.kids[0]).kids[0]);
      }
    }
    auto piece = BuildRegex(alt, 0);
    if (!piece.ok()) return piece.status();
    Terminal t;
    t.name = absl::StrCat("%ignore@", pos.line);
    t.regex = piece->regex;
    t.literal = piece->literal;
    t.where = pos;
    std::string key = absl::StrCat("I", t.name);
    return AddTerminal(key, std::move(t));
  }

  // ---- rules

  absl::Status LowerAlts(uint32_t alt, const Env* env, const std::string& origin, int depth,
                         std::vector<std::vector<Symbol>>* out) {
    const Node& n = N(alt);
    for (uint32_t seq : n.kids) {
      std::vector<Symbol> s;
      if (absl::Status st = LowerSeq(seq, env, origin, depth + 1, &s); !st.ok()) return st;
      out->push_back(std::move(s));
    }
    return absl::OkStatus();
  }

  absl::Status LowerSeq(uint32_t seq, const Env* env, const std::string& origin, int depth,
                        std::vector<Symbol>* out) {
    for (uint32_t item : N(seq).kids) {
      if (absl::Status st = LowerItem(item, env, origin, depth + 1, out); !st.ok()) return st;
      if (out->size() > limits_.max_symbols) {
        return absl::ResourceExhaustedError(
            absl::StrCat(At(N(seq).pos), "the grammar lowers to more than ", limits_.max_symbols,
                         " symbols (max_symbols)"));
      }
    }
    return absl::OkStatus();
  }

  absl::Status LowerItem(uint32_t id, const Env* env, const std::string& origin, int depth,
                         std::vector<Symbol>* out) {
    const Node& n = N(id);
    if (absl::Status st = Deeper(depth, n.pos); !st.ok()) return st;
    switch (n.kind) {
      case Node::Kind::kName: {
        if (env != nullptr) {
          if (auto b = env->bind.find(n.text); b != env->bind.end()) {
            return LowerItem(b->second.first, b->second.second, origin, depth + 1, out);
          }
        }
        auto d = p_.by_name.find(n.text);
        if (d == p_.by_name.end()) {
          return ErrorAt(n.pos,
                         absl::StrCat(n.text[0] >= 'a' || (n.text[0] == '_' && n.text.size() > 1 &&
                                                           n.text[1] >= 'a')
                                          ? "rule '"
                                          : "terminal '",
                                      n.text, "' is used but not defined"));
        }
        const Definition& def = p_.defs[d->second];
        if (def.terminal) {
          auto t = NamedTerminal(n.text, n.pos);
          if (!t.ok()) return t.status();
          out->push_back(Symbol::Terminal(*t));
        } else if (!def.params.empty()) {
          return ErrorAt(n.pos, absl::StrCat("template '", n.text, "' used without arguments"));
        } else {
          out->push_back(Symbol::Rule(rule_ids_.at(n.text)));
        }
        return absl::OkStatus();
      }
      case Node::Kind::kString:
      case Node::Kind::kRegex:
      case Node::Kind::kRange: {
        auto t = AnonymousTerminal(id);
        if (!t.ok()) return t.status();
        out->push_back(Symbol::Terminal(*t));
        return absl::OkStatus();
      }
      case Node::Kind::kSeq:
        return LowerSeq(id, env, origin, depth + 1, out);
      case Node::Kind::kAlt: {
        if (n.kids.size() == 1) return LowerSeq(n.kids[0], env, origin, depth + 1, out);
        auto r = NewRule(origin, n.pos);
        if (!r.ok()) return r.status();
        std::vector<std::vector<Symbol>> alts;
        if (absl::Status st = LowerAlts(id, env, origin, depth + 1, &alts); !st.ok()) return st;
        if (absl::Status st = AddAlternatives(*r, std::move(alts)); !st.ok()) return st;
        out->push_back(Symbol::Rule(*r));
        return absl::OkStatus();
      }
      case Node::Kind::kRepeat: {
        std::vector<Symbol> x;
        if (absl::Status st = LowerItem(n.kids[0], env, origin, depth + 1, &x); !st.ok()) return st;
        for (uint32_t k = 0; k < n.min; ++k) {
          out->insert(out->end(), x.begin(), x.end());
          if (out->size() > limits_.max_symbols) {
            return absl::ResourceExhaustedError(
                absl::StrCat(At(n.pos), "the grammar lowers to more than ", limits_.max_symbols,
                             " symbols (max_symbols)"));
          }
        }
        if (n.max == n.min) return absl::OkStatus();
        if (n.max == kUnbounded) {
          // R -> ε | R x  (left recursive: what an Earley engine handles best)
          auto r = NewRule(origin, n.pos);
          if (!r.ok()) return r.status();
          std::vector<Symbol> rec = {Symbol::Rule(*r)};
          rec.insert(rec.end(), x.begin(), x.end());
          if (absl::Status st = AddAlternatives(*r, {{}, rec}); !st.ok()) return st;
          out->push_back(Symbol::Rule(*r));
          return absl::OkStatus();
        }
        // Up to max - min more: R_k -> ε | x R_{k-1}, R_1 -> ε | x.
        std::optional<uint32_t> inner;
        for (uint32_t k = 0; k < n.max - n.min; ++k) {
          auto r = NewRule(origin, n.pos);
          if (!r.ok()) return r.status();
          std::vector<Symbol> more = x;
          if (inner) more.push_back(Symbol::Rule(*inner));
          if (absl::Status st = AddAlternatives(*r, {{}, more}); !st.ok()) return st;
          inner = *r;
        }
        out->push_back(Symbol::Rule(*inner));
        return absl::OkStatus();
      }
      case Node::Kind::kTemplateUse: {
        auto r = Instantiate(id, env, depth + 1);
        if (!r.ok()) return r.status();
        out->push_back(Symbol::Rule(*r));
        return absl::OkStatus();
      }
    }
    return ErrorAt(n.pos, "internal: unknown node");
  }

  // A canonical text for a template argument (its bindings resolved).
  absl::StatusOr<std::string> Canonical(uint32_t id, const Env* env, int depth) {
    const Node& n = N(id);
    if (absl::Status st = Deeper(depth, n.pos); !st.ok()) return st;
    switch (n.kind) {
      case Node::Kind::kName:
        if (env != nullptr) {
          if (auto b = env->bind.find(n.text); b != env->bind.end()) {
            return Canonical(b->second.first, b->second.second, depth + 1);
          }
        }
        return n.text;
      case Node::Kind::kString:
        return absl::StrCat("\"", n.text, "\"", n.flags);
      case Node::Kind::kRegex:
        return absl::StrCat("/", n.text, "/", n.flags);
      case Node::Kind::kRange:
        return absl::StrFormat("\"\\x{%X}\"..\"\\x{%X}\"", n.lo, n.hi);
      case Node::Kind::kTemplateUse: {
        std::vector<std::string> args;
        for (uint32_t a : n.kids) {
          auto c = Canonical(a, env, depth + 1);
          if (!c.ok()) return c.status();
          args.push_back(*c);
        }
        return absl::StrCat(n.text, "{", absl::StrJoin(args, ","), "}");
      }
      default:
        return ErrorAt(n.pos, "bad template argument");
    }
  }

  absl::StatusOr<uint32_t> Instantiate(uint32_t use, const Env* env, int depth) {
    const Node& n = N(use);
    auto d = p_.by_name.find(n.text);
    if (d == p_.by_name.end())
      return ErrorAt(n.pos, absl::StrCat("template '", n.text, "' is not defined"));
    const Definition& def = p_.defs[d->second];
    if (def.params.empty()) return ErrorAt(n.pos, absl::StrCat("'", n.text, "' is not a template"));
    if (def.params.size() != n.kids.size()) {
      return ErrorAt(n.pos, absl::StrCat("template '", n.text, "' takes ", def.params.size(),
                                         " arguments, got ", n.kids.size()));
    }
    auto key = Canonical(use, env, depth);
    if (!key.ok()) return key.status();
    if (auto it = instances_.find(*key); it != instances_.end()) return it->second;
    envs_.push_back(std::make_unique<Env>());
    Env* e = envs_.back().get();
    for (size_t k = 0; k < def.params.size(); ++k) e->bind[def.params[k]] = {n.kids[k], env};
    Rule r;
    r.name = *key;
    r.where = n.pos;
    g_.rules.push_back(std::move(r));
    if (absl::Status st = CheckRuleCount(); !st.ok()) return st;
    uint32_t id = static_cast<uint32_t>(g_.rules.size() - 1);
    instances_[*key] = id;
    pending_.push_back({id, *def.body, e});
    return id;
  }

  const Parser& p_;
  const GrammarLimits& limits_;
  Grammar g_;
  size_t symbols_ = 0;
  absl::flat_hash_map<std::string, Piece> term_cache_;
  absl::flat_hash_map<std::string, bool> in_progress_;
  absl::flat_hash_map<std::string, uint32_t> term_ids_;
  absl::flat_hash_map<std::string, uint32_t> rule_ids_;
  absl::flat_hash_map<std::string, uint32_t> helper_count_;
  absl::flat_hash_map<std::string, uint32_t> instances_;
  std::deque<Pending> pending_;
  std::vector<std::unique_ptr<Env>> envs_;
};

// The position of the first byte that is not valid UTF-8, if any.
std::optional<SourcePos> InvalidUtf8(std::string_view s) {
  uint32_t line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < s.size();) {
    auto b = static_cast<unsigned char>(s[i]);
    int len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    bool ok = len > 0 && i + len <= s.size() && !(len == 2 && b < 0xC2);
    uint32_t c = len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
    for (int k = 1; ok && k < len; ++k) {
      auto x = static_cast<unsigned char>(s[i + k]);
      ok = (x & 0xC0) == 0x80;
      c = (c << 6) | (x & 0x3F);
    }
    if (ok && len == 3) ok = c >= 0x800 && !(c >= 0xD800 && c <= 0xDFFF);
    if (ok && len == 4) ok = c >= 0x10000 && c <= 0x10FFFF;
    if (!ok) return SourcePos{line, static_cast<uint32_t>(i - line_start + 1)};
    if (b == '\n') {
      ++line;
      line_start = i + 1;
    }
    i += len;
  }
  return std::nullopt;
}

}  // namespace

absl::StatusOr<Grammar> ParseLark(std::string_view text, const GrammarLimits& limits,
                                  std::string_view start) {
  if (text.size() > limits.max_text_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat("grammar text is ", text.size(),
                                                     " bytes, over max_text_bytes (",
                                                     limits.max_text_bytes, ")"));
  }
  if (auto bad = InvalidUtf8(text)) return ErrorAt(*bad, "invalid UTF-8");
  auto tokens = Lexer(text).Run();
  if (!tokens.ok()) return tokens.status();
  Parser parser(std::move(*tokens), limits);
  if (absl::Status st = parser.Run(); !st.ok()) return st;
  return Lowerer(parser, limits).Run(start);
}

}  // namespace maskd::grammar
