// JSON Schema -> regex: per-keyword tests with RE2 as an independent oracle
// and maskd's own DFA agreeing, warnings, error paths, the options key.
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
#include <random>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gtest/gtest.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "automaton/dfa.h"
#include "schema/internal/json_schema_internal.h"
#include "tests/index/json_schema_test_util.h"

namespace maskd {
namespace {

using json_schema_internal::Decimal;
using json_schema_internal::IntegerRangeRegex64;
using json_schema_internal::NumberRangeRegex;
using json_schema_internal::ParseDecimal;
using json_schema_internal::PatternToJsonStringRegex;
using json_schema_internal::PythonFloatRepr;
using json_schema_internal::PythonJsonString;
using ::maskd::json_schema_test::Compile;
using ::maskd::json_schema_test::Full;

std::string ToRegex(const std::string& schema, const JsonSchemaOptions& o = {}) {
  auto r = JsonSchemaToRegex(schema, o);
  EXPECT_TRUE(r.ok()) << r.status() << " for " << schema;
  return r.ok() ? r->regex : "(?!)";
}

// Checks that the schema's regex accepts `valid` and rejects `invalid`.
void Check(const std::string& schema, const std::vector<std::string>& valid,
           const std::vector<std::string>& invalid, const JsonSchemaOptions& o = {}) {
  std::string regex = ToRegex(schema, o);
  auto re = Compile(regex);
  ASSERT_TRUE(re->ok()) << re->error() << "\nregex: " << regex;
  for (auto& v : valid) EXPECT_TRUE(Full(*re, v)) << schema << " should accept " << v << "\nregex: " << regex;
  for (auto& v : invalid) EXPECT_FALSE(Full(*re, v)) << schema << " should reject " << v << "\nregex: " << regex;
  // maskd's own engine must agree.
  auto dfa = Dfa::FromPattern(regex);
  ASSERT_TRUE(dfa.ok()) << dfa.status() << "\nregex: " << regex;
  for (auto& v : valid) EXPECT_TRUE((*dfa)->Matches(v)) << "DFA: " << schema << " should accept " << v;
  for (auto& v : invalid) EXPECT_FALSE((*dfa)->Matches(v)) << "DFA: " << schema << " should reject " << v;
}

// ---------------------------------------------------------------- keywords

TEST(JsonSchema, Scalars) {
  Check(R"({"type": "null"})", {"null"}, {"nul", "\"null\"", "0"});
  Check(R"({"type": "boolean"})", {"true", "false"}, {"True", "1"});
  Check(R"({"type": "integer"})", {"0", "-12", "123456789012345678901", "3.0"},
        {"1.5", "01", "-", "1e5", "\"1\""});
  Check(R"({"type": "number"})", {"0", "-1.25", "1e-05", "1.5e+16", "10000000000.0"},
        {"1.", ".5", "NaN", "Infinity"});
  Check(R"({"type": ["string", "null"]})", {"null", "\"x\""}, {"1"});
}

TEST(JsonSchema, IntegerBounds) {
  Check(R"({"type": "integer", "minimum": -3, "maximum": 12})", {"-3", "0", "12", "7"},
        {"-4", "13", "100"});
  Check(R"({"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 10})", {"1", "9"},
        {"0", "10"});
  // Draft 4 boolean form.
  Check(R"({"type": "integer", "minimum": 0, "exclusiveMinimum": true, "maximum": 5})",
        {"1", "5"}, {"0", "6"});
  Check(R"({"type": "integer", "minimum": 1.5, "maximum": 3.5})", {"2", "3"}, {"1", "4"});
  Check(R"({"type": "integer", "minimum": 18})", {"18", "99", "1000000"}, {"17", "-18", "0"});
  Check(R"({"type": "integer", "multipleOf": 5, "minimum": 0, "maximum": 30})", {"0", "15", "30"},
        {"3", "35"});
  Check(R"({"type": "integer", "multipleOf": 10})", {"0", "-10", "120"}, {"5", "101"});
}

TEST(JsonSchema, NumberBounds) {
  Check(R"({"type": "number", "minimum": 0, "maximum": 1})", {"0", "0.5", "1", "1.0", "0.999"},
        {"-0.1", "1.01", "2"});
  Check(R"({"type": "number", "exclusiveMinimum": 0})", {"0.001", "5", "1e-05"}, {"0", "0.0", "-1"});
  Check(R"({"type": "number", "minimum": -90, "maximum": 90})", {"-90", "45.123", "90.0"},
        {"-90.5", "91"});
  Check(R"({"type": "number", "multipleOf": 0.01})", {"1.25", "3", "0.1"}, {"1.255"});
}

TEST(JsonSchema, EnumConst) {
  Check(R"({"enum": [1, 12, "a", null, true, 1.5, {"x": [1, "y"]}]})",
        {"1", "12", "1.0", "\"a\"", "null", "true", "1.5", "{\"x\": [1, \"y\"]}"},
        {"2", "\"b\"", "false", "{\"x\":[1,\"y\"]}"});
  Check(R"({"const": "caf\u00e9"})", {"\"caf\\u00e9\""}, {"\"cafe\""});
  Check(R"({"type": "string", "enum": ["a", 1]})", {"\"a\""}, {"1"});
  Check(R"({"enum": ["a\"b", "c\\d", "x.y"]})", {"\"a\\\"b\"", "\"c\\\\d\"", "\"x.y\""},
        {"\"xzy\""});
  Check(R"({"anyOf": [{"type": "integer"}, {"type": "number"}]})", {"1", "12", "1.5"}, {"x"});
}

