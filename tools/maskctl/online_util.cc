#include "tools/maskctl/online_util.h"

#include "tools/maskctl/constraint_flags.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <utility>

namespace maskctl {

Form OnlineConstraintForm(std::string usage, FlagNames own_value, FlagNames own_bool) {
  return Form{std::move(usage), Union({{"tokenizer"}, ConstraintValueFlags(), std::move(own_value)}),
              Union({ConstraintBoolFlags(), std::move(own_bool)})};
}

absl::StatusOr<std::unique_ptr<maskd::Client>> OnlineConnect(const Context& ctx) {
  if (ctx.addr.empty()) {
    return absl::InvalidArgumentError("needs --addr ADDR (e.g. unix:///tmp/maskd.sock)");
  }
  maskd::ClientOptions options;
  options.max_message_bytes = 256 << 20;
  options.client_name = "maskctl";
  if (ctx.tls_ca.empty() && !(ctx.tls_cert.empty() && ctx.tls_key.empty())) {
    return absl::InvalidArgumentError("--tls_cert/--tls_key need --tls_ca");
  }
  for (const auto& [path, out] : {std::pair<std::string, std::string*>{ctx.tls_ca, &options.tls_ca_pem},
                                  {ctx.tls_cert, &options.tls_cert_pem},
                                  {ctx.tls_key, &options.tls_key_pem}}) {
    if (path.empty()) continue;
    std::ifstream in(path, std::ios::binary);
    if (!in) return absl::NotFoundError("cannot read " + path);
    std::stringstream ss;
    ss << in.rdbuf();
    *out = ss.str();
  }
  return maskd::Client::Connect(ctx.addr, options);
}

absl::StatusOr<maskd::v1::CompileRequest> CompileRequestFromFlags(const Args& args) {
  auto tokenizer = args.Require("tokenizer");
  if (!tokenizer.ok()) return tokenizer.status();
  auto source = ReadConstraintFlags(args);
  if (!source.ok()) return source.status();
  maskd::v1::CompileRequest req;
  req.set_tokenizer(*tokenizer);
  const maskd::ConstraintOptions& o = source->options;
  switch (source->kind) {
    case maskd::ConstraintKind::kRegex: req.set_regex(source->text); break;
    case maskd::ConstraintKind::kJsonSchema: req.set_json_schema(source->text); break;
    case maskd::ConstraintKind::kStructuralTag: req.set_structural_tag(source->text); break;
    case maskd::ConstraintKind::kGrammar: {
      maskd::v1::Grammar* g = req.mutable_grammar();
      g->set_text(source->text);
      switch (o.grammar_format) {
        case maskd::grammar::GrammarFormat::kLark: g->set_format(maskd::v1::Grammar::FORMAT_LARK); break;
        case maskd::grammar::GrammarFormat::kGbnf: g->set_format(maskd::v1::Grammar::FORMAT_GBNF); break;
        case maskd::grammar::GrammarFormat::kEbnf: g->set_format(maskd::v1::Grammar::FORMAT_EBNF); break;
      }
      break;
    }
  }
  maskd::v1::CompileOptions* options = req.mutable_options();
  switch (o.schema_route) {
    case maskd::SchemaRoute::kAuto: options->set_schema_route(maskd::v1::SCHEMA_ROUTE_AUTO); break;
    case maskd::SchemaRoute::kRegex: options->set_schema_route(maskd::v1::SCHEMA_ROUTE_REGEX); break;
    case maskd::SchemaRoute::kGrammar: options->set_schema_route(maskd::v1::SCHEMA_ROUTE_GRAMMAR); break;
  }
  switch (o.json_schema.whitespace) {
    case maskd::JsonWhitespace::kPython: options->set_json_whitespace(maskd::v1::JSON_WHITESPACE_PYTHON); break;
    case maskd::JsonWhitespace::kCompact: options->set_json_whitespace(maskd::v1::JSON_WHITESPACE_COMPACT); break;
    case maskd::JsonWhitespace::kFlexible: options->set_json_whitespace(maskd::v1::JSON_WHITESPACE_FLEXIBLE); break;
  }
  options->set_any_property_order(o.json_schema.any_property_order);
  return req;
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string Hex(const std::string& bytes) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

int64_t RandomAllowed(absl::Span<const uint32_t> row, absl::Span<const uint32_t> avoid,
                      std::mt19937_64& rng) {
  uint64_t total = 0, avoided = 0;
  for (uint32_t w : row) total += std::popcount(w);
  for (uint32_t t : avoid) avoided += maskd::Allowed(row, t) ? 1 : 0;
  if (total == 0) return -1;
  const bool skip = total > avoided;
  uint64_t k = std::uniform_int_distribution<uint64_t>(0, (skip ? total - avoided : total) - 1)(rng);
  for (size_t w = 0; w < row.size(); ++w) {
    uint32_t bits = row[w];
    if (skip) {
      for (uint32_t t : avoid) {
        if ((t >> 5) == w) bits &= ~(1u << (t & 31));
      }
    }
    uint64_t c = std::popcount(bits);
    if (k >= c) {
      k -= c;
      continue;
    }
    while (k--) bits &= bits - 1;
    return static_cast<int64_t>(w * 32 + std::countr_zero(bits));
  }
  return -1;
}

}  // namespace maskctl

