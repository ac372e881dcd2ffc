#include "shm/posix_segment.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace maskd::shm {
namespace {
// Debian's abseil has its own string_view type: bridge for StrCat.
inline absl::string_view Sv(std::string_view s) { return {s.data(), s.size()}; }

}  // namespace


absl::StatusOr<PosixShmSegment> PosixShmSegment::Create(std::string_view key,
                                                        size_t byte_size) {
  if (key.size() < 2 || key[0] != '/' || key.find('/', 1) != std::string_view::npos ||
      key.size() > 255 || key.find('\0') != std::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad shared-memory key \"", Sv(key), "\": want \"/name\""));
  }
  if (byte_size == 0) return absl::InvalidArgumentError("byte size is 0");
  std::string k(key);
  const int fd = shm_open(k.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) {
    const int e = errno;
    if (e == EEXIST) {
      return absl::AlreadyExistsError(absl::StrCat("shared-memory key \"", Sv(key), "\" exists"));
    }
    return absl::InternalError(absl::StrCat("shm_open(", Sv(key), "): ", std::strerror(e)));
  }
  if (ftruncate(fd, static_cast<off_t>(byte_size)) != 0) {
    const int e = errno;
    close(fd);
    shm_unlink(k.c_str());
    return absl::InternalError(absl::StrCat("ftruncate(", Sv(key), "): ", std::strerror(e)));
  }
  void* p = mmap(nullptr, byte_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int e = errno;
  close(fd);
  if (p == MAP_FAILED) {
    shm_unlink(k.c_str());
    return absl::InternalError(absl::StrCat("mmap(", Sv(key), "): ", std::strerror(e)));
  }
  return PosixShmSegment(std::move(k), p, byte_size);
}

PosixShmSegment::PosixShmSegment(PosixShmSegment&& o) noexcept
    : key_(std::move(o.key_)), data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)) {}

PosixShmSegment& PosixShmSegment::operator=(PosixShmSegment&& o) noexcept {
  if (this != &o) {
    Reset();
    key_ = std::move(o.key_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

PosixShmSegment::~PosixShmSegment() { Reset(); }

void PosixShmSegment::Reset() {
  if (data_ == nullptr) return;
  munmap(data_, size_);
  shm_unlink(key_.c_str());
  data_ = nullptr;
  size_ = 0;
}

}  // namespace maskd::shm
