// The stages of ParseLark (grammar/lark_parser.h), one file each: the lexer
// (lark_lexer.cc), Lark's evaluation of escapes in literals
// (lark_escaping.cc), the parser to a syntax tree (lark_syntax.cc), Lark's
// common terminals (lark_common.cc), the inlining of a terminal's definition
// into one regex (lark_terminal_regex.cc) and the lowering of the tree to a
// Grammar (lark_lowering.cc). Internal to maskd_grammar.
#ifndef MASKD_GRAMMAR_LARK_INTERNAL_H_
#define MASKD_GRAMMAR_LARK_INTERNAL_H_

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "automaton/regex.h"
#include "grammar/grammar.h"

namespace maskd::grammar::lark_internal {

// Group nesting never exceeds this, whatever GrammarLimits::max_nesting says:
// it bounds the parser's and the lowering's recursion (up to about 8 KiB of
// stack per level under AddressSanitizer: 1,000 levels overflowed its 8 MiB).
inline constexpr uint32_t kMaxNesting = 500;

inline uint32_t Nesting(const GrammarLimits& limits) {
  return std::min(limits.max_nesting, kMaxNesting);
}

// The largest regex one terminal may expand to (maskd's pattern limit).
inline constexpr size_t kMaxTerminalRegexBytes = RegexLimits{}.max_pattern_bytes;

// "line L, column C: " for messages.
std::string At(SourcePos p);

// INVALID_ARGUMENT "line L, column C: <what>".
absl::Status ErrorAt(SourcePos p, std::string_view what);

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

// The tokens of `text` (valid UTF-8), ending with one kEnd. Runs of
// newlines are one kNewline; a newline before a line starting with '|' is
// none.
absl::StatusOr<std::vector<Token>> Lex(std::string_view text);

// Lark's eval_escaping of a string or regex body as written (`raw`); `p` is
// where the literal starts, for messages. The result is valid UTF-8.
absl::StatusOr<std::string> EvalEscaping(std::string_view raw, SourcePos p);

// ---------------------------------------------------------------- syntax --

// The maskd regex of Lark's common terminal `name` (`%import common.NAME`),
// or nullptr when common defines none of that name.
const char* CommonRegex(std::string_view name);

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
inline constexpr uint32_t kUnbounded = RegexNode::kUnbounded;

struct Definition {
  std::string name;
  bool terminal = false;
  SourcePos pos;
  std::optional<uint32_t> body;        // a kAlt node; none for a common import
  const char* common_regex = nullptr;  // set for a common import
  int priority = 0;
  std::vector<std::string> params;  // a template's parameters
};

// A parsed grammar: every node by index, the definitions in text order.
struct Syntax {
  std::vector<Node> nodes;
  std::vector<Definition> defs;
  std::map<std::string, size_t> by_name;                // into defs
  std::vector<std::pair<uint32_t, SourcePos>> ignores;  // kAlt nodes
};

// Parses the tokens (Lex's output) into a Syntax: definitions, %import,
// %override, %extend and %ignore applied, no name resolved yet.
absl::StatusOr<Syntax> ParseSyntax(std::vector<Token> tokens, const GrammarLimits& limits);

// -------------------------------------------------------------- lowering --

// RESOURCE_EXHAUSTED when the lowering's recursion `depth` passes what
// max_nesting allows (definitions nest through names as well as groups).
absl::Status CheckLoweringDepth(int depth, SourcePos pos, const GrammarLimits& limits);

// A terminal's regex, and its text when it is one fixed string.
struct Piece {
  std::string regex;
  std::optional<std::string> literal;
};

// Terminal definitions inlined into maskd regexes: a name's definition once,
// then from a cache; a terminal defined in terms of itself is an error.
class TerminalRegexes {
 public:
  TerminalRegexes(const Syntax& syntax, const GrammarLimits& limits)
      : syntax_(syntax), limits_(limits) {}

  // The terminal `name`, referenced at `use`.
  absl::StatusOr<Piece> Named(const std::string& name, SourcePos use, int depth);
  // The subtree at node `id` of a terminal's definition (or of a literal or
  // an %ignore in a rule).
  absl::StatusOr<Piece> Build(uint32_t id, int depth);

 private:
  const Node& N(uint32_t i) const { return syntax_.nodes[i]; }
  absl::StatusOr<Piece> Alternation(const Node& n, int depth);
  absl::StatusOr<Piece> Sequence(const Node& n, int depth);
  absl::StatusOr<Piece> Repetition(const Node& n, int depth);
  absl::StatusOr<Piece> Reference(const Node& n, int depth);
  static absl::StatusOr<Piece> PythonRegex(const Node& n);

  const Syntax& syntax_;
  const GrammarLimits& limits_;
  absl::flat_hash_map<std::string, Piece> cache_;
  absl::flat_hash_map<std::string, bool> in_progress_;
};

// The Grammar the syntax stands for, started at rule `start`; Normalize has
// run on it.
absl::StatusOr<Grammar> Lower(const Syntax& syntax, const GrammarLimits& limits,
                              std::string_view start);

}  // namespace maskd::grammar::lark_internal

#endif  // MASKD_GRAMMAR_LARK_INTERNAL_H_
