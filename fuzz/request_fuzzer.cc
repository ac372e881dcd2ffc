// libFuzzer: bytes -> a sequence of maskd requests -> the real service
// handlers (MaskdService + SharedMemoryService) behind one grpc::Server,
// exactly as a client reaches them, sessions, StepStreams and mapped shared
// memory included: unary calls over its in-process channel, StepStreams over
// a unix socket it also listens on (see Harness::stream_channel).
//
// Input: records of [kind byte][length: 2 bytes LE][payload], at most
// kMaxCalls per input. Kinds (kind byte % kinds):
//  - a unary method (Methods()): the payload is parsed as that method's
//    request message; when it parses, small id fields are rewritten to ids
//    handed out earlier in this input (Substitute: session_id < 1024 -> the
//    (v % n)-th session created, an index_id of 0..1 bytes -> an index
//    compiled, a tokenizer of 0..1 bytes -> "tiny", shared-memory keys and
//    region names -> the fuzzer's objects and regions), so that the fuzzer
//    reaches live sessions and real mappings; then it is sent. A payload that
//    does not parse is sent as raw bytes (malformed protobuf must be refused
//    cleanly);
//  - kStepStream: one Maskd.StepStream; payload [mode][sub-records of
//    [length: 2 bytes LE][StepRequest]] (at most kMaxStreamMessages), each
//    sent (rewritten as above when it parses) and its reply read; mode & 3:
//    0 half-close at the end, 1 cancel after reply (mode >> 2), 2 abandon
//    (cancel) after sending request (mode >> 2) without reading its reply,
//    3 as 0;
//  - kResize: ftruncate the fuzzer's shm object [k] to [4 bytes LE] %
//    (2 x its size + 1) bytes: registrations and StepInRegion must then be
//    refused (CheckBacked), not crash.
//
// Shared memory: at start the process creates kShmObjects POSIX objects
// /maskd-fuzz-<pid>-<k> (kShmSizes; unlinked at exit; a crashed run leaves
// them in /dev/shm) and serves SharedMemory with that key prefix, so
// RegisterSystemRegion maps them and StepInRegion writes masks and applies
// masks to logits in the mapped memory. Each input starts with no region and
// zeroed objects of full size.
//
// Bug: a crash, a sanitizer report, a hang, a status of UNKNOWN, INTERNAL or
// DATA_LOSS, or UNIMPLEMENTED from a method both services implement (other
// than Mask's answer to a token budget on a grammar). Work per input is
// bounded by small server limits (constraint and grammar bytes, DFA states,
// grammar parser work, batch, tokens, compile timeout, regions) and
// kMaxCalls; sessions and regions created by an input are dropped at its end.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <google/protobuf/reflection.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/rpc_method.h>
#include <grpcpp/support/sync_stream.h>
#include <grpcpp/support/byte_buffer.h>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "fuzz/tiny_vocabulary.h"
#include "maskd/v1/maskd.grpc.pb.h"
#include "maskd/v1/shm.grpc.pb.h"
#include "service/index_cache.h"
#include "service/maskd_service.h"
#include "service/metrics.h"
#include "service/session_table.h"
#include "service/shm_service.h"
#include "service/step_batch.h"
#include "service/tokenizer_registry.h"

