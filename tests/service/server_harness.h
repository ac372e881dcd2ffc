// Starts the real maskd binary (MASKD_BIN_DIR/maskd) on a temporary unix
// socket for integration tests, with the bundled tokenizer folder.
#ifndef MASKD_TESTS_SERVICE_SERVER_HARNESS_H_
#define MASKD_TESTS_SERVICE_SERVER_HARNESS_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "client/client.h"

namespace maskd::testing {

class MaskdProcess {
 public:
  // Starts maskd with `flags` added to --listen/--metrics-listen/
  // --tokenizer-dir, and waits (up to 60 s) for its start line.
  explicit MaskdProcess(const std::vector<std::string>& flags = {}, bool wait_ready = true);
  // Waits for the start line (`ok()` after); false on exit or timeout.
  bool WaitReady(double timeout_s);
  // SIGKILL if still running.
  ~MaskdProcess();

  bool ok() const { return ready_; }
  const std::string& addr() const { return addr_; }
  pid_t pid() const { return pid_; }
  int metrics_port() const { return metrics_port_; }
  // `client_name`: ClientOptions::client_name (the per-engine metrics label).
  std::unique_ptr<Client> Connect(const std::string& client_name = "") const;

  // Sends `sig`.
  void Signal(int sig) const;
  // Waits up to `timeout_s` for exit; returns the exit status, or -1 when it
  // did not exit normally in time.
  int Wait(double timeout_s);
  // The server's stderr so far.
  std::string Log() const;
  // GET /metrics body ("" on failure).
  std::string Metrics() const;

 private:
  pid_t pid_ = -1;
  bool ready_ = false;
  bool exited_ = false;
  int exit_status_ = -1;
  std::string dir_, addr_, log_path_;
  int metrics_port_ = 0;
};

// The value of the first sample line of `metrics` starting with `prefix`
// (name plus labels as serialized); -1 when absent.
double MetricValue(const std::string& metrics, const std::string& prefix);

// Polls `server`'s metrics every 100 ms, for at most 60 s, until one of the
// samples `names` (MetricValue prefixes) is >= 1; whether it got there. For
// "the abandoned call's work stopped and was counted": a bound on a failure,
// not a timing assertion.
bool WaitForAnyMetric(const MaskdProcess& server, const std::vector<std::string>& names);

// The tokens session `id` holds (a Rollback of none, so nothing changes); -1
// when the call fails.
int64_t SessionTokens(Client& client, uint64_t id);

}  // namespace maskd::testing

#endif  // MASKD_TESTS_SERVICE_SERVER_HARNESS_H_
