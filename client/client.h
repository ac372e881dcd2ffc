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

// Resuming sessions after a server restart.
//
// maskd keeps sessions in memory: after a crash or SIGKILL and restart every
// session id answers NOT_FOUND (index ids stay the same: they are content
// hashes, and CreateSession{compile} rebuilds the index). A ResumableSession
// remembers what is needed to rebuild its session anywhere: the constraint
// (its CompileRequest) and the tokens accepted since the start. When a call
// finds the session gone (NOT_FOUND for it) or the server unreachable
// (UNAVAILABLE, the connection dropped), it creates a new session at the same
// constraint, replays the accepted tokens in one Step (in chunks of
// ResumeOptions::replay_chunk_tokens), then redoes the call on the new
// session. Masks depend only on (constraint, tokenizer, tokens), so the caller
// sees exactly the masks an uninterrupted server would have given.
//
// The local token list is the truth: it changes only when the server
// confirmed a step (or rollback). After a transport error the old session is
// abandoned, never stepped again (the lost call may or may not have been
// applied); it expires after the server's --session-ttl if the server lived.
// Entry errors (a token not allowed, a bad id) are returned as they are and
// change nothing. Memory: 4 bytes per accepted token on the client. Not
// thread-safe: one decoding loop owns a ResumableSession (the Client under it
// is shared freely).
struct ResumeOptions {
  // Total time one call may spend recovering (reconnecting, re-creating,
  // replaying) before it gives up with UNAVAILABLE naming the last error.
  absl::Duration recovery_timeout = absl::Seconds(30);
  // Wait between attempts: doubles from `initial_backoff` up to `max_backoff`.
  absl::Duration initial_backoff = absl::Milliseconds(20);
  absl::Duration max_backoff = absl::Seconds(1);
  // Attempts per call (first try included) before giving up.
  int max_attempts = 50;
  // Tokens per replay Step (keep under the server's --max-request-tokens).
  size_t replay_chunk_tokens = 65536;
};

class ResumableSession {
 public:
  // Creates a session at `compile`'s constraint (CreateSession{compile}),
  // retrying as a resume would while the server is unreachable. `client`
  // must outlive the session.
  static absl::StatusOr<std::unique_ptr<ResumableSession>> Create(
      Client* client, const v1::CompileRequest& compile, const ResumeOptions& options = {});
  // Closes the server session (best effort).
  ~ResumableSession();
  ResumableSession(const ResumableSession&) = delete;
  ResumableSession& operator=(const ResumableSession&) = delete;

  // One decoding step: undo `rollback` tokens, advance by `tokens` (accepted
  // since the previous step), and get the next mask: resp->results(0) and
  // MaskRow(*resp, 0), as a one-entry Client::Step. An entry error is
  // returned as a non-OK status (FAILED_PRECONDITION for a token not allowed,
  // ...) with resp->results(0) set and nothing changed. `words_per_row` as in
  // StepRequest; `max_tokens_left` as StepEntry.max_tokens_left (budget mode;
  // 0: none).
  absl::Status Step(absl::Span<const uint32_t> tokens, v1::StepResponse* resp,
                    uint32_t rollback = 0, uint32_t words_per_row = 0,
                    uint32_t max_tokens_left = 0);
  // Undoes the last `n` accepted tokens (INVALID_ARGUMENT, nothing undone,
  // when n > tokens().size()).
  absl::Status Rollback(uint32_t n);
  // A new resumable session in the same state (ForkSession).
  absl::StatusOr<std::unique_ptr<ResumableSession>> Fork();
  // Ends the server session; later calls fail with FAILED_PRECONDITION.
  absl::Status Close();

  // The live server session id (changes on each resume); 0 while lost.
  uint64_t session_id() const { return session_id_; }
  const std::string& index_id() const { return index_id_; }
  uint32_t words_per_row() const { return words_per_row_; }
  // Tokens accepted since the start, as the server confirmed them.
  const std::vector<uint32_t>& tokens() const { return tokens_; }
  // Times this session was re-created after a loss.
  int resumes() const { return resumes_; }
  // Makes the next call re-create the session (testing and the soak test:
  // what a reconnect to another server instance does).
  void MarkLost() { session_id_ = 0; }
  // Re-creates the session now if it is lost (after MarkLost, or when a call
  // through another path found it NOT_FOUND), with the usual retries.
  absl::Status Resume();
  // Records a step the server confirmed (an OK entry) that the caller made on
  // session_id() through another path: its own StepStream or
  // SharedMemory.StepInRegion. Keeps tokens() the truth for a later resume.
  void Accepted(uint32_t rollback, absl::Span<const uint32_t> tokens) { Commit(rollback, tokens); }

 private:
  friend absl::Status StepResumable(absl::Span<ResumableSession* const>,
                                    absl::Span<const v1::StepEntry>, v1::StepResponse*,
                                    StepStream*);
  ResumableSession(Client* client, const v1::CompileRequest& compile,
                   const ResumeOptions& options)
      : client_(client), compile_(compile), options_(options) {}
  // Runs `attempt` until it returns something other than a loss (NOT_FOUND
  // for the session, UNAVAILABLE), re-creating the session before each retry,
  // within options_'s attempts and recovery time.
  template <typename F>
  absl::Status WithRecovery(const char* what, F attempt);
  // Creates a session at compile_ and replays tokens_ into it.
  absl::Status Recreate(absl::Time deadline);
  void PrepareContext(grpc::ClientContext* ctx, absl::Time deadline, bool recovering) const;
  // One Step entry on the live session; *lost set when it found the session
  // gone or the server unreachable. Commits tokens_ on success.
  absl::Status StepOnce(absl::Span<const uint32_t> tokens, uint32_t rollback,
                        uint32_t max_tokens_left,
                        uint32_t words_per_row, v1::StepResponse* resp, absl::Time deadline,
                        bool recovering, bool* lost);
  void Commit(uint32_t rollback, absl::Span<const uint32_t> tokens);

  Client* client_;
  v1::CompileRequest compile_;
  ResumeOptions options_;
  uint64_t session_id_ = 0;
  std::string index_id_;
  uint32_t words_per_row_ = 0;
  std::vector<uint32_t> tokens_;
  int resumes_ = 0;
  bool closed_ = false;
};

// A batched Step over resumable sessions: entries[i] (its session_id is
// ignored) steps sessions[i]. One Step call when all goes well; sessions
// found lost are resumed and their entries redone one by one, so each row and
// result is what an uninterrupted server would have returned. Entry errors
// are in resp->results(i).status() as for Client::Step; a non-OK return means
// the server did not come back in time (rows of unfinished entries are zero
// and their status says UNAVAILABLE), or a request-level error (e.g.
// RESOURCE_EXHAUSTED past --max-batch). All sessions must use one Client.
// With `stream`, the batched call goes over it (StepStream) instead of a
// unary Step; when the stream breaks, the entries are redone as above and
// stream->closed() tells the caller to open a new one.
absl::Status StepResumable(absl::Span<ResumableSession* const> sessions,
                           absl::Span<const v1::StepEntry> entries, v1::StepResponse* resp,
                           StepStream* stream = nullptr);

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
