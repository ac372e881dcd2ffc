#include "shm/region_registry.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "shm/cuda_ipc_internal.h"
#include "shm/fault_guard.h"

namespace maskd::shm {
namespace {
// Debian's abseil has its own string_view type: bridge for StrCat.
inline absl::string_view Sv(std::string_view s) { return {s.data(), s.size()}; }

// Where POSIX shared-memory objects live on Linux (glibc's shm_open opens
// kShmDir + key).
constexpr char kShmDir[] = "/dev/shm";

// A client's string for an error message: quoted, C-escaped, at most 64 input
// bytes (then "..." and the full length), so a message stays bounded.
std::string Quoted(std::string_view s) {
  constexpr size_t kMax = 64;
  if (s.size() <= kMax) return absl::StrCat("\"", absl::CEscape(Sv(s)), "\"");
  return absl::StrCat("\"", absl::CEscape(Sv(s.substr(0, kMax))), "...\" (", s.size(),
                      " bytes)");
}

const char* FileTypeName(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

class SystemRegion final : public Region {
 public:
  // Owns fd (closed in the destructor) and the mapping; `required` is the
  // object size the region needs (offset + byte_size).
  SystemRegion(std::string name, void* map_base, size_t map_len, size_t delta,
               uint64_t byte_size, int fd, uint64_t required,
               std::unique_ptr<FaultGuard> guard, uid_t owner)
      : Region(std::move(name), RegionKind::kSystem,
               static_cast<char*>(map_base) + delta, byte_size, -1, owner),
        map_base_(map_base), map_len_(map_len), fd_(fd), required_(required),
        guard_(std::move(guard)) {}
  ~SystemRegion() override {
    guard_.reset();  // stop watching before the range can be reused
    munmap(map_base_, map_len_);
    close(fd_);
  }

  absl::Status CheckBacked() const override {
    if (guard_->faulted()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "region ", Quoted(name()), " is unusable: its shared-memory object shrank while "
          "the server was using it; unregister the region and register it again"));
    }
    struct stat st;
    if (fstat(fd_, &st) != 0) {
      return absl::InternalError(absl::StrCat("could not inspect the shared-memory object of "
                                              "region ", Quoted(name())));
    }
    if (static_cast<uint64_t>(st.st_size) < required_) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the shared-memory object of region ", Quoted(name()), " has shrunk to ",
          static_cast<uint64_t>(st.st_size), " bytes; the region needs ", required_));
    }
    return absl::OkStatus();
  }

  absl::Status CheckNotFaulted() const override {
    if (!guard_->faulted()) return absl::OkStatus();
    return absl::DataLossError(absl::StrCat(
        "the shared-memory object of region ", Quoted(name()),
        " shrank during the call: what the server wrote or read there is lost"));
  }

 private:
  void* const map_base_;
  const size_t map_len_;
  const int fd_;
  const uint64_t required_;
  std::unique_ptr<FaultGuard> guard_;
};

class CudaRegion final : public Region {
 public:
  CudaRegion(std::string name, void* ipc_base, uint64_t offset,
             uint64_t byte_size, int device_id,
             std::function<void(std::string_view)> log, uid_t owner)
      : Region(std::move(name), RegionKind::kCuda,
               static_cast<char*>(ipc_base) + offset, byte_size, device_id, owner),
        ipc_base_(ipc_base), log_(std::move(log)) {}
  ~CudaRegion() override {
    std::string detail;
    internal::CloseCudaIpc(ipc_base_, device_id(), &detail);
    if (!detail.empty() && log_) log_(detail);
  }

 private:
  void* const ipc_base_;
  const std::function<void(std::string_view)> log_;
};

// Offset + size, overflow-checked, with both inside [0, limit].
absl::Status CheckBounds(uint64_t offset, uint64_t size, uint64_t limit,
                         std::string_view what) {
  uint64_t end;
  if (__builtin_add_overflow(offset, size, &end)) {
    return absl::InvalidArgumentError(
        absl::StrCat("offset ", offset, " + byte size ", size, " overflows"));
  }
  if (end > limit) {
    return absl::OutOfRangeError(absl::StrCat(
        "offset ", offset, " + byte size ", size, " exceeds the ", Sv(what),
        " size ", limit));
  }
  return absl::OkStatus();
}

// Writes a detail the client is not told to options.log (stderr when unset).
void LogDetail(const RegionRegistry::Options& options, std::string_view message) {
  if (options.log) {
    options.log(message);
  } else {
    std::fprintf(stderr, "maskd shm: %.*s\n", static_cast<int>(message.size()),
                 message.data());
  }
}

