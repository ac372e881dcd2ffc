#include "service/client_label.h"

#include <array>

#include "absl/strings/match.h"

namespace maskd {
namespace {

constexpr std::array<absl::string_view, kNumClientKinds> kNames = {
    "unknown", "vllm", "sglang", "llama.cpp", "transformers", "mlx-lm", "outlines", "maskctl",
    "other"};

}  // namespace

absl::string_view ClientKindName(ClientKind kind) {
  return kNames[static_cast<size_t>(kind)];
}

ClientKind ClientKindFromUserAgent(absl::string_view user_agent) {
  constexpr absl::string_view kPrefix = "maskd-";
  if (!absl::StartsWith(user_agent, kPrefix)) return ClientKind::kUnknown;
  absl::string_view rest = user_agent.substr(kPrefix.size());
  const size_t end = rest.find_first_of("/ ");
  const absl::string_view name = rest.substr(0, end);
  for (size_t k = 1; k + 1 < kNames.size(); ++k) {
    if (name == kNames[k]) return static_cast<ClientKind>(k);
  }
  return ClientKind::kOther;
}

}  // namespace maskd
