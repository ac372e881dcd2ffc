// Listener (service/listener.h) and PeerCredentialsOf (service/peer_credentials.h)
// with a real grpc::Server and a tiny service whose Detokenize answers with
// what the server sees of the caller: "peer=<ctx.peer()> uid=<uid> pid=<pid>"
// or "peer=<...> none", then " conn=<ConnectionOf id>" when there is one. A
// client under another uid is this binary run again (fork, setuid(65534),
// exec) with MASKD_LISTENER_CHILD=<address>, so that the child starts gRPC
// afresh; it prints the reply on stdout.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <grp.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "maskd/v1/maskd.grpc.pb.h"
#include "service/listener.h"
#include "service/peer_credentials.h"
#include "service/relay.h"

namespace maskd {
namespace {

class WhoAmI final : public v1::Maskd::CallbackService {
  grpc::ServerUnaryReactor* Detokenize(grpc::CallbackServerContext* ctx,
                                       const v1::DetokenizeRequest*,
                                       v1::DetokenizeResponse* resp) override {
    auto creds = PeerCredentialsOf(*ctx);
    std::string text = absl::StrCat("peer=", ctx->peer());
    if (creds) {
      absl::StrAppend(&text, " uid=", creds->uid, " pid=", creds->pid);
    } else {
      absl::StrAppend(&text, " none");
    }
    if (auto conn = ConnectionOf(*ctx)) absl::StrAppend(&text, " conn=", conn->id);
    resp->set_text(text);
    auto* r = ctx->DefaultReactor();
    r->Finish(grpc::Status::OK);
    return r;
  }
};

std::string Ask(const std::string& addr) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection of its own
  auto ch = grpc::CreateCustomChannel(addr, grpc::InsecureChannelCredentials(), args);
  auto stub = v1::Maskd::NewStub(ch);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::DetokenizeRequest req;
  v1::DetokenizeResponse resp;
  grpc::Status s = stub->Detokenize(&ctx, req, &resp);
  if (!s.ok()) return "error " + std::to_string(s.error_code()) + " " + s.error_message();
  return resp.text();
}

// The child's side: asks once and prints the answer.
TEST(ListenerChild, Ask) {
  const char* addr = getenv("MASKD_LISTENER_CHILD");
  if (addr == nullptr) GTEST_SKIP() << "runs only as the other-uid child of PeerCredentials tests";
  printf("ANSWER[%s]\n", Ask(addr).c_str());
  fflush(stdout);
}

// Runs Ask(addr) in a child process as `uid`; returns its answer, "" on failure.
std::string AskAs(uid_t uid, const std::string& addr, pid_t* child_pid) {
  char out_path[] = "/tmp/maskd-listener-child-XXXXXX";
  int out = mkstemp(out_path);
  if (out < 0) return "";
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out, 1);
    if (setgroups(0, nullptr) != 0 || setgid(uid) != 0 || setuid(uid) != 0) _exit(3);
    setenv("MASKD_LISTENER_CHILD", addr.c_str(), 1);
    execl("/proc/self/exe", "listener_test", "--gtest_filter=ListenerChild.Ask", nullptr);
    _exit(127);
  }
  *child_pid = pid;
  int status = 0;
  waitpid(pid, &status, 0);
  std::string text;
  char buf[4096];
  ssize_t n;
  lseek(out, 0, SEEK_SET);
  while ((n = read(out, buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
  close(out);
  unlink(out_path);
  size_t a = text.find("ANSWER["), b = text.find("]\n", a);
  if (a == std::string::npos || b == std::string::npos) return "";
  return text.substr(a + 7, b - a - 7);
}

class ListenerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/maskd-listener-XXXXXX";
    dir_ = mkdtemp(tmpl);
    chmod(dir_.c_str(), 0755);  // the other-uid child must reach the socket
    grpc::ServerBuilder b;
    b.RegisterService(&service_);
    server_ = b.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    options_.limit = &limit_;
  }
  void TearDown() override {
    for (auto& l : listeners_) l->Stop();
    server_->Shutdown(std::chrono::system_clock::now());
    std::string cmd = "rm -rf '" + dir_ + "'";
    (void)!system(cmd.c_str());
  }
  Listener* Start(const std::string& addr) {
    auto l = Listener::Bind(addr, options_);
    EXPECT_TRUE(l.ok()) << l.status();
    if (!l.ok()) return nullptr;
    (*l)->Start(server_.get());
    listeners_.push_back(*std::move(l));
    return listeners_.back().get();
  }

  std::string dir_;
  WhoAmI service_;
  std::unique_ptr<grpc::Server> server_;
  ConnectionLimit limit_{0};
  ListenerOptions options_;
  std::vector<std::unique_ptr<Listener>> listeners_;
};

TEST_F(ListenerTest, UnixPeerSeesOwnUidAndPid) {
  const std::string addr = "unix://" + dir_ + "/s.sock";
  ASSERT_NE(Start(addr), nullptr);
  std::string mine = Ask(addr);
  EXPECT_NE(mine.find(absl::StrCat(" uid=", getuid(), " pid=", getpid())), std::string::npos)
      << mine;
  EXPECT_EQ(mine.rfind("peer=fd:", 0), 0u) << mine;
}