// A system region's key and range as the client gave them, checked for
// shape by CheckSystemRequest.
struct SystemRequest {
  std::string_view name;  // the region's
  std::string key;        // "/name"
  std::string qkey;       // Quoted(key), for messages
  uint64_t offset = 0;
  uint64_t byte_size = 0;
  uint64_t end = 0;       // offset + byte_size, at most INT64_MAX
};

// The key is "/name" (no other '/', no NUL, at most NAME_MAX bytes) under
// `key_prefix`; the range is not empty and ends at most at INT64_MAX.
absl::StatusOr<SystemRequest> CheckSystemRequest(std::string_view name, std::string_view key,
                                                 uint64_t offset, uint64_t byte_size,
                                                 const std::string& key_prefix) {
  if (key.empty() || key[0] != '/' || key.size() > 255 ||
      key.find('/', 1) != std::string_view::npos ||
      key.find('\0') != std::string_view::npos || key == "/" ||
      key.find("..") != std::string_view::npos) {
    return absl::InvalidArgumentError(
        "shared-memory key must be \"/name\" with no other '/' and at most "
        "255 bytes");
  }
  if (key.substr(0, key_prefix.size()) != key_prefix) {
    return absl::PermissionDeniedError(absl::StrCat(
        "shared-memory key must start with \"", key_prefix, "\""));
  }
  if (byte_size == 0) {
    return absl::InvalidArgumentError("region byte size is 0");
  }
  uint64_t end;
  if (__builtin_add_overflow(offset, byte_size, &end) ||
      end > static_cast<uint64_t>(INT64_MAX)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "offset ", offset, " + byte size ", byte_size, " overflows"));
  }
  // The key is at most 255 bytes.
  return SystemRequest{name, std::string(key), Quoted(key), offset, byte_size, end};
}

// Opens the request's shared-memory object read-write: what shm_open does on
// Linux, with every errno kept (glibc's shm_open turns EISDIR into EINVAL).
// O_NOFOLLOW: a symlink is refused (ELOOP), never followed; O_NONBLOCK: a
// FIFO or device never blocks the open; O_CLOEXEC: nothing leaks to
// children. A client's bad key is its error, not logged.
absl::StatusOr<int> OpenSharedMemoryObject(const SystemRequest& r,
                                           const RegionRegistry::Options& options) {
  const std::string& qkey = r.qkey;
  const std::string path = absl::StrCat(kShmDir, r.key);
  const int fd = open(path.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd >= 0) return fd;
  const int e = errno;
  switch (e) {
    case ENOENT:
      return absl::NotFoundError(absl::StrCat("shared-memory key ", qkey, " does not exist"));
    case ELOOP:
      return absl::FailedPreconditionError(absl::StrCat(
          "shared-memory key ", qkey, " is a symbolic link; register the object itself"));
    case EISDIR:
      return absl::FailedPreconditionError(
          absl::StrCat("shared-memory key ", qkey, " is a directory, not a shared-memory object"));
    case ENXIO:
    case ENODEV:
    case ETXTBSY:
    case EROFS:
      return absl::FailedPreconditionError(absl::StrCat(
          "shared-memory key ", qkey, " is not a regular shared-memory object"));
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(
          absl::StrCat("shared-memory key ", qkey, " is not accessible to the server"));
    case ENAMETOOLONG:
    case EINVAL:
      return absl::InvalidArgumentError(absl::StrCat("shared-memory key ", qkey, " is not valid"));
    case EMFILE:
    case ENFILE:
    case ENOMEM:
      LogDetail(options, absl::StrCat("open(", path, ") for region ", Quoted(r.name), ": ",
                                      std::strerror(e)));
      return absl::ResourceExhaustedError(
          "the server is out of file descriptors or memory; try again later");
    default:
      LogDetail(options, absl::StrCat("open(", path, ") for region ", Quoted(r.name), ": ",
                                      std::strerror(e)));
      return absl::InternalError("could not open the shared-memory key");
  }
}

// The status of the object open on `fd`: a regular file owned by
// `want_uid` that covers the request's range. Does not close `fd`.
absl::StatusOr<struct stat> CheckSharedMemoryObject(int fd, const SystemRequest& r, uid_t want_uid,
                                                    const RegionRegistry::Options& options) {
  struct stat st;
  if (fstat(fd, &st) != 0) {
    LogDetail(options, absl::StrCat("fstat(", r.key, "): ", std::strerror(errno)));
    return absl::InternalError("could not inspect the shared-memory key");
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "shared-memory key ", r.qkey, " is ", FileTypeName(st.st_mode),
        ", not a shared-memory object"));
  }
  if (st.st_uid != want_uid) {
    return absl::PermissionDeniedError(absl::StrCat(
        "shared-memory key ", r.qkey, " is owned by uid ", st.st_uid, ", not by the caller (uid ",
        want_uid, "); a client may register only objects it owns"));
  }
  if (r.end > static_cast<uint64_t>(st.st_size)) {
    return absl::OutOfRangeError(absl::StrCat(
        "offset ", r.offset, " + byte size ", r.byte_size, " exceeds the size of shared-memory key ",
        r.qkey, " (", static_cast<uint64_t>(st.st_size), " bytes)"));
  }
  return st;
}

