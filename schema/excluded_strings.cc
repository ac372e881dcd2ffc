// The JSON strings whose decoded text is none of a list of words, as a regex
// over the encoded content (ExcludedStringsRegex): a complement over a trie
// of the words' codepoints, every spelling of a character leading to the
// same child.
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_join.h"
#include "automaton/codepoint_set.h"
#include "automaton/regex_text.h"
#include "automaton/utf8.h"
#include "schema/internal/json_schema_internal.h"
#include "schema/internal/json_string_class.h"

namespace maskd::json_schema_internal {
namespace {

// Decodes UTF-8 (valid, as nlohmann::json produces it; a stray byte reads
// as the codepoint of its value).
std::vector<uint32_t> DecodeCodepoints(std::string_view s) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < s.size();) {
    std::optional<uint32_t> cp = DecodeUtf8(s, &i);
    out.push_back(cp ? *cp : static_cast<unsigned char>(s[i++]));
  }
  return out;
}

// A trie over decoded characters (codepoints).
struct CpTrie {
  std::map<uint32_t, CpTrie> kids;
  bool terminal = false;
};

char ShortEscape(uint32_t cp) {
  switch (cp) {
    case '"': return '"';
    case '\\': return '\\';
    case '/': return '/';
    case 0x08: return 'b';
    case 0x0C: return 'f';
    case '\n': return 'n';
    case '\r': return 'r';
    case '\t': return 't';
    default: return 0;
  }
}

// Regex for one \uXXXX code `v` (both letter cases), digits only.
std::string HexCode(uint32_t v) { return HexRange(v, v); }

// Regex for 4-hex-digit codes not in `codes` (both letter cases), surrogate
// halves included; never empty for the small sets used here.
std::string HexComplement(const std::set<uint32_t>& codes) {
  CodepointSet free = CodepointSet::Range(0, 0xFFFF);
  for (uint32_t c : codes) free.Subtract(CodepointSet::Range(c, c));
  std::vector<std::string> alts;
  for (auto& [lo, hi] : free.ranges()) alts.push_back(HexRange(lo, hi));
  if (alts.size() == 1) return alts[0];
  return "(?:" + absl::StrJoin(alts, "|") + ")";
}

std::string Utf8(uint32_t cp) {
  std::string s;
  AppendUtf8(&s, cp);
  return s;
}

// Strings (as sequences of JSON units: a raw character, a short escape or a
// \uXXXX escape) that, from trie node `n`, do not spell one of its words.
// Every spelling of a character leads to the same child, so a string is
// rejected exactly when it decodes to an excluded word.
std::string CompNode(const CpTrie& n) {
  const std::string any = JsonCharRegex() + "*";
  std::vector<std::string> alts;
  // First units that start no spelling of a child: any continuation.
  CodepointSet raw = CodepointSet::Range(0x20, kMaxCodepoint);
  raw.Subtract(CodepointSet::Range('"', '"'));
  raw.Subtract(CodepointSet::Range('\\', '\\'));
  raw.Subtract(CodepointSet::Range(0xD800, 0xDFFF));
  std::string short_free = "\"\\/bfnrt";
  std::set<uint32_t> u_used;
  std::map<uint32_t, std::vector<std::pair<uint32_t, const CpTrie*>>> astral;  // high -> (low, kid)
  for (auto& [cp, kid] : n.kids) {
    if (cp >= 0x20 && cp != '"' && cp != '\\' && cp <= kMaxCodepoint) {
      raw.Subtract(CodepointSet::Range(cp, cp));
    }
    if (char e = ShortEscape(cp)) short_free.erase(short_free.find(e), 1);
    if (cp < 0x10000) {
      u_used.insert(cp);
    } else {
      uint32_t v = cp - 0x10000;
      uint32_t hi = 0xD800 + (v >> 10), lo = 0xDC00 + (v & 0x3FF);
      u_used.insert(hi);
      astral[hi].emplace_back(lo, &kid);
    }
  }
  if (!raw.empty()) alts.push_back(ClassOf(raw) + any);
  if (!short_free.empty()) {
    alts.push_back("\\\\[" + RegexClassEscape(short_free) + "]" + any);
  }
  alts.push_back("\\\\u" + HexComplement(u_used) + any);
  // Each child: every spelling, then the rest of the word's complement.
  for (auto& [cp, kid] : n.kids) {
    std::vector<std::string> sp;
    if (cp >= 0x20 && cp != '"' && cp != '\\') sp.push_back(RegexEscape(Utf8(cp)));
    if (char e = ShortEscape(cp)) sp.push_back("\\\\" + RegexEscape(std::string(1, e)));
    if (cp < 0x10000) sp.push_back("\\\\u" + HexCode(cp));
    std::string spell = sp.size() == 1 ? sp[0] : "(?:" + absl::StrJoin(sp, "|") + ")";
    alts.push_back(spell + CompNode(kid));
  }
  // Astral children written as surrogate pairs share their high half.
  for (auto& [hi, lows] : astral) {
    std::set<uint32_t> low_codes;
    std::vector<std::string> after;
    for (auto& [lo, kid] : lows) {
      low_codes.insert(lo);
      after.push_back("\\\\u" + HexCode(lo) + CompNode(*kid));
    }
    after.push_back("\\\\u" + HexComplement(low_codes) + any);
    after.push_back("(?:[^\"\\\\\\x00-\\x1f]|\\\\[\"\\\\/bfnrt])" + any);
    alts.push_back("\\\\u" + HexCode(hi) + "(?:" + absl::StrJoin(after, "|") + ")?");
  }
  std::string r = "(?:" + absl::StrJoin(alts, "|") + ")";
  if (!n.terminal) r += "?";
  return r;
}

}  // namespace

std::string ExcludedStringsRegex(const std::vector<std::string>& words) {
  CpTrie root;
  for (auto& w : words) {
    CpTrie* n = &root;
    for (uint32_t cp : DecodeCodepoints(w)) n = &n->kids[cp];
    n->terminal = true;
  }
  return CompNode(root);
}

}  // namespace maskd::json_schema_internal
