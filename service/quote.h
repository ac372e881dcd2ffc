// Client input in error messages, bounded.
//
// Every status message that quotes something a client sent (a tokenizer
// name, an index id, a key) quotes it through QuoteInput: at most
// kQuoteBytes bytes of it, C-escaped (non-printable and non-ASCII bytes as
// \xNN, so no message carries raw control bytes or invalid UTF-8), and the
// full size when it was cut:
//   QuoteInput("qwen3")          -> 'qwen3'
//   QuoteInput(<20000 x 'a'>)    -> 'aaaa…aaaa'... (20000 bytes)
// A message is then a few hundred bytes whatever the input, far under gRPC's
// 16 KiB metadata limit (past which a client sees RESOURCE_EXHAUSTED instead
// of the real code). BoundMessage is the last line of defence for any status
// message leaving the server.
#ifndef MASKD_SERVICE_QUOTE_H_
#define MASKD_SERVICE_QUOTE_H_

#include <cstddef>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace maskd {

inline constexpr size_t kQuoteBytes = 64;
inline constexpr size_t kMaxStatusMessageBytes = 1024;

inline std::string QuoteInput(absl::string_view s, size_t max_bytes = kQuoteBytes) {
  if (s.size() <= max_bytes) return absl::StrCat("'", absl::CHexEscape(s), "'");
  return absl::StrCat("'", absl::CHexEscape(s.substr(0, max_bytes)), "'... (", s.size(),
                      " bytes)");
}

// `message` cut to at most max_bytes bytes (plus a short note of its size).
inline std::string BoundMessage(absl::string_view message,
                                size_t max_bytes = kMaxStatusMessageBytes) {
  if (message.size() <= max_bytes) return std::string(message);
  return absl::StrCat(message.substr(0, max_bytes), "... (message of ", message.size(),
                      " bytes cut)");
}

}  // namespace maskd

#endif  // MASKD_SERVICE_QUOTE_H_
