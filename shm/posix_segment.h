// posix_segment.h: client helper owning a POSIX shared-memory object that it
// created and mapped read-write; the object is unmapped and shm_unlink'ed
// when the PosixShmSegment is destroyed (move-only, RAII).
#ifndef MASKD_SHM_POSIX_SEGMENT_H_
#define MASKD_SHM_POSIX_SEGMENT_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace maskd::shm {

class PosixShmSegment {
 public:
  // Creates `key` ("/name") of `byte_size` bytes (zero-filled), mode 0600.
  // AlreadyExists when the key is taken (never reuses a foreign object),
  // InvalidArgument for a bad key or size 0, Internal otherwise.
  static absl::StatusOr<PosixShmSegment> Create(std::string_view key,
                                                size_t byte_size);

  PosixShmSegment() = default;
  PosixShmSegment(PosixShmSegment&& other) noexcept;
  PosixShmSegment& operator=(PosixShmSegment&& other) noexcept;
  ~PosixShmSegment();

  void* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& key() const { return key_; }
  bool valid() const { return data_ != nullptr; }

  // Unmaps and unlinks now (idempotent). A server that mapped the object
  // keeps its mapping until it unregisters the region.
  void Reset();

 private:
  PosixShmSegment(std::string key, void* data, size_t size)
      : key_(std::move(key)), data_(data), size_(size) {}
  std::string key_;
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace maskd::shm

#endif  // MASKD_SHM_POSIX_SEGMENT_H_
