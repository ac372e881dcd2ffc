// MaskdServer: the real maskd binary as a child process on a fixed unix
// socket, for tests and the soak driver that kill and restart it on the same
// address. Not thread-safe (one owner starts, kills and samples it).
#ifndef MASKD_BENCH_SOAK_MASKD_PROCESS_H_
#define MASKD_BENCH_SOAK_MASKD_PROCESS_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace maskd::soak {

// The folder for a MaskdServer's socket and logs: `given` when not empty,
// else a new one made by mkdtemp as /tmp/<prefix>-XXXXXX.
absl::StatusOr<std::string> ServerDirectory(const std::string& given, const std::string& prefix);

class MaskdServer {
 public:
  // `binary`: path of maskd. `dir`: an existing folder for the socket and the
  // logs (maskd.sock, maskd.N.log). `flags`: added after --listen,
  // --metrics-listen= (off) and --tokenizer-dir. Instance n logs to
  // dir/maskd.n.log.
  MaskdServer(std::string binary, std::string dir, std::string tokenizer_dir,
              std::vector<std::string> flags = {});
  // SIGKILL if running.
  ~MaskdServer();

  // Whether instances started from now on die with the thread that starts
  // them (Spawn's die_with_parent), so a killed driver leaves no maskd
  // behind. Off by default: a test may restart maskd from a thread that
  // ends before maskd should. The soak and hostile-mix drivers turn it on
  // (they start maskd from their main thread).
  void set_die_with_parent(bool on) { die_with_parent_ = on; }

  // Starts it and waits (up to `timeout_s`) for its start line. A previous
  // instance must have been killed (Kill) or have exited.
  absl::Status Start(double timeout_s = 60);
  // SIGKILL and reap. Returns the previous instance's wait status.
  int Kill();
  // Whether the child is still running (reaps it if it exited).
  bool Running();
  // Raw wait status of the last exit (valid when !Running()).
  int exit_status() const { return exit_status_; }

  pid_t pid() const { return pid_; }
  const std::string& addr() const { return addr_; }
  const std::string& socket_path() const { return socket_; }
  // Instances started so far.
  int starts() const { return starts_; }
  // This instance's log (stderr) so far.
  std::string Log() const;

  // /proc/<pid>/status VmRSS in bytes and the number of /proc/<pid>/fd
  // entries; -1 when unavailable.
  int64_t RssBytes() const;
  int64_t OpenFds() const;

 private:
  std::string binary_, dir_, tokenizer_dir_, socket_, addr_, log_path_;
  std::vector<std::string> flags_;
  pid_t pid_ = -1;
  int exit_status_ = 0;
  int starts_ = 0;
  bool die_with_parent_ = false;
};

}  // namespace maskd::soak

#endif  // MASKD_BENCH_SOAK_MASKD_PROCESS_H_
