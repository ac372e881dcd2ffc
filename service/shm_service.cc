#include "service/shm_service.h"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/support/message_allocator.h"
#include "service/call_interrupt.h"
#include "service/client_identity.h"
#include "service/client_kind_of.h"
#include "service/grpc_status.h"
#include "service/quote.h"
#include "service/log.h"
#include "service/peer_credentials.h"
#include "service/pooled_allocator.h"
#include "service/step_proto.h"

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

bool Aligned(const void* p, uint64_t alignment) {
  return reinterpret_cast<uintptr_t>(p) % alignment == 0;
}

// Per-thread scratch kept between calls (capacity only): the mask rows
// (logits target and CUDA masks target) and the effective row map.
struct Scratch {
  std::vector<uint32_t> words;
  std::vector<int32_t> row_map;
};

Scratch& ThreadScratch() {
  thread_local Scratch scratch;
  return scratch;
}

// The logits geometry and row map of a logits target, checked by the
// kernels' rule (ValidateApplyArgs) against `entries` mask rows: whatever
// width the rows get, the apply in pass 3 then sees valid arguments.
absl::Status CheckLogitsShape(const LogitsBatch& logits, int64_t entries,
                              const v1::LogitsTarget& t) {
  static constexpr uint32_t kAnyRow[1] = {0};
  MaskBatch rows;
  rows.words = kAnyRow;
  rows.num_rows = entries;
  rows.words_per_row = 1;
  return ValidateApplyArgs(logits, rows, t.row_map_size() == 0 ? -1 : t.row_map_size(),
                           t.row_map().data());
}

}  // namespace

// What StepInRegion's placement decided, for delivery. The lease keeps the
// mapping alive until the call returns, whatever UnregisterRegion does
// meanwhile.
struct SharedMemoryService::Target {
  shm::RegionLease region;
  bool to_logits = false;
  uint32_t words = 0;           // words per mask row
  void* device_masks = nullptr;  // CUDA masks target: where the rows go on the device
  LogitsBatch logits;           // logits target
  std::string_view wait_event;  // logits target on a CUDA region: empty or 64 bytes
};

SharedMemoryService::SharedMemoryService(const ShmServiceOptions& options, StepBatch* step,
                                         Metrics* metrics, WorkPool* steps)
    : options_(options),
      step_(step),
      metrics_(metrics),
      steps_(steps),
      region_shares_("shared-memory regions", "--max-shm-regions-per-client",
                     options.max_regions_per_client) {
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
  Reactor* r = ctx->DefaultReactor();
  Finish(r, method, s);
  return r;
}

void SharedMemoryService::Finish(Reactor* r, const char* method, const absl::Status& s) {
  if (!s.ok() && metrics_) metrics_->RpcError(method, static_cast<int>(s.code()));
  if (s.code() == absl::StatusCode::kInternal || s.code() == absl::StatusCode::kUnknown) {
    LogError(absl::StrCat(method, ": ", s.message()));
  }
  r->Finish(ToGrpcStatus(s));
}

absl::Status SharedMemoryService::CheckAllowed() const {
  if (options_.allow_registration) return absl::OkStatus();
  return absl::FailedPreconditionError(
      "shared-memory registration is disabled on this server (start maskd with --allow_shm)");
}

absl::Status SharedMemoryService::RegisterCharged(
    const grpc::ServerContextBase& ctx, absl::string_view name,
    const std::function<absl::Status()>& registration) {
  absl::MutexLock lock(&regions_mu_);
  absl::StatusOr<ClientShares::Charge> charge =
      region_shares_.Take(ClientKey(ctx, options_.client_identity));
  if (!charge.ok()) return charge.status();
  absl::Status s = registration();
  if (s.ok()) region_charges_[name] = *std::move(charge);
  return s;  // failed: the unit goes back with `charge`
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
  s = RegisterCharged(*ctx, req->name(), [&] {
    return registry_->RegisterSystem(req->name(), req->key(), req->offset(), req->byte_size(),
                                     *uid);
  });
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
  s = RegisterCharged(*ctx, req->name(), [&] {
    return registry_->RegisterCuda(req->name(), req->raw_handle(), req->device_id(),
                                   req->offset(), req->byte_size(), *uid);
  });
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
  absl::MutexLock lock(&regions_mu_);
  absl::Status s = registry_->Unregister(req->name(), *uid);
  // The units of every region gone (one name, or all of the uid's) go back.
  for (auto it = region_charges_.begin(); it != region_charges_.end();) {
    if (registry_->Acquire(it->first).ok()) {
      ++it;
    } else {
      region_charges_.erase(it++);
    }
  }
  return Done(ctx, "UnregisterRegion", s);
}

