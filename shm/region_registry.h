// region_registry.h: named shared-memory regions a client registers so that
// logits and masks move without copies through the gRPC channel (the model is
// Triton Inference Server's shared-memory API).
//
// Two kinds share one name space:
//  - system: a POSIX shared-memory object (shm_open key) of which the byte
//    range [offset, offset + byte_size) is mapped read-write;
//  - CUDA:   a cudaIpcMemHandle_t (exactly 64 raw bytes) exported by another
//    process from a cudaMalloc allocation, opened on `device_id`; the region is
//    [offset, offset + byte_size) of that allocation. Only in CUDA builds.
//
// Lifetime: a registered region is held by the registry and by every lease
// returned from Acquire (a shared_ptr). Unregister removes the name at once
// (it can be registered again) but the mapping stays valid until the last
// lease is released; then it is unmapped (munmap / cudaIpcCloseMemHandle).
//
// Errors are absl::Status with short, client-safe, bounded messages: they
// name the client's own inputs (region name, key; quoted, escaped and cut to
// 64 bytes) but never server paths, errno text or CUDA internals. A client's
// mistake (missing key, symlink, FIFO, wrong owner, ...) is only its status;
// server-side failures (Internal) also go to Options::log with the details.
//
// What a system region trusts, and what is checked (docs/reliability.md):
//  - at registration: the key is under Options::key_prefix; the object is
//    opened O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK (a symlink is
//    refused, a FIFO never blocks), must be a regular file owned by the
//    caller's uid (RegisterSystem's caller_uid; the server's own effective
//    uid when none is given), and must cover [offset, offset + byte_size);
//  - at each use (Region::CheckBacked, one fstat on the descriptor the region
//    keeps): the object still covers the range;
//  - during the use: the client may still shrink the object; the access then
//    raises SIGBUS, which FaultGuard (shm/fault_guard.h) turns into a sticky
//    flag (Region::CheckNotFaulted) instead of a crash.
//
// Thread safety: all RegionRegistry methods are thread-safe. A Region is
// immutable; writes through its data pointer are the users' business.
#ifndef MASKD_SHM_REGION_REGISTRY_H_
#define MASKD_SHM_REGION_REGISTRY_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace maskd::shm {

enum class RegionKind : uint8_t { kSystem = 0, kCuda = 1 };
const char* RegionKindName(RegionKind kind);  // "system" or "cuda"

// Size of a cudaIpcMemHandle_t, in bytes.
inline constexpr size_t kCudaIpcHandleSize = 64;

// A mapped region. Obtained only through RegionRegistry::Acquire.
class Region {
 public:
  virtual ~Region() = default;
  const std::string& name() const { return name_; }
  RegionKind kind() const { return kind_; }
  // Bytes usable from data().
  uint64_t byte_size() const { return byte_size_; }
  // First byte of the region: a host address (system) or a device address
  // (CUDA, valid on device_id()). Never null.
  void* data() const { return data_; }
  // CUDA device of a CUDA region; -1 for a system region.
  int device_id() const { return device_id_; }
  // The uid that registered the region (for a system region, also the owner
  // of its shared-memory object).
  uid_t owner_uid() const { return owner_uid_; }

  // OK when [offset, offset + length) lies inside the region; OutOfRange
  // otherwise (overflow-checked).
  absl::Status CheckRange(uint64_t offset, uint64_t length) const;
  // data() + offset after CheckRange(offset, length).
  absl::StatusOr<void*> At(uint64_t offset, uint64_t length) const;

  // Call before touching the bytes. System region: FailedPrecondition when
  // the object no longer covers the region (one fstat on the descriptor kept
  // since registration) or an earlier access faulted (the region then stays
  // unusable: unregister it and register it again). CUDA region: OK.
  // Thread-safe; no allocation when OK.
  virtual absl::Status CheckBacked() const { return absl::OkStatus(); }
  // Call after touching the bytes: DataLoss when an access to the region
  // faulted (the object shrank during the use: what was written there since
  // is lost, what was read there was zeros). One atomic load. CUDA: OK.
  virtual absl::Status CheckNotFaulted() const { return absl::OkStatus(); }

