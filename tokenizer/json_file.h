// Reading a JSON document from disk, gunzipping it when it is gzip data, into
// a buffer with the padding simdjson needs. Private to the tokenizer library.
#ifndef MASKD_TOKENIZER_JSON_FILE_H_
#define MASKD_TOKENIZER_JSON_FILE_H_

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace maskd::internal {

// Documents (after gunzip) larger than this (1 GiB) are refused: the
// largest real tokenizer.json is ~35 MB, and the cap bounds gzip bombs.
inline constexpr size_t kMaxJsonBytes = size_t{1} << 30;

// A document followed by kJsonPadding (tokenizer_json.h) zero bytes.
class JsonBuffer {
 public:
  JsonBuffer() = default;
  std::string_view view() const { return std::string_view(data_.get(), size_); }
  // The document's bytes, writable (see json_blank.h); size() of them.
  char* mutable_data() { return data_.get(); }
  size_t size() const { return size_; }

 private:
  friend absl::StatusOr<JsonBuffer> ReadJsonFile(const std::string& path);
  friend JsonBuffer CopyToJsonBuffer(std::string_view json);
  std::unique_ptr<char[]> data_;  // size_ + kJsonPadding bytes
  size_t size_ = 0;
};

// Reads `path`; gzip data (magic 1f 8b, any file name) is decompressed,
// concatenated members included. Errors name the file: NotFound when it
// cannot be opened, InvalidArgument for bad gzip or an oversized document.
absl::StatusOr<JsonBuffer> ReadJsonFile(const std::string& path);

// Copies an in-memory document into a padded buffer.
JsonBuffer CopyToJsonBuffer(std::string_view json);

}  // namespace maskd::internal

#endif  // MASKD_TOKENIZER_JSON_FILE_H_
