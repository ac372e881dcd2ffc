// Shared by the JSON Schema -> regex tests (tests/index/json_schema_*_test.cc):
// RE2, the independent oracle.
#ifndef MASKD_TESTS_INDEX_JSON_SCHEMA_TEST_UTIL_H_
#define MASKD_TESTS_INDEX_JSON_SCHEMA_TEST_UTIL_H_

#include <re2/re2.h>

#include <cstdint>
#include <memory>
#include <string>

namespace maskd::json_schema_test {

inline std::unique_ptr<RE2> Compile(const std::string& pattern) {
  RE2::Options opt;
  opt.set_max_mem(int64_t{1} << 30);
  opt.set_log_errors(false);
  auto re = std::make_unique<RE2>(pattern, opt);
  return re;
}

inline bool Full(const RE2& re, const std::string& text) { return RE2::FullMatch(text, re); }

}  // namespace maskd::json_schema_test

#endif  // MASKD_TESTS_INDEX_JSON_SCHEMA_TEST_UTIL_H_
