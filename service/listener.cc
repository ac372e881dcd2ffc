#include "service/listener.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "grpcpp/server_posix.h"
#include "service/log.h"
#include "service/peer_credentials.h"
#include "service/peer_credentials_internal.h"
#include "service/fd_headroom.h"
#include "service/relay.h"
#include "service/this_thread.h"

namespace maskd {

struct Listener::Pending {
  int fd;
  absl::Time deadline;
  std::optional<PeerCredentials> creds;
};
struct Listener::Handed {
  int fd;
  dev_t dev;
  ino_t ino;
};

namespace {

std::string Errno(int e) { return std::string(strerror(e)); }

// "host:port" / "[v6]:port" → host, port; false when malformed.
bool SplitHostPort(absl::string_view hp, std::string* host, std::string* port) {
  if (!hp.empty() && hp[0] == '[') {
    size_t close = hp.find(']');
    if (close == absl::string_view::npos || close + 1 >= hp.size() || hp[close + 1] != ':') {
      return false;
    }
    *host = std::string(hp.substr(1, close - 1));
    *port = std::string(hp.substr(close + 2));
  } else {
    size_t colon = hp.rfind(':');
    if (colon == absl::string_view::npos) return false;
    *host = std::string(hp.substr(0, colon));
    *port = std::string(hp.substr(colon + 1));
    if (host->find(':') != std::string::npos) return false;  // bare IPv6 needs brackets
  }
  int p;
  return !port->empty() && absl::SimpleAtoi(*port, &p) && p >= 0 && p <= 65535;
}

struct Resolved {
  std::vector<sockaddr_storage> addrs;
  std::vector<socklen_t> lens;
};

absl::StatusOr<Resolved> Resolve(const std::string& host_port) {
  std::string host, port;
  if (!SplitHostPort(host_port, &host, &port)) {
    return absl::InvalidArgumentError(
        absl::StrCat("listen address '", host_port.substr(0, 256), "': want host:port or [v6]:port"));
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("listen address '", host_port.substr(0, 256), "': ", gai_strerror(rc)));
  }
  Resolved out;
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    sockaddr_storage ss{};
    memcpy(&ss, a->ai_addr, a->ai_addrlen);
    out.addrs.push_back(ss);
    out.lens.push_back(a->ai_addrlen);
  }
  freeaddrinfo(res);
  if (out.addrs.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("listen address '", host_port, "': no address"));
  }
  return out;
}

bool IsLoopback(const sockaddr_storage& ss) {
  if (ss.ss_family == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(&ss);
    return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
  }
  if (ss.ss_family == AF_INET6) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(&ss);
    if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr)) return true;
    if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) return in6->sin6_addr.s6_addr[12] == 127;
  }
  return false;
}

std::string AddrString(const sockaddr_storage& ss) {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (ss.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr, buf, sizeof buf);
    return buf;
  }
  inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr, buf, sizeof buf);
  return absl::StrCat("[", buf, "]");
}

void SetPort(sockaddr_storage* ss, int port) {
  if (ss->ss_family == AF_INET) {
    reinterpret_cast<sockaddr_in*>(ss)->sin_port = htons(static_cast<uint16_t>(port));
  } else {
    reinterpret_cast<sockaddr_in6*>(ss)->sin6_port = htons(static_cast<uint16_t>(port));
  }
}

int GetPort(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return 0;
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
}

std::string UnixPath(const std::string& addr) {
  absl::string_view a = addr;
  if (a.substr(0, 7) == "unix://") return std::string(a.substr(7));
  return std::string(a.substr(5));  // "unix:"
}

// A new non-blocking connection to the unix socket at `path`, from a fresh
// autobound abstract address (bind with only the family: the kernel picks 5
// hex digits), so that the server's peer string tells connections apart;
// -1 with errno set when it cannot be made (EAGAIN: the backlog is full).
int ConnectUnix(const std::string& path) {
  sockaddr_un sun{};
  sun.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof sun.sun_path) {
    errno = ENAMETOOLONG;
    return -1;
  }
  memcpy(sun.sun_path, path.data(), path.size());
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  sockaddr_un any{};
  any.sun_family = AF_UNIX;
  if (bind(fd, reinterpret_cast<sockaddr*>(&any), sizeof(sa_family_t)) != 0 ||
      connect(fd, reinterpret_cast<sockaddr*>(&sun), sizeof sun) != 0) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