namespace {

namespace pb = google::protobuf;
using namespace maskd;

constexpr int kMaxCalls = 24;
constexpr int kMaxStreamMessages = 16;
constexpr const char* kStepStreamPath = "/maskd.v1.Maskd/StepStream";

// The fuzzer's shared-memory objects: a mask row of the tiny vocabulary (271
// tokens) is 9 words (36 bytes), an fp32 logits row 1084 bytes; 8 entries
// (max_batch) fit in each object, 8 fp32 logits rows only in the largest.
constexpr int kShmObjects = 3;
constexpr std::array<size_t, kShmObjects> kShmSizes = {4096, 16384, 65536};

struct Method {
  const char* path;
  const pb::Message* request;
  const pb::Message* response;
};

template <typename Req, typename Resp>
Method M(const char* path) {
  return {path, &Req::default_instance(), &Resp::default_instance()};
}

const std::vector<Method>& Methods() {
  static const auto* m = new std::vector<Method>{
      M<v1::PingRequest, v1::PingResponse>("/maskd.v1.Maskd/Ping"),
      M<v1::StatsRequest, v1::StatsResponse>("/maskd.v1.Maskd/Stats"),
      M<v1::ListTokenizersRequest, v1::ListTokenizersResponse>("/maskd.v1.Maskd/ListTokenizers"),
      M<v1::RegisterTokenizerRequest, v1::RegisterTokenizerResponse>(
          "/maskd.v1.Maskd/RegisterTokenizer"),
      M<v1::DetokenizeRequest, v1::DetokenizeResponse>("/maskd.v1.Maskd/Detokenize"),
      M<v1::CompileRequest, v1::CompileResponse>("/maskd.v1.Maskd/Compile"),
      M<v1::GetIndexRequest, v1::CompileResponse>("/maskd.v1.Maskd/GetIndex"),
      M<v1::CancelCompileRequest, v1::CancelCompileResponse>("/maskd.v1.Maskd/CancelCompile"),
      M<v1::CreateSessionRequest, v1::CreateSessionResponse>("/maskd.v1.Maskd/CreateSession"),
      M<v1::CloseSessionRequest, v1::CloseSessionResponse>("/maskd.v1.Maskd/CloseSession"),
      M<v1::ForkSessionRequest, v1::ForkSessionResponse>("/maskd.v1.Maskd/ForkSession"),
      M<v1::RollbackRequest, v1::RollbackResponse>("/maskd.v1.Maskd/Rollback"),
      M<v1::StepRequest, v1::StepResponse>("/maskd.v1.Maskd/Step"),
      M<v1::MaskRequest, v1::MaskResponse>("/maskd.v1.Maskd/Mask"),
      M<v1::RegisterSystemRegionRequest, v1::RegisterSystemRegionResponse>(
          "/maskd.v1.SharedMemory/RegisterSystemRegion"),
      M<v1::ListRegionsRequest, v1::ListRegionsResponse>("/maskd.v1.SharedMemory/ListRegions"),
      M<v1::UnregisterRegionRequest, v1::UnregisterRegionResponse>(
          "/maskd.v1.SharedMemory/UnregisterRegion"),
      M<v1::StepInRegionRequest, v1::StepInRegionResponse>("/maskd.v1.SharedMemory/StepInRegion"),
  };
  return *m;
}

// Kinds after the unary methods.
size_t StepStreamKind() { return Methods().size(); }
size_t ResizeKind() { return Methods().size() + 1; }
size_t NumKinds() { return Methods().size() + 2; }

// The POSIX shm objects the fuzzer owns (created once, unlinked at exit).
struct ShmObjects {
  std::string prefix;                     // "/maskd-fuzz-<pid>-"
  std::array<int, kShmObjects> fds{};     // O_RDWR, kept for kResize
  std::string Key(int k) const { return prefix + std::to_string(k); }

  void Create() {
    prefix = "/maskd-fuzz-" + std::to_string(getpid()) + "-";
    for (int k = 0; k < kShmObjects; ++k) {
      shm_unlink(Key(k).c_str());  // a stale object of an earlier process with our pid
      fds[k] = shm_open(Key(k).c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
      if (fds[k] < 0 || ftruncate(fds[k], static_cast<off_t>(kShmSizes[k])) != 0) {
        perror("request_fuzzer: shm object");
        abort();
      }
    }
  }
  // Full size and zero bytes again (no region maps them then).
  void Reset() {
    for (int k = 0; k < kShmObjects; ++k) {
      if (ftruncate(fds[k], 0) != 0 || ftruncate(fds[k], static_cast<off_t>(kShmSizes[k])) != 0) {
        perror("request_fuzzer: shm reset");
        abort();
      }
    }
  }
  void Unlink() const {
    for (int k = 0; k < kShmObjects; ++k) shm_unlink(Key(k).c_str());
  }
};

struct Harness;
Harness& H();

// The server, built once per process and never torn down.
struct Harness {
  ShmObjects objects;
  Metrics metrics{"fuzz"};
  TokenizerRegistry tokenizers{4, size_t{1} << 20};
  std::unique_ptr<IndexCache> cache;
  std::unique_ptr<SessionTable> sessions;
  std::unique_ptr<StepBatch> step;
  std::unique_ptr<MaskdService> service;
  std::unique_ptr<SharedMemoryService> shm;
  std::unique_ptr<grpc::Server> server;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<grpc::GenericStub> stub;
  // StepStreams go over a unix socket of the same server: gRPC 1.51's
  // in-process transport keeps about 22 KB of each finished bidi stream's
  // client call (2 GB by ~400,000 inputs) while the server has finished it.
  std::string stream_socket;
  std::shared_ptr<grpc::Channel> stream_channel;

