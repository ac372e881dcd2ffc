#include "tests/index/regex_corpus.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace maskd::testing {
namespace {

using nlohmann::json;

std::vector<std::string> ReadLines(const std::string& path) {
  std::vector<std::string> lines;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

// RE2's search tests (Go edition): `full_match` is the whole-string answer.
void LoadRe2Search(const std::string& path, std::vector<RegexCase>* out,
                   std::map<std::string, int>* dropped) {
  int n = 0;
  for (const std::string& line : ReadLines(path)) {
    ++n;
    json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.contains("regex")) {
      (*dropped)["re2: unreadable line"]++;
      continue;
    }
    out->push_back(RegexCase{"re2-search.jsonl:" + std::to_string(n), j["regex"].get<std::string>(),
                             j["haystack"].get<std::string>(), !j["full_match"].is_null()});
  }
}

bool IsSpan(const json& m, size_t len) {
  // A match is [s, e] or [[s, e], groups...].
  const json& span = (m.is_array() && !m.empty() && m[0].is_array()) ? m[0] : m;
  return span.is_array() && span.size() == 2 && span[0].is_number() && span[0].get<size_t>() == 0 &&
         span[1].get<size_t>() == len;
}

bool TextuallyAnchored(const std::string& re) {
  if (re.size() < 2 || re.front() != '^' || re.back() != '$') return false;
  size_t bs = 0;
  for (size_t i = re.size() - 1; i > 0 && re[i - 1] == '\\'; --i) ++bs;
  return bs % 2 == 0;
}

// The Rust regex crate's tests: whole-string when a reported match spans the
// whole haystack (a full match exists), or when the regex is anchored at both
// ends (or the test is anchored) and nothing matched (no full match exists).
void LoadRust(const std::string& dir, std::vector<RegexCase>* out,
              std::map<std::string, int>* dropped) {
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() == ".jsonl") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    int n = 0;
    for (const std::string& line : ReadLines(f.string())) {
      ++n;
      json j = json::parse(line, nullptr, false);
      if (j.is_discarded()) continue;
      std::string where = f.filename().string() + ":" + std::to_string(n);
      if (!j["regex"].is_string()) {
        (*dropped)["rust: regex sets"]++;
        continue;
      }
      if (j.contains("compiles") && !j["compiles"].get<bool>()) {
        (*dropped)["rust: must-not-compile cases"]++;
        continue;
      }
      // The flag is (?i) in front of the regex; without Unicode, Rust folds ASCII only.
      const bool fold_case = j.value("case-insensitive", false);
      if (fold_case && !j.value("unicode", true)) {
        (*dropped)["rust: ASCII-only case-insensitive flag"]++;
        continue;
      }
      if (j.contains("unescape") || j.value("utf8", true) == false) {
        (*dropped)["rust: byte-oriented haystack"]++;
        continue;
      }
      if (j.contains("bounds") || j.contains("line-terminator")) {
        (*dropped)["rust: bounded or line-terminator search"]++;
        continue;
      }
      std::string re = (fold_case ? "(?i)" : "") + j["regex"].get<std::string>();
      std::string hay = j["haystack"].get<std::string>();
      bool unicode = j.value("unicode", true);
      if (unicode && (re.find("\\d") != std::string::npos || re.find("\\w") != std::string::npos ||
                      re.find("\\s") != std::string::npos || re.find("\\D") != std::string::npos ||
                      re.find("\\W") != std::string::npos || re.find("\\S") != std::string::npos)) {
        (*dropped)["rust: Unicode \\d \\w \\s (maskd's are ASCII)"]++;
        continue;
      }
      const json& matches = j["matches"];
      bool full = false;
      for (const auto& m : matches) full = full || IsSpan(m, hay.size());
      if (full) {
        out->push_back(RegexCase{where, re, hay, true});
      } else if (matches.empty() && (TextuallyAnchored(re) || j.value("anchored", false))) {
        out->push_back(RegexCase{where, re, hay, false});
      }
      // Otherwise the test asks no whole-string question.
    }
  }
}

// AT&T/Fowler POSIX tests: leftmost-longest, so a full match exists exactly
// when the reported match is (0,len). Only ERE lines ('E' flag) are used.
void LoadFowler(const std::string& path, const std::string& name, std::vector<RegexCase>* out,
                std::map<std::string, int>* dropped) {
  int n = 0;
  std::string last_regex;
  for (const std::string& raw : ReadLines(path)) {
    ++n;
    if (raw.empty() || raw[0] == '#' || raw.rfind("NOTE", 0) == 0) continue;
    std::vector<std::string> f;
    std::stringstream ss(raw);
    std::string field;
    while (std::getline(ss, field, '\t')) {
      if (!field.empty()) f.push_back(field);
    }
    if (f.size() < 4) continue;
    std::string flags = f[0];
    if (f[1] != "SAME") last_regex = f[1];
    if (flags.find('E') == std::string::npos) continue;
    if (flags.find_first_not_of("BE") != std::string::npos) {
      (*dropped)["fowler: flags other than B/E"]++;
      continue;
    }
    std::string re = f[1] == "SAME" ? last_regex : f[1];
    std::string text = f[2] == "NULL" ? "" : f[2];
    std::string result = f[3];
    if (re.find('[') != std::string::npos && re.find('\\') != std::string::npos) {
      (*dropped)["fowler: backslash with brackets (POSIX reads it literally)"]++;
      continue;
    }
    if (result[0] != '(' && result != "NOMATCH") {
      (*dropped)["fowler: expected compile errors"]++;
      continue;
    }
    bool full = result.rfind("(0," + std::to_string(text.size()) + ")", 0) == 0;
    out->push_back(RegexCase{name + ":" + std::to_string(n), re, text, full});
  }
}

}  // namespace

std::vector<RegexCase> LoadRegexCorpus(const std::string& regex_dir,
                                       std::map<std::string, int>* dropped) {
  std::vector<RegexCase> out;
  LoadRe2Search(regex_dir + "/re2-go-testdata/re2-search.jsonl", &out, dropped);
  LoadRust(regex_dir + "/rust-regex/testdata-jsonl", &out, dropped);
  for (const char* name : {"basic.dat", "nullsubexpr.dat", "repetition.dat"}) {
    LoadFowler(regex_dir + "/re2-go-testdata/" + name, name, &out, dropped);
  }
  return out;
}

std::vector<RegexCase> LoadNormalizedCases(const std::string& path) {
  std::vector<RegexCase> out;
  for (const std::string& line : ReadLines(path)) {
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded()) continue;
    out.push_back(RegexCase{j["source"].get<std::string>(), j["regex"].get<std::string>(),
                            j["text"].get<std::string>(), j["full_match"].get<bool>()});
  }
  return out;
}

}  // namespace maskd::testing
