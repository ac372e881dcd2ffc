// maskd_grammar_coldpath: what one fresh grammar costs in a fresh process.
//
// One run = one (grammar, tokenizer) in this process, which has compiled
// nothing before: the GrammarIndex memo starts empty, as it does for a new
// grammar in a server. bench/grammar_peers.py starts one process per case.
//
//   maskd_grammar_coldpath --tokenizer DIR --grammar FILE [--format lark|gbnf|ebnf]
//                          [--text FILE | --steps 64 --seed 1] [--warm-reps 10]
//                          [--masks-out FILE] [--clock wall|cpu]
//                          [--eager-terminal-dfa-states N | --eager-dfa]
//   maskd_grammar_coldpath --tokenizer DIR --structural-tag FILE [the same flags]
//
// The grammar, or with --structural-tag a structural tag (constraint/
// structural_tag.h; bench/tools_bench.py runs this on tool lists), is
// compiled as maskd compiles one: a ConstraintCompiler with maskd's default
// limits, so a terminal's DFA is whole when it fits
// CompileLimits::eager_terminal_dfa_states and lazy past it.
// --eager-terminal-dfa-states sets that bound (0: every terminal lazy);
// --eager-dfa builds every terminal whole (the constraint option eager_dfa).
//
// The walk: with --text, the sample text is spelled token by token, each
// step taking the longest allowed token whose bytes start the rest of the
// text (lowest id on ties); the walk stops when the text is spelled or no
// allowed token starts the rest. Without --text, each step takes a token
// drawn (seeded, uniform) among the allowed ones, for --steps steps. EOS is
// never taken; the mask after the last token is recorded too.
//
// Prints one JSON line (times in ms unless named _us; wall time unless
// --clock cpu, this process's CPU time):
//   vocab_load_ms   tokenizer load and its context (trie, loop-mask byte index;
//                   not part of any other figure)
//   compile_ms      grammar text -> GrammarIndex (front end + Create; the
//                   file is read before the clock starts); for a structural
//                   tag, ConstraintCompiler::Compile
//   first_mask_ms   GrammarGuide::Create + its first mask
//   ttfm_ms         compile_ms + first_mask_ms
//   walk_steps      tokens advanced
//   step_us         per step of the first walk (mask + advance; the masks
//                   of the memo's first visits included): mean, p50, p99,
//                   max; the mask after the last token is not a step
//   warm_step_us    the same per-step figures over --warm-reps replays of
//                   the walk on new guides over the same index
//   text_spelled    with --text: whether the walk spelled all of it
//   accepting       whether the grammar accepts the walk's text
//   memo_bytes      the index memo after the walk and its replays
//   tokens          the walk's token ids
//   dfas_built, dfas_shared  terminal DFAs built, and taken from the
//                   compiler's cache (grammar/terminal_dfas.h), by the first
//                   compilation
//   resent_ttfm_ms  with --structural-tag: the same document compiled again
//                   by the same compiler (a new index: the tools sent again in
//                   a later request, its DFAs from the cache) + its first
//                   mask; 0 otherwise
// MASKD_COLDPATH_TRACE=1 in the environment prints each step of the first
// walk on stderr (mask and advance times, tokens allowed, the token taken),
// then each step's time in the first replay.
// With --masks-out, the walk's masks (step 0 .. walk_steps) are written
// there (bench/coldpath/coldpath_util.h: the mask dump format).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/coldpath/coldpath_util.h"
#include "constraint/constraint.h"
#include "constraint/constraint_compiler.h"
#include "grammar/grammar_guide.h"
#include "grammar/grammar_index.h"
#include "grammar/grammar_text.h"
#include "index/random_walk.h"
#include "tokenizer/tokenizer_context.h"
#include "tokenizer/vocabulary.h"