// A finite value set (enum/const, in an allOf branch, behind a $ref, or the
// union of anyOf branches) is checked value by value against the whole
// schema: exact where keyword-by-keyword conversion is refused or loose.
TEST(JsonSchema, EnumCheckedAgainstWholeSchema) {
  // oneOf exclusivity inside not (3 matches both branches, so it is valid).
  Check(R"({"allOf": [{"enum": [3]}, {"not": {"oneOf": [{"type": "integer"}, {"minimum": 2}]}}]})",
        {"3"}, {"2"});
  Check(R"({"enum": [1, 5, 10], "oneOf": [{"minimum": 4}, {"maximum": 6}]})", {"1", "10"}, {"5"});
  // Negated enums of objects and arrays.
  Check(R"({"allOf": [{"enum": [{"boo": 42, "foo": 12}]},
                      {"not": {"enum": [6, "foo", [], true, {"foo": 12}]}}]})",
        {R"({"boo": 42, "foo": 12})"}, {R"({"foo": 12})"});
  Check(R"({"enum": [[1, 2, 3], [{"foo": "bar"}]], "not": {"enum": [[{"foo": "bar"}]]}})",
        {"[1, 2, 3]"}, {R"([{"foo": "bar"}])"});
  // not of a pattern, of patternProperties; multipleOf with a decimal step.
  Check(R"({"enum": ["ab", "cd", "x1"], "not": {"pattern": "^[a-z]+$"}})", {"\"x1\""},
        {"\"ab\"", "\"cd\""});
  Check(R"({"enum": [{"a1": 1}, {"a1": "x"}], "not": {"patternProperties": {"^a": {"type": "integer"}}}})",
        {R"({"a1": "x"})"}, {R"({"a1": 1})"});
  Check(R"({"enum": [1.5, 3, 4.5, 7, 0.30000000000000004], "multipleOf": 1.5})",
        {"1.5", "3", "4.5"}, {"7", "0.30000000000000004"});
  Check(R"({"enum": [0.3, 0.35], "multipleOf": 0.1})", {"0.3"}, {"0.35"});
  // $ref to the values, formats maskd enforces, uniqueItems, contains, dependencies.
  Check(R"({"$defs": {"c": {"enum": ["a", "b", "c"]}}, "$ref": "#/$defs/c", "not": {"const": "b"}})",
        {"\"a\"", "\"c\""}, {"\"b\""});
  Check(R"({"enum": ["2020-01-01", "2020-02-30", "nope"], "format": "date"})", {"\"2020-01-01\""},
        {"\"2020-02-30\"", "\"nope\""});
  Check(R"({"enum": [[1, 1], [1, 2]], "uniqueItems": true})", {"[1, 2]"}, {"[1, 1]"});
  Check(R"({"enum": [[1, 2], [3, 4], [5]], "contains": {"minimum": 3}, "maxItems": 1})", {"[5]"},
        {"[1, 2]", "[3, 4]"});
  Check(R"({"enum": [{"a": 1}, {"a": 1, "b": 2}], "dependentRequired": {"a": ["b"]}})",
        {R"({"a": 1, "b": 2})"}, {R"({"a": 1})"});
  // The union of anyOf branches' consts, and spec semantics: no type is
  // inferred from `minimum`, so the string stays.
  Check(R"({"anyOf": [{"const": "a"}, {"const": "b"}], "not": {"const": "a"}})", {"\"b\""},
        {"\"a\""});
  Check(R"({"enum": ["s", 1, 7], "minimum": 5})", {"\"s\"", "7"}, {"1"});
  // No value left: no instance, reported as such.
  auto none = JsonSchemaToRegex(R"({"enum": [1, 2], "not": {"type": "integer"}})");
  EXPECT_FALSE(none.ok());
  // A keyword the check does not decide: the keyword-by-keyword conversion.
  Check(R"({"enum": [{"a": 1}, {"b": 1}], "properties": {"a": true}, "unevaluatedProperties": false})",
        {R"({"a": 1})"}, {});
}

// A discriminator as schema stores write it: a property whose anyOf lists n
// values, and n branches that each pin one with a pattern. Each branch's
// merge checks n values against the anyOf's n branches: n^3 value checks
// if the pattern came last, about n^2 when each allOf member's own keywords
// reject first. Within the work limit (CountStep: 2,000,000 steps) only the
// latter: n = 200 is 4M steps the first way.
TEST(JsonSchema, DiscriminatorOfManyValuesStaysWithinTheWorkLimit) {
  constexpr int kValues = 200;
  std::string values, branches;
  for (int i = 0; i < kValues; ++i) {
    absl::StrAppend(&values, i ? ", " : "", R"({"enum": ["V)", i, R"("]})");
    absl::StrAppend(&branches, i ? ", " : "", R"({"properties": {"task": {"pattern": "^V)", i,
                    R"($"}}})");
  }
  const std::string schema =
      absl::StrCat(R"({"type": "object", "required": ["task"], "additionalProperties": false,)",
                   R"( "properties": {"task": {"anyOf": [)", values, "]}}, \"anyOf\": [", branches,
                   "]}");
  Check(schema, {R"({"task": "V0"})", R"({"task": "V137"})", R"({"task": "V199"})"},
        {R"({"task": "V200"})", R"({"task": "V1x"})", R"({})"});
}

