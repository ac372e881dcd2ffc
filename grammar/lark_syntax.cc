// The Lark parser: tokens to a syntax tree (Syntax), with %import,
// %override, %extend and %ignore applied and no name resolved yet.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "automaton/utf8.h"
#include "grammar/lark_internal.h"

namespace maskd::grammar::lark_internal {
namespace {

class Parser {
 public:
  Parser(std::vector<Token> toks, const GrammarLimits& limits)
      : t_(std::move(toks)), limits_(limits) {}

  absl::StatusOr<Syntax> Run() && {
    while (Peek().kind != Tok::kEnd) {
      if (Peek().kind == Tok::kNewline) {
        ++i_;
        continue;
      }
      absl::Status st = Peek().kind == Tok::kDirective ? Directive() : ParseDefinition();
      if (!st.ok()) return st;
    }
    return std::move(syntax_);
  }

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
    syntax_.nodes.push_back(std::move(n));
    return static_cast<uint32_t>(syntax_.nodes.size() - 1);
  }

  absl::Status Declare(Definition d) {
    auto [it, fresh] = syntax_.by_name.emplace(d.name, syntax_.defs.size());
    if (!fresh) {
      return ErrorAt(d.pos, absl::StrCat(d.terminal ? "terminal '" : "rule '", d.name,
                                         "' is defined more than once (first at line ",
                                         syntax_.defs[it->second].pos.line, ")"));
    }
    syntax_.defs.push_back(std::move(d));
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
    Definition d;
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
    auto it = syntax_.by_name.find(d.name);
    const char* what = mode == Mode::kOverride ? "%override" : "%extend";
    if (it == syntax_.by_name.end()) {
      return ErrorAt(directive, absl::StrCat(what, " of '", d.name, "', which is not defined"));
    }
    Definition& old = syntax_.defs[it->second];
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
    for (uint32_t alt : syntax_.nodes[*d.body].kids) {
      syntax_.nodes[*old.body].kids.push_back(alt);
    }
    return absl::OkStatus();
  }

