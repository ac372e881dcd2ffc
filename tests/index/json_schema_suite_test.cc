// The official JSON-Schema-Test-Suite (../shared/corpora/json-schema-test-suite),
// drafts 2020-12 and 7, required tests only: each group's schema goes through
// the converter and the DFA; each instance, serialized as Python's json.dumps
// would (the converter's default layout), must match iff it is valid. Groups
// whose schema the converter rejects (unsupported keyword, no instance) are
// counted as skipped by reason. Prints agreement per draft; skips without
// ../shared.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "automaton/dfa.h"
#include "gtest/gtest.h"
#include "schema/internal/json_schema_internal.h"
#include "schema/json_schema.h"

namespace maskd {
namespace {

using Json = nlohmann::ordered_json;

// Python's json.dumps(value) with its default separators and ensure_ascii.
std::string PythonDumps(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::boolean: return v.get<bool>() ? "true" : "false";
    case Json::value_t::number_integer: return std::to_string(v.get<int64_t>());
    case Json::value_t::number_unsigned: return std::to_string(v.get<uint64_t>());
    case Json::value_t::number_float: return json_schema_internal::PythonFloatRepr(v.get<double>());
    case Json::value_t::string:
      return json_schema_internal::PythonJsonString(v.get<std::string>(), /*ensure_ascii=*/true);
    case Json::value_t::array: {
      std::string out = "[";
      for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + PythonDumps(v[i]);
      return out + "]";
    }
    case Json::value_t::object: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, x] : v.items()) {
        out += (first ? "" : ", ") + json_schema_internal::PythonJsonString(k, true) + ": " + PythonDumps(x);
        first = false;
      }
      return out + "}";
    }
    default: return "";
  }
}

struct Tally {
  int groups = 0, compiled_groups = 0, instances = 0, agree = 0, valid = 0, valid_ok = 0,
      invalid = 0, invalid_ok = 0;
  std::map<std::string, int> skipped;
};

std::string Reason(const std::string& message) {
  size_t at = message.find(" at ");
  return message.substr(0, std::min<size_t>(at, 60));
}

void RunDraft(const std::string& dir, Tally* t) {
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() == ".json") files.push_back(e.path());  // not optional/
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    std::ifstream in(f);
    std::stringstream text;
    text << in.rdbuf();
    Json groups = Json::parse(text.str(), nullptr, false);
    if (!groups.is_array()) continue;
    for (const auto& g : groups) {
      ++t->groups;
      auto regex = JsonSchemaToRegex(g["schema"].dump());
      if (!regex.ok()) {
        t->skipped[Reason(std::string(regex.status().message()))]++;
        continue;
      }
      DfaOptions options;
      options.max_states = 200000;
      auto dfa = Dfa::FromPattern(regex->regex, RegexLimits{}, options);
      if (!dfa.ok()) {
        t->skipped["dfa: " + Reason(std::string(dfa.status().message()))]++;
        continue;
      }
      ++t->compiled_groups;
      for (const auto& test : g["tests"]) {
        bool valid = test["valid"].get<bool>();
        bool match = (*dfa)->Matches(PythonDumps(test["data"]));
        ++t->instances;
        (valid ? t->valid : t->invalid)++;
        if (match == valid) {
          ++t->agree;
          (valid ? t->valid_ok : t->invalid_ok)++;
        } else if (std::getenv("MASKD_SUITE_VERBOSE")) {
          std::printf("DISAGREE %s | %s | %s | %s\n", f.filename().c_str(),
                      g["description"].get<std::string>().c_str(),
                      valid ? "valid-rejected" : "invalid-accepted", PythonDumps(test["data"]).c_str());
        }
      }
    }
  }
}

TEST(JsonSchemaTestSuite, AgreementOnSupportedGroups) {
  const std::string root = std::string(MASKD_SHARED_DIR) + "/corpora/json-schema-test-suite/tests";
  if (!std::filesystem::exists(root)) GTEST_SKIP() << "../shared/corpora/json-schema-test-suite is absent";
  for (const char* draft : {"draft2020-12", "draft7"}) {
    Tally t;
    RunDraft(root + "/" + draft, &t);
    std::printf("%s: %d groups, %d converted; %d instances, %d agree (%.1f%%): valid %d/%d, invalid %d/%d\n",
                draft, t.groups, t.compiled_groups, t.instances, t.agree,
                t.instances ? 100.0 * t.agree / t.instances : 0.0, t.valid_ok, t.valid, t.invalid_ok,
                t.invalid);
    for (const auto& [reason, n] : t.skipped) std::printf("  skipped %3d groups: %s\n", n, reason.c_str());
    EXPECT_GT(t.compiled_groups, t.groups / 3) << draft;
    // Measured 71.9% (2020-12) and 72.8% (7). Most disagreements are valid
    // instances a generator could never produce in maskd's layout: keys in
    // another order than `properties`, and values of another type next to
    // type-specific keywords ({"minLength": 2} accepting 123), which the
    // converter reads as "a string" (docs/json-schema.md).
    EXPECT_GE(100.0 * t.agree / t.instances, 72.0) << draft;  // measured 74.6% (2020-12), 74.3% (7)
  }
}

}  // namespace
}  // namespace maskd
