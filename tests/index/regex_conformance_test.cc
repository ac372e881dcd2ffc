// Whole-string conformance on regex suites written by others: RE2's search
// tests, the Rust regex crate's tests and the AT&T/Fowler POSIX tests (see
// tests/index/regex_corpus.h for which cases ask a whole-string question).
// Cases whose regex maskd rejects (syntax a full-match DFA does not support)
// are skipped and counted by reason; every failure is printed.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <filesystem>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "automaton/dfa.h"
#include "gtest/gtest.h"
#include "tests/index/regex_corpus.h"

namespace maskd {
namespace {

using testing::RegexCase;

struct Outcome {
  int applicable = 0, passed = 0;
  std::map<std::string, int> skipped;
  std::vector<std::string> failures;
};

std::string Reason(std::string message) {
  size_t at = message.find(" at byte offset");
  if (at != std::string::npos) message.resize(at);
  return message;
}

Outcome RunCases(const std::vector<RegexCase>& cases) {
  Outcome o;
  DfaOptions options;
  options.max_states = 20000;
  for (const RegexCase& c : cases) {
    auto dfa = Dfa::FromPattern(c.regex, RegexLimits{}, options);
    if (!dfa.ok()) {
      o.skipped[Reason(std::string(dfa.status().message()))]++;
      continue;
    }
    ++o.applicable;
    bool got = (*dfa)->Matches(c.text);
    if (got == c.full_match) {
      ++o.passed;
    } else {
      o.failures.push_back(c.source + ": regex " + c.regex + " text \"" + c.text + "\" expected " +
                           (c.full_match ? "match" : "no match"));
    }
  }
  return o;
}

void Print(const char* name, const Outcome& o) {
  std::printf("%s: %d/%d applicable cases pass (%.2f%%)\n", name, o.passed, o.applicable,
              o.applicable ? 100.0 * o.passed / o.applicable : 0.0);
  for (const auto& [reason, n] : o.skipped) std::printf("  skipped %4d: %s\n", n, reason.c_str());
  for (const auto& f : o.failures) std::printf("  FAILED %s\n", f.c_str());
}

TEST(RegexConformance, InRepoSlice) {
  auto cases = testing::LoadNormalizedCases(std::string(MASKD_SOURCE_DIR) +
                                            "/tests/data/regex_conformance_slice.jsonl");
  ASSERT_GT(cases.size(), 200u);
  Outcome o = RunCases(cases);
  Print("in-repo slice", o);
  EXPECT_TRUE(o.failures.empty());
  EXPECT_GT(o.applicable, 200);
}

TEST(RegexConformance, SharedCorpora) {
  std::string dir = std::string(MASKD_SHARED_DIR) + "/corpora/regex";
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << "../shared/corpora/regex is absent";
  std::map<std::string, int> dropped;
  auto cases = testing::LoadRegexCorpus(dir, &dropped);
  for (const auto& [reason, n] : dropped) std::printf("  not a whole-string case %4d: %s\n", n, reason.c_str());
  Outcome o = RunCases(cases);
  Print("shared corpora", o);
  // MASKD_WRITE_REGEX_SLICE=path rewrites the in-repo slice: every applicable case.
  if (const char* path = std::getenv("MASKD_WRITE_REGEX_SLICE")) {
    std::ofstream out(path);
    for (const RegexCase& c : cases) {
      if (!Dfa::FromPattern(c.regex).ok()) continue;
      nlohmann::json j = {{"source", c.source}, {"regex", c.regex}, {"text", c.text},
                          {"full_match", c.full_match}};
      out << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    }
  }
  ASSERT_GT(o.applicable, 1000);
  EXPECT_GE(o.passed * 100.0 / o.applicable, 99.0);
}

}  // namespace
}  // namespace maskd
