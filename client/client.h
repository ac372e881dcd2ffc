// maskd::Client: a C++ client of the maskd sidecar (proto/maskd/v1/maskd.proto).
//
// One Client owns one gRPC channel and is thread-safe: share it between
// threads. Every call returns absl::Status / absl::StatusOr carrying the
// server's gRPC code and message (INVALID_ARGUMENT, NOT_FOUND, ...). The hot
// path, Step, takes caller-owned request and reply messages so that an engine
// can reuse them (and their mask buffer) across decoding steps.
//
// Typical engine loop:
//   auto client = maskd::Client::Connect("unix:///tmp/maskd.sock").value();
//   auto s = client->CreateSession(compile_request).value();   // per request
//   maskd::v1::StepRequest req; maskd::v1::StepResponse resp;
//   each step: fill req.entries (session id + tokens sampled last step),
//              client->Step(req, &resp), then apply maskd::MaskRow(resp, i).
#ifndef MASKD_CLIENT_CLIENT_H_
#define MASKD_CLIENT_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "grpcpp/grpcpp.h"
#include "maskd/v1/maskd.grpc.pb.h"

namespace maskd {

struct ClientOptions {
  // gRPC receive/send limit; raise it for large batches (256 rows of a 128k
  // vocabulary are ~4.1 MB, over gRPC's default 4 MiB).
  int max_message_bytes = 64 << 20;
  // Deadline of every call; zero: none.
  absl::Duration timeout = absl::ZeroDuration();
  // TLS to a TCP address (maskd --tls_cert): PEM CA certificates that sign
  // the server's certificate; empty: plaintext. With a server that requires
  // client certificates (--tls_client_ca), also the client's PEM
  // certificate chain and key.
  std::string tls_ca_pem;
  std::string tls_cert_pem;
  std::string tls_key_pem;
  // The name the server certificate must carry; empty: the address's host.
  std::string tls_server_name;
  // gRPC's reconnect backoff after the connection drops (a server restart):
  // first wait, then growing up to the maximum. gRPC's own defaults (1 s up
  // to 120 s) would leave a restarted sidecar unused for minutes.
  absl::Duration reconnect_backoff_initial = absl::Milliseconds(100);
  absl::Duration reconnect_backoff_max = absl::Seconds(1);
  // How long one connection attempt (connect, TLS handshake, HTTP/2
  // settings) may take. gRPC 1.51 takes it from GRPC_ARG_MIN_RECONNECT_BACKOFF_MS,
  // so it is set apart from the backoff above.
  absl::Duration connect_timeout = absl::Seconds(5);
  // The engine this client serves ("llama.cpp", "vllm", ...), sent first in the
  // gRPC user agent as "maskd-<name>" so the server's per-engine metrics count
  // its steps (docs/operations.md); empty: not said.
  std::string client_name;
  // Who this client is to a server run with --client-identity=header (its
  // per-client shares of sessions, tokenizers, streams, shm regions and
  // pending work; docs/reliability.md): sent as the `maskd-client-id` metadata
  // of every call on channel(), ShmClient's and stub()'s included. 1 to 128
  // bytes of [A-Za-z0-9._:@/+-] (Connect refuses another with
  // INVALID_ARGUMENT); empty: not sent. Clients with one id share one share.
  std::string client_id;
};

// A bidirectional Step stream: one reply per request, in order. Not
// thread-safe (one decoding loop owns it).
class StepStream {
 public:
  ~StepStream();
  // Sends `req` and waits for its reply.
  absl::Status Step(const v1::StepRequest& req, v1::StepResponse* resp);
  // Half-closes and returns the stream's final status.
  absl::Status Close();
  // Whether the stream has ended (Close, or a failed Step): open another.
  bool closed() const { return closed_; }

 private:
  friend class Client;
  StepStream() = default;
  std::unique_ptr<grpc::ClientContext> ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::StepRequest, v1::StepResponse>> rw_;
  bool closed_ = false;
};

class Client {
 public:
  // `addr`: unix:///abs/path, unix:relative, host:port. Does not wait for the
  // connection (the first call does).
  static absl::StatusOr<std::unique_ptr<Client>> Connect(const std::string& addr,
                                                         const ClientOptions& options = {});

  // grpc.health.v1 Check of `service` ("" = the server): "SERVING",
  // "NOT_SERVING", "UNKNOWN" or "SERVICE_UNKNOWN".
  absl::StatusOr<std::string> Health(const std::string& service = "");
  // An empty round trip.
  absl::Status Ping();
  absl::StatusOr<v1::StatsResponse> Stats();

  absl::StatusOr<std::vector<v1::Tokenizer>> ListTokenizers();
  absl::StatusOr<v1::Tokenizer> RegisterTokenizer(const v1::RegisterTokenizerRequest& req);

  // Bytes of `tokens` (special tokens add nothing).
  absl::StatusOr<std::string> Detokenize(const std::string& tokenizer,
                                         absl::Span<const uint32_t> tokens);

  absl::StatusOr<v1::CompileResponse> Compile(const v1::CompileRequest& req);
  // Compile of a regex, waiting for the result.
  absl::StatusOr<v1::CompileResponse> CompileRegex(const std::string& tokenizer,
                                                   const std::string& regex);
  absl::StatusOr<v1::CompileResponse> GetIndex(const std::string& index_id, bool wait);
  absl::StatusOr<bool> CancelCompile(const std::string& index_id);

  absl::StatusOr<v1::CreateSessionResponse> CreateSession(const std::string& index_id);
  absl::StatusOr<v1::CreateSessionResponse> CreateSession(const v1::CompileRequest& compile);
  absl::Status CloseSession(uint64_t session_id);
  // The new session's id.
  absl::StatusOr<uint64_t> ForkSession(uint64_t session_id);
  // Tokens left after undoing `n`.
  absl::StatusOr<uint64_t> Rollback(uint64_t session_id, uint32_t n);

  // One decoding step for a batch (see StepRequest). Entry errors are in
  // resp->results(i).status(); a non-OK return fails the whole call.
  absl::Status Step(const v1::StepRequest& req, v1::StepResponse* resp);
  absl::StatusOr<std::unique_ptr<StepStream>> OpenStepStream();

  absl::StatusOr<v1::MaskResponse> Mask(const std::string& index_id,
                                        absl::Span<const uint32_t> tokens);

  // For calls this class does not wrap.
  v1::Maskd::Stub* stub() { return stub_.get(); }
  const ClientOptions& options() const { return options_; }
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }

 private:
  Client() = default;
  void Prepare(grpc::ClientContext* ctx) const;

  ClientOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Maskd::Stub> stub_;
};

// grpc::Status -> absl::Status (same code and message).
absl::Status FromGrpc(const grpc::Status& s);

// Row `i` of a Step reply's masks (words_per_row words). Valid while `resp`
// is unchanged. Little-endian hosts: the wire bytes are the words.
absl::Span<const uint32_t> MaskRow(const v1::StepResponse& resp, int i);
// Whether `token` is allowed in a mask row.
inline bool Allowed(absl::Span<const uint32_t> row, uint32_t token) {
  return (token >> 5) < row.size() && ((row[token >> 5] >> (token & 31)) & 1u) != 0;
}
// Token ids allowed in a row, increasing.
std::vector<uint32_t> AllowedTokens(absl::Span<const uint32_t> row);

}  // namespace maskd

#endif  // MASKD_CLIENT_CLIENT_H_