  absl::Status Directive() {
    const Token& dir = Next();
    if (dir.text == "%ignore") {
      auto body = Expansions(0, true);
      if (!body.ok()) return body.status();
      syntax_.ignores.push_back({*body, dir.pos});
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
    Definition d;
    d.name = alias.empty() ? name.text : alias;
    d.terminal = true;
    d.pos = at;
    d.common_regex = re;
    if (syntax_.by_name.count(d.name) &&
        syntax_.defs[syntax_.by_name[d.name]].common_regex == re) {
      return absl::OkStatus();
    }
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

  // A kNumber after '~' or '..': at most max_repeat.
  absl::StatusOr<uint32_t> RepeatCount(const Token& t) {
    if (t.text[0] == '-') return ErrorAt(t.pos, "negative repeat count");
    std::string digits = t.text[0] == '+' ? t.text.substr(1) : t.text;
    if (digits.size() > 9 || std::stoul(digits) > limits_.max_repeat) {
      return absl::ResourceExhaustedError(absl::StrCat(
          At(t.pos), "repeat count ", t.text, " is over max_repeat (", limits_.max_repeat, ")"));
    }
    return static_cast<uint32_t>(std::stoul(digits));
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
      auto lo = RepeatCount(a);
      if (!lo.ok()) return lo.status();
      rep.min = rep.max = *lo;
      if (Accept(Tok::kDotDot)) {
        if (Peek().kind != Tok::kNumber) return Unexpected("a count after '..'");
        const Token& b = Next();
        auto hi = RepeatCount(b);
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

  // value: a string or a range of two, a regex, a name or a template use.
  absl::StatusOr<uint32_t> Value(int depth, bool terminal) {
    const Token& t = Next();
    switch (t.kind) {
      case Tok::kString:
        return Accept(Tok::kDotDot) ? RangeValue(t) : StringValue(t);
      case Tok::kRegexp:
        return RegexValue(t);
      case Tok::kRule:
      case Tok::kTerminal:
        return NameValue(t, depth, terminal);
      default:
        --i_;
        return Unexpected("a name, string, regex, '(' or '['");
    }
  }

  // Whether `x` (valid UTF-8) is one character; its codepoint in *cp.
  static bool SingleCodepoint(std::string_view x, uint32_t* cp) {
    if (x.empty()) return false;
    size_t pos = 0;
    std::optional<uint32_t> c = DecodeUtf8(x, &pos);
    if (!c || pos != x.size()) return false;
    *cp = *c;
    return true;
  }

  // "a".."z" (the '..' read): a kRange of two single characters.
  absl::StatusOr<uint32_t> RangeValue(const Token& t) {
    auto lo = EvalEscaping(t.text, t.pos);
    if (!lo.ok()) return lo.status();
    if (Peek().kind != Tok::kString) return Unexpected("a string after '..'");
    const Token& e = Next();
    auto hi = EvalEscaping(e.text, e.pos);
    if (!hi.ok()) return hi.status();
    if (!t.flags.empty() || !e.flags.empty()) return ErrorAt(t.pos, "a range takes no flags");
    Node n;
    n.pos = t.pos;
    if (!SingleCodepoint(*lo, &n.lo) || !SingleCodepoint(*hi, &n.hi)) {
      return ErrorAt(t.pos, "a range's ends must be single characters");
    }
    if (n.hi < n.lo) return ErrorAt(t.pos, "bad character range (reversed)");
    n.kind = Node::Kind::kRange;
    return Add(std::move(n));
  }

  absl::StatusOr<uint32_t> StringValue(const Token& t) {
    auto s = EvalEscaping(t.text, t.pos);
    if (!s.ok()) return s.status();
    // Lark reads "\\" in a string as one backslash.
    std::string v;
    for (size_t k = 0; k < s->size(); ++k) {
      v += (*s)[k];
      if ((*s)[k] == '\\' && k + 1 < s->size() && (*s)[k + 1] == '\\') ++k;
    }
    if (v.empty()) return ErrorAt(t.pos, "empty terminals are not allowed (\"\")");
    Node n;
    n.pos = t.pos;
    n.kind = Node::Kind::kString;
    n.text = std::move(v);
    n.flags = t.flags;
    return Add(std::move(n));
  }

  absl::StatusOr<uint32_t> RegexValue(const Token& t) {
    if (t.text.find('\n') != std::string::npos && t.flags.find('x') == std::string::npos) {
      return ErrorAt(t.pos, "newlines in a regex need the x (verbose) flag");
    }
    auto s = EvalEscaping(t.text, t.pos);
    if (!s.ok()) return s.status();
    if (s->empty()) return ErrorAt(t.pos, "empty regex");
    Node n;
    n.pos = t.pos;
    n.kind = Node::Kind::kRegex;
    n.raw = absl::StrCat("/", t.text, "/", t.flags);
    n.text = std::move(*s);
    n.flags = t.flags;
    return Add(std::move(n));
  }

  // A name, or a template use name{arg, ...} whose arguments are values.
  absl::StatusOr<uint32_t> NameValue(const Token& t, int depth, bool terminal) {
    Node n;
    n.pos = t.pos;
    n.text = t.text;
    if (t.kind != Tok::kRule || Peek().kind != Tok::kLBrace) {
      n.kind = Node::Kind::kName;
      return Add(std::move(n));
    }
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

  std::vector<Token> t_;
  size_t i_ = 0;
  const GrammarLimits& limits_;
  Syntax syntax_;
};

}  // namespace

absl::StatusOr<Syntax> ParseSyntax(std::vector<Token> tokens, const GrammarLimits& limits) {
  return Parser(std::move(tokens), limits).Run();
}

}  // namespace maskd::grammar::lark_internal
