#include "service/peer_credentials.h"

#include <sys/stat.h>

#include <cstdlib>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "service/peer_credentials_internal.h"

namespace maskd {
namespace {

// Why the key is safe: gRPC names an fd channel "fd:<n>" and closes <n> only
// when the transport is destroyed, which waits for every call on it (each
// stream holds a transport ref). So while a handler runs, its fd is open and
// no new accept can return the same number; when a number is reused, the
// listener records the new connection before gRPC sees the fd. The inode
// check at lookup is a second guard: a record never answers for a different
// file that happens to have the same number.
struct Entry {
  dev_t dev = 0;
  ino_t ino = 0;
  uint64_t id = 0;  // ConnectionInfo::id
  bool has_creds = false;
  PeerCredentials creds;
};

class Registry {
 public:
  bool Record(int fd, const std::optional<PeerCredentials>& creds) {
    struct stat st;
    if (fstat(fd, &st) != 0) return false;
    Entry e;
    e.dev = st.st_dev;
    e.ino = st.st_ino;
    e.has_creds = creds.has_value();
    if (creds) e.creds = *creds;
    absl::MutexLock l(&mu_);
    e.id = ++last_id_;
    entries_[fd] = e;
    return true;
  }
  std::optional<ConnectionInfo> Lookup(int fd) {
    Entry e;
    {
      absl::ReaderMutexLock l(&mu_);
      auto it = entries_.find(fd);
      if (it == entries_.end()) return std::nullopt;
      e = it->second;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_dev != e.dev || st.st_ino != e.ino) return std::nullopt;
    ConnectionInfo info;
    info.id = e.id;
    if (e.has_creds) info.creds = e.creds;
    return info;
  }

 private:
  absl::Mutex mu_;
  uint64_t last_id_ ABSL_GUARDED_BY(mu_) = 0;
  // One entry per fd number ever handed over (bounded by RLIMIT_NOFILE); a
  // closed connection's entry stays until its number is recorded again.
  absl::flat_hash_map<int, Entry> entries_ ABSL_GUARDED_BY(mu_);
};

Registry& TheRegistry() {
  static Registry* r = new Registry;
  return *r;
}

}  // namespace

std::optional<ConnectionInfo> ConnectionOf(const grpc::ServerContextBase& ctx) {
  const std::string peer = ctx.peer();
  absl::string_view p = peer;
  if (p.substr(0, 3) != "fd:") return std::nullopt;
  int fd;
  if (!absl::SimpleAtoi(p.substr(3), &fd) || fd < 0) return std::nullopt;
  return TheRegistry().Lookup(fd);
}

std::optional<PeerCredentials> PeerCredentialsOf(const grpc::ServerContextBase& ctx) {
  std::optional<ConnectionInfo> c = ConnectionOf(ctx);
  if (!c) return std::nullopt;
  return c->creds;
}

namespace internal {
bool RecordConnection(int fd, const std::optional<PeerCredentials>& creds) {
  return TheRegistry().Record(fd, creds);
}
}  // namespace internal

}  // namespace maskd