// Clears the way for a unix socket at `sun`'s path (`addr` names it in
// messages): nothing there, or a stale socket (connect: ECONNREFUSED, its
// server gone) removed. FAILED_PRECONDITION when a server listens there,
// when the path is not a socket, or when it cannot be removed.
absl::Status ClearStaleSocket(const std::string& addr, const sockaddr_un& sun) {
  struct stat st;
  if (lstat(sun.sun_path, &st) != 0) return absl::OkStatus();
  if (!S_ISSOCK(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot listen on ", addr, ": the path exists and is not a socket"));
  }
  int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (probe < 0) return absl::InternalError(absl::StrCat("socket: ", Errno(errno)));
  int rc = connect(probe, reinterpret_cast<const sockaddr*>(&sun), sizeof sun);
  int e = errno;
  close(probe);
  if (rc == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot listen on ", addr, ": another server is listening there (stop it first)"));
  }
  if (e != ECONNREFUSED) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot listen on ", addr, ": the socket exists and connect says ", Errno(e)));
  }
  if (unlink(sun.sun_path) != 0 && errno != ENOENT) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot listen on ", addr, ": cannot remove the stale socket: ", Errno(errno)));
  }
  return absl::OkStatus();
}

}  // namespace

bool IsUnixAddress(const std::string& addr) {
  return addr.rfind("unix:", 0) == 0;  // not unix-abstract: (left to gRPC)
}

absl::StatusOr<std::vector<std::string>> ResolveForBind(const std::string& host_port) {
  auto r = Resolve(host_port);
  if (!r.ok()) return r.status();
  std::vector<std::string> out;
  for (const auto& ss : r->addrs) out.push_back(AddrString(ss));
  return out;
}

absl::StatusOr<bool> IsLoopbackTcp(const std::string& host_port) {
  auto r = Resolve(host_port);
  if (!r.ok()) return r.status();
  for (const auto& ss : r->addrs) {
    if (!IsLoopback(ss)) return false;
  }
  return true;
}

absl::StatusOr<std::unique_ptr<Listener>> Listener::Bind(const std::string& addr,
                                                         const ListenerOptions& options) {
  if (!options.upstream_path.empty() &&
      (options.relay == nullptr || options.upstream_path.size() >= sizeof(sockaddr_un::sun_path))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "listener ", addr.substr(0, 256), ": an upstream needs a relay and a path under ",
        sizeof(sockaddr_un::sun_path), " bytes"));
  }
  std::unique_ptr<Listener> l(new Listener);
  l->addr_ = l->shown_ = addr;
  l->options_ = options;
  absl::Status bound = IsUnixAddress(addr) ? l->BindUnix() : l->BindTcp();
  if (!bound.ok()) return bound;
  l->wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (l->wake_fd_ < 0) return absl::InternalError(absl::StrCat("eventfd: ", Errno(errno)));
  if (options.spare_fds > 0 || !options.upstream_path.empty()) {
    absl::StatusOr<std::unique_ptr<FdHeadroom>> headroom = FdHeadroom::Open();
    if (!headroom.ok()) return headroom.status();
    l->headroom_ = *std::move(headroom);
  }
  return l;
}

