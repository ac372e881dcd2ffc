// The calling thread's OS attributes: its name (what `top -H`, `ps -L` and
// /proc/<pid>/task/<tid>/comm show) and its scheduling priority. Linux only
// has per-thread values for both; elsewhere, and on any failure, the calls
// leave the thread as it was (best effort: neither is needed for
// correctness).
#ifndef MASKD_SERVICE_THIS_THREAD_H_
#define MASKD_SERVICE_THIS_THREAD_H_

#include "absl/strings/string_view.h"

namespace maskd {

// Names the calling thread `name`, cut to the OS's 15 bytes. maskd's names
// start with "maskd-" and say what the thread serves (maskd-compile,
// maskd-step, ...): docs/service.md lists them.
void NameThisThread(absl::string_view name);

// Adds `nice` (> 0) to the calling thread's nice value, at most 19; 0 or less
// changes nothing. The OS then gives the thread less CPU than the process's
// other threads whenever they compete.
void LowerThisThreadPriority(int nice);

}  // namespace maskd

#endif  // MASKD_SERVICE_THIS_THREAD_H_
