// Who may use shared memory, against the real maskd binary (--allow_shm): a
// unix caller only its own uid's objects and regions (SO_PEERCRED; the test
// runs shm_peer_child as uid 65534 when root), a TCP caller only with
// --shm_allow_tcp.
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <grp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "client/shm_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/apply_mask.h"
#include "nlohmann/json.hpp"
#include "tests/service/server_harness.h"
#include "tests/service/shm_test_util.h"

namespace maskd {
namespace {

using ::maskd::testing::MaskdProcess;
using ::maskd::testing::MetricValue;
using ::maskd::testing::SessionTokens;
using ::maskd::testing::WaitForAnyMetric;
using ::testing::HasSubstr;
using ::testing::Not;
using Code = absl::StatusCode;
using ::maskd::shm_test::NewSegment;

// Copies shm_peer_child into `dir` (mode 0755) and returns the copy's path,
// or "" on error. The build tree may sit under a directory other users cannot
// enter (/root, a 0700 mktemp folder); `dir` is one they can.
std::string CopyPeerChild(const std::string& dir) {
  const std::string from = std::string(MASKD_BIN_DIR) + "/shm_peer_child";
  const std::string to = dir + "/shm_peer_child";
  std::ifstream in(from, std::ios::binary);
  std::ofstream out(to, std::ios::binary | std::ios::trunc);
  out << in.rdbuf();
  out.close();
  if (!in || !out || chmod(to.c_str(), 0755) != 0) return "";
  return to;
}

// Whether `uid` (gid too) may execute `path`.
bool CanExecAs(uid_t uid, const std::string& path) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (setgroups(0, nullptr) != 0 || setgid(uid) != 0 || setuid(uid) != 0) _exit(2);
    _exit(access(path.c_str(), X_OK) == 0 ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// Runs `child` (a shm_peer_child) as `uid` (gid too) with `args`; returns its
// stdout line ("<code>[ names]"), or "" when it could not run.
std::string RunHelperAs(uid_t uid, const std::string& child, const std::vector<std::string>& args) {
  int out[2];
  if (pipe(out) != 0) return "";
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], 1);
    close(out[0]);
    close(out[1]);
    if (setgroups(0, nullptr) != 0 || setgid(uid) != 0 || setuid(uid) != 0) _exit(126);
    std::vector<std::string> a = {child};
    a.insert(a.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& s : a) argv.push_back(s.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(out[1]);
  std::string text;
  char buf[256];
  ssize_t n;
  while ((n = read(out[0], buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
  close(out[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return "";
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

std::string CodeOf(Code c) { return std::to_string(static_cast<int>(c)); }

// Gives shared-memory object `key` to `uid`.
void Chown(const std::string& key, uid_t uid) {
  const int fd = shm_open(key.c_str(), O_RDWR, 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(fchown(fd, uid, uid), 0);
  close(fd);
}

// Issue #11 item 3: a root maskd mapped and wrote an object another user owns
// (mode 0600). End to end over the unix socket: the caller's uid comes from
// SO_PEERCRED and must own the object; a region is used, listed and
// unregistered only by its owner.
TEST(ShmOwnership, UnixCallersMayUseOnlyTheirOwnMemory) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run a client as uid 65534";
  constexpr uid_t kNobody = 65534;
  MaskdProcess server({"--allow_shm", "--socket_mode=0666"});
  ASSERT_TRUE(server.ok()) << server.Log();
  const std::string dir = server.addr().substr(7, server.addr().rfind('/') - 7);
  ASSERT_EQ(chmod(dir.c_str(), 0711), 0);  // let uid 65534 reach the socket
  // ... and run the helper: from the build tree it may not (issue #24, 5).
  const std::string child = CopyPeerChild(dir);
  ASSERT_NE(child, "") << "cannot copy shm_peer_child into " << dir;
  if (!CanExecAs(kNobody, child)) {
    GTEST_SKIP() << "uid 65534 cannot execute " << child << " (is " << dir
                 << "'s file system mounted noexec?)";
  }
  auto client = server.Connect();
  ShmClient shm(client->channel(), absl::Seconds(30));
  const std::string addr = server.addr();
  auto RunAs = [&child](uid_t uid, const std::vector<std::string>& args) {
    return RunHelperAs(uid, child, args);
  };
  ASSERT_NE(RunAs(kNobody, {addr, "list"}), "") << "shm_peer_child did not run as uid 65534";

  // Root's 0600 object: nobody cannot register it; root can.
  auto roots = NewSegment("root-owned", 4096);
  EXPECT_EQ(RunAs(kNobody, {addr, "register", "stolen", roots.key(), "4096"}),
            CodeOf(Code::kPermissionDenied));
  ASSERT_TRUE(shm.RegisterSystemRegion("roots", roots.key(), 0, 4096).ok());
  // ... nor use, unregister or see root's region.
  EXPECT_EQ(RunAs(kNobody, {addr, "step", "roots"}), CodeOf(Code::kPermissionDenied));
  EXPECT_EQ(RunAs(kNobody, {addr, "unregister", "roots"}), CodeOf(Code::kPermissionDenied));
  EXPECT_EQ(RunAs(kNobody, {addr, "unregister", ""}), CodeOf(Code::kOk));  // only its own
  EXPECT_EQ(RunAs(kNobody, {addr, "list"}), CodeOf(Code::kOk));            // sees none
  auto list = shm.ListRegions();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].name(), "roots");

  // Nobody's object: nobody registers it; root (maskd's own uid) may not.
  auto theirs = NewSegment("nobody-owned", 4096);
  Chown(theirs.key(), kNobody);
  absl::Status s = shm.RegisterSystemRegion("not-mine", theirs.key(), 0, 4096);
  EXPECT_EQ(s.code(), Code::kPermissionDenied) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(theirs.key()));
  EXPECT_EQ(RunAs(kNobody, {addr, "register", "theirs", theirs.key(), "4096"}),
            CodeOf(Code::kOk));
  EXPECT_EQ(RunAs(kNobody, {addr, "list"}), CodeOf(Code::kOk) + " theirs");
  v1::StepInRegionRequest req;
  req.mutable_masks()->set_region("theirs");
  v1::StepInRegionResponse resp;
  EXPECT_EQ(shm.StepInRegion(req, &resp).code(), Code::kPermissionDenied);
  EXPECT_EQ(shm.UnregisterRegion("theirs").code(), Code::kPermissionDenied);
  EXPECT_EQ(RunAs(kNobody, {addr, "step", "theirs"}), CodeOf(Code::kOk));
  EXPECT_EQ(RunAs(kNobody, {addr, "unregister", "theirs"}), CodeOf(Code::kOk));
  EXPECT_TRUE(shm.UnregisterRegion("roots").ok());
}

// The TCP listener carries no peer credentials: SharedMemory calls there are
// FAILED_PRECONDITION naming why, unless --shm_allow_tcp makes TCP clients
// act as maskd's own uid (whose objects they may then register).
TEST(ShmOwnership, TcpCallersNeedShmAllowTcp) {
  for (bool allow : {false, true}) {
    std::vector<std::string> flags = {"--allow_shm", "--listen=127.0.0.1:0"};
    if (allow) flags.push_back("--shm_allow_tcp");
    MaskdProcess server(flags);
    ASSERT_TRUE(server.ok()) << server.Log();
    const std::string log = server.Log();
    const size_t at = log.find("listen=");
    ASSERT_NE(at, std::string::npos) << log;
    const size_t tcp = log.find("127.0.0.1:", at);
    ASSERT_NE(tcp, std::string::npos) << log;
    const std::string tcp_addr = "127.0.0.1:" + std::to_string(std::atoi(log.c_str() + tcp + 10));
    auto c = Client::Connect(tcp_addr);
    ASSERT_TRUE(c.ok()) << c.status();
    ShmClient shm((*c)->channel(), absl::Seconds(30));
    auto seg = NewSegment("tcp", 4096);
    absl::Status s = shm.RegisterSystemRegion("t", seg.key(), 0, 4096);
    v1::StepInRegionRequest req;
    req.mutable_masks()->set_region("t");
    v1::StepInRegionResponse resp;
    if (!allow) {
      EXPECT_EQ(s.code(), Code::kFailedPrecondition) << s;
      EXPECT_THAT(std::string(s.message()), HasSubstr("unix"));
      EXPECT_THAT(std::string(s.message()), HasSubstr("--shm_allow_tcp"));
      EXPECT_EQ(shm.StepInRegion(req, &resp).code(), Code::kFailedPrecondition);
      EXPECT_EQ(shm.ListRegions().status().code(), Code::kFailedPrecondition);
      EXPECT_EQ(shm.UnregisterRegion("t").code(), Code::kFailedPrecondition);
      // The unix socket still serves shared memory.
      ShmClient unix_shm(server.Connect()->channel(), absl::Seconds(30));
      EXPECT_TRUE(unix_shm.RegisterSystemRegion("t", seg.key(), 0, 4096).ok());
    } else {
      EXPECT_TRUE(s.ok()) << s;  // the object is maskd's own uid's (root's)
      EXPECT_TRUE(shm.StepInRegion(req, &resp).ok());
      if (geteuid() == 0) {
        auto other = NewSegment("tcp-other", 4096);
        Chown(other.key(), 65534);
        EXPECT_EQ(shm.RegisterSystemRegion("o", other.key(), 0, 4096).code(),
                  Code::kPermissionDenied);
      }
      EXPECT_TRUE(shm.UnregisterRegion("t").ok());
    }
  }
}

}  // namespace
}  // namespace maskd