absl::Status Listener::BindUnix() {
  is_unix_ = true;
  const std::string path = UnixPath(addr_);
  sockaddr_un sun{};
  sun.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof sun.sun_path) {
    return absl::InvalidArgumentError(absl::StrCat(
        "listen address '", addr_.substr(0, 256), "': the path must have 1 to ",
        sizeof sun.sun_path - 1, " bytes"));
  }
  memcpy(sun.sun_path, path.data(), path.size());
  if (absl::Status s = ClearStaleSocket(addr_, sun); !s.ok()) return s;
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", Errno(errno)));
  // Created with no permission bits at all, then chmod: the socket is never
  // reachable with more than `socket_mode`, whatever the process umask.
  mode_t old = umask(0777);
  int rc = bind(fd, reinterpret_cast<sockaddr*>(&sun), sizeof sun);
  int e = errno;
  umask(old);
  if (rc != 0) {
    close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat("cannot listen on ", addr_, ": bind: ", Errno(e)));
  }
  struct stat st;
  if (chmod(path.c_str(), options_.socket_mode) != 0 || lstat(path.c_str(), &st) != 0) {
    e = errno;
    close(fd);
    unlink(path.c_str());
    return absl::FailedPreconditionError(
        absl::StrCat("cannot listen on ", addr_, ": chmod: ", Errno(e)));
  }
  unix_path_ = path;
  unix_dev_ = st.st_dev;
  unix_ino_ = st.st_ino;
  if (listen(fd, SOMAXCONN) != 0) {
    e = errno;
    close(fd);
    unlink(path.c_str());
    return absl::FailedPreconditionError(
        absl::StrCat("cannot listen on ", addr_, ": listen: ", Errno(e)));
  }
  fds_.push_back(fd);
  return absl::OkStatus();
}

absl::Status Listener::BindTcp() {
  auto r = Resolve(addr_);
  if (!r.ok()) return r.status();
  int port = 0;
  for (size_t i = 0; i < r->addrs.size(); ++i) {
    sockaddr_storage ss = r->addrs[i];
    if (port != 0) SetPort(&ss, port);  // port 0: every address gets the first one's
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", Errno(errno)));
    int one = 1;
    // SO_REUSEADDR only (TIME_WAIT); never SO_REUSEPORT: a second server
    // on the same port must fail to bind.
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (ss.ss_family == AF_INET6) {
      int v6only = 0;
      setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof v6only);
    }
    if (bind(fd, reinterpret_cast<sockaddr*>(&ss), r->lens[i]) != 0 || listen(fd, SOMAXCONN) != 0) {
      int e = errno;
      close(fd);
      // "localhost" may name ::1 on a host without IPv6: skip an address
      // the host cannot bind, as long as one binds.
      if ((e == EADDRNOTAVAIL || e == EAFNOSUPPORT) && r->addrs.size() > 1) continue;
      for (int f : fds_) close(f);
      fds_.clear();
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot listen on ", addr_, ": ", AddrString(ss), ": ", Errno(e),
          e == EADDRINUSE ? " (another process has the port)" : ""));
    }
    if (port == 0) port = GetPort(fd);
    fds_.push_back(fd);
  }
  if (fds_.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("cannot listen on ", addr_));
  }
  port_ = port;
  shown_ = absl::StrCat(addr_.substr(0, addr_.rfind(':')), ":", port);
  return absl::OkStatus();
}

Listener::~Listener() { Stop(); }

void Listener::Start(grpc::Server* server) {
  server_ = server;
  thread_ = std::thread([this] {
    NameThisThread("maskd-accept");
    Loop();
  });
}

void Listener::Stop() {
  if (stopped_) return;
  stopped_ = true;
  if (thread_.joinable()) {
    uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof one);
    thread_.join();
  }
  for (int fd : fds_) close(fd);
  fds_.clear();
  if (wake_fd_ >= 0) close(wake_fd_);
  wake_fd_ = -1;
  if (!unix_path_.empty()) {
    struct stat st;
    if (lstat(unix_path_.c_str(), &st) == 0 && st.st_dev == unix_dev_ && st.st_ino == unix_ino_) {
      unlink(unix_path_.c_str());
    }
  }
}

int Listener::SpareFdsNeeded(int base) const {
  const uint64_t unanswered = options_.limit->upstream_unanswered.load();
  return static_cast<int>(std::min<uint64_t>(static_cast<uint64_t>(base) + unanswered, 64));
}

