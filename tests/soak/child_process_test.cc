// ChildProcess (bench/soak/child_process.h): what the child writes comes back
// whole, its exit is told apart from a kill, a child past its time is killed,
// it inherits no fd of the parent's, and it dies with its parent.
#include "bench/soak/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace maskd::soak {
namespace {

TEST(ChildProcessTest, OutputAndExitStatusComeBack) {
  ChildProcess child;
  ASSERT_TRUE(child.Start("/bin/sh", {"sh", "-c", "echo one; echo two; exit 3"}).ok());
  EXPECT_EQ(child.Finish(30), "one\ntwo\n");
  EXPECT_FALSE(child.killed());
  EXPECT_EQ(DescribeWaitStatus(child.exit_status()), "exited with status 3");
  EXPECT_EQ(child.pid(), -1);
}

TEST(ChildProcessTest, ChildPastItsTimeIsKilled) {
  ChildProcess child;
  ASSERT_TRUE(child.Start("/bin/sh", {"sh", "-c", "echo started; exec sleep 60"}).ok());
  EXPECT_EQ(child.Finish(0.5), "started\n");
  EXPECT_TRUE(child.killed());
  EXPECT_EQ(DescribeWaitStatus(child.exit_status()), "killed by signal 9");
}

TEST(ChildProcessTest, TerminateSendsSigterm) {
  ChildProcess child;
  ASSERT_TRUE(child.Start("/bin/sh", {"sh", "-c", "exec sleep 60"}).ok());
  child.Terminate();
  EXPECT_EQ(child.Finish(30), "");
  EXPECT_FALSE(child.killed());
  EXPECT_EQ(DescribeWaitStatus(child.exit_status()), "killed by signal 15");
}

TEST(ChildProcessTest, InheritsOnlyStdio) {
  const int leaked = open("/dev/null", O_RDONLY);  // no O_CLOEXEC: would be inherited
  ASSERT_GE(leaked, 3);
  ChildProcess child;
  ASSERT_TRUE(child.Start("/bin/sh", {"sh", "-c", "readlink /proc/$$/fd/0; ls /proc/$$/fd"}).ok());
  const std::string out = child.Finish(30);
  close(leaked);
  EXPECT_EQ(out, "/dev/null\n0\n1\n2\n");
  EXPECT_EQ(child.exit_status(), 0);
}

// Spawn (MaskdServer's log): stdout and stderr to one fd the parent opened
// close-on-exec; that fd itself is not inherited past the two.
TEST(SpawnTest, StdoutAndStderrGoToTheGivenFd) {
  char path[] = "/tmp/maskd-spawn-XXXXXX";
  const int fd = mkostemp(path, O_CLOEXEC);
  ASSERT_GE(fd, 0);
  SpawnOptions options;
  options.stdout_fd = fd;
  options.stderr_fd = fd;
  options.die_with_parent = false;
  auto pid = Spawn("/bin/sh", {"sh", "-c", "echo out; echo err >&2; exec ls /proc/self/fd"}, options);
  close(fd);
  ASSERT_TRUE(pid.ok()) << pid.status();
  int status = 0;
  ASSERT_EQ(waitpid(*pid, &status, 0), *pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << DescribeWaitStatus(status);
  std::ifstream in(path);
  std::string out((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  unlink(path);
  // ls holds 0, 1 and 2, and 3 for the folder it lists: nothing else came
  // through the exec.
  EXPECT_EQ(out, "out\nerr\n0\n1\n2\n3\n");
}

// Whether `pid` is gone (or a zombie no one reaps: it runs no more).
bool Ended(pid_t pid) {
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  if (!std::getline(stat, line)) return true;
  const size_t paren = line.rfind(')');
  return paren != std::string::npos && line.size() > paren + 2 && line[paren + 2] == 'Z';
}

TEST(ChildProcessTest, DiesWithItsParent) {
  int to_test[2];
  ASSERT_EQ(pipe(to_test), 0);
  const pid_t parent = fork();
  ASSERT_GE(parent, 0);
  if (parent == 0) {  // the parent to be killed: starts a child, says its pid, waits
    ChildProcess child;
    if (!child.Start("/bin/sh", {"sh", "-c", "exec sleep 60"}).ok()) _exit(1);
    const std::string pid = absl::StrCat(child.pid(), "\n");
    if (write(to_test[1], pid.data(), pid.size()) != static_cast<ssize_t>(pid.size())) _exit(1);
    pause();
    _exit(0);
  }
  close(to_test[1]);
  char buf[32] = {};
  const ssize_t n = read(to_test[0], buf, sizeof buf - 1);
  close(to_test[0]);
  pid_t child = 0;
  const bool read_pid = n > 0 && absl::SimpleAtoi(absl::StripTrailingAsciiWhitespace(buf), &child);
  kill(parent, SIGKILL);
  waitpid(parent, nullptr, 0);
  ASSERT_TRUE(read_pid) << "the parent did not start its child";
  bool ended = false;
  for (int i = 0; i < 500 && !ended; ++i) {  // up to 5 s
    ended = Ended(child);
    if (!ended) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(ended) << "child " << child << " outlived its parent";
  if (!ended) kill(child, SIGKILL);
}

}  // namespace
}  // namespace maskd::soak
