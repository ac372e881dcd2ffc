#include "tools/maskctl/grammar_cmds.h"

#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "grammar/grammar_guide.h"
#include "grammar/grammar_index.h"
#include "grammar/grammar_text.h"
#include "index/random_walk.h"
#include "tools/maskctl/command.h"
#include "tools/maskctl/digest.h"
#include "tools/maskctl/report.h"

namespace maskctl {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

absl::StatusOr<GrammarArg> CompileGrammarSource(const ConstraintSource& source,
                                                std::shared_ptr<const maskd::TokenizerContext> context) {
  GrammarArg out;
  out.started = Clock::now();
  // The front ends' messages give the line and column; the file is named here.
  auto g = maskd::grammar::ParseGrammarText(source.text, source.options.grammar_format);
  if (!g.ok()) {
    return absl::Status(g.status().code(), absl::StrCat(source.path, ": ", g.status().message()));
  }
  out.rules = g->rules.size();
  out.terminals = g->terminals.size();
  auto index = maskd::grammar::GrammarIndex::Create(*g, std::move(context));
  if (!index.ok()) {
    return absl::Status(index.status().code(), absl::StrCat(source.path, ": ", index.status().message()));
  }
  out.index = *std::move(index);
  return out;
}

GrammarArg SchemaGrammarArg(std::shared_ptr<const maskd::grammar::GrammarIndex> index,
                            Clock::time_point started) {
  GrammarArg out;
  out.rules = index->grammar()->num_rules();
  out.terminals = index->grammar()->num_terminals();
  out.index = std::move(index);
  out.started = started;
  return out;
}

int RunGrammarCompile(const GrammarArg& g) {
  const double compile_ms = MsSince(g.started);
  auto guide = maskd::grammar::GrammarGuide::Create(g.index);
  if (!guide.ok()) return Fail("compile", std::string(guide.status().message()));
  std::vector<uint32_t> mask(g.index->num_words());
  if (auto s = guide->WriteMask(absl::MakeSpan(mask)); !s.ok()) {
    return Fail("compile", std::string(s.message()));
  }
  PrintJsonLine({{"grammar_rules", g.rules},
             {"grammar_terminals", g.terminals},
             {"compile_ms", compile_ms},
             {"first_mask_ms", MsSince(g.started)},
             {"allowed", maskd::CountAllowedTokens(mask.data(), g.index->num_words())},
             {"memo_bytes", g.index->memo_bytes()}});
  return 0;
}

int RunGrammarWalk(const GrammarArg& g, const std::vector<uint32_t>& tokens, bool full) {
  auto guide = maskd::grammar::GrammarGuide::Create(g.index);
  if (!guide.ok()) return Fail("walk", std::string(guide.status().message()));
  std::vector<uint32_t> mask(g.index->num_words());
  auto emit = [&](size_t step) -> bool {
    if (auto s = guide->WriteMask(absl::MakeSpan(mask)); !s.ok()) {
      PrintJsonLine({{"step", step}, {"error", std::string(s.message())}});
      return false;
    }
    const size_t bytes = mask.size() * sizeof(uint32_t);  // little-endian host words
    nlohmann::json line = {{"step", step},
                           {"bytes", guide->num_bytes()},
                           {"allowed", maskd::CountAllowedTokens(mask.data(), g.index->num_words())},
                           {"mask_sha256", Sha256Hex(mask.data(), bytes)},
                           {"accepting", guide->IsAccepting()},
                           {"finished", guide->IsFinished()}};
    if (full) {
      line["mask_b64"] = absl::Base64Escape(
          absl::string_view(reinterpret_cast<const char*>(mask.data()), bytes));
    }
    PrintJsonLine(line);
    return true;
  };
  if (!emit(0)) return 3;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (auto s = guide->Advance(tokens[i]); !s.ok()) {
      PrintJsonLine({{"step", i + 1}, {"error", std::string(s.message())}});
      return 3;
    }
    if (!emit(i + 1)) return 3;
  }
  return 0;
}

int RunGrammarSample(const GrammarArg& g, uint64_t seed, uint64_t max_tokens) {
  auto guide = maskd::grammar::GrammarGuide::Create(g.index);
  if (!guide.ok()) return Fail("sample", std::string(guide.status().message()));
  const maskd::Vocabulary& v = g.index->vocab();
  std::mt19937_64 rng(seed);
  std::vector<uint32_t> mask(g.index->num_words()), tokens;
  std::string text;
  bool finished = false;
  // Uniform among the allowed tokens (EOS included); past half the budget,
  // EOS as soon as it is allowed, so that most samples finish.
  while (tokens.size() < max_tokens && !finished) {
    if (auto s = guide->WriteMask(absl::MakeSpan(mask)); !s.ok()) {
      return Fail("sample", std::string(s.message()));
    }
    const uint32_t n = maskd::CountAllowedTokens(mask.data(), g.index->num_words());
    if (n == 0) return Fail("sample", "no token is allowed (the vocabulary cannot spell the grammar)");
    uint32_t token = maskd::NthAllowedToken(mask.data(), g.index->num_words(),
                                            static_cast<uint32_t>(rng() % n));
    if (2 * tokens.size() >= max_tokens && guide->IsAccepting() && !v.eos_ids().empty()) {
      token = v.eos_ids()[0];
    }
    if (auto s = guide->Advance(token); !s.ok()) return Fail("sample", std::string(s.message()));
    tokens.push_back(token);
    if (v.is_eos(token)) finished = true;
    else text += v.bytes(token);
  }
  PrintJsonLine({{"tokens", tokens}, {"text_hex", Hex(text)}, {"finished", finished}});
  return 0;
}

}  // namespace maskctl
