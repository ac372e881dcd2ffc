// JSON Schema -> regex on a slice of MaskBench (tests/data/maskbench_slice.jsonl):
// the share of schemas whose every test passes stays above a floor.
//
// MASKD_MASKBENCH_DIR=/path/to/maskbench-dev runs the MaskBench check over
// every *.jsonl there too and prints a failure breakdown (not in the default
// suite's time budget).
#include "schema/json_schema.h"

#include <re2/re2.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <limits>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gtest/gtest.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "automaton/dfa.h"
#include "schema/internal/json_schema_internal.h"

// Passing rate (%) of tests/data/maskbench_slice.jsonl, set a little below
// the measured rate.
#define MASKBENCH_SLICE_FLOOR 90.0  // measured 92.8% (enum/const values checked against the whole schema)

namespace maskd {
namespace {

using json_schema_internal::Decimal;
using json_schema_internal::IntegerRangeRegex64;
using json_schema_internal::NumberRangeRegex;
using json_schema_internal::ParseDecimal;
using json_schema_internal::PatternToJsonStringRegex;
using json_schema_internal::PythonFloatRepr;
using json_schema_internal::PythonJsonString;

// ---------------------------------------------------------------- MaskBench

struct BenchStats {
  int schemas = 0, compiled = 0, passing = 0;
  int valid = 0, valid_ok = 0, invalid = 0, invalid_ok = 0;
  std::map<std::string, int> errors;  // first words of conversion errors
  std::map<std::string, int> features_failing;
};

std::string ErrorKey(const std::string& msg) {
  auto q = msg.find("unsupported keyword \"");
  if (q != std::string::npos) {
    auto e = msg.find('"', q + 21);
    return "unsupported " + msg.substr(q + 21, e - q - 21);
  }
  return msg.substr(0, std::min<size_t>(msg.size(), 40));
}

// Runs every `stride`-th schema of `path`. `deadline`: per-schema DFA
// construction limit (infinite: only the deterministic state caps apply).
void RunMaskBench(const std::string& path, BenchStats* st, bool verbose, int stride = 1,
                  absl::Duration deadline = absl::Seconds(10)) {
  std::ifstream in(path);
  ASSERT_TRUE(in) << path;
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (n++ % stride != 0) continue;
    auto doc = nlohmann::ordered_json::parse(line);
    ++st->schemas;
    auto r = JsonSchemaToRegex(doc["schema"].dump());
    int nv = 0, ni = 0;
    for (auto& t : doc["tests"]) (t["valid"].get<bool>() ? nv : ni)++;
    st->valid += nv;
    st->invalid += ni;
    if (!r.ok()) {
      st->errors[ErrorKey(std::string(r.status().message()))]++;
      if (verbose) std::printf("ERR %s: %s\n", doc["file"].get<std::string>().c_str(), std::string(r.status().message()).substr(0, 200).c_str());
      continue;
    }
    DfaOptions dopt;
    if (deadline != absl::InfiniteDuration()) dopt.deadline = absl::Now() + deadline;
    auto dfa = Dfa::FromPattern(r->regex, RegexLimits{}, dopt);
    if (!dfa.ok()) {
      st->errors["dfa: " + std::string(dfa.status().message()).substr(0, 40)]++;
      if (verbose) std::printf("ERR %s: dfa: %s\n", doc["file"].get<std::string>().c_str(), std::string(dfa.status().message()).substr(0, 200).c_str());
      continue;
    }
    ++st->compiled;
    bool pass = true;
    for (auto& t : doc["tests"]) {
      bool valid = t["valid"].get<bool>();
      bool m = (*dfa)->Matches(t["text"].get<std::string>());
      if (valid && m) ++st->valid_ok;
      if (!valid && !m) ++st->invalid_ok;
      if (m != valid) {
        pass = false;
        if (verbose) {
          std::printf("FAIL %s %s: %s\n", doc["file"].get<std::string>().c_str(),
                      valid ? "valid-rejected" : "invalid-accepted",
                      t["text"].get<std::string>().substr(0, 300).c_str());
        }
      }
    }
    if (pass) ++st->passing;
  }
}

TEST(MaskBench, Slice) {
  std::string path = std::string(MASKD_SOURCE_DIR) + "/tests/data/maskbench_slice.jsonl";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "no " << path;
  BenchStats st;
  auto t0 = std::chrono::steady_clock::now();
  // The sanitizer run (MASKD_TEST_QUICK) checks every 4th schema with no
  // deadline, so its outcome does not depend on the machine's speed.
  const bool quick = std::getenv("MASKD_TEST_QUICK") != nullptr;
  RunMaskBench(path, &st, std::getenv("MASKD_MASKBENCH_VERBOSE") != nullptr, quick ? 4 : 1,
               quick ? absl::InfiniteDuration() : absl::Seconds(10));
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("slice: %d schemas, %d compiled, %d passing (%.1f%%); valid %d/%d, invalid %d/%d; %.1fs\n",
              st.schemas, st.compiled, st.passing, 100.0 * st.passing / st.schemas,
              st.valid_ok, st.valid, st.invalid_ok, st.invalid, secs);
  for (auto& [k, v] : st.errors) std::printf("  error %4d  %s\n", v, k.c_str());
  EXPECT_GE(st.schemas, quick ? 70 : 280);
  // Measured when this floor was set; see docs/json-schema.md.
  // Quick mode: every 4th schema, no deadline: 58 of 73 pass (79.5%) when measured.
  EXPECT_GE(100.0 * st.passing / st.schemas, quick ? 75.0 : MASKBENCH_SLICE_FLOOR);
}

TEST(MaskBench, FullCorpus) {
  const char* dir = std::getenv("MASKD_MASKBENCH_DIR");
  if (!dir) GTEST_SKIP() << "set MASKD_MASKBENCH_DIR to run over a MaskBench folder";
  BenchStats all;
  bool verbose = std::getenv("MASKD_MASKBENCH_VERBOSE") != nullptr;
  std::vector<std::string> files;
  for (auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".jsonl") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  for (auto& f : files) {
    BenchStats st;
    RunMaskBench(f, &st, verbose);
    std::printf("%-40s %5d schemas %5d compiled %5d passing (%.1f%%) valid %d/%d invalid %d/%d\n",
                std::filesystem::path(f).filename().c_str(), st.schemas, st.compiled, st.passing,
                100.0 * st.passing / std::max(1, st.schemas), st.valid_ok, st.valid,
                st.invalid_ok, st.invalid);
    all.schemas += st.schemas;
    all.compiled += st.compiled;
    all.passing += st.passing;
    all.valid += st.valid;
    all.valid_ok += st.valid_ok;
    all.invalid += st.invalid;
    all.invalid_ok += st.invalid_ok;
    for (auto& [k, v] : st.errors) all.errors[k] += v;
  }
  std::printf("ALL %d schemas %d compiled %d passing (%.1f%%) valid %d/%d invalid %d/%d\n",
              all.schemas, all.compiled, all.passing, 100.0 * all.passing / std::max(1, all.schemas),
              all.valid_ok, all.valid, all.invalid_ok, all.invalid);
  std::vector<std::pair<int, std::string>> errs;
  for (auto& [k, v] : all.errors) errs.push_back({v, k});
  std::sort(errs.rbegin(), errs.rend());
  for (auto& [v, k] : errs) std::printf("  error %4d  %s\n", v, k.c_str());
}

}  // namespace
}  // namespace maskd