TEST(JsonSchema, Strings) {
  Check(R"({"type": "string"})",
        {"\"\"", "\"abc\"", "\"a\\\"b\"", "\"\\u00e9\"", "\"caf\xc3\xa9\"", "\"\\n\""},
        {"\"a\"b\"", "\"\\x\"", "\"\n\"", "abc"});
  Check(R"({"type": "string", "minLength": 2, "maxLength": 3})",
        {"\"ab\"", "\"abc\"", "\"a\\nb\"", "\"\\u00e9\\u00e9\""}, {"\"a\"", "\"abcd\""});
  Check(R"({"type": "string", "pattern": "^[a-z]+$"})", {"\"abc\""}, {"\"\"", "\"aBc\"", "\"a1\""});
  Check(R"({"type": "string", "pattern": "[0-9]{3}"})", {"\"x123y\"", "\"123\""}, {"\"12\""});
  Check(R"({"type": "string", "pattern": "^a|b$"})", {"\"ax\"", "\"xb\""}, {"\"xa\"", "\"bx\""});
  Check(R"({"type": "string", "pattern": "^[^\"]*$"})", {"\"abc\"", "\"\""}, {"\"a\\\"b\""});
  Check(R"({"type": "string", "pattern": "^\\S+\\s\\S+$"})", {"\"a b\"", "\"a\\tb\""}, {"\"ab\""});
  Check(R"({"type": "string", "pattern": "^[\\u4e00-\\u9fa5]+$"})",
        {"\"\\u4e2d\\u6587\"", "\"\xe4\xb8\xad\""}, {"\"a\"", "\"\\u4dff\""});
  Check(R"({"type": "string", "pattern": "^(?:\\+|-)?\\d+(\\.\\d+)?$"})", {"\"+1.5\"", "\"-2\""},
        {"\"1.\""});
  // ECMA \p{..} (u flag): maskd's Unicode property tables.
  Check(R"({"type": "string", "pattern": "^\\p{Lu}\\p{Ll}+$"})",
        {"\"Hello\"", "\"\\u03a9\\u03bc\"", "\"\xce\xa9\xce\xbc\xce\xad\xce\xb3\xce\xb1\""},
        {"\"hello\"", "\"H\""});
  Check(R"({"type": "string", "pattern": "^[\\p{Script=Greek}\\d]+$"})", {"\"\xce\xb1\xce\xb2" "1\""},
        {"\"ab\"", "\"\""});
  Check(R"({"type": "string", "pattern": "^\\P{L}+$"})", {"\"12\"", "\"\\n\""}, {"\"a\"", "\"1a\""});
  // Length folded into a simple anchored pattern.
  Check(R"({"type": "string", "pattern": "^[a-z][a-z0-9_]*$", "maxLength": 4, "minLength": 2})",
        {"\"ab\"", "\"a_1b\""}, {"\"a\"", "\"abcde\"", "\"1ab\""});
}

TEST(JsonSchema, Formats) {
  Check(R"({"type": "string", "format": "date-time"})",
        {"\"2024-01-31T12:00:00Z\"", "\"2024-02-29T23:59:59.123+02:00\""},
        {"\"2023-02-29T12:00:00Z\"", "\"2024-01-31 12:00:00\"", "\"2024-13-01T00:00:00Z\""});
  Check(R"({"type": "string", "format": "date"})", {"\"2000-02-29\"", "\"1999-12-31\""},
        {"\"1900-02-29\"", "\"1999-04-31\""});
  Check(R"({"type": "string", "format": "time"})", {"\"12:30:00Z\"", "\"23:59:60+01:00\""},
        {"\"24:00:00Z\"", "\"12:30\""});
  Check(R"({"type": "string", "format": "uuid"})", {"\"123e4567-e89b-12d3-a456-426614174000\""},
        {"\"123e4567e89b12d3a456426614174000\""});
  Check(R"({"type": "string", "format": "ipv4"})", {"\"192.168.0.1\""}, {"\"256.1.1.1\"", "\"1.2.3\""});
  Check(R"({"type": "string", "format": "ipv6"})", {"\"::1\"", "\"2001:db8::8a2e:370:7334\""},
        {"\"1::2::3\"", "\"12345::\""});
  Check(R"({"type": "string", "format": "email"})", {"\"a.b@example.com\""}, {"\"a@\"", "\"ab\""});
  Check(R"({"type": "string", "format": "duration"})", {"\"P1Y2M3DT4H5M6S\"", "\"PT1S\"", "\"P4W\""},
        {"\"P\"", "\"PT\"", "\"P1H\""});
  Check(R"({"type": "string", "format": "uri"})", {"\"https://example.com/a?b=c#d\""},
        {"\"example com\"", "\"/relative\""});
  Check(R"({"type": "string", "format": "hostname"})", {"\"example.com\"", "\"a-b.c\""},
        {"\"-a.com\"", "\"a..b\""});
}