bool Listener::HandOver(const Pending& p, Handed* out) {
  struct stat st;
  if (!options_.upstream_path.empty()) {
    // A client that hung up before its first byte: nothing to relay.
    char b;
    if (recv(p.fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0) {
      close(p.fd);
      return false;
    }
    int up = -1;
    if (!headroom_->AtLeast(SpareFdsNeeded(options_.spare_fds / 2))) {
      errno = EMFILE;
    } else {
      up = ConnectUnix(options_.upstream_path);
    }
    if (up < 0 || fstat(p.fd, &st) != 0) {
      const int e = errno;
      const uint64_t n = upstream_failures_.fetch_add(1) + 1;  // counted before the client sees it
      if (up >= 0) close(up);
      close(p.fd);
      const absl::Time now = absl::Now();
      if (now - last_upstream_log_ > absl::Seconds(10)) {
        last_upstream_log_ = now;
        LogError(absl::StrCat("listener ", shown_,
                              ": closed a connection: cannot connect to gRPC's TLS socket: ",
                              Errno(e), " (", n, " so far)"));
      }
      return false;
    }
    *out = {p.fd, st.st_dev, st.st_ino};  // before the relay may close it
    options_.relay->Add(p.fd, up, /*guard_resets=*/false, &options_.limit->upstream_unanswered);
    return true;
  }
  // gRPC gets the client's socket, or the relay's end of a socketpair.
  int fd = p.fd;
  if (options_.relay != nullptr) {
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, pair) != 0) {
      close(p.fd);
      return false;
    }
    options_.relay->Add(p.fd, pair[1], /*guard_resets=*/true);
    fd = pair[0];
  }
  if (fstat(fd, &st) != 0 || !internal::RecordConnection(fd, p.creds)) {
    close(fd);  // the relay, if any, sees the hang-up and closes the client
    return false;
  }
  *out = {fd, st.st_dev, st.st_ino};
  grpc::AddInsecureChannelFromFd(server_, fd);
  return true;
}

// The accept loop's state, on Loop's stack: the pending connections
// (accepted, waiting for a first byte) and those handed to gRPC (tracked by
// fd and inode: gRPC closes them without telling, and a sweep notices).
struct Listener::LoopState {
  std::vector<Pending> pending;
  std::vector<Handed> handed;
  absl::Duration backoff = absl::ZeroDuration();  // of accept, after EMFILE and the like
  absl::Time accept_resume = absl::InfinitePast();
  absl::Time next_sweep;
  absl::Time last_fd_log = absl::InfinitePast();
  uint64_t refused_logged = 0;
  // The wake eventfd, the listening sockets (-1 while backing off), then one
  // per pending connection, in `pending`'s order.
  std::vector<pollfd> pfds;
};

void Listener::Loop() {
  LoopState s;
  s.next_sweep = absl::Now() + absl::Seconds(1);
  for (;;) {
    const int timeout_ms = PreparePoll(&s, absl::Now());
    int n = poll(s.pfds.data(), s.pfds.size(), timeout_ms);
    if (n < 0 && errno != EINTR) {
      LogError(absl::StrCat("listener ", shown_, ": poll: ", Errno(errno)));
      absl::SleepFor(absl::Milliseconds(100));
      continue;
    }
    if (s.pfds[0].revents != 0) break;  // Stop()
    const absl::Time after = absl::Now();
    ServePending(&s, after);
    // New connections, a bounded number per round so that pending ones are
    // served too.
    for (size_t li = 0; li < fds_.size(); ++li) {
      if (s.pfds[1 + li].revents != 0) AcceptBatch(&s, fds_[li]);
    }
    if (after >= s.next_sweep) SweepAndReport(&s, after);
  }
  for (const Pending& p : s.pending) ClosePending(p);
}

int Listener::PreparePoll(LoopState* s, absl::Time now) const {
  const bool accepting = now >= s->accept_resume;
  s->pfds.clear();
  s->pfds.push_back({wake_fd_, POLLIN, 0});
  for (int fd : fds_) s->pfds.push_back({accepting ? fd : -1, POLLIN, 0});
  absl::Time wake_at = s->next_sweep;
  if (!accepting) wake_at = std::min(wake_at, s->accept_resume);
  for (const Pending& p : s->pending) {
    s->pfds.push_back({p.fd, POLLIN, 0});
    wake_at = std::min(wake_at, p.deadline);
  }
  return static_cast<int>(
      std::clamp<int64_t>(absl::ToInt64Milliseconds(wake_at - now) + 1, 0, 1000));
}

