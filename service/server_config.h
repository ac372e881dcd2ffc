// ServerConfig: maskd's command line (the flags of docs/service.md), read
// and checked once at start-up into plain option structs, before anything is
// bound or started. Every check's message is the line maskd logs before it
// exits with status 2 (tests look for them in the log).
#ifndef MASKD_SERVICE_SERVER_CONFIG_H_
#define MASKD_SERVICE_SERVER_CONFIG_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "service/index_cache.h"
#include "service/maskd_service.h"
#include "service/session_table.h"
#include "service/shm_service.h"
#include "service/step_batch.h"
#include "service/work_pool.h"

namespace maskd {

// --tls_cert, --tls_key, --tls_client_ca: the PEM texts read from the files
// (each at most 1 MiB). An empty cert_chain: no TLS.
struct TlsPem {
  std::string cert_chain;
  std::string private_key;
  std::string client_ca;  // empty: clients present no certificate
};

// The connection and stream bounds gRPC enforces (docs/reliability.md,
// Threat model); a duration <= 0 means never.
struct GrpcServerBounds {
  absl::Duration max_connection_idle;       // --max_connection_idle
  absl::Duration max_connection_age;        // --max_connection_age
  absl::Duration max_connection_age_grace;  // --max_connection_age_grace
  absl::Duration keepalive_time;            // --keepalive_time
  absl::Duration keepalive_timeout;         // --keepalive_timeout
  absl::Duration handshake_timeout;         // --handshake_timeout
  uint32_t max_concurrent_streams = 0;      // --max_concurrent_streams, per connection
  uint64_t memory_bytes = 0;                // --grpc_memory_bytes (resource quota)
  int32_t max_threads = 0;                  // --grpc_max_threads (resource quota)
  uint64_t max_message_bytes = 0;           // --max_message_bytes, each way
};

// maskd's own listeners (listener.h) and what stands between them and gRPC.
struct TransportConfig {
  // --listen, in order: unix:..., host:port (maskd's listeners) and
  // unix-abstract:... (gRPC's own). Each TCP address is checked: it resolves,
  // and without TLS it is loopback unless --allow_insecure_tcp.
  std::vector<std::string> listen;
  mode_t socket_mode = 0660;                           // --socket_mode
  absl::Duration first_byte_timeout = absl::Seconds(10);  // --handshake_timeout
  uint64_t max_connections = 0;                        // --max_connections; 0: no limit
  TlsPem tls;
  double max_resets_per_second = 0;  // --max_resets_per_second (>= 0 here); 0: no guard
  bool reset_guard_unix = false;     // --reset_guard_unix
  GrpcServerBounds grpc;
};

struct ServerConfig {
  TransportConfig transport;
  std::string metrics_listen;  // --metrics_listen; empty: no /metrics

  // Tokenizers: the folder loaded at start (--tokenizer_dir, else the
  // installed or source tree's default) and the registry's bounds.
  std::string tokenizer_dir;
  std::map<std::string, uint32_t> vocab_sizes;  // --vocab_size name=N
  uint64_t max_tokenizers = 0;                  // --max_tokenizers
  uint64_t loop_mask_bytes = 0;                 // --loop_mask_bytes
  uint64_t max_tokenizers_per_client = 0;       // --max_tokenizers_per_client

  IndexCacheOptions cache;
  SessionTableOptions sessions;  // on_sweep left for the caller to set
  StepLimits step;
  ServiceLimits service;
  ShmServiceOptions shm;
  // --mask_threads, --max_pending_masks_per_client, --mask_slice_ms, --max_long_masks
  WorkPool::Options mask_pool;
  // --step_threads, --max_pending_steps_per_client, --step_slice_ms, --max_long_steps
  WorkPool::Options step_pool;

  // On SIGTERM/SIGINT: health NOT_SERVING for drain_delay while still
  // serving, then grace_period for the calls in flight.
  absl::Duration drain_delay;
  absl::Duration grace_period;
};

// Parses maskd's command line (flag names take '-' or '_'; --listen and
// --vocab_size repeat or take commas) and checks it. absl's parser exits
// itself for --help, --version and an unknown flag; any other mistake is an
// error whose message names the flag and what it wants.
absl::StatusOr<ServerConfig> ReadServerConfig(int argc, char** argv);

}  // namespace maskd

#endif  // MASKD_SERVICE_SERVER_CONFIG_H_