TEST(JsonSchema, Objects) {
  const char* schema = R"({"type": "object", "properties": {"a": {"type": "integer"},
      "b": {"type": "string"}, "c": {"type": "boolean"}}, "required": ["b"],
      "additionalProperties": false})";
  Check(schema,
        {"{\"b\": \"x\"}", "{\"a\": 1, \"b\": \"x\"}", "{\"b\": \"x\", \"c\": true}",
         "{\"a\": 1, \"b\": \"x\", \"c\": false}"},
        {"{}", "{\"a\": 1}", "{\"b\": \"x\", \"a\": 1}", "{\"b\": \"x\", \"d\": 1}",
         "{\"b\":\"x\"}", "{\"a\": 1, , \"b\": \"x\"}"});
  // All optional.
  Check(R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"},
      "c": {"type": "integer"}}, "additionalProperties": false})",
        {"{}", "{\"a\": 1}", "{\"b\": 2}", "{\"c\": 3}", "{\"a\": 1, \"c\": 3}",
         "{\"b\": 2, \"c\": 3}", "{\"a\": 1, \"b\": 2, \"c\": 3}"},
        {"{, \"a\": 1}", "{\"a\": 1, }", "{\"c\": 3, \"a\": 1}"});
  // Open objects: extra keys after the declared ones, not a declared key again.
  Check(R"({"type": "object", "properties": {"a": {"type": "integer"}}})",
        {"{}", "{\"a\": 1}", "{\"a\": 1, \"zz\": [1, {\"q\": null}]}", "{\"ab\": \"x\"}",
         "{\"\": 1}"},
        {"{\"a\": \"x\"}", "{\"a\": 1, \"a\": 2}"});
  Check(R"({"type": "object", "additionalProperties": {"type": "integer"}})",
        {"{}", "{\"x\": 1, \"y\": 2}"}, {"{\"x\": \"1\"}"});
  Check(R"({"type": "object", "patternProperties": {"^x-": {"type": "integer"}},
      "additionalProperties": false})", {"{\"x-a\": 1}"}, {"{\"y\": 1}", "{\"x-a\": \"s\"}"});
  Check(R"({"type": "object", "minProperties": 1, "additionalProperties": {"type": "integer"}})",
        {"{\"x\": 1}"}, {"{}"});
  Check(R"({"type": "object", "properties": {"a": {}, "b": {}, "c": {}}, "maxProperties": 2,
      "minProperties": 1, "additionalProperties": false})",
        {"{\"a\": 1}", "{\"a\": 1, \"c\": 2}"}, {"{}", "{\"a\": 1, \"b\": 2, \"c\": 3}"});
  Check(R"({"type": "object", "required": ["k"], "additionalProperties": {"type": "string"}})",
        {"{\"k\": \"v\"}", "{\"k\": \"v\", \"z\": \"w\"}"}, {"{}", "{\"k\": 1}"});
}

TEST(JsonSchema, OpenObjectsWithMultiByteKeys) {
  // Found by json_schema_fuzzer: with raw Unicode output, the regex for "any
  // key but the declared ones" was built byte by byte, so a declared key of
  // multi-byte characters (here U+00E9, U+FEFF, U+65E5 U+672C) put a lone
  // lead byte into a character class: the regex was not UTF-8 and the schema
  // failed to compile.
  JsonSchemaOptions raw;
  raw.ensure_ascii = false;
  const std::string schema = R"({"type": "object", "properties": {"\u00e9": {"type": "integer"},
      "\ufeff": {"type": "integer"}, "\u65e5\u672c": {"type": "integer"}}})";
  Check(schema,
        {"{}", "{\"\xc3\xa9\": 1}", "{\"\xef\xbb\xbf\": 2}", "{\"\xe6\x97\xa5\xe6\x9c\xac\": 3}",
         // Other keys: a different character, a prefix, a longer word.
         "{\"\xc3\xaa\": \"x\"}", "{\"\xe6\x97\xa5\": \"x\"}", "{\"\xc3\xa9\xc3\xa9\": \"x\"}",
         "{\"z\": \"x\"}"},
        {"{\"\xc3\xa9\": \"x\"}", "{\"\xef\xbb\xbf\": \"x\"}",
         "{\"\xe6\x97\xa5\xe6\x9c\xac\": \"x\"}"},
        raw);
}