namespace {

using maskd::coldpath::MsSince;
using maskd::coldpath::NowMs;
using maskd::grammar::GrammarGuide;
using maskd::grammar::GrammarIndex;

[[noreturn]] void Die(const std::string& msg) { maskd::coldpath::Die("maskd_grammar_coldpath", msg); }

std::string ReadFileOrDie(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) Die(path + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The format name a grammar file's extension gives ("" when none).
std::string FormatOf(const std::string& path) {
  const size_t dot = path.rfind('.');
  return dot == std::string::npos ? "" : path.substr(dot + 1);
}

// Mean, p50, p99 and max of per-step times (nearest rank), as a JSON object.
std::string Summary(std::vector<double> us) {
  if (us.empty()) return "{\"mean\": 0, \"p50\": 0, \"p99\": 0, \"max\": 0}";
  double sum = 0;
  for (double u : us) sum += u;
  std::sort(us.begin(), us.end());
  auto rank = [&](double q) {
    const size_t n = us.size();
    const size_t r = static_cast<size_t>(std::max(1.0, std::ceil(q * static_cast<double>(n))));
    return us[std::min(n, r) - 1];
  };
  return absl::StrFormat("{\"mean\": %.3f, \"p50\": %.3f, \"p99\": %.3f, \"max\": %.3f}",
                         sum / static_cast<double>(us.size()), rank(0.5), rank(0.99), us.back());
}

// The longest allowed text token whose bytes start `rest` (lowest id on
// ties); -1 when none.
int64_t LongestAllowedPrefix(const maskd::Vocabulary& vocab, const std::vector<uint32_t>& mask,
                             std::string_view rest) {
  int64_t best = -1;
  size_t best_len = 0;
  for (uint32_t w = 0; w < mask.size(); ++w) {
    for (uint32_t bits = mask[w]; bits != 0; bits &= bits - 1) {
      const uint32_t t = w * 32 + static_cast<uint32_t>(__builtin_ctz(bits));
      if (t >= vocab.size() || vocab.is_eos(t) || vocab.is_special(t)) continue;
      const std::string_view b = vocab.bytes(t);
      if (b.size() > best_len && b.size() <= rest.size() && rest.substr(0, b.size()) == b) {
        best = t;
        best_len = b.size();
      }
    }
  }
  return best;
}

using IndexOr = absl::StatusOr<std::shared_ptr<const GrammarIndex>>;

// How the run compiles: --eager-terminal-dfa-states and --eager-dfa.
uint32_t eager_terminal_dfa_states = maskd::CompileLimits::kDefaultEagerTerminalDfaStates;
bool eager_dfa = false;

// One compiler per process, as in maskd.
const maskd::ConstraintCompiler& Compiler() {
  static const maskd::ConstraintCompiler* compiler = [] {
    maskd::CompileLimits limits;
    limits.eager_terminal_dfa_states = eager_terminal_dfa_states;
    return new maskd::ConstraintCompiler(limits);
  }();
  return *compiler;
}

// Terminal DFAs the first compilation built and shared (the compiler's
// TerminalDfas stats).
uint64_t dfas_built = 0, dfas_shared = 0;

IndexOr Compile(maskd::Constraint constraint) {
  constraint.options.eager_dfa = eager_dfa;
  const maskd::ConstraintCompiler& compiler = Compiler();
  auto compiled = compiler.Compile(constraint);
  if (compiler.terminal_dfas() != nullptr && dfas_built == 0) {  // the first compilation's
    dfas_built = compiler.terminal_dfas()->stats().misses;
    dfas_shared = compiler.terminal_dfas()->stats().hits;
  }
  if (!compiled.ok()) return compiled.status();
  return compiled->index->grammar_index();
}

IndexOr CompileGrammar(const std::string& text, maskd::grammar::GrammarFormat format,
                       std::shared_ptr<const maskd::TokenizerContext> context) {
  return Compile(maskd::Constraint::Grammar(text, format, std::move(context)));
}

IndexOr CompileStructuralTag(const std::string& text,
                             std::shared_ptr<const maskd::TokenizerContext> context) {
  return Compile(maskd::Constraint::StructuralTag(text, std::move(context)));
}

// The same structural tag compiled again by the same compiler (a new index:
// the tools sent in a later request) + its first mask, in ms.
double ResentTtfmMs(const std::string& text, std::shared_ptr<const maskd::TokenizerContext> context,
                    std::vector<uint32_t>& mask) {
  const double t0 = NowMs();
  auto again = CompileStructuralTag(text, std::move(context));
  if (!again.ok()) Die(absl::StrCat("compile again: ", again.status().message()));
  auto guide = GrammarGuide::Create(*again);
  if (!guide.ok() || !guide->WriteMask(absl::MakeSpan(mask)).ok()) Die("first mask again failed");
  return MsSince(t0);
}

}  // namespace

int main(int argc, char** argv) {
  std::string tokenizer, grammar_path, format, text_path, masks_out;
  bool structural_tag = false;
  int steps = 64, warm_reps = 10;
  uint64_t seed = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Die("flag " + a + " needs a value");
      return argv[++i];
    };
    if (a == "--tokenizer") tokenizer = value();
    else if (a == "--grammar") grammar_path = value();
    else if (a == "--structural-tag") grammar_path = value(), structural_tag = true;
    else if (a == "--format") format = value();
    else if (a == "--text") text_path = value();
    else if (a == "--steps") steps = std::max(0, std::atoi(value().c_str()));
    else if (a == "--seed") seed = std::strtoull(value().c_str(), nullptr, 10);
    else if (a == "--warm-reps") warm_reps = std::max(1, std::atoi(value().c_str()));
    else if (a == "--masks-out") masks_out = value();
    else if (a == "--eager-terminal-dfa-states") {
      eager_terminal_dfa_states = static_cast<uint32_t>(std::strtoul(value().c_str(), nullptr, 10));
    } else if (a == "--eager-dfa") eager_dfa = true;
    else if (a == "--clock") {
      const std::string c = value();
      if (c != "cpu" && c != "wall") Die("--clock is cpu or wall");
      maskd::coldpath::UseCpuClock(c == "cpu");
    } else {
      Die("unknown flag " + a);
    }
  }
  if (tokenizer.empty() || grammar_path.empty()) {
    Die("--tokenizer and --grammar (or --structural-tag) are required");
  }
  if (format.empty()) format = structural_tag ? "lark" : FormatOf(grammar_path);
  const std::optional<maskd::grammar::GrammarFormat> grammar_format =
      maskd::grammar::GrammarFormatNamed(format);
  if (!grammar_format.has_value()) Die("--format is lark, gbnf or ebnf");
  const std::string grammar_text = ReadFileOrDie(grammar_path);
  const bool text_mode = !text_path.empty();
  const std::string text = text_mode ? ReadFileOrDie(text_path) : "";

  double t0 = NowMs();
  auto vocab = maskd::Vocabulary::Load(tokenizer);
  if (!vocab.ok()) Die(std::string(vocab.status().message()));
  const auto context = maskd::TokenizerContext::Create(*vocab);
  const double vocab_load_ms = MsSince(t0);
  const maskd::Vocabulary& v = **vocab;

  t0 = NowMs();
  auto index = structural_tag ? CompileStructuralTag(grammar_text, context)
                              : CompileGrammar(grammar_text, *grammar_format, context);
  const double compile_ms = MsSince(t0);
  if (!index.ok()) Die(absl::StrCat("compile: ", index.status().message()));
  const uint32_t nw = (*index)->num_words();
  std::vector<uint32_t> mask(nw);

  t0 = NowMs();
  auto guide = GrammarGuide::Create(*index);
  if (!guide.ok()) Die(std::string(guide.status().message()));
  if (auto s = guide->WriteMask(absl::MakeSpan(mask)); !s.ok()) Die(std::string(s.message()));
  const double first_mask_ms = MsSince(t0);

  // The first walk. Step 0's mask is the first mask again, as a server's
  // first step writes it.
  std::vector<uint32_t> all_masks, tokens;
  std::vector<double> step_us;
  std::mt19937_64 rng(seed);
  size_t spelled = 0;
  const bool trace = std::getenv("MASKD_COLDPATH_TRACE") != nullptr;
  for (;;) {
    double s0 = NowMs();
    if (auto s = guide->WriteMask(absl::MakeSpan(mask)); !s.ok()) {
      Die(absl::StrCat("mask at step ", tokens.size(), ": ", s.message()));
    }
    const double mask_ms = MsSince(s0);
    if (!masks_out.empty()) all_masks.insert(all_masks.end(), mask.begin(), mask.end());
    int64_t tok = -1;
    if (text_mode) {
      tok = LongestAllowedPrefix(v, mask, std::string_view(text).substr(spelled));
    } else if (tokens.size() < static_cast<size_t>(steps)) {
      std::vector<uint32_t> choice = mask;
      for (uint32_t e : v.eos_ids()) choice[e >> 5] &= ~(1u << (e & 31));
      const uint32_t n = maskd::CountAllowedTokens(choice.data(), nw);
      if (n > 0) {
        tok = maskd::NthAllowedToken(choice.data(), nw, static_cast<uint32_t>(rng() % n));
      }
    }
    if (tok < 0) break;
    s0 = NowMs();
    if (auto s = guide->Advance(static_cast<uint32_t>(tok)); !s.ok()) {
      Die(absl::StrCat("advance at step ", tokens.size(), ": ", s.message()));
    }
    const double advance_ms = MsSince(s0);
    step_us.push_back((mask_ms + advance_ms) * 1e3);
    if (trace) {
      std::fprintf(stderr, "step %zu mask_us %.1f advance_us %.1f allowed %u token %lld \"%s\"\n",
                   tokens.size(), mask_ms * 1e3, advance_ms * 1e3,
                   maskd::CountAllowedTokens(mask.data(), nw), static_cast<long long>(tok),
                   maskd::coldpath::JsonEscape(std::string(v.bytes(static_cast<uint32_t>(tok)))).c_str());
    }
    tokens.push_back(static_cast<uint32_t>(tok));
    spelled += v.bytes(static_cast<uint32_t>(tok)).size();
  }
  const bool accepting = guide->IsAccepting();

  // Warm: the same walk replayed on new guides over the same index.
  std::vector<double> warm_us;
  for (int r = 0; r < warm_reps && !tokens.empty(); ++r) {
    auto w = GrammarGuide::Create(*index);
    if (!w.ok()) Die(std::string(w.status().message()));
    for (size_t i = 0; i < tokens.size(); ++i) {
      const double s0 = NowMs();
      (void)w->WriteMask(absl::MakeSpan(mask));
      (void)w->Advance(tokens[i]);
      warm_us.push_back(MsSince(s0) * 1e3);
      if (trace && r == 0) std::fprintf(stderr, "replay step %zu us %.1f\n", i, warm_us.back());
    }
  }

  const double resent_ttfm_ms = structural_tag ? ResentTtfmMs(grammar_text, context, mask) : 0;

  std::string toks;
  for (uint32_t t : tokens) absl::StrAppend(&toks, toks.empty() ? "" : ",", t);
  std::printf(
      "{\"vocab_load_ms\": %.3f, \"compile_ms\": %.3f, \"first_mask_ms\": %.3f, \"ttfm_ms\": %.3f, "
      "\"walk_steps\": %zu, \"walk_ms\": %.3f, \"step_us\": %s, \"warm_step_us\": %s, "
      "\"text_spelled\": %s, \"accepting\": %s, \"memo_bytes\": %zu, \"clock\": \"%s\", "
      "\"dfas_built\": %llu, \"dfas_shared\": %llu, \"resent_ttfm_ms\": %.3f, \"tokens\": [%s], \"grammar\": \"%s\"}\n",
      vocab_load_ms, compile_ms, first_mask_ms, compile_ms + first_mask_ms, tokens.size(),
      [&] {
        double s = 0;
        for (double u : step_us) s += u;
        return s / 1e3;
      }(),
      Summary(step_us).c_str(), Summary(warm_us).c_str(),
      text_mode && spelled == text.size() ? "true" : "false", accepting ? "true" : "false",
      (*index)->memo_bytes(), maskd::coldpath::ClockName(),
      static_cast<unsigned long long>(dfas_built), static_cast<unsigned long long>(dfas_shared),
      resent_ttfm_ms,
      toks.c_str(),
      maskd::coldpath::JsonEscape(grammar_path).c_str());
  if (!masks_out.empty() && !maskd::coldpath::WriteMasks(masks_out, all_masks)) {
    Die("cannot write " + masks_out);
  }
  return 0;
}
