#include "bench/soak/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace maskd::soak {

ChildProcess::~ChildProcess() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (out_fd_ >= 0) close(out_fd_);
}

absl::StatusOr<pid_t> Spawn(const std::string& binary, const std::vector<std::string>& args,
                            const SpawnOptions& options) {
  if (args.empty()) return absl::InvalidArgumentError("Spawn: no argv");
  // Everything the child needs is prepared here: between fork and exec the
  // child of a multithreaded parent may only make async-signal-safe calls
  // (no malloc).
  std::vector<std::string> copy = args;
  std::vector<char*> argv;
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  const char* path = binary.c_str();
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  if (pid != 0) return pid;
  // A parent already gone before prctl took effect is caught by getppid
  // (the child was re-parented).
  if (options.die_with_parent &&
      (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)) {
    _exit(126);
  }
  const int null_fd = open("/dev/null", O_RDONLY);
  if (null_fd < 0 || dup2(null_fd, 0) < 0) _exit(126);
  for (const auto [from, to] : {std::pair{options.stdout_fd, 1}, std::pair{options.stderr_fd, 2}}) {
    if (from < 0) continue;
    if (from == to) {
      fcntl(to, F_SETFD, 0);  // dup2 onto itself would keep O_CLOEXEC
    } else if (dup2(from, to) < 0) {
      _exit(126);
    }
  }
  close_range(3, ~0U, 0);
  execv(path, argv.data());
  _exit(127);
}

absl::Status ChildProcess::Start(const std::string& binary, const std::vector<std::string>& args) {
  if (pid_ > 0) return absl::FailedPreconditionError("child running");
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe2: ", std::strerror(errno)));
  }
  SpawnOptions options;
  options.stdout_fd = fds[1];
  absl::StatusOr<pid_t> pid = Spawn(binary, args, options);
  close(fds[1]);
  if (!pid.ok()) {
    close(fds[0]);
    return pid.status();
  }
  pid_ = *pid;
  out_fd_ = fds[0];
  return absl::OkStatus();
}

void ChildProcess::Terminate() {
  if (pid_ > 0) kill(pid_, SIGTERM);
}

namespace {

using SteadyClock = std::chrono::steady_clock;

int64_t MsUntil(SteadyClock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t - SteadyClock::now()).count();
}

}  // namespace

std::string ChildProcess::Finish(double timeout_s, size_t max_bytes) {
  std::string out;
  if (pid_ <= 0) return out;
  const auto deadline =
      SteadyClock::now() + std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  char buf[4096];
  for (;;) {  // to end of file: the child closed its stdout (by exiting)
    const int64_t left = MsUntil(deadline);
    if (left <= 0 && !killed_) {
      kill(pid_, SIGKILL);  // its stdout closes as it dies
      killed_ = true;
    }
    pollfd p{out_fd_, POLLIN, 0};
    const int ready = poll(&p, 1, static_cast<int>(std::clamp<int64_t>(left, 0, 1000)));
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    const ssize_t n = read(out_fd_, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, std::min(static_cast<size_t>(n), max_bytes - std::min(max_bytes, out.size())));
  }
  close(out_fd_);
  out_fd_ = -1;
  // An exiting child closes stdout a moment before it can be reaped.
  const auto reap_by = std::max(deadline, SteadyClock::now() + std::chrono::seconds(5));
  while (!killed_ && waitpid(pid_, &exit_status_, WNOHANG) == 0) {
    if (MsUntil(reap_by) <= 0) {
      kill(pid_, SIGKILL);  // closed stdout but does not exit
      killed_ = true;
    } else {
      poll(nullptr, 0, 10);
    }
  }
  if (killed_) waitpid(pid_, &exit_status_, 0);
  pid_ = -1;
  return out;
}

std::string DescribeWaitStatus(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exited with status ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return absl::StrCat("killed by signal ", WTERMSIG(status));
  return absl::StrCat("ended with wait status ", status);
}

}  // namespace maskd::soak