void Listener::Sweep(LoopState* s) {
  std::vector<Handed>& handed = s->handed;
  size_t kept = 0;
  for (const Handed& h : handed) {
    struct stat st;
    if (fstat(h.fd, &st) == 0 && st.st_dev == h.dev && st.st_ino == h.ino) {
      handed[kept++] = h;
    }
  }
  if (kept < handed.size()) {
    options_.limit->open.fetch_sub(handed.size() - kept);
    handed.resize(kept);
  }
}

void Listener::ClosePending(const Pending& p) {
  close(p.fd);
  options_.limit->open.fetch_sub(1);
}

void Listener::ServePending(LoopState* s, absl::Time after) {
  const size_t base = 1 + fds_.size();
  size_t kept = 0;
  for (size_t i = 0; i < s->pending.size(); ++i) {
    Pending& p = s->pending[i];
    if (s->pfds[base + i].revents != 0) {
      Handed h;
      if (HandOver(p, &h)) {
        s->handed.push_back(h);
      } else {
        options_.limit->open.fetch_sub(1);
      }
    } else if (after >= p.deadline) {
      ClosePending(p);
    } else {
      s->pending[kept++] = p;
    }
  }
  s->pending.resize(kept);
}

void Listener::AcceptBatch(LoopState* s, int listen_fd) {
  for (int k = 0; k < 64; ++k) {
    // Too few spare descriptors reads as EMFILE (ListenerOptions::spare_fds).
    const bool spare =
        options_.spare_fds <= 0 || headroom_->AtLeast(SpareFdsNeeded(options_.spare_fds));
    int fd = spare ? accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK) : -1;
    if (fd < 0) {
      int e = spare ? errno : EMFILE;
      if (e == EINTR || e == ECONNABORTED || e == EPROTO) continue;
      OnAcceptFailure(s, e, spare);
      break;
    }
    s->backoff = absl::ZeroDuration();
    Admit(s, fd);
  }
}

void Listener::OnAcceptFailure(LoopState* s, int e, bool spare) {
  if (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM) {
    s->backoff = std::clamp(s->backoff * 2, absl::Milliseconds(10), absl::Seconds(1));
    s->accept_resume = absl::Now() + s->backoff;
    Sweep(s);
    if (absl::Now() - s->last_fd_log > absl::Seconds(10)) {
      s->last_fd_log = absl::Now();
      LogError(absl::StrCat("listener ", shown_, ": accept: ", Errno(e),
                            spare ? "" : absl::StrCat(" (", options_.spare_fds,
                                                      " descriptors kept spare)"),
                            "; retrying (open connections: ", options_.limit->open.load(), ")"));
    }
  } else if (e != EAGAIN && e != EWOULDBLOCK) {
    LogError(absl::StrCat("listener ", shown_, ": accept: ", Errno(e)));
    s->accept_resume = absl::Now() + absl::Milliseconds(100);
  }
}

void Listener::Admit(LoopState* s, int fd) {
  ConnectionLimit* limit = options_.limit;
  if (limit->max != 0 && limit->open.load() >= limit->max) {
    Sweep(s);
    if (limit->open.load() >= limit->max) {
      close(fd);
      limit->refused.fetch_add(1);
      return;
    }
  }
  limit->open.fetch_add(1);
  Pending p{fd, absl::Now() + options_.first_byte_timeout, std::nullopt};
  if (is_unix_) {
    ucred uc{};
    socklen_t len = sizeof uc;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) == 0) {
      p.creds = PeerCredentials{uc.pid, uc.uid, uc.gid};
    }
  } else {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  s->pending.push_back(p);
}

void Listener::SweepAndReport(LoopState* s, absl::Time after) {
  Sweep(s);
  s->next_sweep = after + absl::Seconds(1);
  const ConnectionLimit* limit = options_.limit;
  uint64_t refused = limit->refused.load();
  if (refused != s->refused_logged && after - s->last_fd_log > absl::Seconds(10)) {
    s->last_fd_log = after;
    LogError(absl::StrCat("listener ", shown_, ": ", refused - s->refused_logged,
                          " connections closed at accept (--max_connections=", limit->max,
                          ")"));
    s->refused_logged = refused;
  }
}

}  // namespace maskd
