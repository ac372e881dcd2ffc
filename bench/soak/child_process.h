// ChildProcess: a program run as a child process whose stdout is a pipe the
// parent reads back (the hostile mix runs itself, /proc/self/exe, so). The
// child gets SIGKILL when the thread that started it ends (PR_SET_PDEATHSIG:
// start it from the main thread), so a killed parent leaves no child behind.
// Not thread-safe (one owner starts, signals and finishes it).
#ifndef MASKD_BENCH_SOAK_CHILD_PROCESS_H_
#define MASKD_BENCH_SOAK_CHILD_PROCESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace maskd::soak {

class ChildProcess {
 public:
  ChildProcess() = default;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  // SIGKILL and reap if still running.
  ~ChildProcess();

  // Runs `binary` (a path; "/proc/self/exe": this program) with `args`
  // (args[0] is its argv[0]); its stdin is /dev/null, stdout the pipe, stderr
  // the parent's; no other fd is inherited.
  absl::Status Start(const std::string& binary, const std::vector<std::string>& args);
  // SIGTERM: asks the child to finish early (it decides how).
  void Terminate();
  // Reads the child's stdout to its end (at most `max_bytes` kept) and reaps
  // it; SIGKILLs it first if it has not closed stdout within `timeout_s`.
  // Returns what it wrote; exit_status() and killed() are valid after.
  std::string Finish(double timeout_s, size_t max_bytes = 1 << 20);

  // The running child's pid; -1 before Start and after Finish.
  pid_t pid() const { return pid_; }
  // Raw wait status (waitpid) of the finished child.
  int exit_status() const { return exit_status_; }
  // Whether Finish had to SIGKILL it.
  bool killed() const { return killed_; }

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1;  // read end of the child's stdout
  int exit_status_ = 0;
  bool killed_ = false;
};

// How Spawn wires a child's standard fds. Every other fd of the parent's is
// closed in the child (no client socket, pipe end or log keeps a connection
// alive or counts in the child's fds).
struct SpawnOptions {
  int stdout_fd = -1;  // -1: the parent's
  int stderr_fd = -1;  // -1: the parent's
  // SIGKILL when the thread that spawned it ends (PR_SET_PDEATHSIG): spawn
  // from a thread that lives as long as the child should (the main thread).
  bool die_with_parent = true;
};

// Runs `binary` with `args` (args[0] is its argv[0]; not empty), its stdin
// /dev/null. The child's pid; the caller reaps it.
absl::StatusOr<pid_t> Spawn(const std::string& binary, const std::vector<std::string>& args,
                            const SpawnOptions& options);

// "exited with status N", "killed by signal N" for a raw wait status.
std::string DescribeWaitStatus(int status);

}  // namespace maskd::soak

#endif  // MASKD_BENCH_SOAK_CHILD_PROCESS_H_
