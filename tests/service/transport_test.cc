// The listeners of the real maskd binary (docs/service.md, Listeners;
// docs/reliability.md, Threat model): a taken address fails the second
// server, the socket mode ignores the umask, connection caps, descriptor
// exhaustion that the listener survives, idle and silent connections closed.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "gtest/gtest.h"
#include "maskd/v1/shm.grpc.pb.h"
#include "tests/service/server_harness.h"

namespace maskd::testing {
namespace {

using std::chrono::milliseconds;

std::string SocketPath(const MaskdProcess& p) { return p.addr().substr(7); }  // unix://

// The TCP port in the start line's listen=... (the listener after the unix one).
int TcpPort(const MaskdProcess& p) {
  std::string log = p.Log();
  size_t at = log.find(",127.0.0.1:", log.find(" listen="));
  return at == std::string::npos ? 0 : atoi(log.c_str() + at + 11);
}

std::string HealthOf(const std::string& addr) {
  ClientOptions o;
  o.timeout = absl::Seconds(5);
  auto c = Client::Connect(addr, o);
  if (!c.ok()) return c.status().ToString();
  auto h = (*c)->Health();
  return h.ok() ? *h : h.status().ToString();
}

// A raw connection; -1 on failure. `speak`: sends the HTTP/2 client preface
// and an empty SETTINGS frame, as a gRPC client's first bytes.
int RawConnect(const std::string& addr, bool speak) {
  int fd;
  if (addr.rfind("unix://", 0) == 0) {
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un sun{};
    sun.sun_family = AF_UNIX;
    std::string path = addr.substr(7);
    memcpy(sun.sun_path, path.data(), path.size());
    if (connect(fd, reinterpret_cast<sockaddr*>(&sun), sizeof sun) != 0) {
      close(fd);
      return -1;
    }
  } else {
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(static_cast<uint16_t>(atoi(addr.c_str() + addr.rfind(':') + 1)));
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
      close(fd);
      return -1;
    }
  }
  if (speak) {
    static const char kHello[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0";
    // MSG_NOSIGNAL: a server that closed the connection at accept must not
    // SIGPIPE the test.
    if (send(fd, kHello, sizeof kHello - 1, MSG_NOSIGNAL) !=
        static_cast<ssize_t>(sizeof kHello - 1)) {
      close(fd);
      return -1;
    }
  }
  return fd;
}

// True when the server closes `fd` (EOF or reset) within `timeout`; reads and
// drops whatever the server sends before.
bool ClosedWithin(int fd, milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  char buf[4096];
  for (;;) {
    auto left = std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) return true;
  }
}

int OpenFds(pid_t pid) {
  int n = 0;
  for (auto& e : std::filesystem::directory_iterator(absl::StrCat("/proc/", pid, "/fd"))) {
    (void)e;
    ++n;
  }
  return n;
}

TEST(TransportTest, SecondServerOnSameTcpPortFailsAndFirstKeepsServing) {
  MaskdProcess first({"--listen=127.0.0.1:0"});
  ASSERT_TRUE(first.ok()) << first.Log();
  const int port = TcpPort(first);
  ASSERT_GT(port, 0) << first.Log();
  MaskdProcess second({absl::StrCat("--listen=127.0.0.1:", port)}, /*wait_ready=*/false);
  EXPECT_EQ(second.Wait(30), 1) << second.Log();
  EXPECT_NE(second.Log().find(absl::StrCat("cannot listen on 127.0.0.1:", port)),
            std::string::npos)
      << second.Log();
  // Every new connection still reaches the first server.
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(HealthOf(absl::StrCat("127.0.0.1:", port)), "SERVING");
  }
}

TEST(TransportTest, SecondServerOnLiveSocketPathFailsAndFirstKeepsServing) {
  MaskdProcess first;
  ASSERT_TRUE(first.ok()) << first.Log();
  MaskdProcess second({"--listen=" + first.addr()}, /*wait_ready=*/false);
  EXPECT_EQ(second.Wait(30), 1) << second.Log();
  EXPECT_NE(second.Log().find("another server is listening there"), std::string::npos)
      << second.Log();
  EXPECT_EQ(HealthOf(first.addr()), "SERVING");
}

