#include "service/this_thread.h"

#include <pthread.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>

namespace maskd {

void NameThisThread(absl::string_view name) {
#ifdef __linux__
  const std::string cut(name.substr(0, 15));  // the kernel's 16 bytes, NUL included
  (void)pthread_setname_np(pthread_self(), cut.c_str());
#else
  (void)name;
#endif
}

void LowerThisThreadPriority(int nice) {
#ifdef __linux__
  if (nice <= 0) return;
  const id_t tid = static_cast<id_t>(syscall(SYS_gettid));
  errno = 0;
  const int now = getpriority(PRIO_PROCESS, tid);
  if (errno == 0) (void)setpriority(PRIO_PROCESS, tid, std::min(now + nice, 19));
#else
  (void)nice;
#endif
}

}  // namespace maskd
