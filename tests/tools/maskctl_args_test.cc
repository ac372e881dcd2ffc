// maskctl's command lines (#25 item 6): every command's usage lines against
// the flags its parser accepts, the online and offline forms of a command
// against each other, and a FILE meaning the same with and without --addr.
// The registered commands are read in process (the maskctl_commands object
// library); the parser is exercised through the built binary.
#include <sys/wait.h>

#include <cctype>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/service/server_harness.h"
#include "tools/maskctl/command.h"
#include "tools/maskctl/constraint_flags.h"
#include "tools/maskctl/online_util.h"

namespace maskctl {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// The flags a usage line names, split by whether a value follows the flag
// (a metavariable such as N, FILE or auto|regex|grammar) or not (the flag
// is followed by a bracket, a bar, another flag or the end).
struct UsageFlags {
  FlagNames value, boolean;
};

UsageFlags FlagsOfUsage(std::string usage) {
  if (size_t at = usage.find("CONSTRAINT"); at != std::string::npos) {
    usage.replace(at, 10, kConstraintUsage);
  }
  UsageFlags out;
  for (size_t at = usage.find("--"); at != std::string::npos; at = usage.find("--", at)) {
    size_t end = at + 2;
    while (end < usage.size() && (std::islower(usage[end]) || std::isdigit(usage[end]) || usage[end] == '-')) {
      ++end;
    }
    const std::string name = usage.substr(at + 2, end - at - 2);
    const bool value = end + 1 < usage.size() && usage[end] == ' ' &&
                       std::string("[]()|-").find(usage[end + 1]) == std::string::npos;
    (value ? out.value : out.boolean).insert(name);
    at = end;
  }
  return out;
}

struct NamedForm {
  std::string label;  // "compile", "--addr compile"
  const CommandSpec* spec;
  const Form* form;
  bool online;
};

std::vector<NamedForm> AllForms() {
  std::vector<NamedForm> out;
  for (const auto& [name, spec] : Commands()) {
    if (spec.offline.present()) out.push_back({name, &spec, &spec.offline, false});
    if (spec.online.present()) out.push_back({"--addr " + name, &spec, &spec.online, true});
  }
  return out;
}

TEST(MaskctlUsage, EveryCommandIsRegisteredWithAForm) {
  std::set<std::string> names;
  for (const auto& [name, spec] : Commands()) {
    names.insert(name);
    EXPECT_TRUE(spec.offline.present() || spec.online.present()) << name;
    EXPECT_FALSE(spec.summary.empty()) << name;
  }
  for (const char* name : {"bench", "compile", "generate", "health", "maskbench", "sample",
                           "schema-to-regex", "shm-demo", "vocab", "walk"}) {
    EXPECT_TRUE(names.count(name)) << name;
  }
}

// Every flag a usage line names is one its parser accepts, taking a value
// exactly when the usage shows one; every flag the parser accepts is named.
TEST(MaskctlUsage, UsageLinesNameExactlyTheFlagsTheParserAccepts) {
  for (const NamedForm& f : AllForms()) {
    SCOPED_TRACE(f.label + ": " + f.form->usage);
    EXPECT_EQ(f.form->usage.rfind(f.spec->name + " ", 0), 0u) << "starts with the command's name";
    const UsageFlags usage = FlagsOfUsage(f.form->usage);
    EXPECT_EQ(usage.value, f.form->value_flags);
    EXPECT_EQ(usage.boolean, f.form->bool_flags);
  }
}

// A form that names CONSTRAINT accepts all of it; the online and offline
// forms of one command differ only where a flag cannot mean anything on the
// other side, listed here with the reason.
TEST(MaskctlUsage, OnlineAndOfflineFormsTakeTheSameConstraintFlags) {
  const FlagNames constraint = Union({ConstraintValueFlags(), ConstraintBoolFlags()});
  for (const NamedForm& f : AllForms()) {
    if (f.form->usage.find("CONSTRAINT") == std::string::npos) continue;
    const FlagNames accepted = Union({f.form->value_flags, f.form->bool_flags});
    for (const std::string& flag : constraint) EXPECT_TRUE(accepted.count(flag)) << f.label << " --" << flag;
  }
  const std::map<std::string, FlagNames> offline_only = {
      // The offline form loads a tokenizer file (--vocab-size, --eos) and
      // precomputes on its own threads; the server has its tokenizers and pool.
      {"compile", {"vocab-size", "eos", "threads"}}};
  const std::map<std::string, FlagNames> online_only = {
      // A request's deadline and whether the call waits are the server's.
      {"compile", {"timeout-ms", "no-wait"}}};
  int both = 0;
  for (const auto& [name, spec] : Commands()) {
    if (!spec.offline.present() || !spec.online.present()) continue;
    ++both;
    const FlagNames off = Union({spec.offline.value_flags, spec.offline.bool_flags});
    const FlagNames on = Union({spec.online.value_flags, spec.online.bool_flags});
    FlagNames off_only, on_only;
    for (const std::string& flag : off) {
      if (!on.count(flag)) off_only.insert(flag);
    }
    for (const std::string& flag : on) {
      if (!off.count(flag)) on_only.insert(flag);
    }
    EXPECT_EQ(off_only, offline_only.count(name) ? offline_only.at(name) : FlagNames{}) << name;
    EXPECT_EQ(on_only, online_only.count(name) ? online_only.at(name) : FlagNames{}) << name;
    // A flag in both takes a value in both or in neither.
    for (const std::string& flag : off) {
      if (on.count(flag)) {
        EXPECT_EQ(spec.offline.value_flags.count(flag), spec.online.value_flags.count(flag)) << name << " --" << flag;
      }
    }
  }
  EXPECT_GE(both, 1);  // compile
}

struct CmdResult {
  int status;
  std::string out, err;
};

CmdResult Maskctl(const std::string& args, const std::string& stdin_text = "") {
  const std::string dir = ::testing::TempDir();
  {
    std::ofstream in(dir + "/maskctl_args_in.txt", std::ios::binary);
    in << stdin_text;
  }
  const std::string cmd = std::string(MASKD_BIN_DIR) + "/maskctl " + args + " <" + dir +
                          "/maskctl_args_in.txt 2>" + dir + "/maskctl_args_err.txt";
  CmdResult r;
  FILE* p = popen(cmd.c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  r.status = WEXITSTATUS(pclose(p));
  std::ifstream err(dir + "/maskctl_args_err.txt", std::ios::binary);
  r.err.assign(std::istreambuf_iterator<char>(err), {});
  return r;
}

// `maskctl help` prints every form's usage line, and CONSTRAINT once.
TEST(MaskctlUsage, HelpPrintsEveryForm) {
  CmdResult r = Maskctl("help");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr(std::string("CONSTRAINT: ") + kConstraintUsage + "\n"));
  for (const NamedForm& f : AllForms()) {
    EXPECT_THAT(r.out, HasSubstr("  maskctl " + std::string(f.online ? "--addr ADDR " : "") +
                                 f.form->usage + "\n"));
  }
}

// The binary's parser, flag by flag: each value flag takes a value, each
// boolean refuses one, and a flag no usage names is refused. The commands
// then fail on what is missing (no tokenizer, no server), fast.
TEST(MaskctlUsage, TheBinaryParsesWhatTheUsageSays) {
  for (const NamedForm& f : AllForms()) {
    const std::string prefix = (f.online ? "--addr unix:///nonexistent/maskctl.sock " : "") + f.spec->name;
    for (const std::string& flag : f.form->value_flags) {
      CmdResult r = Maskctl(prefix + " --" + flag + " 1");
      EXPECT_THAT(r.err, Not(HasSubstr("unknown flag"))) << f.label << " --" << flag;
      r = Maskctl(prefix + " --" + flag);
      EXPECT_THAT(r.err, HasSubstr("--" + flag + " needs a value")) << f.label;
    }
    for (const std::string& flag : f.form->bool_flags) {
      CmdResult r = Maskctl(prefix + " --" + flag + "=1");
      EXPECT_THAT(r.err, HasSubstr("--" + flag + " takes no value")) << f.label;
    }
    CmdResult r = Maskctl(prefix + " --no-such-flag");
    EXPECT_EQ(r.status, 2);
    EXPECT_THAT(r.err, HasSubstr("unknown flag --no-such-flag")) << f.label;
  }
  // A form a command does not have is an error, not ignored.
  EXPECT_THAT(Maskctl("--addr unix:///nonexistent/maskctl.sock vocab").err, HasSubstr("drop --addr"));
  EXPECT_THAT(Maskctl("health").err, HasSubstr("needs --addr"));
}

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

Args ParseForm(const Form& form, const std::vector<std::string>& argv) {
  auto args = Args::Parse(argv, form.value_flags, form.bool_flags);
  EXPECT_TRUE(args.ok()) << args.status();
  return args.ok() ? *args : Args();
}

// One CONSTRAINT read by both forms: the FILE's content is what compiles
// (online: what the request carries), with the same options.
TEST(MaskctlConstraint, OnlineAndOfflineReadTheSameConstraint) {
  const CommandSpec& compile = Commands().at("compile");
  const std::string schema = R"({"type": "object", "properties": {"a": {"type": "integer"}}})";
  const std::string path = WriteFile("args_schema.json", schema);
  const std::vector<std::string> flags = {"--json-schema", path, "--route", "grammar",
                                          "--whitespace", "compact", "--any-property-order"};
  std::vector<std::string> offline = {"--tokenizer", "data"}, online = {"--tokenizer", "qwen3"};
  offline.insert(offline.end(), flags.begin(), flags.end());
  online.insert(online.end(), flags.begin(), flags.end());

  auto source = ReadConstraintFlags(ParseForm(compile.offline, offline));
  ASSERT_TRUE(source.ok()) << source.status();
  EXPECT_EQ(source->kind, maskd::ConstraintKind::kJsonSchema);
  EXPECT_EQ(source->text, schema);
  EXPECT_EQ(source->options.schema_route, maskd::SchemaRoute::kGrammar);
  EXPECT_EQ(source->options.json_schema.whitespace, maskd::JsonWhitespace::kCompact);
  EXPECT_TRUE(source->options.json_schema.any_property_order);

  auto req = CompileRequestFromFlags(ParseForm(compile.online, online));
  ASSERT_TRUE(req.ok()) << req.status();
  EXPECT_EQ(req->json_schema(), schema);
  EXPECT_EQ(req->options().schema_route(), maskd::v1::SCHEMA_ROUTE_GRAMMAR);
  EXPECT_EQ(req->options().json_whitespace(), maskd::v1::JSON_WHITESPACE_COMPACT);
  EXPECT_TRUE(req->options().any_property_order());

  // A grammar and a structural tag are files too; a regex is inline text.
  const std::string gbnf = "root ::= \"yes\" | \"no\"\n";
  const std::string tag = R"({"tags": [{"begin": "<f>", "regex": "[0-9]+", "end": "</f>"}], "triggers": ["<f>"]})";
  req = CompileRequestFromFlags(ParseForm(
      compile.online, {"--tokenizer", "qwen3", "--grammar", WriteFile("args.gbnf", gbnf)}));
  ASSERT_TRUE(req.ok()) << req.status();
  EXPECT_EQ(req->grammar().text(), gbnf);
  EXPECT_EQ(req->grammar().format(), maskd::v1::Grammar::FORMAT_GBNF);
  req = CompileRequestFromFlags(ParseForm(
      compile.online, {"--tokenizer", "qwen3", "--structural-tag", WriteFile("args_tag.json", tag)}));
  ASSERT_TRUE(req.ok()) << req.status();
  EXPECT_EQ(req->structural_tag(), tag);
  req = CompileRequestFromFlags(ParseForm(compile.online, {"--tokenizer", "qwen3", "--regex", "[0-9]+"}));
  ASSERT_TRUE(req.ok()) << req.status();
  EXPECT_EQ(req->regex(), "[0-9]+");

  // An option that does not apply to the kind is an error in both forms.
  for (const Form* form : {&compile.offline, &compile.online}) {
    auto bad = ReadConstraintFlags(ParseForm(*form, {"--tokenizer", "t", "--regex", "a", "--route", "regex"}));
    EXPECT_THAT(bad.status().message(), HasSubstr("--route applies to --json-schema only"));
    bad = ReadConstraintFlags(ParseForm(
        *form, {"--tokenizer", "t", "--json-schema", WriteFile("args_route.json", "{}"), "--route", "fast"}));
    EXPECT_THAT(bad.status().message(), HasSubstr("--route fast: expected auto, regex or grammar"));
    bad = ReadConstraintFlags(ParseForm(*form, {"--tokenizer", "t", "--json-schema", "/nonexistent.json"}));
    EXPECT_THAT(bad.status().message(), HasSubstr("/nonexistent.json"));
  }
}

// The same schema FILE through the binary, offline and against a real maskd,
// from a path and from stdin: each compiles the file's schema on the route
// asked for.
TEST(MaskctlConstraint, AFileCompilesItsContentOnlineAndOffline) {
  const std::string schema = R"({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})";
  const std::string path = WriteFile("args_online.json", schema);
  const std::string tok_dir = std::string(MASKD_SOURCE_DIR) + "/data/tokenizers/qwen3";
  for (const std::string& file : {path, std::string("-")}) {
    CmdResult r = Maskctl("compile --tokenizer " + tok_dir + " --json-schema " + file + " --route grammar", schema);
    ASSERT_EQ(r.status, 0) << file << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr("route: grammar"));
    EXPECT_TRUE(nlohmann::json::parse(r.out).contains("grammar_rules")) << r.out;
  }
  maskd::testing::MaskdProcess server;
  ASSERT_TRUE(server.ok()) << server.Log();
  for (const char* route : {"regex", "grammar"}) {
    for (const std::string& file : {path, std::string("-")}) {
      CmdResult r = Maskctl("--addr " + server.addr() + " compile --tokenizer qwen3 --json-schema " + file +
                          " --route " + std::string(route),
                      schema);
      ASSERT_EQ(r.status, 0) << file << ": " << r.err;
      const nlohmann::json j = nlohmann::json::parse(r.out);
      EXPECT_EQ(j["state"], "ready") << r.out;
      EXPECT_EQ(j["route"], route) << r.out;
    }
  }
  // The file's path is not a schema: before, online --json-schema sent its
  // argument as the schema's text.
  CmdResult r = Maskctl("--addr " + server.addr() + " generate --tokenizer qwen3 --json-schema " + path +
                  " --seed 1 --max-tokens 16");
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j["finished"].get<bool>()) << r.out;
  const nlohmann::json value = nlohmann::json::parse(j["text"].get<std::string>());
  EXPECT_TRUE(value["n"].is_number_integer()) << r.out;
}

}  // namespace
}  // namespace maskctl
