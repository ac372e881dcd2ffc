#include "service/relay.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "service/log.h"
#include "service/this_thread.h"

namespace maskd {
namespace {

int64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

// Bytes in flight one way: [start, end) of a fixed block.
struct Buf {
  explicit Buf(size_t cap) : data(new char[cap]), cap(cap) {}
  std::unique_ptr<char[]> data;
  size_t cap, start = 0, end = 0;
  size_t size() const { return end - start; }
  size_t room() const { return cap - size(); }
  // Contiguous free space at the back, compacting first when needed.
  char* back(size_t* n) {
    if (start == end) start = end = 0;
    if (end == cap && start > 0) {
      memmove(data.get(), data.get() + start, size());
      end -= start;
      start = 0;
    }
    *n = cap - end;
    return data.get() + end;
  }
};

constexpr char kPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
constexpr uint8_t kRstStream = 0x3;

}  // namespace

struct Relay::End {
  struct Conn* conn;
  bool is_client;
  uint32_t interest = 0;
};

struct Relay::Conn {
  Conn(int client, int upstream, bool guard_resets, const RelayOptions& o)
      : client(client), upstream(upstream), guard_resets(guard_resets),
        to_server(o.to_server_buffer), to_client(o.to_client_buffer), tokens(o.reset_burst),
        last_ns(MonotonicNs()) {
    client_end.conn = this;
    client_end.is_client = true;
    upstream_end.conn = this;
    upstream_end.is_client = false;
  }
  int client, upstream;
  const bool guard_resets;
  std::atomic<uint64_t>* unanswered = nullptr;  // Add's; null once answered
  void Answered() {
    if (unanswered != nullptr) unanswered->fetch_sub(1);
    unanswered = nullptr;
  }
  End client_end, upstream_end;
  Buf to_server, to_client;
  bool client_eof = false, upstream_eof = false, dead = false;
  // Frame reader over the client's bytes (guard_resets only).
  size_t preface_left = sizeof kPreface - 1;
  uint8_t header[9];
  size_t header_len = 0;
  uint64_t payload_left = 0;
  uint64_t resets = 0;
  // RST_STREAM token bucket.
  double tokens;
  int64_t last_ns;
};

Relay::Relay(const RelayOptions& options) : options_(options) {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;  // the wake fd
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
  thread_ = std::thread([this] {
    NameThisThread("maskd-relay");
    Loop();
  });
}

Relay::~Relay() {
  stop_.store(true);
  uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof one);
  thread_.join();
  absl::MutexLock l(&mu_);
  for (Conn* c : conns_) {
    close(c->client);
    close(c->upstream);
    c->Answered();
    delete c;
  }
  conns_.clear();
  close(wake_fd_);
  close(epoll_fd_);
}

void Relay::Add(int client_fd, int upstream_fd, bool guard_resets,
                std::atomic<uint64_t>* unanswered) {
  // The relay thread alone touches the epoll set and a Conn's life: it picks
  // the new one up from added_.
  Conn* c = new Conn(client_fd, upstream_fd, guard_resets, options_);
  if (unanswered != nullptr) {
    unanswered->fetch_add(1);
    c->unanswered = unanswered;
  }
  {
    absl::MutexLock l(&mu_);
    conns_.insert(c);
    added_.push_back(c);
  }
  uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof one);
}

void Relay::Close(Conn* c) {
  if (c->dead) return;
  c->dead = true;
  c->Answered();
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c->client, nullptr);
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c->upstream, nullptr);
  close(c->client);
  close(c->upstream);
}

void Relay::Update(Conn* c) {
  auto set = [&](End* e, int fd, uint32_t want) {
    if (want == e->interest || e->interest == ~0u) return;  // ~0u: left the set
    e->interest = want;
    epoll_event ev{};
    ev.events = want;
    ev.data.ptr = e;
    epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, fd, &ev);
  };
  set(&c->client_end, c->client,
      (!c->client_eof && c->to_server.room() > 0 ? EPOLLIN : 0u) |
          (c->to_client.size() > 0 ? EPOLLOUT : 0u));
  set(&c->upstream_end, c->upstream,
      (!c->upstream_eof && c->to_client.room() > 0 ? EPOLLIN : 0u) |
          (c->to_server.size() > 0 ? EPOLLOUT : 0u));
}

