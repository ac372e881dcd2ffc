// maskd: the token-mask sidecar. Run reads as its start-up: the command line
// (server_config.h), the metrics exposer, the gRPC-free core, the transport
// (server_transport.h), the gRPC server, the tokenizers, then serving until
// SIGTERM/SIGINT and the shutdown sequence of docs/service.md.
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "prometheus/exposer.h"
#include "service/index_cache.h"
#include "service/log.h"
#include "service/maskd_service.h"
#include "service/metrics.h"
#include "service/server_config.h"
#include "service/server_transport.h"
#include "service/session_table.h"
#include "service/shm_service.h"
#include "service/step_batch.h"
#include "service/this_thread.h"
#include "service/tokenizer_registry.h"
#include "service/work_pool.h"

#ifndef MASKD_VERSION
#define MASKD_VERSION "0.0.0"
#endif

namespace maskd {
namespace {

// What the gRPC services serve from. Members in dependency order: each is
// destroyed before those it points to.
struct Core {
  Core(const ServerConfig& config, Metrics* metrics)
      : tokenizers(config.max_tokenizers, config.loop_mask_bytes,
                   config.max_tokenizers_per_client),
        cache(std::make_unique<IndexCache>(config.cache, metrics)),
        sessions(std::make_unique<SessionTable>(SessionOptions(config, cache.get()), metrics)),
        step_batch(sessions.get(), metrics, config.step),
        mask_pool(config.mask_pool),
        step_pool(config.step_pool),
        service(&tokenizers, cache.get(), sessions.get(), &step_batch, metrics, config.service,
                MASKD_VERSION, &mask_pool, &step_pool),
        shm_service(config.shm, &step_batch, metrics, &step_pool) {
    metrics->SetSessionsMax(config.sessions.max_sessions);
  }
  static SessionTableOptions SessionOptions(const ServerConfig& config, IndexCache* cache) {
    SessionTableOptions o = config.sessions;
    o.on_sweep = [cache] { cache->Maintain(); };  // sessions die before the cache
    return o;
  }

  TokenizerRegistry tokenizers;
  std::unique_ptr<IndexCache> cache;
  std::unique_ptr<SessionTable> sessions;
  StepBatch step_batch;
  // The pools outlive the server: calls they have queued finish during Shutdown.
  WorkPool mask_pool;
  WorkPool step_pool;
  MaskdService service;
  SharedMemoryService shm_service;
};

// Blocks SIGTERM/SIGINT, which WaitForStop takes: called before any thread
// starts, so that every thread inherits the mask.
sigset_t BlockStopSignals() {
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  return sigs;
}

// Every connection costs a descriptor: take all the hard limit allows.
void RaiseDescriptorLimit() {
  struct rlimit nofile;
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    setrlimit(RLIMIT_NOFILE, &nofile);
  }
}

// Serves `metrics` on *addr (host:port) as Prometheus /metrics, *addr then
// with the port bound; null (not an error) when *addr is empty.
absl::StatusOr<std::unique_ptr<prometheus::Exposer>> ServeMetrics(Metrics* metrics,
                                                                  std::string* addr) {
  if (addr->empty()) return std::unique_ptr<prometheus::Exposer>();
  std::unique_ptr<prometheus::Exposer> exposer;
  try {
    exposer = std::make_unique<prometheus::Exposer>(*addr);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", *addr, ": ", e.what()));
  }
  exposer->RegisterCollectable(metrics->registry());
  exposer->RegisterCollectable(metrics->collectable());
  auto ports = exposer->GetListeningPorts();
  if (!ports.empty()) *addr = absl::StrCat(addr->substr(0, addr->rfind(':')), ":", ports[0]);
  return exposer;
}

// gRPC's connection and stream bounds (docs/reliability.md, Threat model)
// and message sizes.
void SetServerBounds(const GrpcServerBounds& b, grpc::ServerBuilder* builder) {
  auto ms = [](absl::Duration d) {
    return d <= absl::ZeroDuration() ? INT_MAX
                                     : static_cast<int>(std::min<int64_t>(
                                           absl::ToInt64Milliseconds(d), INT_MAX));
  };
  builder->AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, ms(b.max_connection_idle));
  builder->AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS, ms(b.max_connection_age));
  builder->AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS,
                              ms(b.max_connection_age_grace));
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, ms(b.keepalive_time));
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, ms(b.keepalive_timeout));
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 2);
  builder->AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, ms(b.handshake_timeout));
  builder->AddChannelArgument(
      GRPC_ARG_MAX_CONCURRENT_STREAMS,
      static_cast<int>(std::min<uint32_t>(b.max_concurrent_streams, INT_MAX)));
  grpc::ResourceQuota quota("maskd");  // the builder keeps a reference
  quota.Resize(static_cast<size_t>(b.memory_bytes));
  quota.SetMaxThreads(std::max(b.max_threads, 2));
  builder->SetResourceQuota(quota);
  const int max_message = static_cast<int>(std::min<uint64_t>(b.max_message_bytes, INT_MAX));
  builder->SetMaxReceiveMessageSize(max_message);
  builder->SetMaxSendMessageSize(max_message);
}