TEST_F(ListenerTest, TwoUidsEachSeeTheirOwnAndFdReuseDoesNotLeak) {
  if (getuid() != 0) GTEST_SKIP() << "needs root to run a client as uid 65534";
  options_.socket_mode = 0666;
  const std::string addr = "unix://" + dir_ + "/s.sock";
  ASSERT_NE(Start(addr), nullptr);
  // Alternate: nobody, root, nobody, root. Each child's connection closes when
  // it exits, so fd numbers come back; every answer must still name its own
  // caller.
  for (int round = 0; round < 2; ++round) {
    pid_t child = 0;
    std::string theirs = AskAs(65534, addr, &child);
    EXPECT_NE(theirs.find(absl::StrCat(" uid=65534 pid=", child)), std::string::npos)
        << "round " << round << ": " << theirs;
    // A fresh channel per ask (a new connection).
    std::string mine = Ask(addr);
    EXPECT_NE(mine.find(absl::StrCat(" uid=0 pid=", getpid())), std::string::npos)
        << "round " << round << ": " << mine;
  }
}

// The connection number (the default per-client share key, issue #24) is
// new for every connection, also when gRPC's peer string "fd:N" repeats
// because a closed connection's fd number came back.
TEST_F(ListenerTest, ConnectionNumbersAreNeverReused) {
  const std::string addr = "unix://" + dir_ + "/s.sock";
  ASSERT_NE(Start(addr), nullptr);
  absl::flat_hash_set<std::string> conns;
  for (int i = 0; i < 4; ++i) {  // each Ask: a connection, closed after
    std::string answer = Ask(addr);
    const size_t at = answer.find(" conn=");
    ASSERT_NE(at, std::string::npos) << answer;
    EXPECT_TRUE(conns.insert(answer.substr(at)).second) << "repeated: " << answer;
  }
  const std::string tcp = Ask(absl::StrCat("127.0.0.1:", Start("127.0.0.1:0")->port()));
  EXPECT_NE(tcp.find(" conn="), std::string::npos) << tcp;  // plaintext TCP has one too
}

TEST_F(ListenerTest, TcpCarriesNoCredentials) {
  Listener* l = Start("127.0.0.1:0");
  ASSERT_NE(l, nullptr);
  ASSERT_GT(l->port(), 0);
  std::string answer = Ask(absl::StrCat("127.0.0.1:", l->port()));
  EXPECT_EQ(answer.rfind("peer=fd:", 0), 0u) << answer;
  EXPECT_NE(answer.find(" none"), std::string::npos) << answer;
}

// Relayed to an upstream unix socket (as TLS is, to gRPC's private socket):
// bytes pass both ways unchanged (here plaintext HTTP/2), and each relayed
// connection reaches the server from its own abstract address, without
// credentials.
TEST_F(ListenerTest, UpstreamConnectionsHaveTheirOwnPeerAndNoCredentials) {
  const std::string up = dir_ + "/up.sock";
  grpc::ServerBuilder b;
  b.AddListeningPort("unix:" + up, grpc::InsecureServerCredentials());
  WhoAmI who;
  b.RegisterService(&who);
  std::unique_ptr<grpc::Server> upstream = b.BuildAndStart();
  ASSERT_NE(upstream, nullptr);
  Relay relay{RelayOptions{}};
  options_.relay = &relay;
  options_.upstream_path = up;
  Listener* l = Start("127.0.0.1:0");
  ASSERT_NE(l, nullptr);
  const std::string addr = absl::StrCat("127.0.0.1:", l->port());
  std::string one = Ask(addr), two = Ask(addr);
  EXPECT_EQ(one.rfind("peer=unix-abstract:", 0), 0u) << one;
  EXPECT_NE(one.find(" none"), std::string::npos) << one;
  EXPECT_EQ(two.rfind("peer=unix-abstract:", 0), 0u) << two;
  EXPECT_NE(one.substr(0, one.find(' ')), two.substr(0, two.find(' ')));  // two keys
  EXPECT_EQ(l->upstream_failures(), 0u);
  l->Stop();
  upstream->Shutdown(std::chrono::system_clock::now());
}

TEST_F(ListenerTest, NoUpstreamClosesTheClientAndCounts) {
  Relay relay{RelayOptions{}};
  options_.relay = &relay;
  options_.upstream_path = dir_ + "/nobody.sock";
  Listener* l = Start("127.0.0.1:0");
  ASSERT_NE(l, nullptr);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(l->port()));
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  ASSERT_EQ(send(fd, "x", 1, MSG_NOSIGNAL), 1);
  pollfd p{fd, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 5000), 1);
  char c;
  EXPECT_LE(read(fd, &c, 1), 0);  // closed: EOF or reset
  close(fd);
  EXPECT_EQ(l->upstream_failures(), 1u);
  // The listener gives the slot back just after closing.
  for (int i = 0; i < 100 && limit_.open.load() != 0; ++i) absl::SleepFor(absl::Milliseconds(10));
  EXPECT_EQ(limit_.open.load(), 0u);
}

}  // namespace
}  // namespace maskd