// The request's range mapped read-write from the pages that hold it, watched
// by a FaultGuard. Does not close `fd`.
struct SharedMapping {
  void* base = nullptr;  // page-aligned
  size_t length = 0;
  size_t delta = 0;      // from base to the range's first byte
  std::unique_ptr<FaultGuard> guard;
};

absl::StatusOr<SharedMapping> MapSharedMemoryObject(int fd, const SystemRequest& r,
                                                    const RegionRegistry::Options& options) {
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t aligned = r.offset - r.offset % page;
  const uint64_t delta = r.offset - aligned;
  const size_t map_len = static_cast<size_t>(delta + r.byte_size);
  void* p = mmap(nullptr, map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                 static_cast<off_t>(aligned));
  const int mmap_errno = errno;
  if (p == MAP_FAILED) {
    if (mmap_errno == EACCES) {
      return absl::PermissionDeniedError(
          absl::StrCat("shared-memory key ", r.qkey, " cannot be mapped read-write"));
    }
    LogDetail(options, absl::StrCat("mmap(", r.key, ", ", map_len, " bytes at ", aligned,
                                    "): ", std::strerror(mmap_errno)));
    if (mmap_errno == ENOMEM) {
      return absl::ResourceExhaustedError("the server is out of address space; try again later");
    }
    return absl::InternalError("could not map the shared-memory key");
  }
  auto guard = FaultGuard::Watch(p, map_len);
  if (!guard.ok()) {
    munmap(p, map_len);
    if (guard.status().code() == absl::StatusCode::kInternal) {
      LogDetail(options, std::string(guard.status().message()));
    }
    return guard.status();
  }
  return SharedMapping{p, map_len, static_cast<size_t>(delta), *std::move(guard)};
}

}  // namespace

const char* RegionKindName(RegionKind kind) {
  return kind == RegionKind::kCuda ? "cuda" : "system";
}

absl::Status Region::CheckRange(uint64_t offset, uint64_t length) const {
  uint64_t end;
  if (__builtin_add_overflow(offset, length, &end) || end > byte_size_) {
    return absl::OutOfRangeError(
        absl::StrCat("range [", offset, ", +", length, ") is outside region ",
                     Quoted(name_), " of ", byte_size_, " bytes"));
  }
  return absl::OkStatus();
}

absl::StatusOr<void*> Region::At(uint64_t offset, uint64_t length) const {
  absl::Status s = CheckRange(offset, length);
  if (!s.ok()) return s;
  return static_cast<void*>(static_cast<char*>(data_) + offset);
}

RegionRegistry::RegionRegistry() : RegionRegistry(Options()) {}
RegionRegistry::RegionRegistry(Options options) : options_(std::move(options)) {}
RegionRegistry::~RegionRegistry() = default;

void RegionRegistry::Log(std::string_view message) const { LogDetail(options_, message); }

absl::Status RegionRegistry::CheckCanRegister(std::string_view name) const {
  if (!options_.allow_registration) {
    return absl::FailedPreconditionError(
        "shared-memory registration is disabled on this server");
  }
  if (name.empty()) {
    return absl::InvalidArgumentError("region name is empty");
  }
  if (name.size() > options_.max_name_length) {
    return absl::InvalidArgumentError(absl::StrCat(
        "region name is longer than ", options_.max_name_length, " bytes"));
  }
  for (unsigned char c : name) {
    if (c < 0x20 || c == 0x7F) {
      return absl::InvalidArgumentError("region name has a control character");
    }
  }
  if (regions_.find(name) != regions_.end()) {
    return absl::AlreadyExistsError(
        absl::StrCat("region ", Quoted(name), " is already registered"));
  }
  if (regions_.size() >= options_.max_regions) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "too many shared-memory regions (limit ", options_.max_regions, ")"));
  }
  return absl::OkStatus();
}

