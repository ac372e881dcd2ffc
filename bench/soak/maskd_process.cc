#include "bench/soak/maskd_process.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "bench/soak/child_process.h"

namespace maskd::soak {

absl::StatusOr<std::string> ServerDirectory(const std::string& given, const std::string& prefix) {
  if (!given.empty()) return given;
  std::string tmpl = absl::StrCat("/tmp/", prefix, "-XXXXXX");
  if (mkdtemp(tmpl.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("mkdtemp ", tmpl, ": ", std::strerror(errno)));
  }
  return tmpl;
}

MaskdServer::MaskdServer(std::string binary, std::string dir, std::string tokenizer_dir,
                         std::vector<std::string> flags)
    : binary_(std::move(binary)),
      dir_(std::move(dir)),
      tokenizer_dir_(std::move(tokenizer_dir)),
      socket_(dir_ + "/maskd.sock"),
      addr_("unix://" + socket_),
      log_path_(dir_ + "/maskd.0.log"),
      flags_(std::move(flags)) {}

MaskdServer::~MaskdServer() {
  if (pid_ > 0) Kill();
}

absl::Status MaskdServer::Start(double timeout_s) {
  if (pid_ > 0 && Running()) return absl::FailedPreconditionError("maskd already running");
  std::vector<std::string> args = {binary_, "--listen=" + addr_, "--metrics-listen=",
                                   "--tokenizer-dir=" + tokenizer_dir_};
  args.insert(args.end(), flags_.begin(), flags_.end());
  // A log of its own per instance: the previous one's start line must not
  // count as this one's.
  log_path_ = absl::StrCat(dir_, "/maskd.", starts_, ".log");
  unlink(log_path_.c_str());
  const int log = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log < 0) {
    return absl::InternalError(absl::StrCat("open ", log_path_, ": ", std::strerror(errno)));
  }
  SpawnOptions options;
  options.stdout_fd = log;
  options.stderr_fd = log;
  options.die_with_parent = die_with_parent_;
  absl::StatusOr<pid_t> spawned = Spawn(binary_, args, options);
  close(log);
  if (!spawned.ok()) return spawned.status();
  const pid_t pid = *spawned;
  pid_ = pid;
  ++starts_;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  while (std::chrono::steady_clock::now() < deadline) {
    if (Log().find(" INFO start ") != std::string::npos) return absl::OkStatus();
    if (!Running()) {
      return absl::InternalError(absl::StrCat("maskd exited during start (status ", exit_status_,
                                              "): ", Log()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return absl::DeadlineExceededError(absl::StrCat("maskd did not start in ", timeout_s, " s"));
}

int MaskdServer::Kill() {
  if (pid_ <= 0) return exit_status_;
  kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  exit_status_ = status;
  pid_ = -1;
  return status;
}

bool MaskdServer::Running() {
  if (pid_ <= 0) return false;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) {
    exit_status_ = status;
    pid_ = -1;
    return false;
  }
  return true;
}

std::string MaskdServer::Log() const {
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int64_t MaskdServer::RssBytes() const {
  if (pid_ <= 0) return -1;
  std::ifstream in(absl::StrCat("/proc/", pid_, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;  // "... kB"
  }
  return -1;
}

int64_t MaskdServer::OpenFds() const {
  if (pid_ <= 0) return -1;
  DIR* d = opendir(absl::StrCat("/proc/", pid_, "/fd").c_str());
  if (d == nullptr) return -1;
  int64_t n = 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(d);
  return n;
}

}  // namespace maskd::soak