// The rapid-reset guard over `len` bytes the client sent: reads them as the
// HTTP/2 preface then frames (a header split across reads is kept in `c`),
// and takes a token per RST_STREAM frame from the connection's bucket
// (refilled at resets_per_second, holding at most reset_burst); false when
// the bucket is empty: the connection is to be closed.
bool Relay::GuardResets(Conn* c, const uint8_t* b, size_t len) {
  size_t i = 0;
  while (i < len) {
    if (c->preface_left > 0) {
      size_t k = std::min(c->preface_left, len - i);
      c->preface_left -= k;
      i += k;
    } else if (c->payload_left > 0) {
      size_t k = static_cast<size_t>(std::min<uint64_t>(c->payload_left, len - i));
      c->payload_left -= k;
      i += k;
    } else {
      c->header[c->header_len++] = b[i++];
      if (c->header_len < 9) continue;
      c->header_len = 0;
      c->payload_left = (uint64_t{c->header[0]} << 16) | (uint64_t{c->header[1]} << 8) |
                        c->header[2];
      if (c->header[3] != kRstStream) continue;
      ++c->resets;
      const int64_t now = MonotonicNs();
      c->tokens = std::min(options_.reset_burst,
                           c->tokens + static_cast<double>(now - c->last_ns) * 1e-9 *
                                           options_.resets_per_second);
      c->last_ns = now;
      if (c->tokens < 1) {
        const uint64_t n_closed = closed_for_resets_.fetch_add(1) + 1;
        if ((n_closed & (n_closed - 1)) == 0) {  // 1st, 2nd, 4th, ...: bounded logging
          LogError(absl::StrCat(
              "closed a connection after ", c->resets,
              " RST_STREAM frames, faster than --max_resets_per_second=",
              options_.resets_per_second, " (HTTP/2 rapid reset; ", n_closed,
              " closed so far)"));
        }
        return false;
      }
      c->tokens -= 1;
    }
  }
  return true;
}

// Moves what it can both ways; false when the connection is done (closed by
// either side, an error, or too many resets).
bool Relay::Pump(Conn* c) {
  for (bool progress = true; progress;) {
    progress = false;
    // client -> buffer, reading frame headers as the bytes pass (guard_resets).
    if (!c->client_eof && c->to_server.room() > 0) {
      size_t n;
      char* p = c->to_server.back(&n);
      ssize_t got = read(c->client, p, n);
      if (got > 0) {
        progress = true;
        c->to_server.end += static_cast<size_t>(got);
        if (c->guard_resets &&
            !GuardResets(c, reinterpret_cast<const uint8_t*>(p), static_cast<size_t>(got))) {
          return false;
        }
      } else if (got == 0) {
        c->client_eof = true;
      } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        return false;
      }
    }
    if (c->to_server.size() > 0) {
      ssize_t put = send(c->upstream, c->to_server.data.get() + c->to_server.start,
                         c->to_server.size(), MSG_NOSIGNAL);
      if (put > 0) {
        progress = true;
        c->to_server.start += static_cast<size_t>(put);
      } else if (put < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        return false;
      }
    }
    if (!c->upstream_eof && c->to_client.room() > 0) {
      size_t n;
      char* p = c->to_client.back(&n);
      ssize_t got = read(c->upstream, p, n);
      if (got > 0) {
        progress = true;
        c->to_client.end += static_cast<size_t>(got);
        c->Answered();
      } else if (got == 0) {
        c->upstream_eof = true;
      } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        return false;
      }
    }
    if (c->to_client.size() > 0) {
      ssize_t put = send(c->client, c->to_client.data.get() + c->to_client.start,
                         c->to_client.size(), MSG_NOSIGNAL);
      if (put > 0) {
        progress = true;
        c->to_client.start += static_cast<size_t>(put);
      } else if (put < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        return false;
      }
    }
  }
  // A side that closed is done once what it sent has been passed on.
  if (c->client_eof && c->to_server.size() == 0) return false;
  if (c->upstream_eof && c->to_client.size() == 0) return false;
  return true;
}

void Relay::Loop() {
  std::vector<epoll_event> events(256);
  std::vector<Conn*> done;
  for (;;) {
    int n = epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      LogError(absl::StrCat("relay: epoll_wait: ", strerror(errno)));
      return;
    }
    for (int i = 0; i < n; ++i) {
      if (events[i].data.ptr == nullptr) {  // Add or ~Relay
        uint64_t count;
        (void)!read(wake_fd_, &count, sizeof count);
        if (stop_.load()) return;
        std::vector<Conn*> fresh;
        {
          absl::MutexLock l(&mu_);
          fresh.swap(added_);
        }
        for (Conn* a : fresh) {
          a->client_end.interest = EPOLLIN;
          a->upstream_end.interest = EPOLLIN;
          epoll_event add{};
          add.events = EPOLLIN;
          add.data.ptr = &a->client_end;
          epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, a->client, &add);
          add.data.ptr = &a->upstream_end;
          epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, a->upstream, &add);
        }
        continue;
      }
      End* e = static_cast<End*>(events[i].data.ptr);
      Conn* c = e->conn;
      if (c->dead) continue;
      const uint32_t ev = events[i].events;
      bool keep = (ev & EPOLLERR) == 0 && Pump(c);
      // A client that hung up both ways can take nothing more; the upstream
      // end (gRPC) hung up: what it sent has been passed on as far as it goes.
      if (keep && (ev & EPOLLHUP) != 0 && (e->is_client || c->to_client.size() == 0)) keep = false;
      if (keep && (ev & EPOLLHUP) != 0 && !e->is_client) {
        // Flush to the client, then done; the upstream end leaves the set so
        // that its level-triggered hang-up does not spin the loop.
        c->upstream_eof = true;
        epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c->upstream, nullptr);
        c->upstream_end.interest = ~0u;
      }
      if (keep) {
        Update(c);
      } else {
        Close(c);
        done.push_back(c);
      }
    }
    if (!done.empty()) {
      absl::MutexLock l(&mu_);
      for (Conn* c : done) {
        conns_.erase(c);
        delete c;
      }
      done.clear();
    }
  }
}

}  // namespace maskd
