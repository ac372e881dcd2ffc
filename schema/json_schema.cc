// JSON Schema -> regex: the entry points. See schema/json_schema.h and
// docs/json-schema.md; the converter itself is schema/internal/converter.h.
#include "schema/json_schema.h"

#include <atomic>
#include <cstddef>
#include <optional>
#include <string>
#include <tuple>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "json/json_scan.h"
#include "schema/internal/converter.h"
#include "schema/internal/messages.h"
#include "schema/internal/status_macros.h"

namespace maskd {
namespace {

using json_schema_internal::Converter;
using json_schema_internal::ConversionCancelledError;
using json_schema_internal::ConversionDeadlineError;
using json_schema_internal::json;
using json_schema_internal::kMaxMessageBytes;
using json_schema_internal::Shown;

// Limits of the structural pre-scan (json/json_scan.h). The deepest schema
// in MaskBench nests 63 levels of arrays and objects and its largest object
// has 600 members.
// (Nesting: JsonSchemaOptions::max_schema_nesting.)
constexpr size_t kMaxSchemaObjectMembers = 4096;

// Records the first parse error of a document, without building it.
class ParseErrorRecorder : public nlohmann::json_sax<json> {
 public:
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&,
                   const json::exception& e) override {
    what_ = e.what();
    if (const auto* pe = dynamic_cast<const json::parse_error*>(&e)) byte_ = pe->byte;
    return false;
  }

  const std::string& what() const { return what_; }
  // The parse_error's byte offset; nullopt for another error (a number
  // beyond double: out_of_range).
  std::optional<std::size_t> byte() const { return byte_; }

 private:
  std::string what_;
  std::optional<std::size_t> byte_;
};

// The InvalidArgument for a document nlohmann refuses, naming the byte offset.
absl::Status ParseError(std::string_view schema_json) {
  ParseErrorRecorder recorder;
  json::sax_parse(schema_json.begin(), schema_json.end(), &recorder);
  if (recorder.byte()) {
    return absl::InvalidArgumentError(absl::StrCat("schema is not valid JSON: ",
                                                   Shown(recorder.what()), " (byte offset ",
                                                   *recorder.byte(), ")"));
  }
  // out_of_range 406: a number beyond double ("1e400"), which the JSON
  // grammar allows but no schema can mean; its message quotes the number,
  // found again in the text for its offset.
  const std::string& what = recorder.what();
  std::string where;
  if (size_t q = what.find('\''); q != std::string::npos) {
    size_t q2 = what.find('\'', q + 1);
    if (q2 != std::string::npos && q2 > q + 1) {
      size_t at = schema_json.find(what.substr(q + 1, q2 - q - 1));
      if (at != std::string_view::npos) where = absl::StrCat(" (byte offset ", at, ")");
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("schema is not valid JSON: ", Shown(what), where));
}

// InvalidArgument for options outside their ranges.
absl::Status CheckOptions(const JsonSchemaOptions& options) {
  if (options.max_counted_repeat < 1 || options.max_counted_repeat > 1000) {
    return absl::InvalidArgumentError("max_counted_repeat must be in [1, 1000]");
  }
  if (options.max_recursion_depth < 0 || options.any_value_depth < 0 ||
      options.any_value_depth > 8) {
    return absl::InvalidArgumentError("bad recursion or any-value depth");
  }
  for (auto [value, max, name] : {std::tuple{options.max_schema_nesting, kMaxSchemaNesting,
                                             "max_schema_nesting"},
                                  std::tuple{options.max_schema_depth, kMaxSchemaDepth,
                                             "max_schema_depth"},
                                  std::tuple{options.max_pattern_nesting, kMaxPatternNesting,
                                             "max_pattern_nesting"}}) {
    if (value < 1 || value > max) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, " ", value, " is outside [1, ", max, "]"));
    }
  }
  return absl::OkStatus();
}

// The regex route refuses any_property_order.
absl::Status CheckRegexRouteOptions(const JsonSchemaOptions& options) {
  if (!options.any_property_order) return absl::OkStatus();
  return absl::InvalidArgumentError(
      "any_property_order needs the grammar route (JsonSchemaToRules): a regex cannot hold "
      "every order");
}

// Runs `fn(converter)`; an error's message is capped at kMaxMessageBytes.
template <typename Result, typename Fn>
absl::StatusOr<Result> RunConverter(const json& root, const JsonSchemaOptions& options, bool rules,
                                    Fn fn) {
  Converter c(root, options, rules);
  absl::StatusOr<Result> result = fn(c);
  if (result.ok() || result.status().message().size() <= kMaxMessageBytes) return result;
  const auto m = result.status().message();
  return absl::Status(result.status().code(),
                      Shown(std::string_view(m.data(), m.size()), kMaxMessageBytes));
}

}  // namespace

