// SharedMemoryService: the gRPC face of maskd.v1.SharedMemory
// (proto/maskd/v1/shm.proto). Thin: it translates requests to the region
// registry (shm/region_registry.h), the session table and the kernels
// (kernels/apply_mask.h, kernels/apply_mask_cuda.h), and absl::Status to
// grpc::Status at the edge.
//
// Who may do what: every call acts as a uid (CallerUid): the peer's, from
// SO_PEERCRED on maskd's unix-socket listener; a TCP connection has none and
// is refused (FAILED_PRECONDITION) unless --shm_allow_tcp, which makes it act
// as maskd's own uid. A system region's object must be owned by that uid; a
// region is used, listed and unregistered only by the uid that registered it
// (PERMISSION_DENIED otherwise; ListRegions shows only the caller's).
// A region also takes a unit of its registering client's share
// (`max_regions_per_client`; the client is its ClientKey, which by default is
// the connection, not the uid), given back when the region is unregistered,
// by whichever connection of the owning uid.
//
// StepInRegion is a StepBatch (service/step_batch.h) with a region target:
// (1) the batch's limits, then, as its placement, the target's request-level
// checks (target, region and owner, session widths, range, alignment, and
// for logits the geometry and row map by the kernels' rule,
// ValidateApplyArgs): any failure fails the call and steps no session;
// (2) each entry is stepped (all or nothing per entry, as Step) with its mask
// written into the region (masks target) or a per-thread scratch buffer
// (logits target, CUDA masks target); (3) the masks are delivered: copied to
// the device (CUDA masks target) or applied in place (logits target), where
// logits rows whose entry failed, or mapped to -1, are left untouched.
// The call holds a RegionLease throughout, so an UnregisterRegion in between
// removes the name at once but unmaps only after the call replies.
//
// Threads: a StepInRegion whose batch steps a grammar session runs on the
// step WorkPool (as Maskd.Step does: service/maskd_service.h), others on
// gRPC's callback thread. Either blocks for the apply (CPU:
// tens to hundreds of microseconds; CUDA: until the stream is synchronised).
// CPU applies share one CpuApplier (its pool is created once; calls
// serialise); CUDA work is serialised by ShmCuda (kernels/shm_cuda.h). No
// allocation per row (nor per call in steady state): StepBatch's and this
// service's per-thread buffers keep their capacity, and request/reply
// messages are recycled by a pooled message allocator (as MaskdService does
// for Step).
#ifndef MASKD_SERVICE_SHM_SERVICE_H_
#define MASKD_SERVICE_SHM_SERVICE_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "automaton/interrupt.h"
#include "grpcpp/support/message_allocator.h"
#include "kernels/apply_mask.h"
#include "kernels/shm_cuda.h"
#include "maskd/v1/shm.grpc.pb.h"
#include "service/checked_request.h"
#include "service/client_identity.h"
#include "service/client_shares.h"
#include "service/metrics.h"
#include "service/step_batch.h"
#include "service/work_pool.h"
#include "shm/region_registry.h"

namespace maskd {

struct ShmServiceOptions {
  bool allow_registration = false;           // --allow_shm
  // --shm_allow_tcp: a connection without peer credentials (TCP) acts as
  // maskd's own uid; false: SharedMemory calls need the unix-socket listener.
  bool allow_tcp = false;
  std::string key_prefix = "/maskd-";        // --shm_prefix
  size_t max_regions = 1024;                 // regions registered at once
  size_t max_regions_per_client = 0;         // --max-shm-regions-per-client; 0: no cap
  ClientIdentity client_identity = ClientIdentity::kConnection;  // --client-identity
  int apply_threads = 0;                     // CpuApplier threads; 0 = its default
};

class SharedMemoryService final : public v1::SharedMemory::CallbackService {
 public:
  // `step` (which runs the batches, with their limits) and `metrics`
  // (nullable) outlive the service. `steps` (nullable: on the callback
  // thread) runs the calls whose batch steps a grammar session, off gRPC's
  // threads and round-robin across clients (ClientKey); it must outlive the
  // server's Shutdown.
  SharedMemoryService(const ShmServiceOptions& options, StepBatch* step, Metrics* metrics,
                      WorkPool* steps = nullptr);
  ~SharedMemoryService() override;

  using Ctx = grpc::CallbackServerContext;
  using Reactor = grpc::ServerUnaryReactor;
  Reactor* RegisterSystemRegion(Ctx* ctx, const v1::RegisterSystemRegionRequest* req,
                                v1::RegisterSystemRegionResponse*) override;
  Reactor* RegisterCudaRegion(Ctx* ctx, const v1::RegisterCudaRegionRequest* req,
                              v1::RegisterCudaRegionResponse*) override;
  Reactor* ListRegions(Ctx* ctx, const v1::ListRegionsRequest* req,
                       v1::ListRegionsResponse* resp) override;
  Reactor* UnregisterRegion(Ctx* ctx, const v1::UnregisterRegionRequest* req,
                            v1::UnregisterRegionResponse*) override;
  Reactor* StepInRegion(Ctx* ctx, const v1::StepInRegionRequest* req,
                        v1::StepInRegionResponse* resp) override;

