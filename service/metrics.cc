#include "service/metrics.h"

#include <array>
#include <limits>
#include <sstream>

#include "prometheus/metric_family.h"
#include "prometheus/text_serializer.h"

namespace maskd {

AtomicHistogram::AtomicHistogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(new std::atomic<uint64_t>[bounds_.size() + 1]) {
  for (size_t i = 0; i <= bounds_.size(); ++i) counts_[i].store(0, std::memory_order_relaxed);
}

void AtomicHistogram::Observe(double value) {
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  double old = sum_.load(std::memory_order_relaxed);
  while (!sum_.compare_exchange_weak(old, old + value, std::memory_order_relaxed)) {
  }
}

prometheus::ClientMetric AtomicHistogram::Collect() const {
  prometheus::ClientMetric m;
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i].load(std::memory_order_relaxed);
    prometheus::ClientMetric::Bucket b;
    b.cumulative_count = cumulative;
    b.upper_bound = i < bounds_.size() ? bounds_[i] : std::numeric_limits<double>::infinity();
    m.histogram.bucket.push_back(b);
  }
  m.histogram.sample_count = cumulative;
  m.histogram.sample_sum = sum_.load(std::memory_order_relaxed);
  return m;
}

// The lock-free histograms, exposed as their own Collectable.
class Metrics::Hot : public prometheus::Collectable {
 public:
  Hot()
      : step_seconds({5e-6, 1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2, 2.5e-2,
                      5e-2, 0.1, 0.25, 1}),
        step_batch_size({1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096}),
        mask_seconds({5e-6, 1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2, 2.5e-2,
                      5e-2, 0.1, 0.25, 1}) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    std::vector<prometheus::MetricFamily> out(6);
    out[0].name = "maskd_step_seconds";
    out[0].help = "Server time per Step call (unary or one streamed message), in seconds";
    out[0].type = prometheus::MetricType::Histogram;
    out[0].metric.push_back(step_seconds.Collect());
    out[1].name = "maskd_step_batch_size";
    out[1].help = "Entries per Step call";
    out[1].type = prometheus::MetricType::Histogram;
    out[1].metric.push_back(step_batch_size.Collect());
    out[2].name = "maskd_mask_seconds";
    out[2].help = "Server time per stateless Mask call, in seconds (_count: Mask calls)";
    out[2].type = prometheus::MetricType::Histogram;
    out[2].metric.push_back(mask_seconds.Collect());
    PerClient(&out[3], "maskd_client_step_calls_total",
              "Step calls (unary, streamed messages, StepInRegion) by the client's engine",
              step_calls);
    PerClient(&out[4], "maskd_client_step_entries_total", "Step entries by the client's engine",
              step_entries);
    PerClient(&out[5], "maskd_client_mask_calls_total", "Mask calls by the client's engine",
              mask_calls);
    return out;
  }

  using PerClientCounts = std::array<std::atomic<uint64_t>, kNumClientKinds>;

  // A counter family with one sample per client kind seen so far.
  static void PerClient(prometheus::MetricFamily* f, const char* name, const char* help,
                        const PerClientCounts& counts) {
    f->name = name;
    f->help = help;
    f->type = prometheus::MetricType::Counter;
    for (int k = 0; k < kNumClientKinds; ++k) {
      const uint64_t v = counts[k].load(std::memory_order_relaxed);
      if (v == 0) continue;
      prometheus::ClientMetric m;
      m.label.push_back({"client", std::string(ClientKindName(static_cast<ClientKind>(k)))});
      m.counter.value = static_cast<double>(v);
      f->metric.push_back(std::move(m));
    }
  }

  AtomicHistogram step_seconds;
  AtomicHistogram step_batch_size;
  AtomicHistogram mask_seconds;
  PerClientCounts step_calls{};
  PerClientCounts step_entries{};
  PerClientCounts mask_calls{};
};