SharedMemoryService::Reactor* SharedMemoryService::StepInRegion(Ctx* ctx,
                                                                const v1::StepInRegionRequest* req,
                                                                v1::StepInRegionResponse* resp) {
  absl::StatusOr<uid_t> uid = CallerUid(*ctx);
  if (!uid.ok()) return Done(ctx, "StepInRegion", uid.status());
  if (steps_ == nullptr || !StepsGrammar(req->entries())) {
    const FlagInterrupt no_pool;  // never fires
    return Done(ctx, "StepInRegion", RunStepInRegion(*ctx, *req, resp, *uid, no_pool));
  }
  Reactor* r = ctx->DefaultReactor();
  auto run = [this, ctx, req, resp, r, caller = *uid](const Interrupt& turn) {
    Finish(r, "StepInRegion", RunStepInRegion(*ctx, *req, resp, caller, turn));
  };
  if (absl::Status queued = steps_->Submit(ClientKey(*ctx, options_.client_identity), std::move(run)); !queued.ok()) {
    Finish(r, "StepInRegion", queued);
  }
  return r;
}

absl::Status SharedMemoryService::RunStepInRegion(const Ctx& ctx,
                                                  const v1::StepInRegionRequest& req,
                                                  v1::StepInRegionResponse* resp, uid_t caller,
                                                  const Interrupt& turn) {
  const int64_t t0 = absl::GetCurrentTimeNanos();
  const CallInterrupt call(ctx);
  const InterruptPair interrupt(call, turn);  // the caller gone, or the turn refused
  absl::Status s = call.Check();              // it may have waited in the step pool
  if (s.ok()) s = DoStepInRegion(req, resp, caller, &interrupt);
  if (metrics_) {
    const size_t n = static_cast<size_t>(req.entries_size());
    metrics_->ClientStep(ClientKindOf(ctx), n);
    if (s.ok()) metrics_->ObserveStep(static_cast<double>(absl::GetCurrentTimeNanos() - t0) * 1e-9, n);
  }
  return s;
}

absl::Status SharedMemoryService::DoStepInRegion(const v1::StepInRegionRequest& req,
                                                 v1::StepInRegionResponse* resp,
                                                 std::optional<uid_t> caller,
                                                 const Interrupt* interrupt) {
  const int n = req.entries_size();
  absl::StatusOr<StepBatch::Buffers> io = step_->ThreadBuffers(static_cast<size_t>(n));
  if (!io.ok()) return io.status();
  for (int i = 0; i < n; ++i) io->entries[i] = StepEntryFromProto(req.entries(i));
  Target target;
  auto place = [&](const StepBatchShape& shape) { return PlaceRows(req, caller, shape, &target); };
  if (absl::Status s = step_->Run(io->entries, place, io->results, interrupt); !s.ok()) return s;
  auto* results = resp->mutable_results();
  results->Clear();
  for (int i = 0; i < n; ++i) StepResultToProto(io->results[i], results->Add());
  resp->set_words_per_row(target.words);

  // Pass 3: deliver. A fault during passes 2-3 (the object shrank under the
  // mapping) left the sessions stepped but the region's bytes lost.
  absl::Status delivered = Deliver(req, target, io->results);
  if (absl::Status f = target.region->CheckNotFaulted(); !f.ok()) {
    return absl::DataLossError(absl::StrCat(
        f.message(), "; the call's sessions were stepped (see Rollback) but their masks are lost"));
  }
  return delivered;
}

absl::StatusOr<StepRows> SharedMemoryService::PlaceRows(const v1::StepInRegionRequest& req,
                                                        std::optional<uid_t> caller,
                                                        const StepBatchShape& shape,
                                                        Target* target) const {
  if (req.target_case() == v1::StepInRegionRequest::TARGET_NOT_SET) {
    return absl::InvalidArgumentError("no target: set masks or logits");
  }
  const bool to_logits = req.target_case() == v1::StepInRegionRequest::kLogits;
  target->to_logits = to_logits;
  auto lease = registry_->Acquire(to_logits ? req.logits().region() : req.masks().region());
  if (!lease.ok()) return lease.status();
  target->region = *std::move(lease);
  const shm::Region& region = *target->region;
  if (caller.has_value() && region.owner_uid() != *caller) {
    return absl::PermissionDeniedError(absl::StrCat(
        "shared-memory region ", QuoteInput(region.name()), " belongs to another user"));
  }
  target->words = shape.widest;
  StepRows rows;
  rows.words_per_row = shape.widest;
  absl::Status placed = to_logits ? PlaceLogits(req.logits(), shape, target, &rows)
                                  : PlaceMasks(req.masks(), shape, target, &rows);
  if (!placed.ok()) return placed;

  // The client may have shrunk the object since registration: refuse before
  // any session is stepped. A shrink after this check is caught by the
  // region's fault guard (DataLoss, after delivery) instead of killing the
  // server.
  if (absl::Status s = region.CheckBacked(); !s.ok()) return s;
  return rows;
}

