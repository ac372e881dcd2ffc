// Metrics: maskd's Prometheus metrics. Their names are API (docs/service.md).
//
// Base units (seconds, bytes), `_total` on counters, no session ids or
// constraints as label values. Everything on the Step hot path (step latency,
// batch size, tokens advanced) is a relaxed atomic: no lock is taken there.
// Exposition over HTTP is the server binary's business (prometheus::Exposer on
// registry() and collectable()); Serialize() renders the same text for tests.
#ifndef MASKD_SERVICE_METRICS_H_
#define MASKD_SERVICE_METRICS_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "service/client_label.h"
#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace maskd {

// A histogram whose Observe() is lock-free (prometheus::Histogram takes a
// mutex). Bucket bounds are fixed at construction, in increasing order.
class AtomicHistogram {
 public:
  explicit AtomicHistogram(std::vector<double> bounds);
  void Observe(double value);
  prometheus::ClientMetric Collect() const;

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;  // bounds_.size() + 1 (+Inf)
  std::atomic<double> sum_{0.0};
};

class Metrics {
 public:
  // `version` becomes maskd_build_info's label.
  explicit Metrics(absl::string_view version);
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // For prometheus::Exposer::RegisterCollectable.
  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }
  std::shared_ptr<prometheus::Collectable> collectable() const;

  // Compilation finished after `seconds`; `result` is a bounded word
  // ("ok", "invalid_argument", "deadline_exceeded", ...).
  // `kind`: the constraint's (ConstraintKindName: regex, json_schema, grammar).
  void ObserveCompile(double seconds, absl::string_view kind, absl::string_view result);
  // A compilation started, or stopped (done, failed, cancelled, or moved off
  // the fast lane), on a compile thread (maskd_compiles_running).
  void CompileStarted() { compiles_running_->Increment(); }
  void CompileStopped() { compiles_running_->Decrement(); }
  // A compilation cancelled because no caller waited for it any more
  // (maskd_compiles_abandoned_total).
  void CompileAbandoned() { compiles_abandoned_->Increment(); }
  void CacheHit() { cache_hits_->Increment(); }
  void CacheMiss() { cache_misses_->Increment(); }
  void CacheEvicted(uint64_t n) { cache_evictions_->Increment(static_cast<double>(n)); }
  void SetCacheBytes(uint64_t bytes) { cache_bytes_->Set(static_cast<double>(bytes)); }
  // Bytes of masks kept under --max-mask-bytes, and masks not kept so far.
  // The totals only grow; callers are serialized (the cache's lock).
  void SetMaskBudget(uint64_t used_bytes, uint64_t unkept) {
    mask_bytes_->Set(static_cast<double>(used_bytes));
    AdvanceTo(masks_unkept_, unkept);
  }
  // The compiler's terminal DFA cache (grammar/terminal_dfas.h): bytes held,
  // and DFAs built and taken from it since start (a tool sent again is taken).
  // Serialized as SetMaskBudget.
  void SetTerminalDfas(uint64_t bytes, uint64_t built, uint64_t shared) {
    terminal_dfa_bytes_->Set(static_cast<double>(bytes));
    AdvanceTo(terminal_dfas_built_, built);
    AdvanceTo(terminal_dfas_shared_, shared);
  }
  // The --max-sessions cap (maskd_sessions_max), set once at start.
  void SetSessionsMax(uint64_t n) { sessions_max_->Set(static_cast<double>(n)); }
  void SetSessionsActive(uint64_t n) { sessions_active_->Set(static_cast<double>(n)); }
  void SessionsExpired(uint64_t n) { sessions_expired_->Increment(static_cast<double>(n)); }
  // Hot path: lock-free.
  void ObserveStep(double seconds, size_t batch_size);
  void TokensAdvanced(uint64_t n) { tokens_advanced_->Increment(static_cast<double>(n)); }
  // Hot path, lock-free: a Step call (unary, one streamed message or
  // StepInRegion) of `entries` entries from a client of `kind`.
  void ClientStep(ClientKind kind, size_t entries);
  // A stateless Mask call that took `seconds` (maskd_mask_seconds; its _count
  // counts Mask calls), from a client of `kind`.
  void ObserveMask(double seconds, ClientKind kind);
  // An RPC (`method`, e.g. "Step") failed with gRPC status code `code` (1..16).
  void RpcError(absl::string_view method, int code);
  // A Step batch entry failed with `code`.
  void StepEntryError(int code);

  // The transport's own counts since start (listener.h, relay.h), polled:
  // open connections, connections closed at accept for --max-connections,
  // relayed connections whose upstream failed, connections closed for too
  // many resets. Totals, not deltas; counters advance by the difference.
  struct TransportCounts {
    uint64_t open = 0;
    uint64_t refused = 0;
    uint64_t upstream_failures = 0;
    uint64_t closed_for_resets = 0;
  };
  void SetTransport(const TransportCounts& now);

  // The tasks of WorkPool `pool` ("mask", "step") queued, running (long
  // ones included) and running long now, polled
  // (maskd_work_pool_tasks{pool,state}).
  void SetWorkPool(absl::string_view pool, size_t queued, size_t running, size_t long_tasks);

  // The Prometheus text exposition of every metric (what /metrics serves).
  std::string Serialize() const;

 private:
  class Hot;
  // Raises counter `c` to `total`, a running total kept elsewhere.
  static void AdvanceTo(prometheus::Counter* c, uint64_t total) {
    const double delta = static_cast<double>(total) - c->Value();
    if (delta > 0) c->Increment(delta);
  }
  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<Hot> hot_;
  prometheus::Family<prometheus::Histogram>* compile_seconds_;
  prometheus::Gauge* compiles_running_;
  prometheus::Counter* compiles_abandoned_;
  prometheus::Counter* cache_hits_;
  prometheus::Counter* cache_misses_;
  prometheus::Counter* cache_evictions_;
  prometheus::Gauge* cache_bytes_;
  prometheus::Gauge* connections_open_;
  prometheus::Counter* connections_refused_;
  prometheus::Counter* relay_upstream_failures_;
  prometheus::Counter* connections_reset_closed_;
  absl::Mutex transport_mu_;
  TransportCounts transport_last_ ABSL_GUARDED_BY(transport_mu_);
  prometheus::Gauge* mask_bytes_;
  prometheus::Counter* masks_unkept_;
  prometheus::Gauge* terminal_dfa_bytes_;
  prometheus::Counter* terminal_dfas_built_;
  prometheus::Counter* terminal_dfas_shared_;
  prometheus::Gauge* sessions_active_;
  prometheus::Gauge* sessions_max_;
  prometheus::Counter* sessions_expired_;
  prometheus::Counter* tokens_advanced_;
  prometheus::Family<prometheus::Counter>* rpc_errors_;
  prometheus::Family<prometheus::Counter>* entry_errors_;
  prometheus::Family<prometheus::Gauge>* work_pool_tasks_;
};

// The canonical upper-case name of a gRPC / absl status code ("NOT_FOUND").
absl::string_view StatusCodeName(int code);

}  // namespace maskd

#endif  // MASKD_SERVICE_METRICS_H_
