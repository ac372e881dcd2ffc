#include "client/client.h"

#include <algorithm>
#include <climits>
#include <bit>

#include "client/client_id.h"

#include "grpc/health/v1/health.grpc.pb.h"

namespace maskd {

static_assert(std::endian::native == std::endian::little,
              "MaskRow reads wire bytes as native words: little-endian hosts only");

absl::Status FromGrpc(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(const std::string& addr,
                                                        const ClientOptions& options) {
  if (addr.empty()) return absl::InvalidArgumentError("empty server address");
  if (!options.client_id.empty()) {
    if (absl::Status s = ValidateClientId(options.client_id); !s.ok()) return s;
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options.max_message_bytes);
  args.SetMaxSendMessageSize(options.max_message_bytes);
  const int initial_ms = static_cast<int>(
      std::max<int64_t>(1, absl::ToInt64Milliseconds(options.reconnect_backoff_initial)));
  const int max_ms = static_cast<int>(std::max<int64_t>(
      initial_ms, absl::ToInt64Milliseconds(options.reconnect_backoff_max)));
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, initial_ms);
  // gRPC 1.51 uses this one as the minimum connect timeout, not as a backoff:
  // at 100 ms, a TLS handshake on a loaded machine timed out.
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS,
              static_cast<int>(std::clamp<int64_t>(
                  absl::ToInt64Milliseconds(options.connect_timeout), 100, INT_MAX)));
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, max_ms);
  if (!options.client_name.empty()) args.SetUserAgentPrefix("maskd-" + options.client_name);
  std::unique_ptr<Client> c(new Client());
  c->options_ = options;
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  if (!options.tls_ca_pem.empty()) {
    grpc::SslCredentialsOptions tls;
    tls.pem_root_certs = options.tls_ca_pem;
    tls.pem_cert_chain = options.tls_cert_pem;
    tls.pem_private_key = options.tls_key_pem;
    creds = grpc::SslCredentials(tls);
    if (!options.tls_server_name.empty()) {
      args.SetSslTargetNameOverride(options.tls_server_name);
    }
  } else if (!options.tls_cert_pem.empty() || !options.tls_key_pem.empty()) {
    return absl::InvalidArgumentError("a TLS client certificate needs tls_ca_pem");
  }
  if (options.client_id.empty()) {
    c->channel_ = grpc::CreateCustomChannel(addr, creds, args);
  } else {
    // An interceptor, not Prepare: every call on the channel carries the id,
    // whoever makes it (ShmClient, the health stub, stub() callers).
    std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> ids;
    ids.push_back(ClientIdInterceptorFactory(options.client_id));
    c->channel_ = grpc::experimental::CreateCustomChannelWithInterceptors(addr, creds, args,
                                                                          std::move(ids));
  }
  if (!c->channel_) return absl::InvalidArgumentError("cannot create a channel to " + addr);
  c->stub_ = v1::Maskd::NewStub(c->channel_);
  return c;
}

void Client::Prepare(grpc::ClientContext* ctx) const {
  if (options_.timeout > absl::ZeroDuration()) {
    ctx->set_deadline(absl::ToChronoTime(absl::Now() + options_.timeout));
  }
}

absl::StatusOr<std::string> Client::Health(const std::string& service) {
  auto stub = grpc::health::v1::Health::NewStub(channel_);
  grpc::ClientContext ctx;
  Prepare(&ctx);
  grpc::health::v1::HealthCheckRequest req;
  req.set_service(service);
  grpc::health::v1::HealthCheckResponse resp;
  grpc::Status s = stub->Check(&ctx, req, &resp);
  if (!s.ok()) return FromGrpc(s);
  return grpc::health::v1::HealthCheckResponse::ServingStatus_Name(resp.status());
}

#define MASKD_UNARY(method, req, resp)           \
  do {                                           \
    grpc::ClientContext ctx;                     \
    Prepare(&ctx);                               \
    grpc::Status s = stub_->method(&ctx, req, resp); \
    if (!s.ok()) return FromGrpc(s);             \
  } while (0)

absl::Status Client::Ping() {
  v1::PingRequest req;
  v1::PingResponse resp;
  MASKD_UNARY(Ping, req, &resp);
  return absl::OkStatus();
}

absl::StatusOr<v1::StatsResponse> Client::Stats() {
  v1::StatsRequest req;
  v1::StatsResponse resp;
  MASKD_UNARY(Stats, req, &resp);
  return resp;
}

absl::StatusOr<std::vector<v1::Tokenizer>> Client::ListTokenizers() {
  v1::ListTokenizersRequest req;
  v1::ListTokenizersResponse resp;
  MASKD_UNARY(ListTokenizers, req, &resp);
  return std::vector<v1::Tokenizer>(resp.tokenizers().begin(), resp.tokenizers().end());
}

absl::StatusOr<v1::Tokenizer> Client::RegisterTokenizer(const v1::RegisterTokenizerRequest& req) {
  v1::RegisterTokenizerResponse resp;
  MASKD_UNARY(RegisterTokenizer, req, &resp);
  return resp.tokenizer();
}

absl::StatusOr<std::string> Client::Detokenize(const std::string& tokenizer,
                                               absl::Span<const uint32_t> tokens) {
  v1::DetokenizeRequest req;
  req.set_tokenizer(tokenizer);
  req.mutable_tokens()->Add(tokens.begin(), tokens.end());
  v1::DetokenizeResponse resp;
  MASKD_UNARY(Detokenize, req, &resp);
  return std::move(*resp.mutable_text());
}