// Other keys of an open object, against a brute-force oracle: a key is
// another key exactly when its spelling (the encoded JSON content) is none
// of the declared keys' spellings. Random declared sets over a few
// characters (prefixes of each other, multi-byte ones) and random
// candidates: the declared keys, their prefixes and extensions, escapes.
TEST(JsonSchema, OtherKeysAreEveryKeyButTheDeclaredOnes) {
  const std::vector<std::string> chars = {"a", "b", "\xc3\xa9", "\xe6\x97\xa5", "\\n",
                                          "\\u0061"};
  std::mt19937 rng(11);
  auto word = [&](size_t max_len) {
    std::string w;
    for (size_t n = rng() % (max_len + 1); n > 0; --n) w += chars[rng() % chars.size()];
    return w;
  };
  JsonSchemaOptions raw;
  raw.ensure_ascii = false;
  for (int trial = 0; trial < 40; ++trial) {
    std::set<std::string> declared;  // spellings without escapes
    nlohmann::json schema = {{"type", "object"}, {"additionalProperties", {{"type", "null"}}}};
    for (int k = 1 + rng() % 5; k > 0; --k) {
      std::string w;
      for (size_t n = rng() % 4; n > 0; --n) w += chars[rng() % 4];
      declared.insert(w);
      schema["properties"][w] = {{"type", "integer"}};
    }
    std::set<std::string> candidates;
    for (const std::string& d : declared) {
      candidates.insert(d);
      candidates.insert(d + word(2));
      if (!d.empty()) candidates.insert(d.substr(0, d.size() - 1));
    }
    for (int i = 0; i < 30; ++i) candidates.insert(word(4));
    std::vector<std::string> other, not_other;
    for (const std::string& c : candidates) {
      // A prefix cut inside a multi-byte character or an escape is no key.
      if (!nlohmann::json::accept("\"" + c + "\"")) continue;
      (declared.count(c) ? not_other : other).push_back("{\"" + c + "\": null}");
    }
    Check(schema.dump(), other, not_other, raw);
  }
}

TEST(JsonSchema, ManyOptionalPropertiesStaySmall) {
  std::string schema = R"({"type": "object", "additionalProperties": false, "properties": {)";
  for (int i = 0; i < 200; ++i) {
    if (i) schema += ", ";
    schema += "\"p" + std::to_string(i) + "\": {\"type\": \"integer\"}";
  }
  schema += "}}";
  std::string regex = ToRegex(schema);
  EXPECT_LT(regex.size(), 40000u);
  auto re = Compile(regex);
  ASSERT_TRUE(re->ok());
  EXPECT_TRUE(Full(*re, "{\"p3\": 1, \"p150\": 2, \"p199\": 3}"));
  EXPECT_FALSE(Full(*re, "{\"p150\": 2, \"p3\": 1}"));
}

TEST(JsonSchema, Arrays) {
  Check(R"({"type": "array", "items": {"type": "integer"}})", {"[]", "[1]", "[1, 2, 3]"},
        {"[1,2]", "[\"a\"]", "[1, ]"});
  Check(R"({"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 3})",
        {"[1, 2]", "[1, 2, 3]"}, {"[]", "[1]", "[1, 2, 3, 4]"});
  Check(R"({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}],
      "items": false})", {"[]", "[\"a\"]", "[\"a\", 1]"}, {"[1]", "[\"a\", 1, 2]"});
  Check(R"({"type": "array", "items": [{"type": "string"}, {"type": "integer"}],
      "additionalItems": {"type": "boolean"}, "minItems": 2})",
        {"[\"a\", 1]", "[\"a\", 1, true, false]"}, {"[\"a\"]", "[\"a\", 1, 2]"});
  Check(R"({"type": "array"})", {"[]", "[1, \"a\", [null], {\"k\": []}]"}, {"[1,]"});
}

TEST(JsonSchema, RefsAndCombinators) {
  Check(R"({"$defs": {"pos": {"type": "integer", "minimum": 1}},
      "type": "object", "properties": {"n": {"$ref": "#/$defs/pos"}}, "required": ["n"],
      "additionalProperties": false})", {"{\"n\": 5}"}, {"{\"n\": 0}"});
  Check(R"({"definitions": {"a/b": {"const": 1}, "t~": {"const": 2}},
      "anyOf": [{"$ref": "#/definitions/a~1b"}, {"$ref": "#/definitions/t~0"}]})", {"1", "2"},
        {"3"});
  Check(R"({"definitions": {"a b": {"const": 1}}, "$ref": "#/definitions/a%20b"})", {"1"}, {"2"});
  Check(R"({"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
      {"properties": {"b": {"type": "string"}}, "required": ["b"]}]})",
        {"{\"a\": 1, \"b\": \"x\"}"}, {"{\"a\": 1}", "{\"b\": \"x\"}", "{\"a\": \"1\", \"b\": \"x\"}"});
  // additionalProperties: false beside allOf sees no declared properties (spec).
  EXPECT_FALSE(JsonSchemaToRegex(R"({"type": "object", "allOf": [{"properties": {"a": {}},
      "required": ["a"]}], "additionalProperties": false})").ok());
  Check(R"({"allOf": [{"type": "integer", "minimum": 0}, {"maximum": 10}]})", {"0", "10"},
        {"-1", "11"});
  Check(R"({"oneOf": [{"type": "string"}, {"type": "integer"}]})", {"\"a\"", "1"}, {"null"});
  Check(R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
      "additionalProperties": false, "anyOf": [{"required": ["a"]}, {"required": ["b"]}]})",
        {"{\"a\": 1}", "{\"b\": 1}", "{\"a\": 1, \"b\": 2}"}, {"{}"});
  // Recursive: a linked list, unrolled.
  JsonSchemaOptions o;
  o.max_recursion_depth = 4;
  Check(R"({"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
      "next": {"$ref": "#/$defs/node"}}, "required": ["v"], "additionalProperties": false}},
      "$ref": "#/$defs/node"})",
        {"{\"v\": 1}", "{\"v\": 1, \"next\": {\"v\": 2, \"next\": {\"v\": 3}}}"},
        {"{\"next\": {\"v\": 2}}"}, o);
  Check(R"({"type": "integer", "not": {"type": "string"}})", {"1"}, {"\"a\""});
}

