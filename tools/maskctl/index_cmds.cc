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
#include "tools/maskctl/constraint_flags.h"
#include "tools/maskctl/online.h"

namespace maskctl {
namespace {

using Clock = std::chrono::steady_clock;

// What a command's CONSTRAINT compiled to: a regex-route index, or a grammar
// (`grammar.index` set).
struct CompiledArg {
  std::shared_ptr<const maskd::TokenIndex> regex;
  GrammarArg grammar;
};

// The command's CONSTRAINT (constraint_flags.h) against --tokenizer: a
// --grammar FILE straight into a GrammarIndex (its figures as written), the
// others through ConstraintCompiler with the converter's default options but
// those the flags set. A schema's warnings go to stderr, one per line, then
// the route taken; conversion errors name the file.
absl::StatusOr<CompiledArg> CompileConstraintFlags(const Args& args,
                                                   std::shared_ptr<const maskd::TokenizerContext> context) {
  const Clock::time_point started = Clock::now();
  auto source = ReadConstraintFlags(args);
  if (!source.ok()) return source.status();
  if (source->kind == maskd::ConstraintKind::kGrammar) {
    auto g = CompileGrammarSource(*source, std::move(context));
    if (!g.ok()) return g.status();
    return CompiledArg{nullptr, *std::move(g)};
  }
  maskd::Constraint constraint = ToConstraint(*source, std::move(context));
  // A regex's DFA is whole when it fits CompileLimits::eager_dfa_states, else
  // lazy, unless asked whole (--eager precomputes it).
  constraint.options.eager_dfa = args.Has("eager") || args.Has("eager-dfa");
  auto compiled = maskd::ConstraintCompiler().Compile(constraint);
  if (!compiled.ok()) {
    if (!source->path.empty() && maskd::FailedStage(compiled.status()) == maskd::CompileStage::kConvert) {
      return absl::Status(compiled.status().code(),
                          absl::StrCat(source->path, ": ", compiled.status().message()));
    }
    return compiled.status();
  }
  for (const auto& w : compiled->warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  std::fprintf(stderr, "route: %s\n", std::string(maskd::ConstraintRouteName(compiled->index->route())).c_str());
  if (compiled->index->grammar_index()) {
    return CompiledArg{nullptr, SchemaGrammarArg(compiled->index->grammar_index(), started)};
  }
  return CompiledArg{compiled->index->token_index(), {}};
}

int RunCompile(const Context& ctx) {
  if (ctx.online()) return RunOnlineCompile(ctx);
  const Args* args = &ctx.args;
  auto context = LoadTokenizerContextFlag(*args);
  if (!context.ok()) return Fail("compile", std::string(context.status().message()));
  auto threads = args->GetUint("threads", 1);
  if (!threads.ok()) return Fail("compile", std::string(threads.status().message()));
  Clock::time_point t0 = Clock::now();
  auto compiled = CompileConstraintFlags(*args, *context);
  if (!compiled.ok()) return Fail("compile", std::string(compiled.status().message()));
  if (compiled->grammar.index) return RunGrammarCompile(compiled->grammar);
  const std::shared_ptr<const maskd::TokenIndex>* index = &compiled->regex;
  double compile_ms = MsSince(t0);
  std::vector<uint32_t> mask((*index)->num_words());
  maskd::Guide guide(*index);
  (void)guide.WriteMaskUnchecked(mask.data());
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
  const Args* args = &ctx.args;
  auto context = LoadTokenizerContextFlag(*args);
  if (!context.ok()) return Fail("walk", std::string(context.status().message()));
  auto tokens = args->GetUintList("tokens");
  if (!tokens.ok()) return Fail("walk", std::string(tokens.status().message()));
  auto compiled = CompileConstraintFlags(*args, *context);
  if (!compiled.ok()) return Fail("walk", std::string(compiled.status().message()));
  if (compiled->grammar.index) return RunGrammarWalk(compiled->grammar, *tokens, args->Has("full"));
  const std::shared_ptr<const maskd::TokenIndex>* index = &compiled->regex;

  const bool full = args->Has("full");
  maskd::Guide guide(*index);
  std::vector<uint32_t> mask((*index)->num_words());
  auto emit = [&](size_t step) {
    (void)guide.WriteMaskUnchecked(mask.data());
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
  const Args* args = &ctx.args;
  auto context = LoadTokenizerContextFlag(*args);
  if (!context.ok()) return Fail("sample", std::string(context.status().message()));
  auto seed = args->GetUint("seed", 0);
  auto max_tokens = args->GetUint("max-tokens", 64);
  if (!seed.ok()) return Fail("sample", std::string(seed.status().message()));
  if (!max_tokens.ok()) return Fail("sample", std::string(max_tokens.status().message()));
  auto compiled = CompileConstraintFlags(*args, *context);
  if (!compiled.ok()) return Fail("sample", std::string(compiled.status().message()));
  if (compiled->grammar.index) return RunGrammarSample(compiled->grammar, *seed, *max_tokens);
  const std::shared_ptr<const maskd::TokenIndex>* index = &compiled->regex;
  auto walk = maskd::RandomWalk(*index, *seed, *max_tokens);
  if (!walk.ok()) return Fail("sample", std::string(walk.status().message()));
  PrintJsonLine({{"tokens", walk->tokens}, {"text_hex", Hex(walk->text)}, {"finished", walk->finished}});
  return 0;
}

// The offline forms' flags: the tokenizer file's, CONSTRAINT's, and `own`.
Form Offline(std::string usage, FlagNames own_value, FlagNames own_bool) {
  return Form{std::move(usage),
              Union({TokenizerValueFlags(), ConstraintValueFlags(), std::move(own_value)}),
              Union({ConstraintBoolFlags(), std::move(own_bool)})};
}

}  // namespace

#define MASKCTL_TOKENIZER_FILE_USAGE "--tokenizer PATH [--vocab-size N] [--eos ID[,ID...]] "

MASKCTL_COMMAND(compile, "compile",
                "compiles CONSTRAINT; prints its figures (online: the index id and state)",
                Offline("compile " MASKCTL_TOKENIZER_FILE_USAGE "CONSTRAINT"
                        " [--eager [--threads N]] [--eager-dfa]",
                        {"threads"}, {"eager", "eager-dfa"}),
                OnlineCompileForm(), RunCompile);
MASKCTL_COMMAND(walk, "walk",
                "one line per step of the given tokens: the mask's size, digest and acceptance",
                Offline("walk " MASKCTL_TOKENIZER_FILE_USAGE "CONSTRAINT"
                        " [--tokens ID[,ID...]] [--full]",
                        {"tokens"}, {"full"}),
                Form{}, RunWalk);
MASKCTL_COMMAND(sample, "sample",
                "a random text CONSTRAINT allows, chosen token by token",
                Offline("sample " MASKCTL_TOKENIZER_FILE_USAGE "CONSTRAINT"
                        " [--seed S] [--max-tokens N]",
                        {"seed", "max-tokens"}, {}),
                Form{}, RunSample);

}  // namespace maskctl
