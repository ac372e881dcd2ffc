// Offline subcommands over the core library: compile, walk, sample (their
// --grammar forms are in grammar_cmds.h).
// With the global --addr flag, `compile` talks to a running maskd instead.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "constraint/constraint_compiler.h"
#include "index/guide.h"
#include "index/random_walk.h"
#include "index/token_index.h"
#include "tools/maskctl/args.h"
#include "tools/maskctl/command.h"
#include "tools/maskctl/digest.h"
#include "tools/maskctl/report.h"
#include "tools/maskctl/grammar_cmds.h"
#include "tools/maskctl/tokenizer_flag.h"
#include "tools/maskctl/online.h"

namespace maskctl {
namespace {

using Clock = std::chrono::steady_clock;

// `flags` plus the tokenizer and grammar value flags.
std::set<std::string> WithTokenizerFlags(std::set<std::string> flags) {
  const auto& t = TokenizerValueFlags();
  flags.insert(t.begin(), t.end());
  const auto& g = GrammarValueFlags();
  flags.insert(g.begin(), g.end());
  return flags;
}

// Exactly one constraint flag.
absl::Status OneConstraintFlag(const Args& args) {
  const int n = args.Has("regex") + args.Has("json-schema") + args.Has("grammar");
  if (n != 1) return absl::InvalidArgumentError("give exactly one of --regex, --json-schema or --grammar");
  return absl::OkStatus();
}

// The index of a command's constraint: --regex R, or --json-schema FILE
// (with the converter's default options, on --route auto|regex|grammar,
// default auto). A schema's warnings go to stderr, one per line; its
// conversion errors name the file.
absl::StatusOr<std::shared_ptr<const maskd::ConstraintIndex>> CompileConstraintFlag(
    const Args& args, std::shared_ptr<const maskd::TokenizerContext> context) {
  auto regex = args.Get("regex");
  auto schema_file = args.Get("json-schema");
  if (absl::Status s = OneConstraintFlag(args); !s.ok()) return s;
  maskd::Constraint constraint = maskd::Constraint::Regex(regex.value_or(""), context);
  if (schema_file) {
    std::ifstream in(*schema_file, std::ios::binary);
    if (!in) return absl::NotFoundError(absl::StrCat(*schema_file, ": cannot open"));
    std::stringstream text;
    text << in.rdbuf();
    constraint = maskd::Constraint::JsonSchema(text.str(), context);
    const std::string route = args.Get("route").value_or("auto");
    if (route == "regex") {
      constraint.options.schema_route = maskd::SchemaRoute::kRegex;
    } else if (route == "grammar") {
      constraint.options.schema_route = maskd::SchemaRoute::kGrammar;
    } else if (route != "auto") {
      return absl::InvalidArgumentError(
          absl::StrCat("--route ", route, ": expected auto, regex or grammar"));
    }
  } else if (args.Has("route")) {
    return absl::InvalidArgumentError("--route applies to --json-schema only");
  }
  auto compiled = maskd::ConstraintCompiler().Compile(constraint);
  if (!compiled.ok()) {
    if (schema_file && maskd::FailedStage(compiled.status()) == maskd::CompileStage::kConvert) {
      return absl::Status(compiled.status().code(),
                          absl::StrCat(*schema_file, ": ", compiled.status().message()));
    }
    return compiled.status();
  }
  for (const auto& w : compiled->warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  std::fprintf(stderr, "route: %s\n", std::string(maskd::ConstraintRouteName(compiled->index->route())).c_str());
  return compiled->index;
}

int RunCompile(const Context& ctx) {
  if (!ctx.addr.empty()) return RunOnlineCompile(ctx);
  auto args = Args::Parse(ctx.args, WithTokenizerFlags({"regex", "json-schema", "route", "threads"}), {"eager"});
  if (!args.ok()) return Fail("compile", std::string(args.status().message()));
  auto context = LoadTokenizerContextFlag(*args);
  if (!context.ok()) return Fail("compile", std::string(context.status().message()));
  auto threads = args->GetUint("threads", 1);
  if (!threads.ok()) return Fail("compile", std::string(threads.status().message()));
  if (auto s = OneConstraintFlag(*args); !s.ok()) return Fail("compile", std::string(s.message()));
  if (args->Has("grammar")) {
    auto g = CompileGrammarFlag(*args, *context);
    if (!g.ok()) return Fail("compile", std::string(g.status().message()));
    return RunGrammarCompile(*g);
  }

  Clock::time_point t0 = Clock::now();
  auto compiled = CompileConstraintFlag(*args, *context);
  if (!compiled.ok()) return Fail("compile", std::string(compiled.status().message()));
  if ((*compiled)->grammar_index()) {
    return RunGrammarCompile(SchemaGrammarArg((*compiled)->grammar_index(), t0));
  }
  const std::shared_ptr<const maskd::TokenIndex>* index = &(*compiled)->token_index();
  double compile_ms = MsSince(t0);
  std::vector<uint32_t> mask((*index)->num_words());
  maskd::Guide guide(*index);
  guide.WriteMaskUnchecked(mask.data());
  double first_mask_ms = MsSince(t0);
  nlohmann::json out = {{"dfa_states", (*index)->dfa().num_states()},
                        {"compile_ms", compile_ms},
                        {"first_mask_ms", first_mask_ms}};
  if (args->Has("eager")) {
    auto status = (*index)->Precompute(static_cast<int>(*threads));
    if (!status.ok()) return Fail("compile", std::string(status.message()));
    out["ready_ms"] = MsSince(t0);
    out["ready_states"] = (*index)->num_computed_states();
  }
  out["index_bytes"] = (*index)->MemoryBytes();
  PrintJsonLine(out);
  return 0;
}

int RunWalk(const Context& ctx) {
  auto args = Args::Parse(ctx.args, WithTokenizerFlags({"regex", "json-schema", "route", "tokens"}), {"full"});
  if (!args.ok()) return Fail("walk", std::string(args.status().message()));
  auto context = LoadTokenizerContextFlag(*args);
  if (!context.ok()) return Fail("walk", std::string(context.status().message()));
  auto tokens = args->GetUintList("tokens");
  if (!tokens.ok()) return Fail("walk", std::string(tokens.status().message()));
  if (auto s = OneConstraintFlag(*args); !s.ok()) return Fail("walk", std::string(s.message()));
  if (args->Has("grammar")) {
    auto g = CompileGrammarFlag(*args, *context);
    if (!g.ok()) return Fail("walk", std::string(g.status().message()));
    return RunGrammarWalk(*g, *tokens, args->Has("full"));
  }
  auto compiled = CompileConstraintFlag(*args, *context);
  if (!compiled.ok()) return Fail("walk", std::string(compiled.status().message()));
  if ((*compiled)->grammar_index()) {
    return RunGrammarWalk(SchemaGrammarArg((*compiled)->grammar_index(), Clock::now()), *tokens,
                          args->Has("full"));
  }
  const std::shared_ptr<const maskd::TokenIndex>* index = &(*compiled)->token_index();

  const bool full = args->Has("full");
  maskd::Guide guide(*index);
  std::vector<uint32_t> mask((*index)->num_words());
  auto emit = [&](size_t step) {
    guide.WriteMaskUnchecked(mask.data());
    const size_t bytes = mask.size() * sizeof(uint32_t);  // little-endian host words
    nlohmann::json line = {
        {"step", step},
        {"state", guide.IsFinished() ? -1 : static_cast<int64_t>(guide.state())},
        {"allowed", maskd::CountAllowedTokens(mask.data(), (*index)->num_words())},
        {"mask_sha256", Sha256Hex(mask.data(), bytes)},
        {"accepting", guide.IsAccepting()}};
    if (full) {
      line["mask_b64"] = absl::Base64Escape(
          absl::string_view(reinterpret_cast<const char*>(mask.data()), bytes));
    }
    PrintJsonLine(line);
  };
  emit(0);
  for (size_t i = 0; i < tokens->size(); ++i) {
    if (auto s = guide.Advance((*tokens)[i]); !s.ok()) {
      PrintJsonLine({{"step", i + 1}, {"error", std::string(s.message())}});
      return 3;
    }
    emit(i + 1);
  }
  return 0;
}

int RunSample(const Context& ctx) {
  auto args = Args::Parse(ctx.args, WithTokenizerFlags({"regex", "json-schema", "route", "seed", "max-tokens"}), {});
  if (!args.ok()) return Fail("sample", std::string(args.status().message()));
  auto context = LoadTokenizerContextFlag(*args);
  if (!context.ok()) return Fail("sample", std::string(context.status().message()));
  auto seed = args->GetUint("seed", 0);
  auto max_tokens = args->GetUint("max-tokens", 64);
  if (!seed.ok()) return Fail("sample", std::string(seed.status().message()));
  if (!max_tokens.ok()) return Fail("sample", std::string(max_tokens.status().message()));
  if (auto s = OneConstraintFlag(*args); !s.ok()) return Fail("sample", std::string(s.message()));
  if (args->Has("grammar")) {
    auto g = CompileGrammarFlag(*args, *context);
    if (!g.ok()) return Fail("sample", std::string(g.status().message()));
    return RunGrammarSample(*g, *seed, *max_tokens);
  }
  auto compiled = CompileConstraintFlag(*args, *context);
  if (!compiled.ok()) return Fail("sample", std::string(compiled.status().message()));
  if ((*compiled)->grammar_index()) {
    return RunGrammarSample(SchemaGrammarArg((*compiled)->grammar_index(), Clock::now()), *seed,
                            *max_tokens);
  }
  const std::shared_ptr<const maskd::TokenIndex>* index = &(*compiled)->token_index();
  auto walk = maskd::RandomWalk(*index, *seed, *max_tokens);
  if (!walk.ok()) return Fail("sample", std::string(walk.status().message()));
  PrintJsonLine({{"tokens", walk->tokens}, {"text_hex", Hex(walk->text)}, {"finished", walk->finished}});
  return 0;
}

}  // namespace

MASKCTL_COMMAND("compile",
                "compile --tokenizer T (--regex R | --json-schema FILE [--route auto|regex|grammar] | --grammar FILE [--format "
                "lark|gbnf|ebnf]) [--eager [--threads N]] "
                "[--vocab-size N] [--eos IDS]   (with --addr: compile on a server, --tokenizer NAME)",
                RunCompile);
MASKCTL_COMMAND("walk",
                "walk --tokenizer T (--regex R | --json-schema FILE [--route auto|regex|grammar] | --grammar FILE [--format F]) "
                "--tokens 12,345,6 [--full]",
                RunWalk);
MASKCTL_COMMAND("sample",
                "sample --tokenizer T (--regex R | --json-schema FILE [--route auto|regex|grammar] | --grammar FILE [--format F]) "
                "--seed S --max-tokens N",
                RunSample);

}  // namespace maskctl