absl::Status RegionRegistry::RegisterSystem(std::string_view name,
                                            std::string_view key,
                                            uint64_t offset,
                                            uint64_t byte_size,
                                            std::optional<uid_t> caller_uid) {
  absl::MutexLock l(&mu_);
  absl::Status s = CheckCanRegister(name);
  if (!s.ok()) return s;
  auto request = CheckSystemRequest(name, key, offset, byte_size, options_.key_prefix);
  if (!request.ok()) return request.status();
  auto fd = OpenSharedMemoryObject(*request, options_);
  if (!fd.ok()) return fd.status();
  const uid_t want_uid = caller_uid.has_value() ? *caller_uid : geteuid();
  auto st = CheckSharedMemoryObject(*fd, *request, want_uid, options_);
  if (!st.ok()) {
    close(*fd);
    return st.status();
  }
  auto mapping = MapSharedMemoryObject(*fd, *request, options_);
  if (!mapping.ok()) {
    close(*fd);
    return mapping.status();
  }
  regions_.emplace(std::string(name),
                   std::make_shared<SystemRegion>(std::string(name), mapping->base, mapping->length,
                                                  mapping->delta, byte_size, *fd, request->end,
                                                  std::move(mapping->guard), st->st_uid));
  return absl::OkStatus();
}

absl::Status RegionRegistry::RegisterCuda(std::string_view name,
                                          std::string_view raw_handle,
                                          int device_id, uint64_t offset,
                                          uint64_t byte_size,
                                          std::optional<uid_t> caller_uid) {
  absl::MutexLock l(&mu_);
  absl::Status s = CheckCanRegister(name);
  if (!s.ok()) return s;
  // Checked on every path, CUDA build or not.
  if (raw_handle.size() != kCudaIpcHandleSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("CUDA IPC handle must be exactly ", kCudaIpcHandleSize,
                     " bytes, got ", raw_handle.size()));
  }
  if (device_id < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("CUDA device id ", device_id, " is negative"));
  }
  if (byte_size == 0) {
    return absl::InvalidArgumentError("region byte size is 0");
  }
  uint64_t end;
  if (__builtin_add_overflow(offset, byte_size, &end)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "offset ", offset, " + byte size ", byte_size, " overflows"));
  }
  if (!internal::CudaIpcSupported()) {
    return absl::UnimplementedError(
        "CUDA shared-memory regions are not supported by this server build");
  }
  void* base = nullptr;
  uint64_t alloc_size = 0;
  std::string detail;
  s = internal::OpenCudaIpc(raw_handle.data(), device_id, &base, &alloc_size,
                            &detail);
  if (!detail.empty()) {
    Log(absl::StrCat("CUDA region \"", Sv(name), "\": ", detail));
  }
  if (!s.ok()) return s;
  s = CheckBounds(offset, byte_size, alloc_size, "CUDA allocation");
  if (!s.ok()) {
    detail.clear();
    internal::CloseCudaIpc(base, device_id, &detail);
    if (!detail.empty()) Log(detail);
    return s;
  }
  regions_.emplace(std::string(name),
                   std::make_shared<CudaRegion>(std::string(name), base, offset,
                                                byte_size, device_id,
                                                options_.log,
                                                caller_uid.value_or(geteuid())));
  return absl::OkStatus();
}

absl::StatusOr<RegionLease> RegionRegistry::Acquire(std::string_view name) const {
  absl::MutexLock l(&mu_);
  auto it = regions_.find(name);
  if (it == regions_.end()) {
    return absl::NotFoundError(
        absl::StrCat("no shared-memory region named ", Quoted(name)));
  }
  return RegionLease(it->second);
}

absl::Status RegionRegistry::Unregister(std::string_view name,
                                        std::optional<uid_t> owner) {
  // Drop the references outside the lock: the last one unmaps.
  std::vector<std::shared_ptr<const Region>> dropped;
  {
    absl::MutexLock l(&mu_);
    if (name.empty()) {
      for (auto it = regions_.begin(); it != regions_.end();) {
        if (!owner.has_value() || it->second->owner_uid() == *owner) {
          dropped.push_back(std::move(it->second));
          it = regions_.erase(it);
        } else {
          ++it;
        }
      }
    } else {
      auto it = regions_.find(name);
      if (it == regions_.end()) {
        return absl::NotFoundError(
            absl::StrCat("no shared-memory region named ", Quoted(name)));
      }
      if (owner.has_value() && it->second->owner_uid() != *owner) {
        return absl::PermissionDeniedError(absl::StrCat(
            "shared-memory region ", Quoted(name), " belongs to another user"));
      }
      dropped.push_back(std::move(it->second));
      regions_.erase(it);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<RegionInfo>> RegionRegistry::List(
    std::string_view name) const {
  absl::MutexLock l(&mu_);
  std::vector<RegionInfo> out;
  for (const auto& [n, r] : regions_) {
    if (!name.empty() && n != name) continue;
    out.push_back(RegionInfo{n, r->kind(), r->byte_size(), r->device_id(),
                             r.use_count() - 1, r->owner_uid()});
  }
  if (!name.empty() && out.empty()) {
    return absl::NotFoundError(
        absl::StrCat("no shared-memory region named ", Quoted(name)));
  }
  return out;
}

}  // namespace maskd::shm
