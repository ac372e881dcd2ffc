// libFuzzer: first byte: the dialect (bit 0: GBNF or XGrammar EBNF) and where
// the grammar text ends; the grammar -> ParseGbnf / ParseXgrammarEbnf ->
// Validate -> ToText -> EarleyRecognizer over the rest of the input, with
// small limits so that no input can legitimately take long. A crash,
// sanitizer report, hang, status other than OK / InvalidArgument /
// ResourceExhausted (DeadlineExceeded from a terminal's DFA), a parsed
// grammar that Validate refuses, or NextBytes disagreeing with
// IsViablePrefix is a bug. Then the token-mask engine (GrammarIndex,
// GrammarGuide) on a tiny byte-level vocabulary (fuzz/tiny_vocabulary.h):
// for a few steps, each mask must equal IsAllowed of every token (the
// token's bytes pushed one by one), and acceptance must equal the
// recognizer's; the tokens advanced are picked by the input's bytes.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "fuzz/expect_status.h"
#include "fuzz/tiny_vocabulary.h"
#include "grammar/bnf_parser.h"
#include "grammar/earley.h"
#include "grammar/grammar.h"
#include "grammar/grammar_guide.h"
#include "grammar/grammar_index.h"
#include "tokenizer/tokenizer_context.h"
#include "tokenizer/vocabulary.h"