  Harness() {
    auto tiny = tokenizers.Register("tiny", maskd::fuzz::TinyTokenizerJson(),
                                    maskd::fuzz::kTinyTokenizerConfig, {});
    if (!tiny.ok()) {
      fprintf(stderr, "tiny tokenizer: %s\n", tiny.status().ToString().c_str());
      abort();
    }
    IndexCacheOptions co;
    co.max_bytes = 32 << 20;
    co.compile_threads = 2;
    co.compile_timeout = absl::Seconds(2);
    co.failure_ttl = absl::Milliseconds(100);
    co.max_pending = 16;
    co.compile.regex.max_pattern_bytes = 4096;
    co.compile.regex.max_repeat = 64;
    co.compile.regex.max_nodes = 1 << 14;
    co.compile.max_dfa_states = 2000;
    co.compile.max_nfa_states = 1 << 16;
    co.compile.grammar.max_text_bytes = 4096;
    co.compile.grammar.max_rules = 256;
    co.compile.grammar.max_terminals = 256;
    co.compile.grammar.max_repeat = 64;
    co.compile.grammar_index.earley.max_chart_items = 1 << 14;
    co.compile.grammar_index.earley.max_items_per_position = 1 << 12;
    co.compile.grammar_index.max_mask_work = 1 << 16;
    co.compile.grammar_index.max_memo_bytes = 4 << 20;
    // The compiler's shared caches, small (the server's defaults are 256 MiB
    // of terminal DFAs and 64 MiB of lowered schemas): their eviction is
    // fuzzed too, and their bytes stay a small part of -rss_limit_mb.
    co.compile.terminal_dfa_bytes = 8 << 20;
    co.compile.schema_grammar_bytes = 4 << 20;
    cache = std::make_unique<IndexCache>(co, &metrics);
    SessionTableOptions so;
    so.max_sessions = 64;
    so.ttl = absl::Minutes(1);
    sessions = std::make_unique<SessionTable>(so, &metrics);
    StepLimits step_limits;
    step_limits.max_batch = 8;
    step_limits.max_message_bytes = 1 << 20;
    step_limits.max_tokens_per_request = 256;
    step = std::make_unique<StepBatch>(sessions.get(), &metrics, step_limits);
    ServiceLimits limits;
    limits.max_constraint_bytes = 4096;
    limits.max_grammar_bytes = 4096;
    service = std::make_unique<MaskdService>(&tokenizers, cache.get(), sessions.get(), step.get(),
                                             &metrics, limits, "fuzz");
    objects.Create();
    atexit([] { H().objects.Unlink(); });
    ShmServiceOptions shm_options;
    shm_options.allow_registration = true;
    shm_options.key_prefix = objects.prefix;  // only this process's objects
    // The in-process channel carries no peer credentials (its peer is not a
    // unix-socket fd), so, as over TCP with --shm_allow_tcp, every call acts
    // as this process's euid. Bypassed: the SO_PEERCRED lookup and the
    // "unix socket only" refusal; the owner checks still run, but caller,
    // region owner and object owner are always the same uid, so their
    // PERMISSION_DENIED paths are not reached (tests/service/shm_ownership_test.cc
    // covers them).
    shm_options.allow_tcp = true;
    shm_options.max_regions = 8;
    shm = std::make_unique<SharedMemoryService>(shm_options, step.get(), &metrics);
    grpc::ServerBuilder builder;
    builder.SetMaxReceiveMessageSize(1 << 20);
    builder.SetMaxSendMessageSize(1 << 20);
    builder.RegisterService(service.get());
    builder.RegisterService(shm.get());
    stream_socket = "/tmp/maskd-request-fuzzer-" + std::to_string(getpid()) + ".sock";
    unlink(stream_socket.c_str());  // a stale socket of an earlier process with our pid
    builder.AddListeningPort("unix:" + stream_socket, grpc::InsecureServerCredentials());
    server = builder.BuildAndStart();
    if (!server) abort();
    atexit([] { unlink(H().stream_socket.c_str()); });
    channel = server->InProcessChannel(grpc::ChannelArguments());
    stub = std::make_unique<grpc::GenericStub>(channel);
    stream_channel = grpc::CreateChannel("unix:" + stream_socket, grpc::InsecureChannelCredentials());
  }
};

// MASKD_FUZZ_VERBOSE=1: one line per call (method, status), to see what an
// input reaches.
bool Verbose() {
  static const bool v = getenv("MASKD_FUZZ_VERBOSE") != nullptr;
  return v;
}

Harness& H() {
  static Harness* h = new Harness();
  return *h;
}

struct Ids {
  std::vector<uint64_t> sessions;  // created by this input
  std::vector<std::string> indexes;
  std::vector<std::string> regions;  // registered by this input
};

uint8_t FirstByte(const std::string& v) { return v.empty() ? 0 : static_cast<uint8_t>(v[0]); }

// The shared-memory fields of `m` (see the top): a RegisterSystemRegion key of
// 0..1 bytes -> the (b % kShmObjects)-th object (and a byte_size of 0 -> the
// rest of it past offset), a region name of 0..1 bytes -> "r<b % 4>"; a
// region of 0..1 bytes in a StepInRegion target, or a name of exactly 1 byte
// in ListRegions / UnregisterRegion (empty means "all" there), -> a region
// registered earlier in this input.
void SubstituteShm(pb::Message* m, const Ids& ids) {
  const std::string& type = m->GetDescriptor()->full_name();
  if (type == "maskd.v1.RegisterSystemRegionRequest") {
    auto* r = static_cast<v1::RegisterSystemRegionRequest*>(m);
    if (r->name().size() <= 1) r->set_name("r" + std::to_string(FirstByte(r->name()) % 4));
    if (r->key().size() <= 1) {
      const int k = FirstByte(r->key()) % kShmObjects;
      r->set_key(H().objects.Key(k));
      if (r->byte_size() == 0 && r->offset() < kShmSizes[k]) {
        r->set_byte_size(kShmSizes[k] - r->offset());
      }
    }
    return;
  }
  auto region = [&](std::string* name, bool empty_too) {
    if (ids.regions.empty() || name->size() > 1 || (name->empty() && !empty_too)) return;
    *name = ids.regions[FirstByte(*name) % ids.regions.size()];
  };
  if (type == "maskd.v1.MasksTarget") {
    region(static_cast<v1::MasksTarget*>(m)->mutable_region(), true);
  } else if (type == "maskd.v1.LogitsTarget") {
    region(static_cast<v1::LogitsTarget*>(m)->mutable_region(), true);
  } else if (type == "maskd.v1.ListRegionsRequest") {
    region(static_cast<v1::ListRegionsRequest*>(m)->mutable_name(), false);
  } else if (type == "maskd.v1.UnregisterRegionRequest") {
    region(static_cast<v1::UnregisterRegionRequest*>(m)->mutable_name(), false);
  }
}

// Rewrites small id fields of `m` to ids handed out earlier (see the top).
void Substitute(pb::Message* m, const Ids& ids, int depth = 0) {
  if (depth > 8) return;
  SubstituteShm(m, ids);
  const pb::Reflection* r = m->GetReflection();
  const pb::Descriptor* d = m->GetDescriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    const pb::FieldDescriptor* f = d->field(i);
    // proto3 leaves empty strings and zeros unset: visit every field, but a
    // oneof member only when it is the one set (setting another would
    // switch the oneof).
    const bool present = f->is_repeated() ? r->FieldSize(*m, f) > 0 : r->HasField(*m, f);
    if (!present && (f->containing_oneof() != nullptr ||
                     f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE)) {
      continue;
    }
    if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
      if (f->is_repeated()) {
        for (int i = 0; i < r->FieldSize(*m, f); ++i) {
          Substitute(r->MutableRepeatedMessage(m, f, i), ids, depth + 1);
        }
      } else {
        Substitute(r->MutableMessage(m, f), ids, depth + 1);
      }
      continue;
    }
    if (f->is_repeated()) continue;
    if (f->name() == "session_id" && f->cpp_type() == pb::FieldDescriptor::CPPTYPE_UINT64) {
      uint64_t v = r->GetUInt64(*m, f);
      if (v < 1024 && !ids.sessions.empty()) {
        r->SetUInt64(m, f, ids.sessions[v % ids.sessions.size()]);
      }
    } else if (f->name() == "index_id" && f->cpp_type() == pb::FieldDescriptor::CPPTYPE_STRING) {
      std::string v = r->GetString(*m, f);
      if (v.size() <= 1 && !ids.indexes.empty()) {
        r->SetString(m, f, ids.indexes[(v.empty() ? 0 : static_cast<uint8_t>(v[0])) % ids.indexes.size()]);
      }
    } else if (f->name() == "tokenizer" && f->cpp_type() == pb::FieldDescriptor::CPPTYPE_STRING) {
      if (r->GetString(*m, f).size() <= 1) r->SetString(m, f, "tiny");
    }
  }
}

