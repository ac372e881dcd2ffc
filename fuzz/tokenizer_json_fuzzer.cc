// libFuzzer: bytes -> the tokenizer.json loader (Vocabulary::FromJson, which
// parses with simdjson, maps token strings to bytes and builds the vocabulary,
// then the TokenizerContext the server builds on it: trie, loop-mask byte
// index) and the tokenizer_config.json EOS reader. The first byte picks options and
// which document the bytes are. Any crash, sanitizer report or hang is a bug;
// errors must be InvalidArgument (bad content) or ResourceExhausted.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "fuzz/expect_status.h"
#include "tokenizer/tokenizer_context.h"
#include "tokenizer/tokenizer_json.h"
#include "tokenizer/vocabulary.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t knobs = data[0];
  std::string_view doc(reinterpret_cast<const char*>(data + 1), size - 1);
  if (knobs & 1) {
    maskd::fuzz::ExpectClientStatus(maskd::internal::ParseEosToken(doc, "tokenizer_config.json").status());
    return 0;
  }
  maskd::VocabularyOptions options;
  if (knobs & 2) options.vocab_size = 1u << 12;
  if (knobs & 4) options.eos_ids = {0};
  // A small config beside it (EOS by name) half the time.
  std::string config = (knobs & 8) ? R"({"eos_token": "</s>"})" : "";
  auto v = maskd::Vocabulary::FromJson(doc, config, options, "tokenizer.json");
  maskd::fuzz::ExpectClientStatus(v.status());
  if (v.ok()) maskd::TokenizerContext::Create(*std::move(v));
  return 0;
}
