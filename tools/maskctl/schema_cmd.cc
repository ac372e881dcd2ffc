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

int RunSchemaToRegex(const Context& ctx) {
  const Args* args = &ctx.args;
  if (args->positional().size() != 1) return Fail("schema-to-regex", "expected one FILE");
  maskd::JsonSchemaOptions options;
  if (auto s = ParseSchemaOptions(*args, &options); !s.ok()) {
    return Fail("schema-to-regex", std::string(s.message()));
  }
  const std::string& path = args->positional()[0];
  auto text = ReadFileArg(path);
  if (!text.ok()) return Fail("schema-to-regex", std::string(text.status().message()));
  auto r = maskd::JsonSchemaToRegex(*text, options);
  if (!r.ok()) return Fail("schema-to-regex", absl::StrCat(path, ": ", r.status().ToString()));
  for (const auto& w : r->warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  std::fwrite(r->regex.data(), 1, r->regex.size(), stdout);
  std::fputc('\n', stdout);
  return 0;
}

}  // namespace

MASKCTL_COMMAND(schema_to_regex, "schema-to-regex",
                "the regex a JSON Schema compiles to on the regex route",
                Form{"schema-to-regex FILE " MASKCTL_SCHEMA_OPTIONS_USAGE, SchemaValueFlags(),
                     SchemaBoolFlags()},
                Form{}, RunSchemaToRegex);

}  // namespace maskctl