// Collects ids from a reply.
void Harvest(const pb::Message& m, Ids* ids) {
  const pb::Reflection* r = m.GetReflection();
  const pb::Descriptor* d = m.GetDescriptor();
  if (const pb::FieldDescriptor* f = d->FindFieldByName("session_id");
      f && !f->is_repeated() && f->cpp_type() == pb::FieldDescriptor::CPPTYPE_UINT64) {
    uint64_t v = r->GetUInt64(m, f);
    if (v != 0 && ids->sessions.size() < 64) ids->sessions.push_back(v);
  }
  if (const pb::FieldDescriptor* f = d->FindFieldByName("index_id");
      f && !f->is_repeated() && f->cpp_type() == pb::FieldDescriptor::CPPTYPE_STRING) {
    std::string v = r->GetString(m, f);
    if (!v.empty() && ids->indexes.size() < 16) ids->indexes.push_back(v);
  }
}

grpc::Status Call(const std::string& path, const std::string& bytes, std::string* reply) {
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  absl::Notification done;
  grpc::Status status;
  H().stub->UnaryCall(&ctx, path, grpc::StubOptions(), &request, &response,
                      [&](grpc::Status s) {
                        status = std::move(s);
                        done.Notify();
                      });
  done.WaitForNotification();
  reply->clear();
  if (status.ok()) {
    std::vector<grpc::Slice> slices;
    if (response.Dump(&slices).ok()) {
      for (const auto& s : slices) reply->append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
  }
  return status;
}

void CheckStatus(const grpc::Status& s, const char* path, bool parsed) {
  switch (s.error_code()) {
    case grpc::StatusCode::UNKNOWN:
    case grpc::StatusCode::INTERNAL:
    case grpc::StatusCode::DATA_LOSS:
      fprintf(stderr, "%s: status %d: %s\n", path, s.error_code(), s.error_message().c_str());
      abort();
    case grpc::StatusCode::UNIMPLEMENTED:
      // Every method here is implemented (RegisterCudaRegion, which a build
      // without CUDA answers UNIMPLEMENTED, is not sent), and both services
      // answer a request that does not parse with INVALID_ARGUMENT. The one
      // UNIMPLEMENTED answer is a token budget on a grammar (Mask).
      if (s.error_message().find("not supported on grammar constraints") != std::string::npos) {
        break;
      }
      fprintf(stderr, "%s: UNIMPLEMENTED (parsed=%d): %s\n", path, parsed,
              s.error_message().c_str());
      abort();
    default:
      break;
  }
  if (s.error_message().size() > 4096) {
    fprintf(stderr, "%s: unbounded message (%zu bytes)\n", path, s.error_message().size());
    abort();
  }
}

// A request payload: parsed, rewritten and serialized again when it parses;
// else the raw bytes. Returns whether it parsed.
bool Prepare(const pb::Message& prototype, const Ids& ids, std::string* payload,
             std::unique_ptr<pb::Message>* parsed_out = nullptr) {
  std::unique_ptr<pb::Message> req(prototype.New());
  if (!req->ParseFromString(*payload)) return false;
  Substitute(req.get(), ids);
  *payload = req->SerializeAsString();
  if (parsed_out) *parsed_out = std::move(req);
  return true;
}

grpc::ByteBuffer ToBuffer(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

// One StepStream (kStepStream, see the top): payload [mode][sub-records].
void RunStream(const uint8_t* data, size_t size, const Ids& ids) {
  if (size == 0) return;
  const uint8_t mode = data[0];
  const int stop_at = mode >> 2;  // cancel after this request (modes 1, 2)
  size_t pos = 1;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  const grpc::internal::RpcMethod method(kStepStreamPath, grpc::internal::RpcMethod::BIDI_STREAMING);
  std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>> stream(
      grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(
          H().stream_channel.get(), method, &ctx));
  bool all_parsed = true, cancelled = false, open = true;
  for (int i = 0; i < kMaxStreamMessages && pos + 2 <= size && open; ++i) {
    size_t len = data[pos] | (size_t{data[pos + 1]} << 8);
    pos += 2;
    len = std::min(len, size - pos);
    std::string payload(reinterpret_cast<const char*>(data + pos), len);
    pos += len;
    all_parsed &= Prepare(v1::StepRequest::default_instance(), ids, &payload);
    if (!stream->Write(ToBuffer(payload))) break;  // the server finished the stream
    if ((mode & 3) == 2 && i == stop_at) {  // abandon: the reply is never read
      ctx.TryCancel();
      cancelled = true;
      break;
    }
    grpc::ByteBuffer reply;
    if (!stream->Read(&reply)) break;  // finished (an error status, read below)
    std::vector<grpc::Slice> slices;
    std::string bytes;
    if (reply.Dump(&slices).ok()) {
      for (const auto& sl : slices) bytes.append(reinterpret_cast<const char*>(sl.begin()), sl.size());
    }
    v1::StepResponse resp;
    if (!resp.ParseFromString(bytes)) {
      fprintf(stderr, "%s: reply does not parse\n", kStepStreamPath);
      abort();
    }
    if ((mode & 3) == 1 && i == stop_at) {
      ctx.TryCancel();
      cancelled = true;
      open = false;
    }
  }
  if (!cancelled) {
    stream->WritesDone();
    grpc::ByteBuffer extra;
    if (stream->Read(&extra)) {  // one reply per request: nothing is left to read
      fprintf(stderr, "%s: a reply nobody asked for\n", kStepStreamPath);
      abort();
    }
  }
  grpc::Status s = stream->Finish();
  if (Verbose()) {
    fprintf(stderr, "stream mode=%d parsed=%d -> %d %s\n", mode & 3, all_parsed, s.error_code(),
            s.error_message().substr(0, 120).c_str());
  }
  if (cancelled && s.error_code() == grpc::StatusCode::CANCELLED) return;
  CheckStatus(s, kStepStreamPath, all_parsed);
}

// kResize: payload [k][size: 4 bytes LE].
void Resize(const uint8_t* data, size_t size) {
  if (size < 5) return;
  const int k = data[0] % kShmObjects;
  const uint32_t v = data[1] | (uint32_t{data[2]} << 8) | (uint32_t{data[3]} << 16) |
                     (uint32_t{data[4]} << 24);
  const off_t bytes = static_cast<off_t>(v % (2 * kShmSizes[k] + 1));
  if (ftruncate(H().objects.fds[k], bytes) != 0) {
    perror("request_fuzzer: ftruncate");
    abort();
  }
  if (Verbose()) fprintf(stderr, "resize object %d to %lld bytes\n", k, static_cast<long long>(bytes));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto& methods = Methods();
  Ids ids;
  size_t pos = 0;
  std::string reply;
  for (int calls = 0; calls < kMaxCalls && pos + 3 <= size; ++calls) {
    const size_t kind = data[pos] % NumKinds();
    size_t len = data[pos + 1] | (size_t{data[pos + 2]} << 8);
    pos += 3;
    len = std::min(len, size - pos);
    const uint8_t* record = data + pos;
    pos += len;
    if (kind == StepStreamKind()) {
      RunStream(record, len, ids);
      continue;
    }
    if (kind == ResizeKind()) {
      Resize(record, len);
      continue;
    }
    const Method& m = methods[kind];
    std::string payload(reinterpret_cast<const char*>(record), len);
    std::unique_ptr<pb::Message> req;
    const bool parsed = Prepare(*m.request, ids, &payload, &req);
    grpc::Status s = Call(m.path, payload, &reply);
    if (Verbose()) fprintf(stderr, "call %s parsed=%d -> %d %s\n", m.path, parsed, s.error_code(),
                           s.error_message().substr(0, 120).c_str());
    CheckStatus(s, m.path, parsed);
    if (s.ok()) {
      std::unique_ptr<pb::Message> resp(m.response->New());
      if (!resp->ParseFromString(reply)) {
        fprintf(stderr, "%s: reply does not parse\n", m.path);
        abort();
      }
      Harvest(*resp, &ids);
      if (parsed && m.request->GetDescriptor() == v1::RegisterSystemRegionRequest::descriptor() &&
          ids.regions.size() < 8) {
        ids.regions.push_back(static_cast<const v1::RegisterSystemRegionRequest&>(*req).name());
      }
    }
  }
  // Inputs do not share sessions, regions or shared-memory bytes.
  for (uint64_t id : ids.sessions) {
    v1::CloseSessionRequest close;
    close.set_session_id(id);
    Call("/maskd.v1.Maskd/CloseSession", close.SerializeAsString(), &reply);
  }
  (void)H().shm->registry().Unregister("");  // NotFound-free: "" is every region
  H().objects.Reset();
  return 0;
}
