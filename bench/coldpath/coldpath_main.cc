// maskd_coldpath: what one fresh constraint costs in a fresh process.
//
// One run = one (regex, tokenizer) in this process, which has compiled
// nothing before: every per-vocabulary memo (LoopMasks) starts empty, as it
// does for a new server. bench/coldpath.py starts one process per case.
//
//   maskd_coldpath --tokenizer DIR --regex PATTERN [--steps 30] [--seed 1]
//                  [--warm-reps 20] [--no-share-loops] [--eager] [--eager-dfa] [--threads N]
//                  [--eager-dfa-states N]
//                  [--masks-out FILE] [--clock wall|cpu] [--scratch-reps N]
//
// Prints one JSON line (times in ms unless named _us; wall time unless
// --clock cpu, the process's CPU time, which a loaded machine distorts less):
//   vocab_load_ms   tokenizer load and its context (trie, loop-mask byte index;
//                   not part of any other figure)
//   compile_ms      parse + DFA + index creation (lazy: no mask yet)
//   first_mask_ms   the start state's mask, after compile
//   ttfm_ms         compile_ms + first_mask_ms (regex -> first mask)
//   walk_ms         a whole first walk of a seeded sample: per step, the
//                   mask written plus the chosen token advanced, every first
//                   visit included (token choice itself is not timed)
//   walk_steps      steps in that walk (fewer than --steps when only EOS is
//                   left; EOS is never taken)
//   warm_step_us    median over --warm-reps replays of the same walk of the
//                   per-step mask + advance cost, every mask now computed
// With --eager, no walk: compile (the whole DFA), then eager_ms for
// Precompute(--threads) of every state reachable through tokens (eager_states
// of them). --eager-dfa: the DFA built whole at compile (ConstraintOptions::
// eager_dfa) instead of the default lazy states; dfa_states is then the
// whole DFA's, else the states built by the end of the run. --eager-dfa-states:
// CompileLimits::eager_dfa_states (the default's; 0: always lazy); "lazy"
// in the JSON line says which build the regex got.
//   write_ns, memcpy_ns, advance_ns: the warm parts over the walk's states:
//                   one mask written (TokenIndex::WriteMask), a memcpy of as
//                   many bytes in the same loop, one token advanced (NextState)
//   scratch_mask_us (--scratch-reps N) median over N new indexes over the
//                   same DFA of the start state's mask: a mask from scratch
//                   once the process is warm
//   tokens          the walk's token ids
// MASKD_COLDPATH_TRACE=1 in the environment prints each step's state and mask
// time on stderr. With --masks-out, the walk's masks (step 0 .. walk_steps, the last one
// after the last token) are written there as little-endian uint32 words,
// num_words each, for bench/coldpath.py to compare with other engines'.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "automaton/dfa.h"
#include "bench/coldpath/coldpath_util.h"
#include "constraint/constraint_compiler.h"
#include "index/guide.h"
#include "index/random_walk.h"
#include "index/token_index.h"
#include "tokenizer/tokenizer_context.h"
#include "tokenizer/vocabulary.h"

namespace {

using maskd::coldpath::JsonEscape;
using maskd::coldpath::MsSince;

struct Clock {
  using time_point = double;  // ms
  static time_point now() { return maskd::coldpath::NowMs(); }
};

[[noreturn]] void Die(const std::string& msg) { maskd::coldpath::Die("maskd_coldpath", msg); }

}  // namespace