TEST(TransportTest, StaleSocketIsReplacedOtherFilesAreRefused) {
  char tmpl[] = "/tmp/maskd-stale-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  // A stale socket: bound, then its owner went away without unlinking it.
  const std::string stale = dir + "/stale.sock";
  {
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un sun{};
    sun.sun_family = AF_UNIX;
    memcpy(sun.sun_path, stale.data(), stale.size());
    ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&sun), sizeof sun), 0);
    close(fd);
  }
  {
    MaskdProcess p({"--listen=unix://" + stale});
    ASSERT_TRUE(p.ok()) << p.Log();
    EXPECT_EQ(HealthOf("unix://" + stale), "SERVING");
  }
  const std::string plain = dir + "/plain";
  FILE* f = fopen(plain.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fputs("keep me", f);
  fclose(f);
  MaskdProcess p({"--listen=unix://" + plain}, /*wait_ready=*/false);
  EXPECT_EQ(p.Wait(30), 1) << p.Log();
  EXPECT_NE(p.Log().find("exists and is not a socket"), std::string::npos) << p.Log();
  struct stat st;
  EXPECT_EQ(stat(plain.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  std::filesystem::remove_all(dir);
}

TEST(TransportTest, SocketModeIgnoresUmask) {
  mode_t old = umask(0);
  {
    MaskdProcess p;  // default --socket_mode=0660
    ASSERT_TRUE(p.ok()) << p.Log();
    struct stat st;
    ASSERT_EQ(stat(SocketPath(p).c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0660u);
  }
  {
    MaskdProcess p({"--socket_mode=0600"});
    ASSERT_TRUE(p.ok()) << p.Log();
    struct stat st;
    ASSERT_EQ(stat(SocketPath(p).c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    EXPECT_EQ(HealthOf(p.addr()), "SERVING");
  }
  umask(old);
  MaskdProcess bad({"--socket_mode=0999"}, /*wait_ready=*/false);
  EXPECT_EQ(bad.Wait(30), 2) << bad.Log();
  EXPECT_NE(bad.Log().find("--socket_mode"), std::string::npos) << bad.Log();
}

TEST(TransportTest, MaxConnectionsClosesTheNextAtOnce) {
  MaskdProcess p({"--max_connections=4"});
  ASSERT_TRUE(p.ok()) << p.Log();
  std::vector<int> held;
  for (int i = 0; i < 4; ++i) {
    int fd = RawConnect(p.addr(), /*speak=*/true);
    ASSERT_GE(fd, 0);
    held.push_back(fd);
  }
  std::this_thread::sleep_for(milliseconds(300));  // all four handed over
  // The server may close it before the preface is written (RawConnect -1).
  int extra = RawConnect(p.addr(), /*speak=*/false);
  ASSERT_GE(extra, 0);
  EXPECT_TRUE(ClosedWithin(extra, milliseconds(1000)));  // well before --handshake_timeout
  close(extra);
  for (int fd : held) EXPECT_FALSE(ClosedWithin(fd, milliseconds(10)));
  for (int fd : held) close(fd);
  // The count notices the closed ones (a sweep at the cap), so a client
  // gets in again.
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_EQ(HealthOf(p.addr()), "SERVING");
  // Operators see the refusal (polled into the metrics once a second).
  double refused = 0;
  for (int i = 0; i < 50 && refused < 1; ++i) {
    refused = MetricValue(p.Metrics(), "maskd_connections_refused_total");
    if (refused < 1) std::this_thread::sleep_for(milliseconds(100));
  }
  EXPECT_GE(refused, 1) << p.Metrics();
  EXPECT_GE(MetricValue(p.Metrics(), "maskd_connections_open"), 0);
}

TEST(TransportTest, ListenersSurviveDescriptorExhaustion) {
  MaskdProcess p({"--listen=127.0.0.1:0"});
  ASSERT_TRUE(p.ok()) << p.Log();
  const std::string tcp = absl::StrCat("127.0.0.1:", TcpPort(p));
  ASSERT_EQ(HealthOf(tcp), "SERVING");
  // Leave the server a few descriptors more than it holds now.
  const int limit = OpenFds(p.pid()) + 8;
  struct rlimit rl = {static_cast<rlim_t>(limit), static_cast<rlim_t>(limit)};
  ASSERT_EQ(prlimit(p.pid(), RLIMIT_NOFILE, &rl, nullptr), 0);
  // Connections until the server has no descriptor left for the next: the
  // kernel still completes connect (backlog), so count what the server holds.
  std::vector<int> held;
  for (int i = 0; i < 40; ++i) {
    int fd = RawConnect(i % 2 ? tcp : p.addr(), /*speak=*/true);
    if (fd >= 0) held.push_back(fd);
  }
  std::this_thread::sleep_for(milliseconds(500));
  EXPECT_GE(OpenFds(p.pid()), limit - 1);
  EXPECT_NE(HealthOf(p.addr()), "SERVING");  // no descriptor for it now
  for (int fd : held) close(fd);
  // Freed: both listeners accept again (back-off is at most 1 s).
  bool unix_ok = false, tcp_ok = false;
  for (int i = 0; i < 20 && !(unix_ok && tcp_ok); ++i) {
    std::this_thread::sleep_for(milliseconds(500));
    unix_ok = unix_ok || HealthOf(p.addr()) == "SERVING";
    tcp_ok = tcp_ok || HealthOf(tcp) == "SERVING";
  }
  EXPECT_TRUE(unix_ok) << p.Log();
  EXPECT_TRUE(tcp_ok) << p.Log();
  EXPECT_NE(p.Log().find("Too many open files; retrying"), std::string::npos) << p.Log();
}

TEST(TransportTest, SilentAndIdleConnectionsAreClosed) {
  MaskdProcess p({"--handshake_timeout=1s", "--max_connection_idle=1s",
                  "--max_connection_age_grace=1s", "--listen=127.0.0.1:0"});
  ASSERT_TRUE(p.ok()) << p.Log();
  const std::string tcp = absl::StrCat("127.0.0.1:", TcpPort(p));
  for (const std::string& addr : {p.addr(), tcp}) {
    int silent = RawConnect(addr, /*speak=*/false);
    int idle = RawConnect(addr, /*speak=*/true);
    ASSERT_GE(silent, 0);
    ASSERT_GE(idle, 0);
    EXPECT_TRUE(ClosedWithin(silent, milliseconds(4000))) << addr;
    EXPECT_TRUE(ClosedWithin(idle, milliseconds(8000))) << addr;
    close(silent);
    close(idle);
  }
  EXPECT_EQ(HealthOf(p.addr()), "SERVING");
}

// One HTTP/2 frame: 9-byte header and payload.
std::string Frame(uint8_t type, uint8_t flags, uint32_t stream, const std::string& payload) {
  std::string f;
  f += static_cast<char>((payload.size() >> 16) & 0xff);
  f += static_cast<char>((payload.size() >> 8) & 0xff);
  f += static_cast<char>(payload.size() & 0xff);
  f += static_cast<char>(type);
  f += static_cast<char>(flags);
  f += static_cast<char>((stream >> 24) & 0x7f);
  f += static_cast<char>((stream >> 16) & 0xff);
  f += static_cast<char>((stream >> 8) & 0xff);
  f += static_cast<char>(stream & 0xff);
  return f + payload;
}

// HEADERS (END_HEADERS) for POST /maskd.v1.Maskd/Ping then RST_STREAM(CANCEL),
// `n` times on one connection; true when the server closes it within `wait`.
// HPACK without the dynamic table: static-table entries and literals.
bool RapidReset(const std::string& addr, int n, milliseconds wait = milliseconds(10000)) {
  int fd = RawConnect(addr, /*speak=*/true);
  if (fd < 0) return false;
  std::string block;
  block += '\x83';  // :method POST
  block += '\x86';  // :scheme http
  const std::string path = "/maskd.v1.Maskd/Ping";
  block += '\x04';  // :path, literal value without indexing
  block += static_cast<char>(path.size());
  block += path;
  block += "\x01\x01x";  // :authority x
  block += "\x0f\x10\x10" "application/grpc";  // content-type (static 31)
  block += std::string("\x00\x02te\x08trailers", 13);
  std::string burst;
  uint32_t id = 1;
  bool closed = false;
  for (int i = 0; i < n && !closed; ++i, id += 2) {
    burst += Frame(0x1, 0x4, id, block);
    burst += Frame(0x3, 0x0, id, std::string("\0\0\0\x08", 4));
    if (burst.size() > 16384 || i + 1 == n) {
      size_t off = 0;
      while (off < burst.size()) {
        ssize_t w = send(fd, burst.data() + off, burst.size() - off, MSG_NOSIGNAL);
        if (w <= 0) {
          closed = true;
          break;
        }
        off += static_cast<size_t>(w);
      }
      burst.clear();
      // Drain what the server says (SETTINGS, acks) so that it never blocks.
      char buf[65536];
      while (recv(fd, buf, sizeof buf, MSG_DONTWAIT) > 0) {
      }
    }
  }
  closed = closed || ClosedWithin(fd, wait);
  close(fd);
  return closed;
}

TEST(TransportTest, RapidResetClosesTheConnection) {
  MaskdProcess p({"--listen=127.0.0.1:0", "--max_resets_per_second=100"});
  ASSERT_TRUE(p.ok()) << p.Log();
  const std::string tcp = absl::StrCat("127.0.0.1:", TcpPort(p));
  // A client within the rate keeps its connection.
  EXPECT_FALSE(RapidReset(tcp, 50, milliseconds(1500)));
  EXPECT_TRUE(RapidReset(tcp, 5000)) << p.Log();
  EXPECT_NE(p.Log().find("RST_STREAM frames, faster than --max_resets_per_second=100"),
            std::string::npos)
      << p.Log();
  EXPECT_EQ(HealthOf(tcp), "SERVING");
  // The unix socket is not guarded unless asked.
  MaskdProcess u({"--reset_guard_unix", "--max_resets_per_second=100"});
  ASSERT_TRUE(u.ok()) << u.Log();
  EXPECT_TRUE(RapidReset(u.addr(), 5000)) << u.Log();
  EXPECT_EQ(HealthOf(u.addr()), "SERVING");
}

// Throwaway certificates made with the openssl CLI for each test run (valid
// 2 days): a CA, a server certificate for localhost/127.0.0.1 and a client
// certificate it signs, plus a client certificate from another CA.
class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/maskd-tls-XXXXXX";
    dir_ = mkdtemp(tmpl);
    const std::string script =
        "set -e\n"
        "key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out $1.key; }\n"
        "ca() { key $1; openssl req -x509 -new -key $1.key -out $1.pem -days 2 -subj /CN=$1; }\n"
        "leaf() { key $1; openssl req -new -key $1.key -out $1.csr -subj /CN=$3\n"
        "  echo \"subjectAltName=$4\" > $1.ext\n"
        "  openssl x509 -req -in $1.csr -CA $2.pem -CAkey $2.key -CAcreateserial -days 2 \\\n"
        "    -extfile $1.ext -out $1.pem; }\n"
        "ca ca; ca other\n"
        "leaf server ca localhost DNS:localhost,IP:127.0.0.1\n"
        "leaf client ca client DNS:client\n"
        "leaf stranger other stranger DNS:stranger\n";
    FILE* f = fopen(File("make.sh").c_str(), "w");
    ASSERT_NE(f, nullptr);
    fputs(script.c_str(), f);
    fclose(f);
    const std::string cmd = "cd '" + dir_ + "' && bash make.sh > openssl.log 2>&1";
    ASSERT_EQ(system(cmd.c_str()), 0) << Read(File("openssl.log"));
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  static std::string Read(const std::string& path) {
    FILE* f = fopen(path.c_str(), "rb");
    if (f == nullptr) return "";
    std::string out;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
    fclose(f);
    return out;
  }
  std::string File(const std::string& name) const { return dir_ + "/" + name; }
  // Health over TLS; `who`: "" (no client certificate), "client", "stranger".
  std::vector<std::string> TlsFlags() const {
    return {"--listen=127.0.0.1:0", "--tls_cert=" + File("server.pem"),
            "--tls_key=" + File("server.key")};
  }
  // A TLS client. gRPC shares one connection between channels whose
  // arguments are equal: `backoff_ms` differing gives a channel its own.
  std::unique_ptr<Client> TlsClient(const std::string& addr, int backoff_ms = 1000) const {
    ClientOptions o;
    o.timeout = absl::Seconds(10);
    o.tls_ca_pem = Read(File("ca.pem"));
    o.reconnect_backoff_initial = absl::Milliseconds(backoff_ms);
    o.reconnect_backoff_max = absl::Seconds(2);
    auto c = Client::Connect(addr, o);
    return c.ok() ? *std::move(c) : nullptr;
  }
  std::string TlsHealth(const std::string& addr, const std::string& who,
                        const std::string& server_name = "") const {
    ClientOptions o;
    o.timeout = absl::Seconds(5);
    o.tls_ca_pem = Read(File("ca.pem"));
    o.tls_server_name = server_name;
    if (!who.empty()) {
      o.tls_cert_pem = Read(File(who + ".pem"));
      o.tls_key_pem = Read(File(who + ".key"));
    }
    auto c = Client::Connect(addr, o);
    if (!c.ok()) return c.status().ToString();
    auto h = (*c)->Health();
    return h.ok() ? *h : h.status().ToString();
  }

  std::string dir_;
};

TEST_F(TlsTest, HealthOverTlsWorksPlaintextFails) {
  MaskdProcess p({"--listen=127.0.0.1:0", "--tls_cert=" + File("server.pem"),
                  "--tls_key=" + File("server.key")});
  ASSERT_TRUE(p.ok()) << p.Log();
  const std::string tcp = absl::StrCat("127.0.0.1:", TcpPort(p));
  EXPECT_EQ(TlsHealth(tcp, ""), "SERVING");
  // The name checked in the certificate (no DNS look-up: gRPC's c-ares
  // resolver leaks a few bytes under LeakSanitizer).
  EXPECT_EQ(TlsHealth(tcp, "", "localhost"), "SERVING");
  EXPECT_NE(TlsHealth(tcp, "", "elsewhere.example"), "SERVING");
  EXPECT_NE(HealthOf(tcp), "SERVING");  // plaintext client
  EXPECT_EQ(HealthOf(p.addr()), "SERVING");  // the unix socket stays plaintext
  // gRPC's own (TLS) listener does not share its port either.
  MaskdProcess second({"--listen=" + tcp, "--tls_cert=" + File("server.pem"),
                       "--tls_key=" + File("server.key")},
                      /*wait_ready=*/false);
  EXPECT_EQ(second.Wait(30), 1) << second.Log();
  EXPECT_EQ(TlsHealth(tcp, ""), "SERVING");
}

TEST_F(TlsTest, ClientCaRequiresAVerifiedClientCertificate) {
  MaskdProcess p({"--listen=127.0.0.1:0", "--tls_cert=" + File("server.pem"),
                  "--tls_key=" + File("server.key"), "--tls_client_ca=" + File("ca.pem")});
  ASSERT_TRUE(p.ok()) << p.Log();
  const std::string tcp = absl::StrCat("127.0.0.1:", TcpPort(p));
  EXPECT_NE(TlsHealth(tcp, ""), "SERVING");
  EXPECT_NE(TlsHealth(tcp, "stranger"), "SERVING");  // signed by another CA
  EXPECT_EQ(TlsHealth(tcp, "client"), "SERVING");
}

// --client-identity=tls (issue #24 finding 3): the per-client shares key
// on the verified certificate, so two connections presenting one client
// certificate are one client; without it each connection is its own.
TEST_F(TlsTest, ClientIdentityTlsKeysOnTheCertificate) {
  auto connect = [&](const std::string& tcp, int backoff_ms) {
    ClientOptions o;  // a distinct backoff: a connection of its own
    o.timeout = absl::Seconds(10);
    o.tls_ca_pem = Read(File("ca.pem"));
    o.tls_cert_pem = Read(File("client.pem"));
    o.tls_key_pem = Read(File("client.key"));
    o.reconnect_backoff_initial = absl::Milliseconds(backoff_ms);
    return *Client::Connect(tcp, o);
  };
  v1::CompileRequest req;
  req.set_tokenizer("qwen3");
  req.set_regex("[0-9]+");
  for (const char* identity : {"tls", "connection"}) {
    MaskdProcess p({"--listen=127.0.0.1:0", "--tls_cert=" + File("server.pem"),
                    "--tls_key=" + File("server.key"), "--tls_client_ca=" + File("ca.pem"),
                    "--max_sessions_per_client=1", absl::StrCat("--client_identity=", identity)});
    ASSERT_TRUE(p.ok()) << p.Log();
    const std::string tcp = absl::StrCat("127.0.0.1:", TcpPort(p));
    auto first = connect(tcp, 1000), second = connect(tcp, 1001);
    ASSERT_TRUE(first->CreateSession(req).ok());
    auto again = second->CreateSession(req);
    if (std::string(identity) == "tls") {
      EXPECT_EQ(again.status().code(), absl::StatusCode::kResourceExhausted) << again.status();
      EXPECT_NE(again.status().message().find("client tls:client holds 1 sessions"),
                std::string::npos)
          << again.status();
    } else {
      EXPECT_TRUE(again.ok()) << again.status();
    }
  }
}

TEST_F(TlsTest, NonLoopbackPlaintextNeedsTheInsecureFlag) {
  MaskdProcess refused({"--listen=0.0.0.0:0"}, /*wait_ready=*/false);
  EXPECT_EQ(refused.Wait(30), 2) << refused.Log();
  EXPECT_NE(refused.Log().find("refusing plaintext TCP on non-loopback 0.0.0.0:0"),
            std::string::npos)
      << refused.Log();
  MaskdProcess allowed({"--listen=0.0.0.0:0", "--allow_insecure_tcp"});
  EXPECT_TRUE(allowed.ok()) << allowed.Log();
  MaskdProcess with_tls({"--listen=0.0.0.0:0", "--tls_cert=" + File("server.pem"),
                         "--tls_key=" + File("server.key")});
  EXPECT_TRUE(with_tls.ok()) << with_tls.Log();
  MaskdProcess half({"--tls_cert=" + File("server.pem")}, /*wait_ready=*/false);
  EXPECT_EQ(half.Wait(30), 2) << half.Log();
  MaskdProcess missing({"--tls_cert=" + File("nope.pem"), "--tls_key=" + File("server.key")},
                       /*wait_ready=*/false);
  EXPECT_EQ(missing.Wait(30), 2) << missing.Log();
  EXPECT_NE(missing.Log().find("--tls_cert: cannot read"), std::string::npos) << missing.Log();
}

// TLS connections come through maskd's own listener too (relayed to gRPC's
// private TLS socket): gRPC 1.51's own listener stopped for good after
// accept failed with EMFILE, and then the port never answered again.
TEST_F(TlsTest, TlsListenerSurvivesDescriptorExhaustion) {
  MaskdProcess p(TlsFlags());
  ASSERT_TRUE(p.ok()) << p.Log();
  const std::string tcp = absl::StrCat("127.0.0.1:", TcpPort(p));
  ASSERT_EQ(TlsHealth(tcp, ""), "SERVING");
  const int limit = OpenFds(p.pid()) + 16;
  struct rlimit rl = {static_cast<rlim_t>(limit), static_cast<rlim_t>(limit)};
  ASSERT_EQ(prlimit(p.pid(), RLIMIT_NOFILE, &rl, nullptr), 0);
  // HTTP/2 on the unix socket (held by gRPC), silent TLS connections (held
  // until their first byte or --handshake_timeout) and TLS connections that
  // send bytes at once (relayed to gRPC, whose handshake fails on them),
  // until the server has no descriptor to spare.
  std::vector<int> held;
  for (int i = 0; i < 90; ++i) {
    int fd = RawConnect(i % 3 == 0 ? p.addr() : tcp, /*speak=*/i % 3 != 1);
    if (fd >= 0) held.push_back(fd);
  }
  std::this_thread::sleep_for(milliseconds(1000));
  EXPECT_NE(TlsHealth(tcp, ""), "SERVING");
  EXPECT_NE(p.Log().find("Too many open files"), std::string::npos) << p.Log();
  for (int fd : held) close(fd);
  // Freed: both listeners accept again (back-off is at most 1 s).
  bool tls_ok = false, unix_ok = false;
  for (int i = 0; i < 20 && !(tls_ok && unix_ok); ++i) {
    std::this_thread::sleep_for(milliseconds(500));
    tls_ok = tls_ok || TlsHealth(tcp, "") == "SERVING";
    unix_ok = unix_ok || HealthOf(p.addr()) == "SERVING";
  }
  EXPECT_TRUE(tls_ok) << p.Log();
  EXPECT_TRUE(unix_ok) << p.Log();
  EXPECT_EQ(p.Log().find("Failed accept4"), std::string::npos) << p.Log();  // gRPC's
}

TEST_F(TlsTest, MaxConnectionsBoundsTls) {
  std::vector<std::string> flags = TlsFlags();
  flags.push_back("--max_connections=4");
  MaskdProcess p(flags);
  ASSERT_TRUE(p.ok()) << p.Log();
  const std::string tcp = absl::StrCat("127.0.0.1:", TcpPort(p));
  std::vector<int> held;
  for (int i = 0; i < 4; ++i) {
    int fd = RawConnect(tcp, /*speak=*/false);  // a TLS client before its ClientHello
    ASSERT_GE(fd, 0);
    held.push_back(fd);
  }
  std::this_thread::sleep_for(milliseconds(300));  // all four accepted
  int extra = RawConnect(tcp, /*speak=*/false);
  ASSERT_GE(extra, 0);
  EXPECT_TRUE(ClosedWithin(extra, milliseconds(1000)));  // well before --handshake_timeout
  close(extra);
  for (int fd : held) EXPECT_FALSE(ClosedWithin(fd, milliseconds(10)));
  for (int fd : held) close(fd);
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_EQ(TlsHealth(tcp, ""), "SERVING");
}

// The compile-fairness key of a TLS connection is gRPC's peer string for the
// relayed connection (a fresh abstract unix address each): two connections
// have two keys, so one client's backlog does not refuse another's compile.
TEST_F(TlsTest, TlsConnectionsHaveTheirOwnCompileKeys) {
  std::vector<std::string> flags = TlsFlags();
  for (const char* f : {"--max_pending_compiles_per_client=1", "--compile_threads=1",
                        "--compile_fast_lane=0", "--compile_timeout=60s"}) {
    flags.push_back(f);
  }
  MaskdProcess p(flags);
  ASSERT_TRUE(p.ok()) << p.Log();
  const std::string tcp = absl::StrCat("127.0.0.1:", TcpPort(p));
  auto a = TlsClient(tcp, 1000);
  auto b = TlsClient(tcp, 1001);
  ASSERT_TRUE(a && b);
  // 2^16 DFA states, each with an eager token mask: minutes of work.
  auto slow = [](char c) {
    v1::CompileRequest r;
    r.set_tokenizer("qwen3");
    r.set_regex(absl::StrCat("(a|b)*", std::string(1, c), "(a|b){15}"));
    r.mutable_options()->set_eager(true);
    r.set_wait(false);
    return r;
  };
  auto first = a->Compile(slow('a'));
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->state(), v1::INDEX_STATE_COMPILING);
  auto again = a->Compile(slow('b'));  // same connection, same key: over the cap
  EXPECT_EQ(again.status().code(), absl::StatusCode::kResourceExhausted) << again.status();
  EXPECT_NE(again.status().message().find("per-client"), std::string::npos) << again.status();
  auto other = b->Compile(slow('b'));  // its own key
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(other->state(), v1::INDEX_STATE_COMPILING);
  EXPECT_TRUE(a->CancelCompile(first->index_id()).ok());
  EXPECT_TRUE(b->CancelCompile(other->index_id()).ok());
}

// A relayed TLS connection carries no peer credentials: shared memory is
// refused there unless --shm_allow_tcp, as on plaintext TCP.
TEST_F(TlsTest, TlsCallersNeedShmAllowTcp) {
  for (bool allow : {false, true}) {
    std::vector<std::string> flags = TlsFlags();
    flags.push_back("--allow_shm");
    if (allow) flags.push_back("--shm_allow_tcp");
    MaskdProcess p(flags);
    ASSERT_TRUE(p.ok()) << p.Log();
    auto c = TlsClient(absl::StrCat("127.0.0.1:", TcpPort(p)));
    ASSERT_TRUE(c);
    auto stub = v1::SharedMemory::NewStub(c->channel());
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::RegisterSystemRegionRequest req;
    req.set_name("t");
    req.set_key("/maskd-tls-test-absent");
    req.set_byte_size(4096);
    v1::RegisterSystemRegionResponse resp;
    grpc::Status s = stub->RegisterSystemRegion(&ctx, req, &resp);
    if (allow) {
      // Past the caller check: the object does not exist.
      EXPECT_NE(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
      EXPECT_NE(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
    } else {
      EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
      EXPECT_NE(s.error_message().find("--shm_allow_tcp"), std::string::npos) << s.error_message();
    }
  }
}

// gRPC's TLS socket: tls.sock in a fresh 0700 directory under $TMPDIR,
// removed when maskd stops.
TEST_F(TlsTest, PrivateTlsSocketLivesInA0700DirectoryRemovedAtExit) {
  const std::string tmp = File("tmp");
  ASSERT_EQ(mkdir(tmp.c_str(), 0755), 0);
  const char* old = getenv("TMPDIR");
  const std::string saved = old != nullptr ? old : "";
  setenv("TMPDIR", tmp.c_str(), 1);  // inherited by the child
  MaskdProcess p(TlsFlags());
  if (old != nullptr) {
    setenv("TMPDIR", saved.c_str(), 1);
  } else {
    unsetenv("TMPDIR");
  }
  ASSERT_TRUE(p.ok()) << p.Log();
  EXPECT_EQ(TlsHealth(absl::StrCat("127.0.0.1:", TcpPort(p)), ""), "SERVING");
  std::vector<std::filesystem::path> dirs;
  for (auto& e : std::filesystem::directory_iterator(tmp)) dirs.push_back(e.path());
  ASSERT_EQ(dirs.size(), 1u);
  EXPECT_EQ(dirs[0].filename().string().rfind("maskd-tls-", 0), 0u) << dirs[0];
  struct stat st;
  ASSERT_EQ(stat(dirs[0].c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(stat((dirs[0] / "tls.sock").c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  p.Signal(SIGTERM);
  EXPECT_EQ(p.Wait(30), 0) << p.Log();
  EXPECT_FALSE(std::filesystem::exists(dirs[0])) << dirs[0];
}

}  // namespace
}  // namespace maskd::testing
