// Small encodings maskctl prints: SHA-256 and hex.
#ifndef MASKD_TOOLS_MASKCTL_DIGEST_H_
#define MASKD_TOOLS_MASKCTL_DIGEST_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace maskctl {

// Lowercase hex SHA-256 of `size` bytes at `data`.
std::string Sha256Hex(const void* data, size_t size);
// Lowercase hex of `bytes`.
std::string Hex(std::string_view bytes);

}  // namespace maskctl

#endif  // MASKD_TOOLS_MASKCTL_DIGEST_H_
