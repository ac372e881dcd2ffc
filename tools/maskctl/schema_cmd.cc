// maskctl schema-to-regex FILE: prints the regex a JSON Schema compiles to
// (one line on stdout; warnings on stderr, one per line). Errors exit 2.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "schema/json_schema.h"
#include "tools/maskctl/args.h"
#include "tools/maskctl/command.h"
#include "tools/maskctl/schema_options.h"

namespace maskctl {
namespace {

// Reads FILE ("-": stdin).
absl::StatusOr<std::string> ReadInput(const std::string& path) {
  std::stringstream text;
  if (path == "-") {
    text << std::cin.rdbuf();
    return text.str();
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  text << in.rdbuf();
  return text.str();
}

int RunSchemaToRegex(const Context& ctx) {
  auto args = Args::Parse(ctx.args, SchemaValueFlags(), SchemaBoolFlags());
  if (!args.ok()) return Fail("schema-to-regex", std::string(args.status().message()));
  if (args->positional().size() != 1) return Fail("schema-to-regex", "expected one FILE");
  maskd::JsonSchemaOptions options;
  if (auto s = ParseSchemaOptions(*args, &options); !s.ok()) {
    return Fail("schema-to-regex", std::string(s.message()));
  }
  const std::string& path = args->positional()[0];
  auto text = ReadInput(path);
  if (!text.ok()) return Fail("schema-to-regex", std::string(text.status().message()));
  auto r = maskd::JsonSchemaToRegex(*text, options);
  if (!r.ok()) return Fail("schema-to-regex", absl::StrCat(path, ": ", r.status().ToString()));
  for (const auto& w : r->warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  std::fwrite(r->regex.data(), 1, r->regex.size(), stdout);
  std::fputc('\n', stdout);
  return 0;
}

}  // namespace

MASKCTL_COMMAND("schema-to-regex",
                "schema-to-regex FILE|- [--whitespace python|compact|flexible] "
                "[--recursion-depth N] [--any-depth N] [--max-regex-bytes N] [--closed-objects] [--raw-unicode]",
                RunSchemaToRegex);

}  // namespace maskctl
