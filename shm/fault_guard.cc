#include "shm/fault_guard.h"

#include <errno.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace maskd::shm {
namespace {

// A slot's state word: generation << 2 | phase. The generation changes on
// every claim and release, so the handler can tell a slot it read whole (same
// state word before and after reading the range) from one being recycled.
constexpr uint64_t kFree = 0, kBusy = 1, kLive = 2, kPhaseMask = 3;

struct Slot {
  std::atomic<uint64_t> state{kFree};
  std::atomic<uintptr_t> begin{0};
  std::atomic<uintptr_t> end{0};  // exclusive, page-aligned
  std::atomic<bool> faulted{false};
};
static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(std::atomic<uintptr_t>::is_always_lock_free);
static_assert(std::atomic<bool>::is_always_lock_free);

Slot g_slots[FaultGuard::kMaxWatched];
std::atomic<uint64_t> g_total_faults{0};
struct sigaction g_previous;  // written once, before the handler is installed

// The previous disposition, or the default one: restart the access (or
// re-raise a signal that was sent, not caused) so it is fatal as before.
void Forward(int sig, siginfo_t* info, void* uctx) {
  if ((g_previous.sa_flags & SA_SIGINFO) != 0 && g_previous.sa_sigaction != nullptr) {
    g_previous.sa_sigaction(sig, info, uctx);
    return;
  }
  if ((g_previous.sa_flags & SA_SIGINFO) == 0 && g_previous.sa_handler != SIG_DFL &&
      g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(sig);
    return;
  }
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(SIGBUS, &dfl, nullptr);
  // A SIGBUS from kill/raise (si_code <= 0) is not restarted: send it again;
  // it is delivered, with the default action, when this handler returns.
  if (info == nullptr || info->si_code <= 0) raise(SIGBUS);
}

void OnSigbus(int sig, siginfo_t* info, void* uctx) {
  const int saved_errno = errno;
  if (info != nullptr && info->si_code > 0) {
    const uintptr_t addr = reinterpret_cast<uintptr_t>(info->si_addr);
    for (Slot& slot : g_slots) {
      const uint64_t s1 = slot.state.load(std::memory_order_acquire);
      if ((s1 & kPhaseMask) != kLive) continue;
      const uintptr_t begin = slot.begin.load(std::memory_order_relaxed);
      const uintptr_t end = slot.end.load(std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_acquire);
      if (slot.state.load(std::memory_order_relaxed) != s1) continue;
      if (addr < begin || addr >= end) continue;
      // Flag first: whoever writes to the new pages checks it afterwards.
      slot.faulted.store(true, std::memory_order_seq_cst);
      void* p = mmap(reinterpret_cast<void*>(begin), end - begin, PROT_READ | PROT_WRITE,
                     MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p != MAP_FAILED) {
        g_total_faults.fetch_add(1, std::memory_order_relaxed);
        errno = saved_errno;
        return;  // the access is restarted on the zero pages
      }
      break;  // cannot repair: fatal, as without the guard
    }
  }
  Forward(sig, info, uctx);
  errno = saved_errno;
}

absl::Status InstallOnce() {
  static std::once_flag once;
  static int install_errno = 0;
  std::call_once(once, [] {
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = OnSigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGBUS, &sa, &g_previous) != 0) install_errno = errno;
  });
  if (install_errno != 0) {
    return absl::InternalError(
        absl::StrCat("sigaction(SIGBUS): ", std::strerror(install_errno)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<FaultGuard>> FaultGuard::Watch(void* base, size_t length) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t b = reinterpret_cast<uintptr_t>(base);
  if (base == nullptr || b % page != 0 || length == 0) {
    return absl::InvalidArgumentError("fault guard: want a page-aligned mapping");
  }
  if (absl::Status s = InstallOnce(); !s.ok()) return s;
  const uintptr_t e = b + (length + page - 1) / page * page;
  for (size_t i = 0; i < kMaxWatched; ++i) {
    Slot& slot = g_slots[i];
    uint64_t s = slot.state.load(std::memory_order_relaxed);
    if ((s & kPhaseMask) != kFree) continue;
    const uint64_t busy = ((s >> 2) + 1) << 2 | kBusy;
    if (!slot.state.compare_exchange_strong(s, busy, std::memory_order_acq_rel)) continue;
    slot.begin.store(b, std::memory_order_relaxed);
    slot.end.store(e, std::memory_order_relaxed);
    slot.faulted.store(false, std::memory_order_relaxed);
    slot.state.store((busy & ~kPhaseMask) | kLive, std::memory_order_release);
    return std::unique_ptr<FaultGuard>(new FaultGuard(i));
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      "too many shared mappings watched at once (limit ", kMaxWatched, ")"));
}

FaultGuard::~FaultGuard() {
  Slot& slot = g_slots[slot_];
  const uint64_t s = slot.state.load(std::memory_order_relaxed);
  const uint64_t busy = ((s >> 2) + 1) << 2 | kBusy;
  slot.state.store(busy, std::memory_order_release);
  slot.begin.store(0, std::memory_order_relaxed);
  slot.end.store(0, std::memory_order_relaxed);
  slot.state.store((busy & ~kPhaseMask) | kFree, std::memory_order_release);
}

bool FaultGuard::faulted() const {
  return g_slots[slot_].faulted.load(std::memory_order_seq_cst);
}

uint64_t FaultGuard::TotalFaults() { return g_total_faults.load(std::memory_order_relaxed); }

}  // namespace maskd::shm