TEST(JsonSchema, NotEnumStrings) {
  // Any spelling of an excluded string is excluded ("\u0061" is "a").
  Check(R"({"type": "string", "not": {"enum": ["a", "ab", "caf\u00e9"]}})",
        {"\"\"", "\"b\"", "\"abc\"", "\"aa\"", "\"A\"", "\"caf\"", "\"cafe\"", "\"caf\\u00e8\"",
         "\"\\u0062\"", "\"a\\n\""},
        {"\"a\"", "\"ab\"", "\"\\u0061\"", "\"\\u0061b\"", "\"a\\u0062\"", "\"caf\\u00e9\"",
         "\"caf\\u00E9\"", "\"caf\xc3\xa9\"", "1"});
  Check(R"({"type": "string", "not": {"const": "x/y"}})", {"\"x\"", "\"x/yz\""},
        {"\"x/y\"", "\"x\\/y\"", "\"\\u0078/y\""});
  Check(R"({"type": "string", "not": {"const": ""}})", {"\"a\"", "\"\\n\""}, {"\"\""});
  Check(R"({"type": "string", "not": {"const": "\ud83d\ude00"}})",
        {"\"\\ud83d\"", "\"\\ud83d\\ude01\"", "\"\\ud83dx\"", "\"\\ud83d\\ude00x\""},
        {"\"\\ud83d\\ude00\"", "\"\\uD83D\\uDE00\"", "\"\xf0\x9f\x98\x80\""});
  // The enum filtered by what the not excludes.
  Check(R"({"enum": ["a", "b", 1, 2, null], "not": {"enum": ["b", 2]}})", {"\"a\"", "1", "null"},
        {"\"b\"", "2", "2.0"});
  // Excluded strings beside a pattern that none of them matches: exact.
  auto r = JsonSchemaToRegex(R"({"type": "string", "pattern": "^[0-9]+$", "not": {"const": "x"}})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->warnings.empty());
  auto w = JsonSchemaToRegex(R"({"type": "string", "pattern": "^[a-z]+$", "not": {"const": "x"}})");
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_EQ(w->warnings.size(), 1u);
  EXPECT_NE(w->warnings[0].find("not at /"), std::string::npos) << w->warnings[0];
}

TEST(JsonSchema, NotOtherKeywords) {
  // Spec semantics inside not: only objects can lack a property.
  Check(R"({"not": {"required": ["a"]}})", {"{}", "{\"b\": 1}", "{\"ab\": 1}"},
        {"{\"a\": 1}", "{\"b\": 1, \"a\": 2}", "1", "\"a\"", "null", "[]"});
  Check(R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {}},
      "not": {"required": ["a", "b"]}})",
        {"{}", "{\"a\": 1}", "{\"b\": 2}"}, {"{\"a\": 1, \"b\": 2}"});
  Check(R"({"type": "integer", "not": {"enum": [3, 5]}})", {"2", "4", "6", "-3", "35"},
        {"3", "5", "5.0", "\"x\""});
  Check(R"({"type": "number", "not": {"minimum": 2}})", {"1.5", "-7", "1.999"}, {"2", "2.5", "3"});
  Check(R"({"type": "integer", "not": {"minimum": 0, "maximum": 9}})", {"-7", "-1", "10"},
        {"0", "7", "9"});
  Check(R"({"type": "number", "not": {"type": "integer"}})", {"1.5", "-0.25", "1e-05", "1.5e-07"},
        {"1", "1.0", "0", "-3", "1e+16"});
  Check(R"({"type": "string", "not": {"maxLength": 2}})", {"\"abc\""}, {"\"ab\"", "\"\""});
  Check(R"({"type": "array", "items": {"type": "integer"}, "not": {"minItems": 2}})",
        {"[]", "[1]"}, {"[1, 2]"});
  // Double negation, anyOf/allOf inside not.
  Check(R"({"not": {"not": {"type": "integer", "minimum": 3}}})", {"3", "10"}, {"2", "\"a\""});
  Check(R"({"type": "integer", "not": {"anyOf": [{"const": 1}, {"minimum": 10}]}})",
        {"0", "2", "9"}, {"1", "10", "11"});
  Check(R"({"type": "integer", "not": {"allOf": [{"minimum": 1}, {"maximum": 3}]}})",
        {"0", "4"}, {"1", "2", "3"});
  Check(R"({"type": "object", "properties": {"k": {"type": "string"}}, "required": ["k"],
      "additionalProperties": false, "not": {"properties": {"k": {"const": "x"}}}})",
        {"{\"k\": \"y\"}"}, {"{\"k\": \"x\"}", "{}"});
  Check(R"({"type": "array", "not": {"items": {"type": "integer"}}})",
        {"[\"a\"]", "[1, \"a\"]", "[\"a\", 2]"}, {"[]", "[1]", "[1, 2]"});
  Check(R"({"type": "object", "propertyNames": {"not": {"const": "0"}}})", {"{}", "{\"1\": 2}"},
        {"{\"0\": 1}", "{\"1\": 2, \"0\": 1}"});
  // A negated keyword with no exact rewrite: an error only where it matters.
  Check(R"({"type": "integer", "not": {"type": "string", "pattern": "^a"}})", {"1"}, {"\"b\""});
  auto e = JsonSchemaToRegex(R"({"properties": {"a": {"not": {"pattern": "^a"}}}})");
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(e.status().message(),
            "unsupported keyword \"not\" at /properties/a/not: negated pattern");
}