// Checks the document's size, the options, and the document's nesting, then
// parses it.
absl::StatusOr<JsonSchemaDocument> JsonSchemaDocument::Parse(std::string_view schema_json,
                                                             const JsonSchemaOptions& options) {
  if (schema_json.size() > options.max_schema_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat("schema is ", schema_json.size(),
                                                     " bytes, above max_schema_bytes (",
                                                     options.max_schema_bytes, ")"));
  }
  MASKD_RETURN_IF_ERROR(CheckOptions(options));
  // Before any tree is built: nesting (every walk below recurses per level),
  // object size (ordered_json inserts in linear time) and the document's end
  // (nlohmann stops at a NUL byte as if the text ended there).
  MASKD_RETURN_IF_ERROR(internal::CheckJsonStructure(
      schema_json,
      {.max_depth = static_cast<size_t>(options.max_schema_nesting),
       .max_object_members = kMaxSchemaObjectMembers,
       .depth_limit_name = "max_schema_nesting, maskd --max_schema_nesting"},
      "schema"));
  auto parsed = std::make_shared<json_schema_internal::ParsedSchema>();
  parsed->root = json::parse(schema_json.begin(), schema_json.end(), /*cb=*/nullptr,
                             /*allow_exceptions=*/false);
  if (parsed->root.is_discarded()) return ParseError(schema_json);
  // Between parsing and conversion: a large document takes a while to parse.
  if (options.budget.cancel != nullptr && options.budget.cancel->load(std::memory_order_relaxed)) {
    return ConversionCancelledError();
  }
  if (absl::Now() > options.budget.deadline) return ConversionDeadlineError();
  return JsonSchemaDocument(std::move(parsed));
}

absl::StatusOr<JsonSchemaRegex> JsonSchemaToRegex(std::string_view schema_json,
                                                  const JsonSchemaOptions& options) {
  MASKD_RETURN_IF_ERROR(CheckRegexRouteOptions(options));
  MASKD_ASSIGN_OR_RETURN(JsonSchemaDocument document, JsonSchemaDocument::Parse(schema_json, options));
  return JsonSchemaToRegex(document, options);
}

absl::StatusOr<JsonSchemaRegex> JsonSchemaToRegex(const JsonSchemaDocument& schema,
                                                  const JsonSchemaOptions& options) {
  MASKD_RETURN_IF_ERROR(CheckRegexRouteOptions(options));
  MASKD_RETURN_IF_ERROR(CheckOptions(options));
  const json& root = schema.parsed().root;
  return RunConverter<JsonSchemaRegex>(root, options, false, [&](Converter& c) -> absl::StatusOr<JsonSchemaRegex> {
    JsonSchemaRegex out;
    MASKD_ASSIGN_OR_RETURN(out.regex, c.Run());
    out.warnings = c.warnings();
    out.truncated_recursion = c.truncated_recursion();
    if (out.regex.size() > options.max_regex_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "regex is ", out.regex.size(), " bytes, above max_regex_bytes (",
          options.max_regex_bytes, ")"));
    }
    return out;
  });
}

absl::StatusOr<JsonSchemaRules> JsonSchemaToRules(std::string_view schema_json,
                                                  const JsonSchemaOptions& options) {
  MASKD_ASSIGN_OR_RETURN(JsonSchemaDocument document, JsonSchemaDocument::Parse(schema_json, options));
  return JsonSchemaToRules(document, options);
}

absl::StatusOr<JsonSchemaRules> JsonSchemaToRules(const JsonSchemaDocument& schema,
                                                  const JsonSchemaOptions& options) {
  MASKD_RETURN_IF_ERROR(CheckOptions(options));
  const json& root = schema.parsed().root;
  return RunConverter<JsonSchemaRules>(root, options, true, [&](Converter& c) -> absl::StatusOr<JsonSchemaRules> {
    MASKD_RETURN_IF_ERROR(c.Run().status());
    JsonSchemaRules out;
    out.rules = c.TakeRules();
    out.warnings = c.warnings();
    size_t bytes = 0;
    for (const JsonSchemaRule& r : out.rules) bytes += r.regex.size();
    if (bytes > options.max_regex_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "rules are ", bytes, " bytes, above max_regex_bytes (", options.max_regex_bytes, ")"));
    }
    return out;
  });
}

std::string JsonSchemaOptionsKey(const JsonSchemaOptions& o) {
  const char* ws = o.whitespace == JsonWhitespace::kPython    ? "python"
                   : o.whitespace == JsonWhitespace::kCompact ? "compact"
                                                              : "flexible";
  return absl::StrCat("jsonschema-v1;ws=", ws,
                      o.whitespace == JsonWhitespace::kFlexible
                          ? absl::StrCat(";wsp=", o.whitespace_pattern.size(), ":",
                                         o.whitespace_pattern)
                          : "",
                      ";rec=", o.max_recursion_depth, ";any=", o.any_value_depth,
                      ";addl=", o.additional_properties_default_open ? 1 : 0,
                      ";ascii=", o.ensure_ascii ? 1 : 0, ";infer=", o.infer_type_from_keywords ? 1 : 0,
                      o.any_property_order ? ";order=any" : "", ";rep=", o.max_counted_repeat,
                      ";maxs=", o.max_schema_bytes, ";maxr=", o.max_regex_bytes,
                      ";nest=", o.max_schema_nesting, ";depth=", o.max_schema_depth,
                      ";pnest=", o.max_pattern_nesting, ";dfa=", o.budget.max_states, "/",
                      o.budget.max_nfa_states);
}

}  // namespace maskd
