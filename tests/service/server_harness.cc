#include "tests/service/server_harness.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

namespace maskd::testing {
namespace {

std::string MakeTempDir() {
  char tmpl[] = "/tmp/maskd-test-XXXXXX";
  char* d = mkdtemp(tmpl);
  return d ? d : "/tmp";
}

}  // namespace

MaskdProcess::MaskdProcess(const std::vector<std::string>& flags, bool wait_ready) {
  dir_ = MakeTempDir();
  addr_ = "unix://" + dir_ + "/maskd.sock";
  log_path_ = dir_ + "/maskd.log";
  std::vector<std::string> args = {std::string(MASKD_BIN_DIR) + "/maskd",
                                   "--listen=" + addr_,
                                   "--metrics-listen=127.0.0.1:0",
                                   std::string("--tokenizer-dir=") + MASKD_SOURCE_DIR +
                                       "/data/tokenizers"};
  args.insert(args.end(), flags.begin(), flags.end());
  pid_ = fork();
  if (pid_ == 0) {
    int fd = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, 2);
      dup2(fd, 1);
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  if (wait_ready) WaitReady(60);
}

bool MaskdProcess::WaitReady(double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int>(timeout_s * 1000));
  while (std::chrono::steady_clock::now() < deadline) {
    std::string log = Log();
    size_t at = log.find(" INFO start ");
    if (at != std::string::npos) {
      size_t m = log.find("metrics=127.0.0.1:", at);
      if (m != std::string::npos) metrics_port_ = atoi(log.c_str() + m + 18);
      ready_ = true;
      return true;
    }
    if (exited_) return false;
    int status;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      exited_ = true;
      exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

MaskdProcess::~MaskdProcess() {
  if (pid_ > 0 && !exited_) {
    kill(pid_, SIGKILL);
    int status;
    waitpid(pid_, &status, 0);
  }
  std::string cmd = "rm -rf '" + dir_ + "'";
  if (dir_.rfind("/tmp/maskd-test-", 0) == 0) (void)!system(cmd.c_str());
}

std::unique_ptr<Client> MaskdProcess::Connect(const std::string& client_name) const {
  ClientOptions options;
  options.timeout = absl::Seconds(30);
  options.client_name = client_name;
  return *Client::Connect(addr_, options);
}

void MaskdProcess::Signal(int sig) const {
  if (pid_ > 0 && !exited_) kill(pid_, sig);
}

int MaskdProcess::Wait(double timeout_s) {
  if (exited_) return exit_status_;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int>(timeout_s * 1000));
  while (std::chrono::steady_clock::now() < deadline) {
    int status;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      exited_ = true;
      exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      return exit_status_;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return -1;
}

std::string MaskdProcess::Log() const {
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string MaskdProcess::Metrics() const {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(metrics_port_));
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0) {
    const char req[] = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    (void)!write(fd, req, sizeof req - 1);
    char buf[65536];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  size_t body = out.find("\r\n\r\n");
  return body == std::string::npos ? "" : out.substr(body + 4);
}

double MetricValue(const std::string& metrics, const std::string& prefix) {
  std::istringstream in(metrics);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (line.compare(0, prefix.size(), prefix) == 0 && line.size() > prefix.size() &&
        (line[prefix.size()] == ' ')) {
      return std::stod(line.substr(prefix.size() + 1));
    }
  }
  return -1;
}

bool WaitForAnyMetric(const MaskdProcess& server, const std::vector<std::string>& names) {
  for (int i = 0; i < 600; ++i) {
    const std::string m = server.Metrics();
    for (const std::string& name : names) {
      if (MetricValue(m, name) >= 1) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

int64_t SessionTokens(Client& client, uint64_t id) {
  v1::RollbackRequest none;
  none.set_session_id(id);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::RollbackResponse resp;
  if (!client.stub()->Rollback(&ctx, none, &resp).ok()) return -1;
  return static_cast<int64_t>(resp.num_tokens());
}

}  // namespace maskd::testing