  // StepInRegion without gRPC, as uid `caller` (nullopt: a trusted
  // in-process caller, any region). A non-OK status fails the whole call (and
  // then no session was stepped, except DataLoss: see shm.proto); entry errors
  // are in `resp`. `interrupt` (the call's; may be null) stops a grammar
  // entry's parsing once the client is gone (StepBatch::Run).
  absl::Status DoStepInRegion(const v1::StepInRegionRequest& req, v1::StepInRegionResponse* resp,
                              std::optional<uid_t> caller = std::nullopt,
                              const Interrupt* interrupt = nullptr);

  // The uid a call acts as: its peer's (SO_PEERCRED, service/peer_credentials.h)
  // on maskd's unix-socket listener; on a connection without credentials
  // (TCP), maskd's own effective uid with allow_tcp, else FailedPrecondition.
  absl::StatusOr<uid_t> CallerUid(const grpc::ServerContextBase& ctx) const;

  shm::RegionRegistry& registry() { return *registry_; }

 private:
  // Replaces the generated handler of method `index` (proto order, checked
  // at start-up) by one over Checked<Req> (checked_request.h), so a request
  // that does not parse gets INVALID_ARGUMENT, not gRPC's bare UNIMPLEMENTED.
  template <typename Req, typename Resp>
  void CheckRequests(int index, const char* name,
                     Reactor* (SharedMemoryService::*method)(Ctx*, const Req*, Resp*),
                     grpc::MessageAllocator<Checked<Req>, Resp>* allocator = nullptr);
  Reactor* Done(Ctx* ctx, const char* method, const absl::Status& s);
  void Finish(Reactor* r, const char* method, const absl::Status& s);
  // StepInRegion's work once its caller is known (metrics included); polls
  // the call's interrupt and `turn` (its step pool turn, or one that never
  // fires).
  absl::Status RunStepInRegion(const Ctx& ctx, const v1::StepInRegionRequest& req,
                               v1::StepInRegionResponse* resp, uid_t caller, const Interrupt& turn);
  absl::Status CheckAllowed() const;
  // Runs `registration` (a RegisterSystem or RegisterCuda of region `name`)
  // charged to the caller's share; the unit stays with `name` until it is
  // unregistered.
  absl::Status RegisterCharged(const grpc::ServerContextBase& ctx, absl::string_view name,
                               const std::function<absl::Status()>& registration);
  // What StepInRegion's placement decided (defined in shm_service.cc).
  struct Target;
  // StepInRegion's placement (StepBatch::PlaceRows): the target's checks;
  // where the rows go. Fills `target`.
  absl::StatusOr<StepRows> PlaceRows(const v1::StepInRegionRequest& req,
                                     std::optional<uid_t> caller, const StepBatchShape& shape,
                                     Target* target) const;
  // PlaceRows' two targets; each fills `target` and `rows->base` (and, for
  // logits, `rows->max_vocab`). Masks: packed rows, every session of one
  // width, in the region (a CUDA region's staged in the thread's scratch).
  // Logits: the rows in the thread's scratch, the logits' range checked.
  static absl::Status PlaceMasks(const v1::MasksTarget& t, const StepBatchShape& shape,
                                 Target* target, StepRows* rows);
  static absl::Status PlaceLogits(const v1::LogitsTarget& t, const StepBatchShape& shape,
                                  Target* target, StepRows* rows);
  // StepInRegion pass 3: copies CUDA mask rows to the device, or applies the
  // mask rows of entries that succeeded to the logits.
  absl::Status Deliver(const v1::StepInRegionRequest& req, const Target& target,
                       absl::Span<const StepEntryResult> results);

  const ShmServiceOptions options_;
  StepBatch* const step_;
  Metrics* const metrics_;
  WorkPool* const steps_;
  std::unique_ptr<shm::RegionRegistry> registry_;
  ClientShares region_shares_;
  // Serialises registration and unregistration (rare calls) so that the
  // charges follow the registry: one per registered region, by name.
  absl::Mutex regions_mu_;
  absl::flat_hash_map<std::string, ClientShares::Charge> region_charges_
      ABSL_GUARDED_BY(regions_mu_);
  std::unique_ptr<CpuApplier> applier_;
  std::unique_ptr<ShmCuda> cuda_;
  std::unique_ptr<grpc::MessageAllocator<Checked<v1::StepInRegionRequest>, v1::StepInRegionResponse>>
      allocator_;
};

}  // namespace maskd

#endif  // MASKD_SERVICE_SHM_SERVICE_H_
