#include "tools/maskctl/tokenizer_flag.h"

#include <cstdint>
#include <limits>

#include "absl/strings/str_cat.h"

namespace maskctl {

const std::set<std::string>& TokenizerValueFlags() {
  static const auto* flags = new std::set<std::string>{"tokenizer", "vocab-size", "eos"};
  return *flags;
}

absl::StatusOr<std::shared_ptr<const maskd::Vocabulary>> LoadTokenizerFlag(const Args& args) {
  absl::StatusOr<std::string> path = args.Require("tokenizer");
  if (!path.ok()) return path.status();
  maskd::VocabularyOptions options;
  if (args.Has("vocab-size")) {
    absl::StatusOr<uint64_t> n = args.GetUint("vocab-size", 0);
    if (!n.ok()) return n.status();
    if (*n > std::numeric_limits<uint32_t>::max()) {
      return absl::InvalidArgumentError(absl::StrCat("--vocab-size: too large: ", *n));
    }
    options.vocab_size = static_cast<uint32_t>(*n);
  }
  absl::StatusOr<std::vector<uint32_t>> eos = args.GetUintList("eos");
  if (!eos.ok()) return eos.status();
  options.eos_ids = *std::move(eos);
  return maskd::Vocabulary::Load(*path, options);
}

absl::StatusOr<std::shared_ptr<const maskd::TokenizerContext>> LoadTokenizerContextFlag(
    const Args& args) {
  auto vocab = LoadTokenizerFlag(args);
  if (!vocab.ok()) return vocab.status();
  return maskd::TokenizerContext::Create(*std::move(vocab));
}

}  // namespace maskctl
