#include "bench/soak/soak_oracle.h"

#include <cstdint>
#include <random>
#include <string>
#include <utility>

#include "index/random_walk.h"
#include "tokenizer/vocabulary.h"

namespace maskd::soak {

absl::Status Oracle::Init(const std::string& tokenizer_dir) {
  auto vocab = Vocabulary::Load(tokenizer_dir + "/qwen3");
  if (!vocab.ok()) return vocab.status();
  context_ = TokenizerContext::Create(*std::move(vocab));
  for (const char* r : kFixed) {
    auto ix = CompileRegex(r, context_);
    if (!ix.ok()) return ix.status();
    fixed_.push_back(*ix);
  }
  return absl::OkStatus();
}

v1::CompileRequest CompileFor(const std::string& regex) {
  v1::CompileRequest c;
  c.set_tokenizer("qwen3");
  c.set_regex(regex);
  return c;
}

uint32_t Sample(const uint32_t* words, uint32_t n, std::mt19937_64& rng) {
  const uint32_t count = CountAllowedTokens(words, n);
  if (count == 0) return UINT32_MAX;
  return NthAllowedToken(words, n,
                         static_cast<uint32_t>(std::uniform_int_distribution<uint32_t>(0, count - 1)(rng)));
}

bool FaultCode(absl::StatusCode c) {
  return c == absl::StatusCode::kUnavailable || c == absl::StatusCode::kCancelled ||
         c == absl::StatusCode::kNotFound || c == absl::StatusCode::kDeadlineExceeded;
}

}  // namespace maskd::soak