int main(int argc, char** argv) {
  std::string tokenizer, regex, masks_out;
  int steps = 30, warm_reps = 20, threads = 1, scratch_reps = 0;
  uint64_t seed = 1;
  bool share_loops = true, eager = false, eager_dfa = false;
  uint32_t eager_dfa_states = maskd::CompileLimits::kDefaultEagerDfaStates;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Die("flag " + a + " needs a value");
      return argv[++i];
    };
    if (a == "--tokenizer") {
      tokenizer = value();
    } else if (a == "--regex") {
      regex = value();
    } else if (a == "--steps") {
      steps = std::atoi(value().c_str());
    } else if (a == "--seed") {
      seed = std::strtoull(value().c_str(), nullptr, 10);
    } else if (a == "--warm-reps") {
      warm_reps = std::max(1, std::atoi(value().c_str()));
    } else if (a == "--scratch-reps") {
      scratch_reps = std::max(0, std::atoi(value().c_str()));
    } else if (a == "--threads") {
      threads = std::max(1, std::atoi(value().c_str()));
    } else if (a == "--masks-out") {
      masks_out = value();
    } else if (a == "--clock") {
      const std::string c = value();
      if (c != "cpu" && c != "wall") Die("--clock is cpu or wall");
      maskd::coldpath::UseCpuClock(c == "cpu");
    } else if (a == "--no-share-loops") {
      share_loops = false;
    } else if (a == "--eager") {
      eager = true;
    } else if (a == "--eager-dfa") {
      eager_dfa = true;
    } else if (a == "--eager-dfa-states") {
      eager_dfa_states = static_cast<uint32_t>(std::strtoul(value().c_str(), nullptr, 10));
    } else {
      Die("unknown flag " + a);
    }
  }
  if (tokenizer.empty() || regex.empty()) Die("--tokenizer and --regex are required");

  auto t0 = Clock::now();
  auto vocab = maskd::Vocabulary::Load(tokenizer);
  if (!vocab.ok()) Die(std::string(vocab.status().message()));
  const auto context = maskd::TokenizerContext::Create(*vocab);
  const double vocab_load_ms = MsSince(t0);

  maskd::CompileLimits limits;
  limits.share_loops = share_loops;
  limits.eager_dfa_states = eager_dfa_states;
  t0 = Clock::now();
  maskd::Constraint constraint = maskd::Constraint::Regex(regex, context);
  constraint.options.eager_dfa = eager_dfa || eager;
  auto compiled = maskd::ConstraintCompiler(limits).Compile(constraint);
  const double compile_ms = MsSince(t0);
  if (!compiled.ok()) Die(absl::StrCat("compile: ", compiled.status().message()));
  const std::shared_ptr<const maskd::TokenIndex> index = compiled->index->token_index();
  const uint32_t nw = index->num_words();
  std::vector<uint32_t> mask(nw);
  if (eager) {
    t0 = Clock::now();
    absl::Status st = index->Precompute(threads);
    const double eager_ms = MsSince(t0);
    if (!st.ok()) Die(absl::StrCat("precompute: ", st.message()));
    std::printf(
        "{\"vocab_load_ms\": %.3f, \"compile_ms\": %.3f, \"eager_ms\": %.3f, \"threads\": %d, "
        "\"eager_states\": %u, \"dfa_states\": %u, \"share_loops\": %s, \"clock\": \"%s\", "
        "\"regex\": \"%s\"}\n",
        vocab_load_ms, compile_ms, eager_ms, threads, index->num_computed_states(),
        index->dfa().num_states(), share_loops ? "true" : "false", maskd::coldpath::ClockName(),
        JsonEscape(regex).c_str());
    return 0;
  }
  maskd::Guide g(index);
  t0 = Clock::now();
  absl::Status first = g.WriteMaskUnchecked(mask.data());
  const double first_mask_ms = MsSince(t0);
  if (!first.ok()) Die(absl::StrCat("first mask: ", first.message()));

  // The whole first walk. Step 0's mask is the first mask again (now warm),
  // so the walk's first step re-writes it: same as a server's first step.
  std::vector<uint32_t> all_masks;
  std::vector<uint32_t> tokens;
  std::mt19937_64 rng(seed);
  double walk_ms = 0;
  for (int step = 0;; ++step) {
    auto s0 = Clock::now();
    absl::Status written = g.WriteMaskUnchecked(mask.data());
    walk_ms += MsSince(s0);
    if (!written.ok()) Die(absl::StrCat("mask: ", written.message()));
    if (std::getenv("MASKD_COLDPATH_TRACE") != nullptr) {
      std::fprintf(stderr, "step %d state %u mask %.3f ms\n", step, g.state(), MsSince(s0));
    }
    if (!masks_out.empty()) all_masks.insert(all_masks.end(), mask.begin(), mask.end());
    if (step >= steps) break;
    // A random allowed text token (EOS is never taken).
    for (uint32_t e : (*vocab)->eos_ids()) {
      if (e < nw * 32) mask[e >> 5] &= ~(1u << (e & 31));
    }
    const uint32_t n = maskd::CountAllowedTokens(mask.data(), nw);
    if (n == 0) break;
    const uint32_t tok = maskd::NthAllowedToken(mask.data(), nw, static_cast<uint32_t>(rng() % n));
    s0 = Clock::now();
    absl::Status st = g.Advance(tok);
    walk_ms += MsSince(s0);
    if (!st.ok()) Die(absl::StrCat("advance: ", st.message()));
    tokens.push_back(tok);
  }

  // Warm: replay the same walk; per-step mask + advance, median over reps.
  std::vector<double> per_step;
  for (int r = 0; r < warm_reps && !tokens.empty(); ++r) {
    maskd::Guide w(index);
    auto s0 = Clock::now();
    for (uint32_t tok : tokens) {
      (void)w.WriteMaskUnchecked(mask.data());
      (void)w.Advance(tok);
    }
    per_step.push_back(MsSince(s0) * 1000.0 / static_cast<double>(tokens.size()));
  }
  std::sort(per_step.begin(), per_step.end());
  const double warm_step_us = per_step.empty() ? 0 : per_step[per_step.size() / 2];


  // Warm parts, each over the walk's states (every mask computed by now):
  // writing one mask, a memcpy of as many bytes (from rotating sources, in
  // this process), and advancing one token. Medians over --warm-reps.
  double write_ns = 0, memcpy_ns = 0, advance_ns = 0;
  if (!tokens.empty()) {
    std::vector<uint32_t> states;
    {
      maskd::Guide r(index);
      for (uint32_t tok : tokens) {
        states.push_back(r.state());
        (void)r.Advance(tok);
      }
    }
    constexpr int kSources = 8;
    std::vector<uint32_t> sources(static_cast<size_t>(kSources) * nw, 0x5a5a5a5a);
    std::vector<double> w, m, a;
    const int inner = std::max(1, 20000 / static_cast<int>(states.size()));
    for (int r = 0; r < warm_reps; ++r) {
      auto s0 = Clock::now();
      for (int k = 0; k < inner; ++k) {
        for (uint32_t st : states) (void)index->WriteMask(st, mask.data());
      }
      w.push_back(MsSince(s0) * 1e6 / (static_cast<double>(inner) * states.size()));
      s0 = Clock::now();
      for (int k = 0; k < inner; ++k) {
        for (size_t i = 0; i < states.size(); ++i) {
          std::memcpy(mask.data(), sources.data() + (i % kSources) * nw, nw * sizeof(uint32_t));
        }
      }
      m.push_back(MsSince(s0) * 1e6 / (static_cast<double>(inner) * states.size()));
      s0 = Clock::now();
      for (int k = 0; k < inner; ++k) {
        for (size_t i = 0; i < states.size(); ++i) {
          volatile uint32_t next = index->NextState(states[i], tokens[i]);
          (void)next;
        }
      }
      a.push_back(MsSince(s0) * 1e6 / (static_cast<double>(inner) * states.size()));
    }
    auto median = [](std::vector<double>& v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    write_ns = median(w);
    memcpy_ns = median(m);
    advance_ns = median(a);
  }

  // A state's mask from scratch: the start state's, in new indexes over the
  // same DFA (the per-vocabulary loop memo stays as the walk left it).
  double scratch_mask_us = 0;
  if (scratch_reps > 0) {
    auto dfa = maskd::Dfa::FromPattern(regex);
    if (!dfa.ok()) Die(std::string(dfa.status().message()));
    std::vector<double> us;
    for (int r = 0; r < scratch_reps; ++r) {
      maskd::TokenIndex::Options index_options;
      index_options.share_loops = share_loops;
      auto fresh = maskd::TokenIndex::Create(*dfa, context, index_options);
      auto s0 = Clock::now();
      (void)fresh->WriteMask(fresh->start(), mask.data());
      us.push_back(MsSince(s0) * 1000.0);
    }
    std::sort(us.begin(), us.end());
    scratch_mask_us = us[us.size() / 2];
  }

  std::string toks;
  for (uint32_t t : tokens) absl::StrAppend(&toks, toks.empty() ? "" : ",", t);
  std::printf(
      "{\"vocab_load_ms\": %.3f, \"compile_ms\": %.3f, \"first_mask_ms\": %.3f, \"ttfm_ms\": %.3f, "
      "\"walk_ms\": %.3f, \"walk_steps\": %zu, \"warm_step_us\": %.3f, \"write_ns\": %.1f, "
      "\"memcpy_ns\": %.1f, \"advance_ns\": %.1f, \"scratch_mask_us\": %.3f, "
      "\"dfa_states\": %u, \"lazy\": %s, "
      "\"share_loops\": %s, \"clock\": \"%s\", \"tokens\": [%s], "
      "\"regex\": \"%s\"}\n",
      vocab_load_ms, compile_ms, first_mask_ms, compile_ms + first_mask_ms, walk_ms,
      tokens.size(), warm_step_us, write_ns, memcpy_ns, advance_ns, scratch_mask_us, index->dfa().num_states(),
      index->dfa().lazy() ? "true" : "false", share_loops ? "true" : "false", maskd::coldpath::ClockName(), toks.c_str(), JsonEscape(regex).c_str());
  if (!masks_out.empty()) {
    if (!maskd::coldpath::WriteMasks(masks_out, all_masks)) Die("cannot write " + masks_out);
  }
  return 0;
}
