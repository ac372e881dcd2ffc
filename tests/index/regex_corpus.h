// Whole-string regex cases from third-party conformance suites, normalized to
// (regex, text, full match expected?). Used by the conformance test and by
// scripts that cut the in-repo slice.
#ifndef MASKD_TESTS_INDEX_REGEX_CORPUS_H_
#define MASKD_TESTS_INDEX_REGEX_CORPUS_H_

#include <map>
#include <string>
#include <vector>

namespace maskd::testing {

struct RegexCase {
  std::string source;  // e.g. "re2-search.jsonl:17"
  std::string regex;
  std::string text;
  bool full_match;
};

// Reads every whole-string question from the suites under `regex_dir`
// (../shared/corpora/regex). Cases that ask no whole-string question are not
// returned; cases dropped for another reason are counted in `dropped` by reason.
std::vector<RegexCase> LoadRegexCorpus(const std::string& regex_dir,
                                       std::map<std::string, int>* dropped);

// Reads the normalized JSONL form ({"source","regex","text","full_match"}).
std::vector<RegexCase> LoadNormalizedCases(const std::string& path);

}  // namespace maskd::testing

#endif  // MASKD_TESTS_INDEX_REGEX_CORPUS_H_
