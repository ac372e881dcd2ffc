// schema_golden: a fingerprint of the JSON Schema converter's behaviour, to
// prove that a refactoring of schema/ changes nothing. Not a ctest: run it
// before and after a change and compare the outputs byte for byte.
//
// For every schema of the inputs it prints one line per (options, entry
// point): the input's name, the options' name, "regex" or "rules", and then
// either the error status in full ("ERR <code> <message>") or the sha256 of
// the whole result (regex or every rule's name and regex, each warning, the
// truncation flag) with the result's size. Inputs:
//   - tests/data/maskbench_slice.jsonl (the "schema" of each line);
//   - fuzz/corpus/json_schema_fuzzer/* (raw bytes; the first byte picks the
//     options as json_schema_fuzzer does);
//   - the edge cases below (malformed schemas: the errors of every accessor
//     that can refuse a schema's shape, and parse errors);
//   - with --suite DIR, every schema of the JSON-Schema-Test-Suite's tests/;
//   - with --maskbench DIR, every *.jsonl there (default options only).
//
// Usage: schema_golden [--suite DIR] [--maskbench DIR] > out.txt
#include <openssl/evp.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "fuzz/json_schema_knobs.h"
#include "schema/json_schema.h"

namespace {

using json = nlohmann::ordered_json;
namespace fs = std::filesystem;

std::string Sha256Hex(const std::string& text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(text.data(), text.size(), digest, &len, EVP_sha256(), nullptr);
  std::string hex;
  for (unsigned int i = 0; i < len; ++i) absl::StrAppend(&hex, absl::Hex(digest[i], absl::kZeroPad2));
  return hex;
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// One line per entry point for `schema` under `options`.
void Fingerprint(const std::string& name, const std::string& options_name,
                 const std::string& schema, const maskd::JsonSchemaOptions& options) {
  auto line = [&](const char* mode, const absl::Status& status, const std::string& text) {
    std::cout << name << " " << options_name << " " << mode << " ";
    if (!status.ok()) {
      std::cout << "ERR " << absl::StatusCodeToString(status.code()) << " " << status.message();
    } else {
      std::cout << Sha256Hex(text) << " " << text.size();
    }
    std::cout << "\n";
  };
  auto regex = maskd::JsonSchemaToRegex(schema, options);
  std::string text;
  if (regex.ok()) {
    text = absl::StrCat(regex->regex, "\n#truncated=", regex->truncated_recursion, "\n");
    for (const std::string& w : regex->warnings) absl::StrAppend(&text, "#warning ", w, "\n");
  }
  line("regex", regex.status(), text);
  auto rules = maskd::JsonSchemaToRules(schema, options);
  text.clear();
  if (rules.ok()) {
    for (const maskd::JsonSchemaRule& r : rules->rules) absl::StrAppend(&text, "#rule ", r.name, "\n", r.regex, "\n");
    for (const std::string& w : rules->warnings) absl::StrAppend(&text, "#warning ", w, "\n");
  }
  line("rules", rules.status(), text);
}

// The option sets every small-corpus schema runs under.
std::vector<std::pair<std::string, maskd::JsonSchemaOptions>> OptionSets() {
  std::vector<std::pair<std::string, maskd::JsonSchemaOptions>> out;
  out.emplace_back("default", maskd::JsonSchemaOptions{});
  maskd::JsonSchemaOptions compact;
  compact.whitespace = maskd::JsonWhitespace::kCompact;
  compact.additional_properties_default_open = false;
  compact.max_recursion_depth = 1;
  compact.ensure_ascii = false;
  out.emplace_back("compact-closed-rec1-raw", compact);
  maskd::JsonSchemaOptions flexible;
  flexible.whitespace = maskd::JsonWhitespace::kFlexible;
  flexible.infer_type_from_keywords = false;
  flexible.any_value_depth = 1;
  flexible.max_counted_repeat = 16;
  out.emplace_back("flexible-noinfer-any1-rep16", flexible);
  return out;
}

void AllOptions(const std::string& name, const std::string& schema) {
  for (const auto& [options_name, options] : OptionSets()) Fingerprint(name, options_name, schema, options);
}


// Schemas whose shape one of nlohmann's accessors refuses (each reached a
// different accessor in the converter), internal keywords spelled by a user,
// parse errors, and errors inside an enum's sibling keywords.
const char* const kEdgeCases[] = {
    R"({"not": {"type": [1]}})",
    R"({"not": {"type": ["string", null]}})",
    R"({"$maskd.unsupported": 5})",
    R"({"$maskd.unsupported": [1, 2, 3]})",
    R"({"$maskd.unsupported": ["a", "/b", "why"]})",
    R"({"type": "integer", "$maskd.unsupported": ["a", "/b", "why"]})",
    R"({"$maskd.notStrings": "x", "type": "string"})",
    R"({"$maskd.notStrings": ["x", 1], "type": "string", "minLength": 1})",
    R"({"allOf": [{"properties": [1]}, {"properties": {"a": {}}}]})",
    R"({"allOf": [{"properties": 5}, {"additionalProperties": false}]})",
    R"({"allOf": [{"properties": null}, {"properties": {"a": {}}}]})",
    R"({"allOf": [{"required": "a"}, {"required": ["b"]}]})",
    R"({"allOf": [{"required": ["a"]}, {"required": "b"}]})",
    R"({"allOf": [{"required": 5}, {"required": null}]})",
    R"({"allOf": [{"prefixItems": [{}]}, {"prefixItems": 5}]})",
    R"({"allOf": [{"prefixItems": []}, {"prefixItems": {"a": 1}}]})",
    R"({"allOf": [{"prefixItems": [{}]}, {"prefixItems": null}]})",
    R"({"allOf": [{"items": [{}]}, {"items": {}}]})",
    R"({"allOf": [{"patternProperties": {"a": {}}}, {"patternProperties": [1]}]})",
    R"({"allOf": [{"patternProperties": 5}, {"patternProperties": {"a": {}}}]})",
    R"({"allOf": [{"patternProperties": null}, {"patternProperties": {"a": {}}}]})",
    R"({"allOf": [{"$maskd.notStrings": "x"}, {"$maskd.notStrings": ["y"]}]})",
    R"({"allOf": [{"anyOf": [{}, {}]}, {"anyOf": 7}]})",
    R"({"allOf": [{"enum": 7}, {"enum": [7]}]})",
    R"({"allOf": [{"minimum": 1}, {"minimum": "2"}]})",
    R"({"allOf": [{"format": "date"}, {"format": "uuid"}]})",
    R"({"allOf": [{"pattern": "a"}, {"pattern": "b"}]})",
    R"({"allOf": [{"not": {"const": 1}}, {"not": {"const": 2}}]})",
    R"({"allOf": 5})",
    R"({"anyOf": []})",
    R"({"$ref": "#/items/99999999999999999999999", "items": [{}]})",
    R"({"$ref": "#/items/1", "items": [{}]})",
    R"({"$ref": "#/$defs/a%2", "$defs": {"a%2": {"type": "null"}}})",
    R"({"$ref": "#nope"})",
    R"({"$ref": "http://other.example/x"})",
    R"({"$ref": 5})",
    R"({"$id": "http://x.example/root.json", "$ref": "root.json#/$defs/a", "$defs": {"a": {"type": "null"}}})",
    R"({"enum": [{}], "properties": {"a": {"allOf": [{"required": "a"}, {"required": ["b"]}]}}})",
    R"({"enum": [[1]], "items": {"$ref": "#/enum/99999999999999999999999"}})",
    R"({"enum": [[1]], "items": {"unevaluatedItems": false}})",
    R"({"enum": [[1], [2]], "items": {"type": "integer", "minimum": 2}})",
    R"({"enum": ["a", "b"], "not": {"const": "b"}})",
    R"({"enum": [1, "a"], "minLength": 5000})",
    R"({"enum": 5})",
    R"({"type": 5})",
    R"({"type": "widget"})",
    R"({"type": "string", "pattern": "(?<=a)b"})",
    R"({"type": "string", "pattern": 5})",
    R"({"type": "string", "minLength": -1})",
    R"({"type": "array", "minItems": 5000})",
    R"({"type": "array", "contains": {"type": "integer"}, "minContains": 5000})",
    R"({"type": "array", "contains": {"type": "integer"}, "maxItems": 3})",
    R"({"type": "array", "prefixItems": 5})",
    R"({"type": "object", "properties": 5})",
    R"({"type": "object", "maxProperties": 100, "additionalProperties": {}})",
    R"({"type": "object", "dependencies": 5})",
    R"({"type": "object", "dependencies": {"a": 5}})",
    R"({"type": "number", "multipleOf": 0})",
    R"({"type": "number", "multipleOf": 0.3})",
    R"({"type": "integer", "multipleOf": 0.3})",
    R"({"type": "integer", "multipleOf": 7, "minimum": 10})",
    R"({"type": "number", "minimum": "a"})",
    R"({"not": {"pattern": "a"}})",
    R"({"type": "integer", "not": {"type": "string", "pattern": "^a"}})",
    R"({"type": "number", "not": {"type": "integer"}, "minimum": 1})",
    R"({"not": 5})",
    R"({"unevaluatedItems": false})",
    R"({"$defs": {"t": {"type": "object", "properties": {"kid": {"$ref": "#/$defs/t"}}, "required": ["kid"]}}, "$ref": "#/$defs/t"})",
    R"({"$defs": {"t": {"type": "array", "items": {"$ref": "#/$defs/t"}}}, "$ref": "#/$defs/t"})",
    R"({"$defs": {"t": {"enum": [[1]], "items": {"$ref": "#/$defs/t"}}}, "$ref": "#/$defs/t"})",
    R"({"if": {"properties": {"k": {"const": 1}}}, "then": {"required": ["a"]}, "else": {"required": ["b"]}})",
    R"(false)",
    R"(true)",
    R"(5)",
    R"({"a": })",
    R"({"const": 1e400})",
    R"({"enum": [1, -1e999]})",
    R"([1, 2)",
    R"({"a": 1} x)",
    R"("\ud800")",
    "{\"a\": \"\xff\"}",
    "{\"type\": \"string\", \"pattern\": \"\xc3\xa9+\"}",
    R"J({"type": "string", "pattern": "((((a))))", "maxLength": 3})J",
    R"({"type": "string", "format": "date-time", "maxLength": 3})",
    R"({"type": "string", "format": "int32"})",
};

void SuiteDir(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(dir / "tests"))
    if (e.is_regular_file() && e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files) {
    json groups = json::parse(ReadFile(f), nullptr, /*allow_exceptions=*/false);
    if (!groups.is_array()) continue;
    for (size_t i = 0; i < groups.size(); ++i) {
      if (!groups[i].is_object() || !groups[i].contains("schema")) continue;
      AllOptions(absl::StrCat("suite:", fs::relative(f, dir).string(), "#", i), groups[i]["schema"].dump());
    }
  }
}

void JsonlFile(const fs::path& path, const std::string& label, bool all_options) {
  std::ifstream in(path);
  std::string line;
  for (size_t n = 1; std::getline(in, line); ++n) {
    json row = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!row.is_object() || !row.contains("schema")) continue;
    const std::string name = absl::StrCat(label, ":", path.filename().string(), "#", n);
    if (all_options) AllOptions(name, row["schema"].dump());
    else Fingerprint(name, "default", row["schema"].dump(), maskd::JsonSchemaOptions{});
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string suite, maskbench;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--suite") suite = argv[i + 1];
    else if (flag == "--maskbench") maskbench = argv[i + 1];
    else {
      std::cerr << "usage: schema_golden [--suite DIR] [--maskbench DIR]\n";
      return 2;
    }
  }
  const fs::path source = MASKD_SOURCE_DIR;
  for (size_t i = 0; i < std::size(kEdgeCases); ++i) AllOptions(absl::StrCat("edge#", i), kEdgeCases[i]);
  JsonlFile(source / "tests/data/maskbench_slice.jsonl", "slice", /*all_options=*/true);
  std::vector<fs::path> seeds;
  for (const auto& e : fs::directory_iterator(source / "fuzz/corpus/json_schema_fuzzer")) seeds.push_back(e.path());
  std::sort(seeds.begin(), seeds.end());
  for (const fs::path& seed : seeds) {
    const std::string bytes = ReadFile(seed);
    if (bytes.empty()) continue;
    Fingerprint(absl::StrCat("fuzz:", seed.filename().string()), "fuzzer-knobs", bytes.substr(1),
                maskd::fuzz::JsonSchemaKnobs(static_cast<uint8_t>(bytes[0])));
  }
  if (!suite.empty()) SuiteDir(suite);
  if (!maskbench.empty()) {
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(maskbench))
      if (e.path().extension() == ".jsonl") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const fs::path& f : files) JsonlFile(f, "maskbench", /*all_options=*/false);
  }
  return 0;
}