TEST(JsonSchema, IfThenElse) {
  // A tagged union.
  const char* schema = R"({"type": "object", "properties": {"kind": {"enum": ["a", "b"]},
      "x": {"type": "integer"}, "y": {"type": "string"}}, "required": ["kind"],
      "additionalProperties": false,
      "if": {"properties": {"kind": {"const": "a"}}},
      "then": {"required": ["x"]}, "else": {"required": ["y"]}})";
  Check(schema, {"{\"kind\": \"a\", \"x\": 1}", "{\"kind\": \"a\", \"x\": 1, \"y\": \"s\"}",
                 "{\"kind\": \"b\", \"y\": \"s\"}"},
        {"{\"kind\": \"a\"}", "{\"kind\": \"a\", \"y\": \"s\"}", "{\"kind\": \"b\", \"x\": 1}",
         "{\"kind\": \"c\", \"y\": \"s\"}"});
  // Without else; without then.
  Check(R"({"type": "integer", "if": {"minimum": 10}, "then": {"multipleOf": 10, "maximum": 40}})",
        {"1", "9", "10", "40"}, {"11", "50"});
  Check(R"({"type": "integer", "if": {"minimum": 10}, "else": {"minimum": 5}})", {"5", "9", "100"},
        {"4", "0"});
  // Two conditionals in allOf.
  Check(R"({"type": "integer", "allOf": [{"if": {"minimum": 10}, "then": {"maximum": 20}},
      {"if": {"maximum": 0}, "then": {"minimum": -5}}]})", {"15", "5", "-5"}, {"21", "-6"});
}

TEST(JsonSchema, Dependencies) {
  const char* props = R"("type": "object", "properties": {"a": {"type": "integer"},
      "b": {"type": "integer"}, "c": {"type": "integer"}}, "additionalProperties": false)";
  for (const char* kw : {"dependencies", "dependentRequired"}) {
    Check(absl::StrCat("{", props, ", \"", kw, "\": {\"a\": [\"c\"], \"c\": [\"b\"]}}"),
          {"{}", "{\"b\": 1}", "{\"a\": 1, \"b\": 2, \"c\": 3}", "{\"b\": 2, \"c\": 3}"},
          {"{\"a\": 1}", "{\"a\": 1, \"b\": 2}", "{\"c\": 3}", "{\"a\": 1, \"c\": 3}"});
  }
  for (const char* kw : {"dependencies", "dependentSchemas"}) {
    Check(absl::StrCat("{", props, ", \"", kw,
                       "\": {\"a\": {\"properties\": {\"b\": {\"minimum\": 5}}, \"required\": [\"b\"]}}}"),
          {"{}", "{\"b\": 1}", "{\"a\": 1, \"b\": 5}"}, {"{\"a\": 1}", "{\"a\": 1, \"b\": 4}"});
  }
  // A required trigger: no branch.
  Check(absl::StrCat("{", props, ", \"required\": [\"a\"], \"dependentRequired\": {\"a\": [\"b\"]}}"),
        {"{\"a\": 1, \"b\": 2}"}, {"{\"a\": 1}", "{}"});
}

TEST(JsonSchema, Contains) {
  Check(R"({"type": "array", "contains": {"const": 3}})", {"[3]", "[1, 3]", "[3, 1, 3]", "[\"a\", 3]"},
        {"[]", "[1]", "[\"3\"]"});
  Check(R"({"type": "array", "items": {"type": "integer"}, "contains": {"minimum": 10},
      "minContains": 2, "maxContains": 3})",
        {"[10, 11]", "[1, 10, 2, 11]", "[10, 11, 12, 1]"},
        {"[10]", "[1, 2]", "[10, 11, 12, 13]", "[10, 11, \"a\"]"});
  Check(R"({"type": "array", "items": {"type": "integer"}, "contains": {"minimum": 10},
      "minContains": 0, "maxContains": 1})", {"[]", "[1]", "[1, 10, 2]"}, {"[10, 11]"});
  Check(R"({"type": "array", "items": {"type": "integer"}, "not": {"contains": {"const": 0}}})",
        {"[]", "[1, 2]"}, {"[0]", "[1, 0]"});
  auto e = JsonSchemaToRegex(R"({"type": "array", "contains": {"const": 1}, "maxItems": 3})");
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(e.status().message().find("unsupported keyword \"contains\" at /"), std::string::npos)
      << e.status();
}

