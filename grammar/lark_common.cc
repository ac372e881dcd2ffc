// Lark's common terminals (`%import common.NAME`), written as maskd regexes
// from what each means under Lark's dynamic_complete lexer: lazy patterns
// such as ESCAPED_STRING's and C_COMMENT's stop at the first closing
// delimiter, so they are written as the languages that shortest match gives.
#include <string_view>

#include "grammar/lark_internal.h"

namespace maskd::grammar::lark_internal {
namespace {

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

}  // namespace

const char* CommonRegex(std::string_view name) {
  for (const auto& t : kCommon) {
    if (name == t.name) return t.regex;
  }
  return nullptr;
}

}  // namespace maskd::grammar::lark_internal