Metrics::Metrics(absl::string_view version)
    : registry_(std::make_shared<prometheus::Registry>()), hot_(std::make_shared<Hot>()) {
  prometheus::BuildGauge()
      .Name("maskd_build_info")
      .Help("Always 1; labels describe the build")
      .Register(*registry_)
      .Add({{"version", std::string(version)}})
      .Set(1);
  compile_seconds_ = &prometheus::BuildHistogram()
                          .Name("maskd_compile_seconds")
                          .Help("Index compilation time in seconds, by constraint kind and result")
                          .Register(*registry_);
  auto counter = [&](const char* name, const char* help) {
    return &prometheus::BuildCounter().Name(name).Help(help).Register(*registry_).Add({});
  };
  auto gauge = [&](const char* name, const char* help) {
    return &prometheus::BuildGauge().Name(name).Help(help).Register(*registry_).Add({});
  };
  compiles_running_ = gauge("maskd_compiles_running",
                            "Compilations running on a compile thread (either lane) now");
  compiles_abandoned_ = counter(
      "maskd_compiles_abandoned_total",
      "Compilations cancelled because every caller waiting for them gave up and no "
      "wait=false request asked for them");
  cache_hits_ = counter("maskd_index_cache_hits_total",
                        "Compile requests answered by an existing cache entry");
  cache_misses_ = counter("maskd_index_cache_misses_total", "Compile requests that started a compilation");
  cache_evictions_ = counter("maskd_index_cache_evictions_total", "Indexes evicted to fit --cache-bytes");
  cache_bytes_ = gauge("maskd_index_cache_bytes", "Bytes held by cached indexes");
  connections_open_ = gauge("maskd_connections_open",
                            "Connections open on maskd's own listeners (unix, TCP, TLS)");
  connections_refused_ = counter("maskd_connections_refused_total",
                                 "Connections closed at accept: --max-connections reached");
  relay_upstream_failures_ = counter(
      "maskd_relay_upstream_failures_total",
      "TLS connections closed because the private gRPC socket could not be reached");
  connections_reset_closed_ = counter(
      "maskd_connections_reset_closed_total",
      "Connections closed for sending RST_STREAM faster than --max-resets-per-second");
  work_pool_tasks_ = &prometheus::BuildGauge()
                         .Name("maskd_work_pool_tasks")
                         .Help("Tasks of a worker pool (mask: Mask calls; step: grammar step "
                               "batches) queued or running, polled every second")
                         .Register(*registry_);
  mask_bytes_ = gauge("maskd_index_mask_bytes",
                      "Bytes of token masks kept by all indexes (bounded by --max-mask-bytes)");
  masks_unkept_ = counter("maskd_index_masks_unkept_total",
                        "Masks computed but not kept for lack of --max-mask-bytes, since start");
  terminal_dfa_bytes_ = gauge("maskd_terminal_dfa_cache_bytes",
                              "Bytes of grammar terminal DFAs kept for later compilations "
                              "(bounded by --terminal-dfa-cache-bytes)");
  terminal_dfas_built_ = counter("maskd_terminal_dfas_built_total",
                               "Grammar terminal DFAs built by compilations, since start");
  terminal_dfas_shared_ = counter("maskd_terminal_dfas_shared_total",
                                "Grammar terminal DFAs taken from the cache instead of built "
                                "(equal terminals, tools sent again), since start");
  sessions_active_ = gauge("maskd_sessions_active", "Live sessions");
  sessions_max_ = gauge("maskd_sessions_max", "The --max-sessions cap");
  sessions_expired_ = counter("maskd_sessions_expired_total", "Sessions closed by --session-ttl");
  tokens_advanced_ = counter("maskd_tokens_advanced_total", "Tokens accepted by Step calls");
  rpc_errors_ = &prometheus::BuildCounter()
                     .Name("maskd_rpc_errors_total")
                     .Help("RPCs that failed, by method and gRPC status code")
                     .Register(*registry_);
  entry_errors_ = &prometheus::BuildCounter()
                       .Name("maskd_step_entry_errors_total")
                       .Help("Step batch entries that failed, by gRPC status code")
                       .Register(*registry_);
}

std::shared_ptr<prometheus::Collectable> Metrics::collectable() const { return hot_; }

void Metrics::ObserveCompile(double seconds, absl::string_view kind, absl::string_view result) {
  static const auto* kBuckets = new prometheus::Histogram::BucketBoundaries{
      1e-4, 1e-3, 5e-3, 1e-2, 5e-2, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
  compile_seconds_->Add({{"kind", std::string(kind)}, {"result", std::string(result)}}, *kBuckets)
      .Observe(seconds);
}

void Metrics::ObserveStep(double seconds, size_t batch_size) {
  hot_->step_seconds.Observe(seconds);
  hot_->step_batch_size.Observe(static_cast<double>(batch_size));
}

void Metrics::ClientStep(ClientKind kind, size_t entries) {
  const size_t k = static_cast<size_t>(kind);
  hot_->step_calls[k].fetch_add(1, std::memory_order_relaxed);
  hot_->step_entries[k].fetch_add(entries, std::memory_order_relaxed);
}

void Metrics::ObserveMask(double seconds, ClientKind kind) {
  hot_->mask_seconds.Observe(seconds);
  hot_->mask_calls[static_cast<size_t>(kind)].fetch_add(1, std::memory_order_relaxed);
}

void Metrics::RpcError(absl::string_view method, int code) {
  rpc_errors_->Add({{"method", std::string(method)}, {"code", std::string(StatusCodeName(code))}})
      .Increment();
}

void Metrics::StepEntryError(int code) {
  entry_errors_->Add({{"code", std::string(StatusCodeName(code))}}).Increment();
}

void Metrics::SetWorkPool(absl::string_view pool, size_t queued, size_t running,
                          size_t long_tasks) {
  const std::string name(pool);
  work_pool_tasks_->Add({{"pool", name}, {"state", "queued"}}).Set(static_cast<double>(queued));
  work_pool_tasks_->Add({{"pool", name}, {"state", "running"}}).Set(static_cast<double>(running));
  work_pool_tasks_->Add({{"pool", name}, {"state", "long"}}).Set(static_cast<double>(long_tasks));
}

void Metrics::SetTransport(const TransportCounts& now) {
  absl::MutexLock lock(&transport_mu_);
  auto advance = [](prometheus::Counter* c, uint64_t total, uint64_t last) {
    if (total > last) c->Increment(static_cast<double>(total - last));
  };
  connections_open_->Set(static_cast<double>(now.open));
  advance(connections_refused_, now.refused, transport_last_.refused);
  advance(relay_upstream_failures_, now.upstream_failures, transport_last_.upstream_failures);
  advance(connections_reset_closed_, now.closed_for_resets, transport_last_.closed_for_resets);
  transport_last_ = now;
}

std::string Metrics::Serialize() const {
  auto families = registry_->Collect();
  auto hot = hot_->Collect();
  families.insert(families.end(), hot.begin(), hot.end());
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, families);
  return out.str();
}

absl::string_view StatusCodeName(int code) {
  static constexpr absl::string_view kNames[] = {
      "OK",        "CANCELLED",         "UNKNOWN",           "INVALID_ARGUMENT",
      "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",    "PERMISSION_DENIED",
      "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
      "UNIMPLEMENTED", "INTERNAL",      "UNAVAILABLE",       "DATA_LOSS",
      "UNAUTHENTICATED"};
  if (code < 0 || code > 16) return "UNKNOWN";
  return kNames[code];
}

}  // namespace maskd