// Loads --tokenizer_dir into the registry, logging each tokenizer that
// failed; the names loaded.
absl::StatusOr<std::vector<std::string>> LoadTokenizers(const ServerConfig& config,
                                                        TokenizerRegistry* tokenizers) {
  std::vector<std::string> errors;
  auto loaded = tokenizers->LoadDir(config.tokenizer_dir, config.vocab_sizes, &errors);
  for (const auto& e : errors) LogError(e);
  return loaded;
}

// Serves until SIGTERM or SIGINT (blocked in `sigs`), polling the transport's
// and the work pools' counts into the metrics once a second; the signal.
int WaitForStop(const sigset_t& sigs, const ServerTransport& transport, Core* core,
                Metrics* metrics) {
  absl::Notification stop_stats;
  std::thread stats([&] {
    NameThisThread("maskd-stats");
    do {
      metrics->SetTransport(transport.Counts());
      const WorkPool& masks = core->mask_pool;
      const WorkPool& steps = core->step_pool;
      metrics->SetWorkPool("mask", masks.queued(), masks.running(), masks.long_tasks());
      metrics->SetWorkPool("step", steps.queued(), steps.running(), steps.long_tasks());
    } while (!stop_stats.WaitForNotificationWithTimeout(absl::Seconds(1)));
  });
  int sig = 0;
  sigwait(&sigs, &sig);
  stop_stats.Notify();
  stats.join();
  return sig;
}

// The shutdown sequence (docs/service.md): health NOT_SERVING while still
// serving for --drain_delay, then no new connections and --grace_period for
// the calls in flight; compilations some call waits for are cancelled at
// that deadline, so that Shutdown (which waits for every call) returns.
void ShutDown(const ServerConfig& config, grpc::Server* server, ServerTransport* transport,
              IndexCache* cache) {
  server->GetHealthCheckService()->SetServingStatus(false);
  absl::SleepFor(config.drain_delay);
  const absl::Time deadline = absl::Now() + config.grace_period;
  transport->Stop();  // gRPC's Shutdown ends the open connections
  absl::Notification shut;
  std::thread shutdown([&] {
    server->Shutdown(absl::ToChronoTime(deadline));
    shut.Notify();
  });
  if (!shut.WaitForNotificationWithDeadline(deadline)) {
    cache->CancelAll();
    shut.WaitForNotification();
  }
  shutdown.join();
  server->Wait();
}

int Run(int argc, char** argv) {
  absl::StatusOr<ServerConfig> config = ReadServerConfig(argc, argv);
  if (!config.ok()) {
    LogError(std::string(config.status().message()));
    return 2;
  }
  const sigset_t sigs = BlockStopSignals();
  const absl::Time started = absl::Now();
  RaiseDescriptorLimit();
  Metrics metrics(MASKD_VERSION);
  std::string metrics_addr = config->metrics_listen;
  auto exposer = ServeMetrics(&metrics, &metrics_addr);
  if (!exposer.ok()) {
    LogError(std::string(exposer.status().message()));
    return 1;
  }
  Core core(*config, &metrics);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  ServerTransport transport(config->transport);
  if (absl::Status bound = transport.Bind(&builder); !bound.ok()) {
    LogError(std::string(bound.message()));
    return 1;
  }
  SetServerBounds(config->transport.grpc, &builder);
  builder.RegisterService(&core.service);
  builder.RegisterService(&core.shm_service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) {
    LogError(absl::StrCat("cannot listen on ", absl::StrJoin(config->transport.listen, ",")));
    return 1;
  }
  if (absl::Status ports = transport.CheckGrpcPorts(); !ports.ok()) {
    LogError(std::string(ports.message()));
    server->Shutdown();
    return 1;
  }
  transport.Start(server.get());
  grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
  health->SetServingStatus(false);
  auto loaded = LoadTokenizers(*config, &core.tokenizers);
  if (!loaded.ok()) {
    LogError(std::string(loaded.status().message()));
    transport.Stop();
    server->Shutdown(absl::ToChronoTime(absl::Now()));
    return 1;
  }
  health->SetServingStatus(true);
  LogInfo(absl::StrCat("start version=", MASKD_VERSION, " pid=", getpid(),
                       " listen=", transport.Shown(),
                       " metrics=", metrics_addr.empty() ? "off" : metrics_addr,
                       " tokenizer_dir=", config->tokenizer_dir, " tokenizers=",
                       absl::StrJoin(*loaded, ","), " ready_ms=",
                       absl::ToInt64Milliseconds(absl::Now() - started)));

  const int sig = WaitForStop(sigs, transport, &core, &metrics);
  const absl::Time stop_at = absl::Now();
  ShutDown(*config, server.get(), &transport, core.cache.get());
  server.reset();
  core.sessions.reset();
  core.cache.reset();
  LogInfo(absl::StrCat("stop signal=", sig == SIGTERM ? "SIGTERM" : "SIGINT",
                       " drain_ms=", absl::ToInt64Milliseconds(absl::Now() - stop_at),
                       " uptime_s=", absl::ToInt64Seconds(absl::Now() - started)));
  return 0;
}

}  // namespace
}  // namespace maskd

int main(int argc, char** argv) { return maskd::Run(argc, argv); }