namespace {

using maskd::fuzz::TinyTokenizer;

// The engine's masks against IsAllowed and the recognizer, along the tokens
// `picks` selects.
void CheckEngine(const maskd::grammar::Grammar& g, const maskd::grammar::EarleyRecognizer& r,
                 const maskd::grammar::EarleyOptions& earley, std::string_view picks) {
  maskd::grammar::GrammarIndex::Options options;
  options.earley = earley;
  options.earley.max_chart_items = 1 << 16;
  options.max_mask_work = 1 << 16;
  options.max_memo_bytes = 1 << 20;
  auto index = maskd::grammar::GrammarIndex::Create(g, TinyTokenizer(), options);
  maskd::fuzz::ExpectClientStatus(index.status(), maskd::fuzz::Deadline::kSet);
  if (!index.ok()) return;
  auto guide = maskd::grammar::GrammarGuide::Create(*index);
  maskd::fuzz::ExpectClientStatus(guide.status());
  if (!guide.ok()) return;
  const maskd::Vocabulary& vocab = (*index)->vocab();
  std::vector<uint32_t> mask((*index)->num_words());
  std::string text;
  for (size_t step = 0; step < 8; ++step) {
    absl::Status s = guide->WriteMask(absl::MakeSpan(mask));
    maskd::fuzz::ExpectClientStatus(s);
    if (!s.ok()) return;
    std::vector<uint32_t> allowed;
    for (uint32_t t = 0; t < vocab.size(); ++t) {
      const bool bit = (mask[t >> 5] >> (t & 31)) & 1;
      auto brute = guide->IsAllowed(t);
      maskd::fuzz::ExpectClientStatus(brute.status());
      if (!brute.ok()) return;
      if (bit != *brute) {
        std::fprintf(stderr, "mask bit %d but IsAllowed %d for token %u after \"%s\"\n", bit,
                     *brute, t, text.c_str());
        std::abort();
      }
      if (bit && !vocab.is_special(t)) allowed.push_back(t);
    }
    auto accepted = r.Accepts(text);
    if (accepted.ok() && *accepted != guide->IsAccepting()) {
      std::fprintf(stderr, "the recognizer %s \"%s\" but the guide %s it\n",
                   *accepted ? "accepts" : "refuses", text.c_str(),
                   guide->IsAccepting() ? "accepts" : "refuses");
      std::abort();
    }
    // The distance to an end is 0 exactly when accepting; a budget mask is a
    // non-empty subset of the mask.
    if ((guide->MinBytesToFinish() == 0) != guide->IsAccepting()) {
      std::fprintf(stderr, "min_bytes_to_finish %u but accepting %d after \"%s\"\n",
                   guide->MinBytesToFinish(), guide->IsAccepting(), text.c_str());
      std::abort();
    }
    std::vector<uint32_t> budgeted = mask;
    const uint32_t left = 1 + (step < picks.size() ? static_cast<uint8_t>(picks[step]) % 8 : 0);
    s = guide->ApplyTokenBudget(left, absl::MakeSpan(budgeted));
    maskd::fuzz::ExpectClientStatus(s);
    if (!s.ok()) return;
    bool any = false, any_before = false;
    for (size_t w = 0; w < mask.size(); ++w) {
      if (budgeted[w] & ~mask[w]) {
        std::fprintf(stderr, "the budget added tokens after \"%s\"\n", text.c_str());
        std::abort();
      }
      any = any || budgeted[w] != 0;
      any_before = any_before || mask[w] != 0;
    }
    if (any_before && !any) {
      std::fprintf(stderr, "the budget emptied the mask after \"%s\"\n", text.c_str());
      std::abort();
    }
    if (allowed.empty() || step >= picks.size()) return;
    const uint32_t t = allowed[static_cast<uint8_t>(picks[step]) % allowed.size()];
    s = guide->Advance(t);
    maskd::fuzz::ExpectClientStatus(s);
    if (!s.ok()) return;
    text += vocab.bytes(t);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool gbnf = (data[0] & 1) == 0;
  std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  // The grammar runs up to the first "\n%%\n"; what follows is a text to run.
  std::string_view text, input;
  size_t split = rest.find("\n%%\n");
  if (split == std::string_view::npos) {
    text = rest;
  } else {
    text = rest.substr(0, split + 1);
    input = rest.substr(split + 4);
  }
  maskd::grammar::GrammarLimits limits;
  limits.max_text_bytes = 8192;
  limits.max_rules = 500;
  limits.max_terminals = 200;
  limits.max_symbols = 5000;
  limits.max_nesting = 64;
  limits.max_repeat = 32;
  auto g = gbnf ? maskd::grammar::ParseGbnf(text, limits)
                : maskd::grammar::ParseXgrammarEbnf(text, limits);
  maskd::fuzz::ExpectClientStatus(g.status());
  if (!g.ok()) return 0;
  absl::Status valid = maskd::grammar::Validate(*g);
  if (!valid.ok()) {
    std::fprintf(stderr, "a parsed grammar fails Validate: %s\n", valid.ToString().c_str());
    std::abort();
  }
  (void)maskd::grammar::ToText(*g);
  maskd::grammar::EarleyOptions options;
  options.max_items_per_position = 4096;
  options.max_steps_per_position = 1 << 12;
  options.regex_limits.max_repeat = 64;
  options.dfa_options.max_states = 2000;
  options.dfa_options.deadline = absl::Now() + absl::Seconds(2);
  auto r = maskd::grammar::EarleyRecognizer::Create(*g, options);
  maskd::fuzz::ExpectClientStatus(r.status(), maskd::fuzz::Deadline::kSet);
  if (!r.ok()) return 0;
  if (input.size() > 64) input = input.substr(0, 64);
  auto accepted = r->Accepts(input);
  maskd::fuzz::ExpectClientStatus(accepted.status());
  auto viable = r->IsViablePrefix(input);
  maskd::fuzz::ExpectClientStatus(viable.status());
  if (accepted.ok() && viable.ok() && *accepted && !*viable) {
    std::fprintf(stderr, "an accepted text is not a viable prefix\n");
    std::abort();
  }
  // NextBytes of a prefix against IsViablePrefix of its one-byte extensions.
  std::string_view prefix = input.substr(0, input.size() / 2);
  auto next = r->NextBytes(prefix);
  maskd::fuzz::ExpectClientStatus(next.status());
  if (next.ok()) {
    std::string extended(prefix);
    extended.push_back('\0');
    const int own = input.size() > prefix.size() ? static_cast<uint8_t>(input[prefix.size()]) : 1;
    for (int b : {0, int{'a'}, int{'"'}, int{'0'}, int{' '}, int{'\n'}, 0xC3, 0xFF, own}) {
      extended.back() = static_cast<char>(b);
      auto v = r->IsViablePrefix(extended);
      maskd::fuzz::ExpectClientStatus(v.status());
      if (v.ok() && *v != (*next)[static_cast<uint8_t>(b)]) {
        std::fprintf(stderr, "NextBytes and IsViablePrefix disagree on byte %d\n", b);
        std::abort();
      }
    }
  }
  CheckEngine(*g, *r, options, input);
  return 0;
}
