// ClientKind: which engine integration a gRPC client says it is, read from the
// user agent it sends, as one value of a fixed set (a metric label must never
// take a client-chosen string: label sets stay bounded).
//
// maskd's own clients put "maskd-<kind>/<version>" first in their user agent
// (the Python package's Client(..., client_name="vllm"), the C++ client's
// ClientOptions::client_name, docs/operations.md "Per-engine metrics"); gRPC
// appends its own part, e.g. "maskd-vllm/0.1.0 grpc-python/1.85.1 (linux; chttp2)".
#ifndef MASKD_SERVICE_CLIENT_LABEL_H_
#define MASKD_SERVICE_CLIENT_LABEL_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace maskd {

enum class ClientKind : uint8_t {
  kUnknown = 0,  // no "maskd-" prefix: a client that does not say
  kVllm,
  kSglang,
  kLlamaCpp,
  kTransformers,
  kMlxLm,
  kOutlines,
  kMaskctl,
  kOther,  // "maskd-<something else>"
};
inline constexpr int kNumClientKinds = 9;

// The label value: "unknown", "vllm", "sglang", "llama.cpp", "transformers",
// "mlx-lm", "outlines", "maskctl", "other".
absl::string_view ClientKindName(ClientKind kind);

// Parses the first product of `user_agent` ("maskd-<kind>/..." or
// "maskd-<kind> ..."); anything else is kUnknown.
ClientKind ClientKindFromUserAgent(absl::string_view user_agent);

}  // namespace maskd

#endif  // MASKD_SERVICE_CLIENT_LABEL_H_
