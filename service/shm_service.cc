#include "service/shm_service.h"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/support/message_allocator.h"
#include "service/grpc_status.h"
#include "service/quote.h"
#include "service/log.h"
#include "service/maskd_service.h"
#include "service/peer_credentials.h"
#include "service/pooled_allocator.h"

namespace maskd {

static_assert(std::endian::native == std::endian::little,
              "mask rows are written as native uint32 words: little-endian hosts only");

namespace {

v1::RegionKind ToProto(shm::RegionKind k) {
  return k == shm::RegionKind::kCuda ? v1::REGION_KIND_CUDA : v1::REGION_KIND_SYSTEM;
}

absl::StatusOr<LogitsDtype> FromProto(v1::LogitsDtype d) {
  switch (d) {
    case v1::LOGITS_DTYPE_FP32: return LogitsDtype::kFloat32;
    case v1::LOGITS_DTYPE_FP16: return LogitsDtype::kFloat16;
    case v1::LOGITS_DTYPE_BF16: return LogitsDtype::kBFloat16;
    default: break;
  }
  return absl::InvalidArgumentError("logits dtype must be FP32, FP16 or BF16");
}

bool Aligned(const void* base, uint64_t offset, uint64_t alignment) {
  return (reinterpret_cast<uintptr_t>(base) + offset) % alignment == 0;
}

// Per-thread scratch kept between calls (capacity only): the sessions of a
// batch, the mask rows (logits target and CUDA masks target), per-entry
// success flags and the effective row map.
struct Scratch {
  std::vector<std::shared_ptr<Session>> refs;
  std::vector<uint32_t> words;
  std::vector<uint8_t> ok;
  std::vector<int32_t> row_map;
};

Scratch& ThreadScratch() {
  thread_local Scratch scratch;
  return scratch;
}

// Drops the session references on every return path (keeps the capacity).
struct RefsGuard {
  std::vector<std::shared_ptr<Session>>* refs;
  ~RefsGuard() { refs->clear(); }
};

}  // namespace

SharedMemoryService::SharedMemoryService(const ShmServiceOptions& options, SessionTable* sessions,
                                         Metrics* metrics)
    : options_(options), sessions_(sessions), metrics_(metrics) {
  shm::RegionRegistry::Options ro;
  ro.allow_registration = options.allow_registration;
  ro.key_prefix = options.key_prefix;
  ro.max_regions = options.max_regions;
  ro.log = [](std::string_view m) {
    LogError(absl::StrCat("shm: ", absl::string_view(m.data(), m.size())));
  };
  registry_ = std::make_unique<shm::RegionRegistry>(std::move(ro));
  CpuApplier::Options ao;
  ao.num_threads = options.apply_threads;
  applier_ = std::make_unique<CpuApplier>(ao);
  allocator_ = std::make_unique<
      PooledAllocator<Checked<v1::StepInRegionRequest>, v1::StepInRegionResponse>>();
  CheckRequests(0, "RegisterSystemRegion", &SharedMemoryService::RegisterSystemRegion);
  CheckRequests(1, "RegisterCudaRegion", &SharedMemoryService::RegisterCudaRegion);
  CheckRequests(2, "ListRegions", &SharedMemoryService::ListRegions);
  CheckRequests(3, "UnregisterRegion", &SharedMemoryService::UnregisterRegion);
  CheckRequests(4, "StepInRegion", &SharedMemoryService::StepInRegion, allocator_.get());
  cuda_ = std::make_unique<ShmCuda>(
      [](std::string_view m) { LogError(absl::string_view(m.data(), m.size())); });
}

SharedMemoryService::~SharedMemoryService() = default;

template <typename Req, typename Resp>
void SharedMemoryService::CheckRequests(int index, const char* name,
                                        Reactor* (SharedMemoryService::*method)(Ctx*, const Req*,
                                                                                 Resp*),
                                        grpc::MessageAllocator<Checked<Req>, Resp>* allocator) {
  CheckMethodShape(v1::StepInRegionRequest::descriptor()->file()->FindServiceByName("SharedMemory"),
                   index, name, Req::descriptor());
  auto* handler = NewCheckedUnaryHandler<Req, Resp>(
      [this, method](Ctx* ctx, const Req* req, Resp* resp) { return (this->*method)(ctx, req, resp); },
      [this, name](Ctx* ctx, const absl::Status& s) { return Done(ctx, name, s); });
  if (allocator != nullptr) handler->SetMessageAllocator(allocator);
  MarkMethodCallback(index, handler);
}

SharedMemoryService::Reactor* SharedMemoryService::Done(Ctx* ctx, const char* method,
                                                        const absl::Status& s) {
  if (!s.ok() && metrics_) metrics_->RpcError(method, static_cast<int>(s.code()));
  if (s.code() == absl::StatusCode::kInternal || s.code() == absl::StatusCode::kUnknown) {
    LogError(absl::StrCat(method, ": ", s.message()));
  }
  Reactor* r = ctx->DefaultReactor();
  r->Finish(ToGrpcStatus(s));
  return r;
}

absl::Status SharedMemoryService::CheckAllowed() const {
  if (options_.allow_registration) return absl::OkStatus();
  return absl::FailedPreconditionError(
      "shared-memory registration is disabled on this server (start maskd with --allow_shm)");
}

absl::StatusOr<uid_t> SharedMemoryService::CallerUid(const grpc::ServerContextBase& ctx) const {
  if (std::optional<PeerCredentials> c = PeerCredentialsOf(ctx)) return c->uid;
  if (options_.allow_tcp) return geteuid();
  return absl::FailedPreconditionError(
      "shared memory is served only on maskd's unix socket: this connection (TCP) carries no "
      "peer credentials to check the memory's owner against; connect over unix:// (or start "
      "maskd with --shm_allow_tcp to let TCP clients act as maskd's own user)");
}

SharedMemoryService::Reactor* SharedMemoryService::RegisterSystemRegion(
    Ctx* ctx, const v1::RegisterSystemRegionRequest* req, v1::RegisterSystemRegionResponse*) {
  absl::Status s = CheckAllowed();
  absl::StatusOr<uid_t> uid = s.ok() ? CallerUid(*ctx) : s;
  if (!uid.ok()) return Done(ctx, "RegisterSystemRegion", uid.status());
  s = registry_->RegisterSystem(req->name(), req->key(), req->offset(), req->byte_size(), *uid);
  return Done(ctx, "RegisterSystemRegion", s);
}

SharedMemoryService::Reactor* SharedMemoryService::RegisterCudaRegion(
    Ctx* ctx, const v1::RegisterCudaRegionRequest* req, v1::RegisterCudaRegionResponse*) {
  absl::Status s = CheckAllowed();
  if (s.ok() && req->raw_handle().size() != shm::kCudaIpcHandleSize) {
    s = absl::InvalidArgumentError(absl::StrCat("raw_handle has ", req->raw_handle().size(),
                                                " bytes; a CUDA IPC handle has ",
                                                shm::kCudaIpcHandleSize));
  }
  absl::StatusOr<uid_t> uid = s.ok() ? CallerUid(*ctx) : s;
  if (!uid.ok()) return Done(ctx, "RegisterCudaRegion", uid.status());
  s = registry_->RegisterCuda(req->name(), req->raw_handle(), req->device_id(), req->offset(),
                              req->byte_size(), *uid);
  return Done(ctx, "RegisterCudaRegion", s);
}

SharedMemoryService::Reactor* SharedMemoryService::ListRegions(Ctx* ctx,
                                                               const v1::ListRegionsRequest* req,
                                                               v1::ListRegionsResponse* resp) {
  absl::StatusOr<uid_t> uid = CallerUid(*ctx);
  if (!uid.ok()) return Done(ctx, "ListRegions", uid.status());
  auto list = registry_->List(req->name());
  if (!list.ok()) return Done(ctx, "ListRegions", list.status());
  for (const shm::RegionInfo& info : *list) {
    if (info.owner_uid != *uid) continue;  // only the caller's own regions
    v1::RegionStatus* r = resp->add_regions();
    r->set_name(info.name);
    r->set_kind(ToProto(info.kind));
    r->set_byte_size(info.byte_size);
    r->set_device_id(info.device_id);
    r->set_calls_in_flight(info.lease_count);
  }
  if (!req->name().empty() && resp->regions_size() == 0) {
    resp->Clear();
    return Done(ctx, "ListRegions",
                absl::PermissionDeniedError("that shared-memory region belongs to another user"));
  }
  return Done(ctx, "ListRegions", absl::OkStatus());
}

SharedMemoryService::Reactor* SharedMemoryService::UnregisterRegion(
    Ctx* ctx, const v1::UnregisterRegionRequest* req, v1::UnregisterRegionResponse*) {
  absl::StatusOr<uid_t> uid = CallerUid(*ctx);
  if (!uid.ok()) return Done(ctx, "UnregisterRegion", uid.status());
  return Done(ctx, "UnregisterRegion", registry_->Unregister(req->name(), *uid));
}

SharedMemoryService::Reactor* SharedMemoryService::StepInRegion(Ctx* ctx,
                                                                const v1::StepInRegionRequest* req,
                                                                v1::StepInRegionResponse* resp) {
  absl::StatusOr<uid_t> uid = CallerUid(*ctx);
  if (!uid.ok()) return Done(ctx, "StepInRegion", uid.status());
  return Done(ctx, "StepInRegion", DoStepInRegion(*req, resp, *uid));
}

absl::Status SharedMemoryService::DoStepInRegion(const v1::StepInRegionRequest& req,
                                                 v1::StepInRegionResponse* resp,
                                                 std::optional<uid_t> caller) {
  const int n = req.entries_size();
  if (static_cast<uint64_t>(n) > options_.max_batch) {
    return absl::ResourceExhaustedError(
        absl::StrCat("batch of ", n, " entries exceeds ", options_.max_batch, " (--max-batch)"));
  }
  uint64_t total_tokens = 0;
  for (const v1::StepEntry& e : req.entries()) total_tokens += static_cast<uint64_t>(e.tokens_size());
  if (total_tokens > options_.max_tokens_per_request) {
    return absl::ResourceExhaustedError(absl::StrCat("request carries ", total_tokens,
                                                     " tokens, more than ",
                                                     options_.max_tokens_per_request,
                                                     " (--max-request-tokens)"));
  }
  const bool to_logits = req.target_case() == v1::StepInRegionRequest::kLogits;
  if (req.target_case() == v1::StepInRegionRequest::TARGET_NOT_SET) {
    return absl::InvalidArgumentError("no target: set masks or logits");
  }
  const std::string& region_name = to_logits ? req.logits().region() : req.masks().region();
  // The lease keeps the mapping alive until this call returns, whatever
  // UnregisterRegion does meanwhile.
  auto lease = registry_->Acquire(region_name);
  if (!lease.ok()) return lease.status();
  const shm::Region& region = **lease;
  if (caller.has_value() && region.owner_uid() != *caller) {
    return absl::PermissionDeniedError(absl::StrCat(
        "shared-memory region ", QuoteInput(region.name()), " belongs to another user"));
  }
  const bool cuda = region.kind() == shm::RegionKind::kCuda;

  // Pass 1: find the sessions; the mask width of the batch.
  Scratch& sc = ThreadScratch();
  RefsGuard guard{&sc.refs};
  sc.refs.resize(static_cast<size_t>(n));
  uint32_t words = 0;
  int first_found = -1;
  for (int i = 0; i < n; ++i) {
    sc.refs[i] = sessions_->Find(req.entries(i).session_id());
    if (!sc.refs[i]) continue;
    const uint32_t w = sc.refs[i]->num_words();
    if (!to_logits && first_found >= 0 && w != words) {
      return absl::InvalidArgumentError(absl::StrCat(
          "masks target: every session of a call must have the same mask width; entry ",
          first_found, " has ", words, " words per row, entry ", i, " has ", w));
    }
    if (first_found < 0) first_found = i;
    words = std::max(words, w);
  }
  const size_t row_words = words;

  // Request-level checks of the target, before any session is stepped.
  uint32_t* out_rows = nullptr;  // where pass 2 writes mask row 0
  LogitsBatch logits;
  std::string_view wait_event;
  if (!to_logits) {
    const v1::MasksTarget& t = req.masks();
    const uint64_t bytes = static_cast<uint64_t>(n) * row_words * 4;  // < 2^10 * 2^27 * 4
    if (absl::Status s = region.CheckRange(t.offset(), bytes); !s.ok()) return s;
    if (!Aligned(region.data(), t.offset(), 4)) {
      return absl::InvalidArgumentError(
          absl::StrCat("masks offset ", t.offset(), " does not give a 4-byte aligned address"));
    }
    if (cuda) {
      sc.words.resize(static_cast<size_t>(n) * row_words);
      out_rows = sc.words.data();
    } else {
      out_rows = reinterpret_cast<uint32_t*>(static_cast<char*>(region.data()) + t.offset());
    }
  } else {
    const v1::LogitsTarget& t = req.logits();
    auto dtype = FromProto(t.dtype());
    if (!dtype.ok()) return dtype.status();
    const uint64_t elem = LogitsDtypeSize(*dtype);
    if (t.rows() == 0) return absl::InvalidArgumentError("logits rows must be >= 1");
    if (t.vocab() == 0) return absl::InvalidArgumentError("logits vocab must be >= 1");
    const uint64_t stride = t.row_stride() == 0 ? t.vocab() : t.row_stride();
    if (stride < t.vocab()) {
      return absl::InvalidArgumentError(
          absl::StrCat("logits row_stride ", stride, " is smaller than vocab ", t.vocab()));
    }
    uint64_t elems = 0, bytes = 0;
    if (__builtin_mul_overflow(static_cast<uint64_t>(t.rows() - 1), stride, &elems) ||
        __builtin_add_overflow(elems, static_cast<uint64_t>(t.vocab()), &elems) ||
        __builtin_mul_overflow(elems, elem, &bytes) || stride > (uint64_t{1} << 40)) {
      return absl::InvalidArgumentError("logits rows x row_stride overflows");
    }
    if (absl::Status s = region.CheckRange(t.offset(), bytes); !s.ok()) return s;
    if (!Aligned(region.data(), t.offset(), elem)) {
      return absl::InvalidArgumentError(absl::StrCat("logits offset ", t.offset(),
                                                     " does not give an address aligned to ",
                                                     elem, " bytes"));
    }
    if (t.row_map_size() == 0) {
      if (t.rows() > static_cast<uint32_t>(n)) {
        return absl::InvalidArgumentError(absl::StrCat("no row map and ", t.rows(),
                                                       " logits rows but only ", n, " entries"));
      }
    } else if (t.row_map_size() != static_cast<int>(t.rows())) {
      return absl::InvalidArgumentError(absl::StrCat("row_map has ", t.row_map_size(),
                                                     " values but logits have ", t.rows(),
                                                     " rows"));
    } else {
      for (int r = 0; r < t.row_map_size(); ++r) {
        const int32_t m = t.row_map(r);
        if (m < -1 || m >= n) {
          return absl::InvalidArgumentError(absl::StrCat("row_map[", r, "] is ", m,
                                                         "; want -1 or an entry index below ", n));
        }
      }
    }
    if (!t.wait_event().empty()) {
      if (!cuda) {
        return absl::InvalidArgumentError("wait_event is only for CUDA regions");
      }
      if (t.wait_event().size() != 64) {
        return absl::InvalidArgumentError(absl::StrCat(
            "wait_event has ", t.wait_event().size(), " bytes; a CUDA IPC event handle has 64"));
      }
      wait_event = t.wait_event();
    }
    logits.data = static_cast<char*>(region.data()) + t.offset();
    logits.dtype = *dtype;
    logits.num_rows = t.rows();
    logits.vocab = t.vocab();
    logits.row_stride = static_cast<int64_t>(stride);
    sc.words.resize(static_cast<size_t>(n) * row_words);
    out_rows = sc.words.data();
  }

  // The client may have shrunk the object since registration: refuse before
  // any session is stepped. A shrink after this check is caught by the
  // region's fault guard (DataLoss below) instead of killing the server.
  if (absl::Status s = region.CheckBacked(); !s.ok()) return s;

  // Pass 2: step every entry; its row goes to out_rows + i * words.
  auto* results = resp->mutable_results();
  results->Clear();
  resp->set_words_per_row(words);
  sc.ok.assign(static_cast<size_t>(n), 0);
  uint64_t advanced = 0;
  for (int i = 0; i < n; ++i) {
    const v1::StepEntry& e = req.entries(i);
    v1::StepResult* out = results->Add();
    absl::Span<uint32_t> row(out_rows + static_cast<size_t>(i) * row_words, row_words);
    Session* s = sc.refs[i].get();
    const absl::Status status = RunStepEntry(
        s, e,
        s != nullptr && to_logits && s->vocab_size() > req.logits().vocab()
            ? absl::InvalidArgumentError(absl::StrCat("the session's vocabulary (", s->vocab_size(),
                                                      ") is wider than the logits (",
                                                      req.logits().vocab(), ")"))
            : absl::OkStatus(),
        row, out, metrics_);
    if (status.ok()) {
      sc.ok[i] = 1;
      advanced += static_cast<uint64_t>(e.tokens_size());
    }
  }
  if (metrics_ && advanced) metrics_->TokensAdvanced(advanced);

  // Pass 3: deliver. A fault during passes 2-3 (the object shrank under the
  // mapping) left the sessions stepped but the region's bytes lost.
  absl::Status delivered = Deliver(req, region, words, logits, wait_event);
  if (absl::Status f = region.CheckNotFaulted(); !f.ok()) {
    return absl::DataLossError(absl::StrCat(
        f.message(), "; the call's sessions were stepped (see Rollback) but their masks are lost"));
  }
  return delivered;
}

absl::Status SharedMemoryService::Deliver(const v1::StepInRegionRequest& req,
                                          const shm::Region& region, uint32_t words,
                                          const LogitsBatch& logits,
                                          std::string_view wait_event) {
  Scratch& sc = ThreadScratch();
  const int n = req.entries_size();
  const bool to_logits = req.target_case() == v1::StepInRegionRequest::kLogits;
  const bool cuda = region.kind() == shm::RegionKind::kCuda;
  if (!to_logits) {
    if (cuda && !sc.words.empty()) {
      return cuda_->CopyToDevice(region.device_id(),
                                 static_cast<char*>(region.data()) + req.masks().offset(),
                                 sc.words.data(), sc.words.size() * 4);
    }
    return absl::OkStatus();
  }
  const v1::LogitsTarget& t = req.logits();
  sc.row_map.resize(t.rows());
  bool any = false;
  for (uint32_t r = 0; r < t.rows(); ++r) {
    const int32_t m = t.row_map_size() == 0 ? static_cast<int32_t>(r) : t.row_map(static_cast<int>(r));
    sc.row_map[r] = (m >= 0 && sc.ok[m]) ? m : -1;
    any |= sc.row_map[r] >= 0;
  }
  if (!any) return absl::OkStatus();  // every row untouched (words may be 0)
  MaskBatch mask;
  mask.words = sc.words.data();
  mask.num_rows = n;
  mask.words_per_row = words;
  mask.mask_vocab = 0;  // words * 32: bits past each session's vocabulary are 0
  if (cuda) {
    return cuda_->Apply(region.device_id(), logits, mask, sc.row_map, wait_event);
  }
  return applier_->Apply(logits, mask, sc.row_map);
}

}  // namespace maskd