TEST(JsonSchema, Whitespace) {
  JsonSchemaOptions compact;
  compact.whitespace = JsonWhitespace::kCompact;
  Check(R"({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}},
      "required": ["a"], "additionalProperties": false})",
        {"{\"a\":[1,2]}"}, {"{\"a\": [1, 2]}"}, compact);
  JsonSchemaOptions flex;
  flex.whitespace = JsonWhitespace::kFlexible;
  Check(R"({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}},
      "required": ["a"], "additionalProperties": false})",
        {"{\"a\":[1,2]}", "{ \"a\" : [ 1 ,\n 2 ] }", "{\"a\": []}"}, {"{\"a\" [1]}"}, flex);
}

TEST(JsonSchema, Warnings) {
  auto r = JsonSchemaToRegex(R"({"type": "object", "properties": {"tags": {"type": "array",
      "uniqueItems": true}}})");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_EQ(r->warnings[0], "uniqueItems at /properties/tags: not enforced");
  auto o = JsonSchemaToRegex(R"({"oneOf": [{"type": "integer"}, {"minimum": 3}]})");
  ASSERT_TRUE(o.ok());
  ASSERT_EQ(o->warnings.size(), 1u);
  EXPECT_NE(o->warnings[0].find("oneOf at /"), std::string::npos);
  // Descriptive keywords are silently ignored.
  auto d = JsonSchemaToRegex(R"({"type": "integer", "title": "t", "description": "d",
      "examples": [1], "default": 2, "$comment": "c", "x-custom": 1})");
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->warnings.empty());
}

TEST(JsonSchema, Errors) {
  auto bad = JsonSchemaToRegex("{\"type\": ");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("byte"), std::string::npos) << bad.status();

  auto ref = JsonSchemaToRegex(R"({"properties": {"a": {"$ref": "#/$defs/missing"}}})");
  EXPECT_EQ(ref.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(ref.status().message().find("#/$defs/missing"), std::string::npos) << ref.status();

  auto remote = JsonSchemaToRegex(R"({"$ref": "http://example.com/schema.json"})");
  EXPECT_EQ(remote.status().code(), absl::StatusCode::kInvalidArgument);

  auto kw = JsonSchemaToRegex(R"({"properties": {"a": {"unevaluatedItems": false}}})");
  EXPECT_EQ(kw.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(kw.status().message(), "unsupported keyword \"unevaluatedItems\" at /properties/a");

  auto deep = JsonSchemaToRegex(R"({"$defs": {"n": {"type": "object", "properties": {
      "next": {"$ref": "#/$defs/n"}}, "required": ["next"]}}, "$ref": "#/$defs/n"})");
  EXPECT_EQ(deep.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(deep.status().message().find("required property \"next\""), std::string::npos)
      << deep.status();

  auto pat = JsonSchemaToRegex(R"({"type": "string", "pattern": "(a)\\1"})");
  EXPECT_EQ(pat.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(pat.status().message().find("pattern"), std::string::npos);
  auto prop = JsonSchemaToRegex(R"({"type": "string", "pattern": "a\\p{Foo}"})");
  EXPECT_EQ(prop.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(prop.status().message().find("unknown Unicode property 'Foo'"), std::string::npos)
      << prop.status();

  JsonSchemaOptions small;
  small.max_regex_bytes = 100;
  auto big = JsonSchemaToRegex(R"({"type": "object", "properties": {"a": {"type": "string"},
      "b": {"type": "string"}, "c": {"type": "string"}}})", small);
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted);

  JsonSchemaOptions tiny;
  tiny.max_schema_bytes = 4;
  auto too_long = JsonSchemaToRegex("{\"type\": \"null\"}", tiny);
  EXPECT_EQ(too_long.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(too_long.status().message().find("max_schema_bytes"), std::string::npos);
  EXPECT_FALSE(JsonSchemaToRegex("false").ok());
}

TEST(JsonSchema, OptionsKey) {
  JsonSchemaOptions a, b;
  EXPECT_EQ(JsonSchemaOptionsKey(a), JsonSchemaOptionsKey(b));
  b.whitespace = JsonWhitespace::kCompact;
  EXPECT_NE(JsonSchemaOptionsKey(a), JsonSchemaOptionsKey(b));
  b = a;
  b.max_recursion_depth = 7;
  EXPECT_NE(JsonSchemaOptionsKey(a), JsonSchemaOptionsKey(b));
  // The converter's DFA caps can change its output; its deadline and cancel
  // flag only end a conversion.
  b = a;
  b.budget.max_states = 1000;
  EXPECT_NE(JsonSchemaOptionsKey(a), JsonSchemaOptionsKey(b));
  b = a;
  std::atomic<bool> cancel{false};
  b.budget.deadline = absl::Now() + absl::Seconds(1);
  b.budget.cancel = &cancel;
  EXPECT_EQ(JsonSchemaOptionsKey(a), JsonSchemaOptionsKey(b));
}

}  // namespace
}  // namespace maskd
