// fault_guard.h: keeps a SIGBUS in a client's shared mapping from killing the
// process.
//
// A MAP_SHARED mapping of a POSIX shm object raises SIGBUS on any access to a
// page past the object's end, and the client that owns the object can
// ftruncate it at any time, also between the server's size check and its
// access. FaultGuard closes that race at the level of the access itself:
//
//  - A process-wide SIGBUS handler (SA_SIGINFO) is installed once, by the
//    first Watch. On a kernel-generated SIGBUS whose fault address lies in a
//    watched mapping, it marks that mapping faulted and replaces the whole
//    mapping, in place, with private anonymous zero pages
//    (mmap MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS), then returns: the
//    faulting instruction is restarted and completes on the new pages. So a
//    truncation becomes a flag, on any thread (gRPC's or a kernel pool's),
//    with no longjmp: no lock is left held and no object half-updated.
//    Anything the server wrote after the fault is lost (it went to private
//    pages), and its readers saw zeros; users check faulted() after their
//    accesses and fail the call.
//  - Any other SIGBUS (outside every watched mapping, or sent by kill/raise)
//    goes to the handler that was installed before (if it was a function) or
//    gets the default, fatal, behaviour: the disposition is reset to SIG_DFL
//    and the signal re-raised / the access restarted.
//
// The handler touches only a fixed table of slots with lock-free atomics and
// makes only async-signal-safe system calls (mmap, sigaction, raise).
//
// Invariant the handler relies on: a watched mapping stays mapped while its
// FaultGuard lives (destroy the guard before munmap), and a thread touches a
// mapping only while it holds a reference that keeps the guard alive.
//
// Thread safety: Watch, ~FaultGuard and faulted() are thread-safe and
// lock-free; faulted() is one atomic load.
#ifndef MASKD_SHM_FAULT_GUARD_H_
#define MASKD_SHM_FAULT_GUARD_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"

namespace maskd::shm {

class FaultGuard {
 public:
  // Mappings watched at once in the process (ResourceExhausted beyond).
  static constexpr size_t kMaxWatched = 4096;

  // Watches [base, base + length) (base page-aligned, as mmap returns it;
  // the range is extended to whole pages). Installs the handler on first use.
  // Errors: InvalidArgument (null or unaligned base, zero length),
  // ResourceExhausted (kMaxWatched mappings already watched), Internal
  // (sigaction failed).
  static absl::StatusOr<std::unique_ptr<FaultGuard>> Watch(void* base, size_t length);

  ~FaultGuard();  // stops watching; call before unmapping
  FaultGuard(const FaultGuard&) = delete;
  FaultGuard& operator=(const FaultGuard&) = delete;

  // True once an access to the mapping has faulted (then its pages are
  // private zero pages: nothing written since reached the object). Sticky.
  bool faulted() const;

  // Faults turned into flags in this process since start (all mappings).
  static uint64_t TotalFaults();

 private:
  explicit FaultGuard(size_t slot) : slot_(slot) {}
  const size_t slot_;
};

}  // namespace maskd::shm

#endif  // MASKD_SHM_FAULT_GUARD_H_
