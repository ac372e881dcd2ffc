#include "service/fd_headroom.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace maskd {
namespace {

// The record getdents64 fills (glibc 2.36 has no wrapper).
struct Dirent64 {
  uint64_t d_ino;
  int64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[];
};

}  // namespace

absl::StatusOr<std::unique_ptr<FdHeadroom>> FdHeadroom::Open() {
  int status_fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  int dir_fd = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (status_fd < 0 || dir_fd < 0) {
    const int e = errno;
    if (status_fd >= 0) close(status_fd);
    if (dir_fd >= 0) close(dir_fd);
    return absl::FailedPreconditionError(
        absl::StrCat("cannot count open descriptors: /proc/self: ", std::strerror(e)));
  }
  return std::unique_ptr<FdHeadroom>(new FdHeadroom(status_fd, dir_fd));
}

FdHeadroom::~FdHeadroom() {
  close(status_fd_);
  close(dir_fd_);
}

bool FdHeadroom::AtLeast(int n) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return false;
  if (rl.rlim_cur == RLIM_INFINITY) return true;
  const long limit = static_cast<long>(rl.rlim_cur);
  const long table = TableSize();
  if (table >= 0 && limit - table >= n) return true;  // every open fd is below `table`
  absl::MutexLock lock(&mu_);
  const int open = CountBelow(limit);
  return open >= 0 && limit - open >= n;
}

long FdHeadroom::TableSize() {
  char buf[4096];
  const ssize_t got = pread(status_fd_, buf, sizeof buf - 1, 0);
  if (got <= 0) return -1;
  absl::string_view text(buf, static_cast<size_t>(got));
  const size_t at = text.find("\nFDSize:");
  if (at == absl::string_view::npos) return -1;
  text.remove_prefix(at + 8);
  text = text.substr(0, text.find('\n'));
  long size = 0;
  return absl::SimpleAtoi(text, &size) ? size : -1;
}

int FdHeadroom::CountBelow(long limit) {
  if (lseek(dir_fd_, 0, SEEK_SET) != 0) return -1;
  alignas(8) char buf[16384];
  int count = 0;
  for (;;) {
    const long got = syscall(SYS_getdents64, dir_fd_, buf, sizeof buf);
    if (got < 0) return -1;
    if (got == 0) return count;
    for (long off = 0; off < got;) {
      const auto* d = reinterpret_cast<const Dirent64*>(buf + off);
      off += d->d_reclen;
      long fd = 0;
      if (absl::SimpleAtoi(d->d_name, &fd) && fd < limit) ++count;  // skips "." and ".."
    }
  }
}

}  // namespace maskd