absl::StatusOr<v1::CompileResponse> Client::Compile(const v1::CompileRequest& req) {
  v1::CompileResponse resp;
  MASKD_UNARY(Compile, req, &resp);
  return resp;
}

absl::StatusOr<v1::CompileResponse> Client::CompileRegex(const std::string& tokenizer,
                                                         const std::string& regex) {
  v1::CompileRequest req;
  req.set_tokenizer(tokenizer);
  req.set_regex(regex);
  req.set_wait(true);
  return Compile(req);
}

absl::StatusOr<v1::CompileResponse> Client::GetIndex(const std::string& index_id, bool wait) {
  v1::GetIndexRequest req;
  req.set_index_id(index_id);
  req.set_wait(wait);
  v1::CompileResponse resp;
  MASKD_UNARY(GetIndex, req, &resp);
  return resp;
}

absl::StatusOr<bool> Client::CancelCompile(const std::string& index_id) {
  v1::CancelCompileRequest req;
  req.set_index_id(index_id);
  v1::CancelCompileResponse resp;
  MASKD_UNARY(CancelCompile, req, &resp);
  return resp.cancelled();
}

absl::StatusOr<v1::CreateSessionResponse> Client::CreateSession(const std::string& index_id) {
  v1::CreateSessionRequest req;
  req.set_index_id(index_id);
  v1::CreateSessionResponse resp;
  MASKD_UNARY(CreateSession, req, &resp);
  return resp;
}

absl::StatusOr<v1::CreateSessionResponse> Client::CreateSession(
    const v1::CompileRequest& compile) {
  v1::CreateSessionRequest req;
  *req.mutable_compile() = compile;
  v1::CreateSessionResponse resp;
  MASKD_UNARY(CreateSession, req, &resp);
  return resp;
}

absl::Status Client::CloseSession(uint64_t session_id) {
  v1::CloseSessionRequest req;
  req.set_session_id(session_id);
  v1::CloseSessionResponse resp;
  MASKD_UNARY(CloseSession, req, &resp);
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> Client::ForkSession(uint64_t session_id) {
  v1::ForkSessionRequest req;
  req.set_session_id(session_id);
  v1::ForkSessionResponse resp;
  MASKD_UNARY(ForkSession, req, &resp);
  return resp.session_id();
}

absl::StatusOr<uint64_t> Client::Rollback(uint64_t session_id, uint32_t n) {
  v1::RollbackRequest req;
  req.set_session_id(session_id);
  req.set_num_tokens(n);
  v1::RollbackResponse resp;
  MASKD_UNARY(Rollback, req, &resp);
  return resp.num_tokens();
}

absl::Status Client::Step(const v1::StepRequest& req, v1::StepResponse* resp) {
  MASKD_UNARY(Step, req, resp);
  return absl::OkStatus();
}

absl::StatusOr<v1::MaskResponse> Client::Mask(const std::string& index_id,
                                              absl::Span<const uint32_t> tokens) {
  v1::MaskRequest req;
  req.set_index_id(index_id);
  req.mutable_tokens()->Add(tokens.begin(), tokens.end());
  v1::MaskResponse resp;
  MASKD_UNARY(Mask, req, &resp);
  return resp;
}

#undef MASKD_UNARY

absl::StatusOr<std::unique_ptr<StepStream>> Client::OpenStepStream() {
  std::unique_ptr<StepStream> s(new StepStream());
  s->ctx_ = std::make_unique<grpc::ClientContext>();
  // No per-call deadline on a stream meant to live for a whole generation.
  s->rw_ = stub_->StepStream(s->ctx_.get());
  if (!s->rw_) return absl::UnavailableError("cannot open StepStream");
  return s;
}

StepStream::~StepStream() {
  if (!closed_ && rw_) {
    ctx_->TryCancel();
    (void)rw_->Finish();
  }
}

absl::Status StepStream::Step(const v1::StepRequest& req, v1::StepResponse* resp) {
  if (closed_) return absl::FailedPreconditionError("stream closed");
  if (!rw_->Write(req) || !rw_->Read(resp)) {
    closed_ = true;
    rw_->WritesDone();
    grpc::Status s = rw_->Finish();
    if (s.ok()) return absl::UnavailableError("stream ended");
    return FromGrpc(s);
  }
  return absl::OkStatus();
}

absl::Status StepStream::Close() {
  if (closed_) return absl::OkStatus();
  closed_ = true;
  rw_->WritesDone();
  return FromGrpc(rw_->Finish());
}

absl::Span<const uint32_t> MaskRow(const v1::StepResponse& resp, int i) {
  const size_t words = resp.words_per_row();
  const std::string& m = resp.masks();
  if (words == 0 || (static_cast<size_t>(i) + 1) * words * 4 > m.size() || i < 0) return {};
  return absl::Span<const uint32_t>(reinterpret_cast<const uint32_t*>(m.data()) + i * words, words);
}

std::vector<uint32_t> AllowedTokens(absl::Span<const uint32_t> row) {
  std::vector<uint32_t> out;
  for (size_t w = 0; w < row.size(); ++w) {
    uint32_t bits = row[w];
    while (bits) {
      out.push_back(static_cast<uint32_t>(w * 32 + std::countr_zero(bits)));
      bits &= bits - 1;
    }
  }
  return out;
}

}  // namespace maskd