absl::Status SharedMemoryService::PlaceMasks(const v1::MasksTarget& t,
                                             const StepBatchShape& shape, Target* target,
                                             StepRows* rows) {
  const shm::Region& region = *target->region;
  const size_t n = shape.words.size();
  const size_t row_words = shape.widest;
  // Every session found must have the same width: the rows are packed.
  int first = -1;
  for (size_t i = 0; i < n; ++i) {
    const uint32_t w = shape.words[i];
    if (w == 0) continue;
    if (first < 0) {
      first = static_cast<int>(i);
    } else if (w != shape.words[first]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "masks target: every session of a call must have the same mask width; entry ", first,
          " has ", shape.words[first], " words per row, entry ", i, " has ", w));
    }
  }
  const uint64_t bytes = static_cast<uint64_t>(n) * row_words * 4;  // < 2^10 * 2^27 * 4
  absl::StatusOr<void*> at = region.At(t.offset(), bytes);
  if (!at.ok()) return at.status();
  if (!Aligned(*at, 4)) {
    return absl::InvalidArgumentError(
        absl::StrCat("masks offset ", t.offset(), " does not give a 4-byte aligned address"));
  }
  if (region.kind() == shm::RegionKind::kCuda) {
    Scratch& sc = ThreadScratch();
    sc.words.resize(n * row_words);
    target->device_masks = *at;
    rows->base = sc.words.data();
  } else {
    rows->base = static_cast<uint32_t*>(*at);
  }
  return absl::OkStatus();
}

absl::Status SharedMemoryService::PlaceLogits(const v1::LogitsTarget& t,
                                              const StepBatchShape& shape, Target* target,
                                              StepRows* rows) {
  const shm::Region& region = *target->region;
  const size_t n = shape.words.size();
  auto dtype = FromProto(t.dtype());
  if (!dtype.ok()) return dtype.status();
  if (t.rows() == 0) return absl::InvalidArgumentError("logits rows must be >= 1");
  LogitsBatch& logits = target->logits;
  logits.data = region.data();  // placed below, once the range is known to fit
  logits.dtype = *dtype;
  logits.num_rows = t.rows();
  logits.vocab = t.vocab();
  logits.row_stride = static_cast<int64_t>(
      std::min<uint64_t>(t.row_stride(), std::numeric_limits<int64_t>::max()));
  if (absl::Status s = CheckLogitsShape(logits, static_cast<int64_t>(n), t); !s.ok()) return s;
  // Valid arguments bound rows x stride x 4 by INT64_MAX: no overflow.
  const uint64_t elem = LogitsDtypeSize(*dtype);
  const uint64_t stride = logits.row_stride == 0 ? t.vocab() : logits.row_stride;
  const uint64_t bytes = ((uint64_t{t.rows()} - 1) * stride + t.vocab()) * elem;
  absl::StatusOr<void*> at = region.At(t.offset(), bytes);
  if (!at.ok()) return at.status();
  if (!Aligned(*at, elem)) {
    return absl::InvalidArgumentError(absl::StrCat("logits offset ", t.offset(),
                                                   " does not give an address aligned to ",
                                                   elem, " bytes"));
  }
  logits.data = *at;
  if (!t.wait_event().empty()) {
    if (region.kind() != shm::RegionKind::kCuda) {
      return absl::InvalidArgumentError("wait_event is only for CUDA regions");
    }
    if (t.wait_event().size() != 64) {
      return absl::InvalidArgumentError(absl::StrCat(
          "wait_event has ", t.wait_event().size(), " bytes; a CUDA IPC event handle has 64"));
    }
    target->wait_event = t.wait_event();
  }
  Scratch& sc = ThreadScratch();
  sc.words.resize(n * shape.widest);
  rows->base = sc.words.data();
  rows->max_vocab = t.vocab();
  return absl::OkStatus();
}

absl::Status SharedMemoryService::Deliver(const v1::StepInRegionRequest& req,
                                          const Target& target,
                                          absl::Span<const StepEntryResult> results) {
  Scratch& sc = ThreadScratch();
  const shm::Region& region = *target.region;
  const bool cuda = region.kind() == shm::RegionKind::kCuda;
  if (!target.to_logits) {
    if (cuda && !sc.words.empty()) {
      return cuda_->CopyToDevice(region.device_id(), target.device_masks, sc.words.data(),
                                 sc.words.size() * 4);
    }
    return absl::OkStatus();
  }
  const v1::LogitsTarget& t = req.logits();
  sc.row_map.resize(t.rows());
  bool any = false;
  for (uint32_t r = 0; r < t.rows(); ++r) {
    const int32_t m = t.row_map_size() == 0 ? static_cast<int32_t>(r) : t.row_map(static_cast<int>(r));
    sc.row_map[r] = (m >= 0 && results[m].status.ok()) ? m : -1;
    any |= sc.row_map[r] >= 0;
  }
  if (!any) return absl::OkStatus();  // every row untouched (words may be 0)
  MaskBatch mask;
  mask.words = sc.words.data();
  mask.num_rows = static_cast<int64_t>(results.size());
  mask.words_per_row = target.words;
  mask.mask_vocab = 0;  // words * 32: bits past each session's vocabulary are 0
  if (cuda) {
    return cuda_->Apply(region.device_id(), target.logits, mask, sc.row_map, target.wait_event);
  }
  return applier_->Apply(target.logits, mask, sc.row_map);
}

}  // namespace maskd
