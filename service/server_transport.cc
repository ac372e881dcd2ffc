#include "service/server_transport.h"

#include <sys/un.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "grpcpp/security/server_credentials.h"

namespace maskd {
namespace {

// The TLS credentials of gRPC's private socket, from the PEM texts.
std::shared_ptr<grpc::ServerCredentials> TlsCredentials(const TlsPem& pem) {
  grpc::SslServerCredentialsOptions o(
      pem.client_ca.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                            : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  pair.cert_chain = pem.cert_chain;
  pair.private_key = pem.private_key;
  o.pem_root_certs = pem.client_ca;
  o.pem_key_cert_pairs.push_back(pair);
  return grpc::SslServerCredentials(o);
}

}  // namespace

ServerTransport::RemoveDir::~RemoveDir() {
  std::error_code ec;
  if (!path.empty()) std::filesystem::remove_all(path, ec);
}

ServerTransport::ServerTransport(const TransportConfig& config)
    : config_(config),
      tls_(!config.tls.cert_chain.empty()),
      connection_limit_(config.max_connections),
      listeners_(config.listen.size()),
      ports_(config.listen.size(), 0) {
  listener_options_.socket_mode = config_.socket_mode;
  listener_options_.first_byte_timeout = config_.first_byte_timeout;
  listener_options_.limit = &connection_limit_;
  if (config_.max_resets_per_second > 0 || tls_) {
    RelayOptions o;
    o.resets_per_second = config_.max_resets_per_second;
    o.reset_burst = 2 * o.resets_per_second;
    relay_ = std::make_unique<Relay>(o);
    if (o.resets_per_second > 0) reset_guard_ = relay_.get();
  }
}

ServerTransport::~ServerTransport() = default;

absl::Status ServerTransport::ListenTls(grpc::ServerBuilder* builder) {
  const char* tmpdir = getenv("TMPDIR");
  std::string tmpl = absl::StrCat(tmpdir != nullptr && *tmpdir != 0 ? tmpdir : "/tmp",
                                  "/maskd-tls-XXXXXX");
  if (tmpl.size() + sizeof "/tls.sock" > sizeof(sockaddr_un::sun_path)) {
    tmpl = "/tmp/maskd-tls-XXXXXX";  // a unix socket path has at most 107 bytes
  }
  if (mkdtemp(tmpl.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("cannot make the private TLS socket directory ",
                                            tmpl, ": ", strerror(errno)));
  }
  tls_dir_.path = tmpl;
  tls_socket_ = tmpl + "/tls.sock";
  builder->AddListeningPort("unix:" + tls_socket_, TlsCredentials(config_.tls), &tls_port_);
  // gRPC's listener on it stops for good on EMFILE: leave it descriptors.
  listener_options_.spare_fds = 8;
  return absl::OkStatus();
}

ListenerOptions ServerTransport::OptionsFor(const std::string& addr) const {
  ListenerOptions options = listener_options_;
  if (!IsUnixAddress(addr) && tls_) {
    options.relay = relay_.get();
    options.upstream_path = tls_socket_;
  } else if (!IsUnixAddress(addr)) {
    options.relay = reset_guard_;
  } else if (config_.reset_guard_unix) {
    options.relay = reset_guard_;
  }
  return options;
}

absl::Status ServerTransport::Bind(grpc::ServerBuilder* builder) {
  if (tls_) {
    if (absl::Status s = ListenTls(builder); !s.ok()) return s;
  }
  const std::vector<std::string>& listen = config_.listen;
  for (size_t i = 0; i < listen.size(); ++i) {
    if (absl::StartsWith(listen[i], "unix-abstract:")) {
      builder->AddListeningPort(listen[i], grpc::InsecureServerCredentials(), &ports_[i]);
      continue;
    }
    auto l = Listener::Bind(listen[i], OptionsFor(listen[i]));
    if (!l.ok()) return l.status();
    listeners_[i] = *std::move(l);
    ports_[i] = listeners_[i]->port();
  }
  builder->AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  return absl::OkStatus();
}

absl::Status ServerTransport::CheckGrpcPorts() const {
  if (tls_ && tls_port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on the private TLS socket ", tls_socket_));
  }
  for (size_t i = 0; i < config_.listen.size(); ++i) {
    if (!listeners_[i] && ports_[i] == 0) {
      return absl::UnavailableError(absl::StrCat("cannot listen on ", config_.listen[i]));
    }
  }
  return absl::OkStatus();
}

void ServerTransport::Start(grpc::Server* server) {
  for (auto& l : listeners_) {
    if (l) l->Start(server);
  }
}

void ServerTransport::Stop() {
  for (auto& l : listeners_) {
    if (l) l->Stop();
  }
}

Metrics::TransportCounts ServerTransport::Counts() const {
  Metrics::TransportCounts t;
  t.open = connection_limit_.open.load();
  t.refused = connection_limit_.refused.load();
  for (const auto& l : listeners_) {
    if (l) t.upstream_failures += l->upstream_failures();
  }
  if (relay_) t.closed_for_resets = relay_->closed_for_resets();
  return t;
}

std::string ServerTransport::Shown() const {
  const std::vector<std::string>& listen = config_.listen;
  std::vector<std::string> shown;
  for (size_t i = 0; i < listen.size(); ++i) {
    if (listeners_[i]) {
      shown.push_back(listeners_[i]->shown());
      continue;
    }
    shown.push_back(listen[i].rfind("unix", 0) == 0 || ports_[i] == 0
                        ? listen[i]
                        : absl::StrCat(listen[i].substr(0, listen[i].rfind(':')), ":", ports_[i]));
  }
  return absl::StrJoin(shown, ",");
}

}  // namespace maskd
