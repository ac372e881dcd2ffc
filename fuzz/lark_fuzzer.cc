// libFuzzer: bytes -> ParseLark, with small limits so that no input can
// legitimately take long. Any crash, sanitizer report, hang or status other
// than OK / InvalidArgument / ResourceExhausted is a bug, and so is a parsed
// grammar that fails Validate.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "absl/status/status.h"
#include "fuzz/expect_status.h"
#include "grammar/grammar.h"
#include "grammar/lark_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  maskd::grammar::GrammarLimits limits;
  limits.max_text_bytes = 8192;
  limits.max_rules = 2000;
  limits.max_terminals = 500;
  limits.max_symbols = 20000;
  limits.max_nesting = 64;
  limits.max_repeat = 64;
  auto g = maskd::grammar::ParseLark(text, limits);
  maskd::fuzz::ExpectClientStatus(g.status());
  if (g.ok() && !maskd::grammar::Validate(*g).ok()) abort();
  return 0;
}