 protected:
  Region(std::string name, RegionKind kind, void* data, uint64_t byte_size,
         int device_id, uid_t owner_uid)
      : name_(std::move(name)), kind_(kind), data_(data),
        byte_size_(byte_size), device_id_(device_id), owner_uid_(owner_uid) {}

 private:
  const std::string name_;
  const RegionKind kind_;
  void* const data_;
  const uint64_t byte_size_;
  const int device_id_;
  const uid_t owner_uid_;
};

// A lease: the region stays mapped while any lease (or the registry) holds it.
using RegionLease = std::shared_ptr<const Region>;

struct RegionInfo {
  std::string name;
  RegionKind kind;
  uint64_t byte_size;
  int device_id;       // -1 for system regions
  long lease_count;    // leases held outside the registry
  uid_t owner_uid;     // Region::owner_uid()
};

class RegionRegistry {
 public:
  struct Options {
    // Registration is refused (FailedPrecondition) unless this is true.
    bool allow_registration = false;
    // POSIX keys must start with this prefix (which must start with '/').
    std::string key_prefix = "/maskd-";
    // Longest region name accepted.
    size_t max_name_length = 128;
    // Most regions registered at once (ResourceExhausted beyond).
    size_t max_regions = 1024;
    // Receives error details not sent to clients; null = stderr.
    std::function<void(std::string_view)> log;
  };

  RegionRegistry();
  explicit RegionRegistry(Options options);
  ~RegionRegistry();  // drops the registry's references (leases stay valid)
  RegionRegistry(const RegionRegistry&) = delete;
  RegionRegistry& operator=(const RegionRegistry&) = delete;

  // Maps [offset, offset + byte_size) of the POSIX shared-memory object `key`,
  // which must be owned by `caller_uid` (nullopt: by the server's own
  // effective uid).
  // Errors: FailedPrecondition (registration disabled; the key is a symbolic
  // link, a FIFO, a directory or anything but a regular file), InvalidArgument
  // (name, key, zero size, offset + size overflow), PermissionDenied (key
  // outside the prefix, object not accessible, object owned by another uid),
  // NotFound (no such key), OutOfRange (range past the object's end),
  // AlreadyExists (name taken), ResourceExhausted (regions, watched mappings
  // or file descriptors), Internal (fstat or mmap failed).
  // The region keeps one file descriptor open (for CheckBacked).
  absl::Status RegisterSystem(std::string_view name, std::string_view key,
                              uint64_t offset, uint64_t byte_size,
                              std::optional<uid_t> caller_uid = std::nullopt);

  // Opens a CUDA IPC handle (exactly kCudaIpcHandleSize raw bytes) on
  // `device_id`; the region is [offset, offset + byte_size) of the exported
  // allocation, checked against its real size.
  // Errors: as RegisterSystem, plus InvalidArgument (handle length, device id,
  // handle rejected by the driver), Unimplemented (build without CUDA),
  // Unavailable (no CUDA device).
  // The region's owner is `caller_uid` (nullopt: the server's effective uid).
  absl::Status RegisterCuda(std::string_view name, std::string_view raw_handle,
                            int device_id, uint64_t offset, uint64_t byte_size,
                            std::optional<uid_t> caller_uid = std::nullopt);

  // A lease on region `name`; NotFound if none.
  absl::StatusOr<RegionLease> Acquire(std::string_view name) const;

  // Removes `name` ("" = every region); the mapping goes away when the last
  // lease is released. NotFound for an unknown non-empty name. With `owner`,
  // only that uid's regions: "" removes just those, and another uid's region
  // is PermissionDenied (and stays).
  absl::Status Unregister(std::string_view name,
                          std::optional<uid_t> owner = std::nullopt);

  // Registered regions, sorted by name; only `name` when not empty (NotFound
  // when it is unknown).
  absl::StatusOr<std::vector<RegionInfo>> List(std::string_view name = "") const;

 private:
  absl::Status CheckCanRegister(std::string_view name) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Log(std::string_view message) const;

  const Options options_;
  mutable absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<const Region>, std::less<>> regions_ ABSL_GUARDED_BY(mu_);
};

}  // namespace maskd::shm

#endif  // MASKD_SHM_REGION_REGISTRY_H_
