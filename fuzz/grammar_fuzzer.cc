// libFuzzer: first byte: the dialect (bit 0: GBNF or XGrammar EBNF) and where
// the grammar text ends; the grammar -> ParseGbnf / ParseXgrammarEbnf ->
// Validate -> ToText -> EarleyRecognizer over the rest of the input, with
// small limits so that no input can legitimately take long. A crash,
// sanitizer report, hang, status other than OK / InvalidArgument /
// ResourceExhausted (DeadlineExceeded from a terminal's DFA), a parsed
// grammar that Validate refuses, or NextBytes disagreeing with
// IsViablePrefix is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "fuzz/expect_status.h"
#include "grammar/bnf_parser.h"
#include "grammar/earley.h"
#include "grammar/grammar.h"

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
  return 0;
}
