// maskd: the token-mask sidecar. See docs/service.md for flags, defaults and
// the shutdown sequence.
#include <signal.h>
#include <sys/resource.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/health_check_service_interface.h"
#include "prometheus/exposer.h"
#include "service/client_identity.h"
#include "service/index_cache.h"
#include "service/listener.h"
#include "service/log.h"
#include "service/maskd_service.h"
#include "service/metrics.h"
#include "service/relay.h"
#include "service/session_table.h"
#include "service/shm_service.h"
#include "service/step_batch.h"
#include "service/tokenizer_registry.h"

#ifndef MASKD_VERSION
#define MASKD_VERSION "0.0.0"
#endif
#ifndef MASKD_SOURCE_DIR
#define MASKD_SOURCE_DIR ""
#endif

ABSL_FLAG(std::vector<std::string>, listen,
          std::vector<std::string>({"unix:///tmp/maskd.sock", "127.0.0.1:50051"}),
          "gRPC listen addresses (repeatable or comma-separated): unix:///abs/path, "
          "unix:relative, host:port");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM server certificate (chain): TCP listeners serve TLS with it (needs --tls_key)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA certificates: TLS clients must present a certificate they sign (mutual TLS)");
ABSL_FLAG(bool, allow_insecure_tcp, false,
          "Allow plaintext TCP listeners on non-loopback addresses (without it maskd refuses "
          "to start: exit 2)");
ABSL_FLAG(std::string, socket_mode, "0660",
          "File mode (octal) of unix sockets maskd listens on, set at bind whatever the umask");
ABSL_FLAG(uint64_t, max_connections, 4096,
          "Open connections at most across the listeners (unix, plaintext and TLS TCP); past it "
          "a new connection is closed at once; 0: no limit");
ABSL_FLAG(absl::Duration, handshake_timeout, absl::Seconds(10),
          "A new connection must send its first byte (plaintext) or finish its TLS handshake "
          "within this time, else it is closed");
ABSL_FLAG(absl::Duration, max_connection_idle, absl::Minutes(5),
          "A connection with no call in flight for this long is sent GOAWAY and closed; "
          "0: never");
ABSL_FLAG(absl::Duration, max_connection_age, absl::ZeroDuration(),
          "Any connection is sent GOAWAY after this long, and closed --max_connection_age_grace "
          "later; 0: never");
ABSL_FLAG(absl::Duration, max_connection_age_grace, absl::Seconds(30),
          "Time the calls of a connection past --max_connection_age (or idle) get to finish");
ABSL_FLAG(absl::Duration, keepalive_time, absl::Minutes(1),
          "The server pings a connection silent for this long");
ABSL_FLAG(absl::Duration, keepalive_timeout, absl::Seconds(20),
          "A connection that does not answer a ping within this time is closed");
ABSL_FLAG(uint32_t, max_concurrent_streams, 256,
          "Calls in flight at most per connection (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS)");
ABSL_FLAG(uint64_t, grpc_memory_bytes, uint64_t{1} << 30,
          "gRPC's memory quota (grpc::ResourceQuota) for connections, streams and messages "
          "in flight; past it gRPC sheds load");
ABSL_FLAG(int32_t, grpc_max_threads, 256,
          "Threads gRPC's resource quota allows its synchronous server (health, reflection)");
ABSL_FLAG(double, max_resets_per_second, 200,
          "HTTP/2 rapid-reset guard: RST_STREAM frames a client may send per second on one "
          "connection (burst twice that); past it the connection is closed. Applies to "
          "plaintext TCP (and the unix socket with --reset_guard_unix); 0: off");
ABSL_FLAG(bool, reset_guard_unix, false,
          "Put unix-socket connections through the rapid-reset guard too (one more copy each "
          "way)");
ABSL_FLAG(std::string, metrics_listen, "127.0.0.1:9464",
          "Prometheus /metrics HTTP address host:port (port 0: any free port); empty: off");
ABSL_FLAG(std::string, tokenizer_dir, "",
          "Folder with one subfolder per tokenizer; default: <exe>/../share/maskd/tokenizers, "
          "else the source tree's data/tokenizers");
ABSL_FLAG(std::vector<std::string>, vocab_size, {},
          "Model logits width per tokenizer, name=N (repeatable); overrides a vocab_size file");
ABSL_FLAG(uint64_t, cache_bytes, uint64_t{1} << 30, "Index cache budget in bytes");
ABSL_FLAG(uint64_t, max_mask_bytes, uint64_t{1} << 30,
          "Token masks kept by all indexes together, leased ones included; past it a state's "
          "mask is computed at each use, not kept. 0: no bound");
ABSL_FLAG(absl::Duration, session_ttl, absl::Minutes(10), "Idle time after which a session expires");
ABSL_FLAG(uint64_t, max_sessions, 100000, "Live sessions at most");
ABSL_FLAG(uint64_t, rollback_window, 4096,
          "Tokens a session can roll back (its history: 4 bytes per token, at most this many)");
ABSL_FLAG(int32_t, compile_threads, 2, "Compilation threads");
ABSL_FLAG(int32_t, mask_threads, 2,
          "Threads that run Mask calls, off gRPC's callback threads, round-robin across clients "
          "(one client runs on all but one of them at most)");
ABSL_FLAG(uint64_t, max_pending_masks_per_client, 64,
          "Mask calls one client (--client-identity) may have queued or running; past it "
          "RESOURCE_EXHAUSTED");
ABSL_FLAG(int32_t, step_threads, 0,
          "Threads that run Step, StepStream and StepInRegion batches that step a grammar "
          "session, off gRPC's callback threads, round-robin across clients (one client runs on "
          "all but one of them at most); regex-only batches stay on gRPC's threads. 0: one per "
          "CPU (at least 2)");
ABSL_FLAG(uint64_t, max_pending_steps_per_client, 64,
          "Grammar Step/StepInRegion calls and StepStream messages one client (--client-identity) "
          "may have queued or running on the step threads; past it RESOURCE_EXHAUSTED");
ABSL_FLAG(absl::Duration, compile_timeout, absl::Seconds(30),
          "Compilation deadline (requests may ask for less)");
ABSL_FLAG(absl::Duration, failure_ttl, absl::Seconds(10), "How long a compile failure is cached");
ABSL_FLAG(uint64_t, max_pending_compiles, 256, "Compilations queued or running at most");
ABSL_FLAG(uint64_t, max_pending_compiles_per_client, 128,
          "Compilations queued or running at most per client (--client-identity); 0: no cap");
ABSL_FLAG(absl::Duration, compile_fast_lane, absl::Milliseconds(100),
          "Each compilation is first tried this long on a thread of its own, then queued for "
          "--compile_threads; 0: no fast lane");
ABSL_FLAG(uint64_t, max_message_bytes, uint64_t{64} << 20,
          "gRPC receive and send message size limit in bytes");
ABSL_FLAG(uint32_t, max_batch, 1024, "Entries per Step call at most");
ABSL_FLAG(uint32_t, max_streams, 256, "Open StepStreams at most (all clients together)");
ABSL_FLAG(uint32_t, max_streams_per_client, 64,
          "Open StepStreams at most per client (--client-identity); 0: no cap");
// Per-client shares (docs/reliability.md, "Per-client shares"): each a
// fixed number, a fraction of its global cap's default, so that one client
// (hostile or leaking) exhausts only its own share. 0: no per-client cap.
ABSL_FLAG(std::string, client_identity, "connection",
          "What one client is, for every per-client share: connection (default; on the unix "
          "socket an engine's processes often share one uid), uid (SO_PEERCRED on the unix "
          "socket, else the connection), header (the maskd-client-id metadata, else the "
          "connection: only for trusted clients), tls (the verified client certificate's "
          "identity, else the connection)");
ABSL_FLAG(uint64_t, max_sessions_per_client, 10000,
          "Live sessions at most created (or forked) by one client (--client-identity); a "
          "session counts until closed or expired; 0: no cap");
ABSL_FLAG(uint64_t, max_tokenizers_per_client, 8,
          "Tokenizers one client (--client-identity) may register (they stay until restart); "
          "0: no cap");
ABSL_FLAG(uint64_t, max_shm_regions_per_client, 64,
          "Shared-memory regions one client (--client-identity) may have registered at once; "
          "0: no cap");
ABSL_FLAG(absl::Duration, stream_idle_timeout, absl::Minutes(5),
          "A StepStream with no request for this long is finished (DEADLINE_EXCEEDED); 0: never");
ABSL_FLAG(uint64_t, max_request_tokens, uint64_t{1} << 20, "Tokens in one Step or Mask call at most");
ABSL_FLAG(uint64_t, max_regex_bytes, uint64_t{1} << 20, "Constraint (regex or schema) bytes at most");
ABSL_FLAG(uint32_t, max_regex_repeat, 1000, "Largest counted repetition {n,m} in a regex");
ABSL_FLAG(int32_t, max_regex_nesting, maskd::kMaxRegexNesting,
          "Groups open at once in a regex (also one converted from a schema); at most 1000, "
          "which bounds the parser's stack");
ABSL_FLAG(int32_t, max_schema_nesting, maskd::kMaxSchemaNesting,
          "Arrays and objects open at once in a JSON Schema's text; at most 256 (stack bound)");
ABSL_FLAG(int32_t, max_schema_depth, maskd::kMaxSchemaDepth,
          "Subschemas ($refs included) the schema converter is inside of at once; at most 128 "
          "(stack bound)");
ABSL_FLAG(int32_t, max_pattern_nesting, maskd::kMaxPatternNesting,
          "Groups open at once in a JSON Schema pattern or patternProperties key; at most 256 "
          "(stack bound)");
ABSL_FLAG(uint64_t, max_grammar_bytes, uint64_t{1} << 20, "Grammar text bytes at most");
ABSL_FLAG(uint32_t, max_grammar_rules, 10000, "Rules at most in a grammar (after lowering EBNF)");
ABSL_FLAG(uint32_t, max_grammar_terminals, 10000, "Terminals at most in a grammar");
ABSL_FLAG(uint32_t, max_grammar_symbols, 1000000,
          "Symbols at most in all of a grammar's alternatives together");
ABSL_FLAG(uint32_t, max_grammar_nesting, 256,
          "Groups nested at most in a grammar's text; at most 1000 (stack bound)");
ABSL_FLAG(uint32_t, max_grammar_repeat, 1000, "Largest counted repetition {m,n} in a grammar");
ABSL_FLAG(uint64_t, max_grammar_chart_items, uint64_t{1} << 20,
          "Per grammar session: Earley items in all its sets (about 12 bytes each; also its "
          "tokens at most)");
ABSL_FLAG(uint64_t, max_grammar_chart_bytes, uint64_t{2} << 30,
          "All grammar sessions' parses together, in bytes held (chart arrays by capacity, "
          "memo, token records, scratch); a step or fork past it is RESOURCE_EXHAUSTED");
ABSL_FLAG(uint64_t, max_grammar_set_items, uint64_t{1} << 18,
          "Earley items at most in one set (one text position)");
ABSL_FLAG(uint64_t, max_grammar_mask_work, uint64_t{1} << 22,
          "Work one grammar mask may take (trie nodes visited plus Earley sets built); past it "
          "the step fails with RESOURCE_EXHAUSTED");
ABSL_FLAG(uint64_t, max_grammar_parser_steps, uint64_t{1} << 24,
          "Earley parser steps (items added or found) one grammar mask, one advance or one "
          "budget walk may take; past it the step fails with RESOURCE_EXHAUSTED");
ABSL_FLAG(uint64_t, max_grammar_memo_bytes, uint64_t{256} << 20,
          "Per grammar index: bytes of memoised token sets (also counted in --max-mask-bytes)");
ABSL_FLAG(uint32_t, max_dfa_states, 100000, "DFA states at most per index");
ABSL_FLAG(uint32_t, max_nfa_states, 2000000, "NFA states at most per index");
ABSL_FLAG(uint64_t, max_tokenizers, 64, "Tokenizers (loaded + registered) at most");
ABSL_FLAG(uint64_t, loop_mask_bytes, uint64_t{64} << 20,
          "Per tokenizer: bytes of shared loop masks kept (docs/design.md, Loops)");
ABSL_FLAG(absl::Duration, grace_period, absl::Seconds(10),
          "On SIGTERM/SIGINT: time in-flight RPCs get to finish");
ABSL_FLAG(bool, allow_shm, false,
          "Allow clients to register shared-memory regions (SharedMemory service); "
          "off: registration answers FAILED_PRECONDITION");
ABSL_FLAG(bool, shm_allow_tcp, false,
          "Serve SharedMemory calls on connections without peer credentials (TCP) as maskd's own "
          "uid; off: they need the unix socket (SO_PEERCRED)");
ABSL_FLAG(std::string, shm_prefix, "/maskd-",
          "POSIX shared-memory keys clients may register must start with this prefix");
ABSL_FLAG(absl::Duration, drain_delay, absl::ZeroDuration(),
          "On SIGTERM/SIGINT: time health reports NOT_SERVING while still serving, before "
          "refusing new RPCs");

namespace maskd {
namespace {

// Collects every occurrence of a repeatable flag ("--name=v" / "--name v").
std::vector<std::string> Repeated(int argc, char** argv, const std::string& name) {
  std::vector<std::string> out;
  const std::string eq = "--" + name + "=", bare = "--" + name;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    std::string v;
    if (a.rfind(eq, 0) == 0) {
      v = a.substr(eq.size());
    } else if (a == bare && i + 1 < argc) {
      v = argv[i + 1];
    } else {
      continue;
    }
    for (absl::string_view p : absl::StrSplit(v, ',', absl::SkipEmpty())) out.emplace_back(p);
  }
  return out;
}

// A PEM file's text; bounded (1 MiB) so that a wrong path cannot eat memory.
absl::StatusOr<std::string> ReadSmallFile(const std::string& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return absl::NotFoundError(absl::StrCat("cannot read ", path, ": ", ec.message()));
  if (size > (1u << 20)) return absl::InvalidArgumentError(absl::StrCat(path, ": over 1 MiB"));
  FILE* f = fopen(path.c_str(), "rb");
  if (f == nullptr) return absl::NotFoundError(absl::StrCat("cannot read ", path, ": ", strerror(errno)));
  std::string out(size, '\0');
  size_t n = fread(out.data(), 1, out.size(), f);
  fclose(f);
  out.resize(n);
  return out;
}

std::string ExeDir() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  buf[n] = 0;
  return std::filesystem::path(buf).parent_path().string();
}

std::string DefaultTokenizerDir() {
  std::error_code ec;
  std::string installed = ExeDir() + "/../share/maskd/tokenizers";
  if (std::filesystem::is_directory(installed, ec)) return installed;
  return std::string(MASKD_SOURCE_DIR) + "/data/tokenizers";
}

// The step pool's options from --step-threads (0: one per CPU, at least 2)
// and --max-pending-steps-per-client.
WorkPool::Options StepPoolOptions() {
  WorkPool::Options o;
  const int32_t threads = absl::GetFlag(FLAGS_step_threads);
  o.threads = threads > 0 ? static_cast<size_t>(threads)
                          : std::max<size_t>(std::thread::hardware_concurrency(), 2);
  o.max_per_client = absl::GetFlag(FLAGS_max_pending_steps_per_client);
  o.tasks = "grammar step batches";
  o.cap_flag = "--max-pending-steps-per-client";
  return o;
}

int Run(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "token masks for constrained generation over gRPC (docs/service.md)");
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [](absl::string_view path) {
    return absl::EndsWith(path, "service/main.cc");
  };
  usage.contains_helpshort_flags = usage.contains_help_flags;
  usage.version_string = [] { return std::string("maskd ") + MASKD_VERSION + "\n"; };
  absl::SetFlagsUsageConfig(usage);
  std::vector<std::string> listen_repeated = Repeated(argc, argv, "listen");
  std::vector<std::string> vocab_repeated = Repeated(argc, argv, "vocab_size");
  for (auto& v : Repeated(argc, argv, "vocab-size")) vocab_repeated.push_back(v);
  // absl flags spell names with underscores; accept dashes too.
  std::vector<std::string> args;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (i > 0 && a.rfind("--", 0) == 0) {
      size_t end = a.find('=');
      for (size_t k = 2; k < std::min(end, a.size()); ++k) {
        if (a[k] == '-') a[k] = '_';
      }
    }
    args.push_back(a);
  }
  std::vector<char*> cargs;
  for (auto& a : args) cargs.push_back(a.data());
  std::vector<char*> positional = absl::ParseCommandLine(static_cast<int>(cargs.size()), cargs.data());
  if (positional.size() > 1) {
    LogError(absl::StrCat("unexpected argument '", positional[1], "'"));
    return 2;
  }
  listen_repeated = Repeated(static_cast<int>(cargs.size()), cargs.data(), "listen");
  std::vector<std::string> listen =
      listen_repeated.empty() ? absl::GetFlag(FLAGS_listen) : listen_repeated;
  if (vocab_repeated.empty()) vocab_repeated = absl::GetFlag(FLAGS_vocab_size);
  std::map<std::string, uint32_t> vocab_sizes;
  for (const auto& v : vocab_repeated) {
    std::pair<std::string, std::string> kv = absl::StrSplit(v, absl::MaxSplits('=', 1));
    uint32_t n;
    if (kv.first.empty() || !absl::SimpleAtoi(kv.second, &n)) {
      LogError(absl::StrCat("--vocab-size: want name=N, got '", v, "'"));
      return 2;
    }
    vocab_sizes[kv.first] = n;
  }
  std::string tokenizer_dir = absl::GetFlag(FLAGS_tokenizer_dir);
  if (tokenizer_dir.empty()) tokenizer_dir = DefaultTokenizerDir();

  // SIGTERM/SIGINT are taken by sigwait below: block them before any thread
  // starts so every thread inherits the mask.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  const absl::Time started = absl::Now();
  // Every connection costs a descriptor: take all the hard limit allows.
  struct rlimit nofile;
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    setrlimit(RLIMIT_NOFILE, &nofile);
  }
  Metrics metrics(MASKD_VERSION);
  std::unique_ptr<prometheus::Exposer> exposer;
  std::string metrics_addr = absl::GetFlag(FLAGS_metrics_listen);
  if (!metrics_addr.empty()) {
    try {
      exposer = std::make_unique<prometheus::Exposer>(metrics_addr);
    } catch (const std::exception& e) {
      LogError(absl::StrCat("cannot serve metrics on ", metrics_addr, ": ", e.what()));
      return 1;
    }
    exposer->RegisterCollectable(metrics.registry());
    exposer->RegisterCollectable(metrics.collectable());
    auto ports = exposer->GetListeningPorts();
    if (!ports.empty()) {
      metrics_addr = absl::StrCat(metrics_addr.substr(0, metrics_addr.rfind(':')), ":", ports[0]);
    }
  }

  const std::optional<ClientIdentity> client_identity =
      ParseClientIdentity(absl::GetFlag(FLAGS_client_identity));
  if (!client_identity) {
    LogError(absl::StrCat("--client_identity: want connection, uid, header or tls, got '",
                          absl::GetFlag(FLAGS_client_identity).substr(0, 64), "'"));
    return 2;
  }
  TokenizerRegistry tokenizers(absl::GetFlag(FLAGS_max_tokenizers),
                               absl::GetFlag(FLAGS_loop_mask_bytes),
                               absl::GetFlag(FLAGS_max_tokenizers_per_client));
  IndexCacheOptions cache_options;
  // Nesting limits: a flag may lower its parser's stack-safe maximum, never
  // raise it.
  for (auto [flag, value, max] :
       {std::tuple{"--max_regex_nesting", absl::GetFlag(FLAGS_max_regex_nesting), kMaxRegexNesting},
        std::tuple{"--max_schema_nesting", absl::GetFlag(FLAGS_max_schema_nesting),
                   kMaxSchemaNesting},
        std::tuple{"--max_schema_depth", absl::GetFlag(FLAGS_max_schema_depth), kMaxSchemaDepth},
        std::tuple{"--max_pattern_nesting", absl::GetFlag(FLAGS_max_pattern_nesting),
                   kMaxPatternNesting}}) {
    if (value < 1 || value > max) {
      LogError(absl::StrCat(flag, "=", value, ": want 1 to ", max,
                            " (the maximum bounds the parser's stack depth; the flag can only "
                            "lower it)"));
      return 2;
    }
  }
  cache_options.compile.regex.max_nesting = absl::GetFlag(FLAGS_max_regex_nesting);
  cache_options.compile.max_schema_nesting = absl::GetFlag(FLAGS_max_schema_nesting);
  cache_options.compile.max_schema_depth = absl::GetFlag(FLAGS_max_schema_depth);
  cache_options.compile.max_pattern_nesting = absl::GetFlag(FLAGS_max_pattern_nesting);
  cache_options.max_bytes = absl::GetFlag(FLAGS_cache_bytes);
  cache_options.max_mask_bytes = absl::GetFlag(FLAGS_max_mask_bytes);
  cache_options.compile_threads = absl::GetFlag(FLAGS_compile_threads);
  cache_options.compile_timeout = absl::GetFlag(FLAGS_compile_timeout);
  cache_options.failure_ttl = absl::GetFlag(FLAGS_failure_ttl);
  cache_options.max_pending = absl::GetFlag(FLAGS_max_pending_compiles);
  cache_options.max_pending_per_client = absl::GetFlag(FLAGS_max_pending_compiles_per_client);
  cache_options.fast_lane_budget = absl::GetFlag(FLAGS_compile_fast_lane);
  cache_options.compile.regex.max_pattern_bytes = absl::GetFlag(FLAGS_max_regex_bytes);
  cache_options.compile.regex.max_repeat = absl::GetFlag(FLAGS_max_regex_repeat);
  cache_options.compile.max_dfa_states = absl::GetFlag(FLAGS_max_dfa_states);
  cache_options.compile.max_nfa_states = absl::GetFlag(FLAGS_max_nfa_states);
  cache_options.compile.grammar.max_text_bytes = absl::GetFlag(FLAGS_max_grammar_bytes);
  cache_options.compile.grammar.max_rules = absl::GetFlag(FLAGS_max_grammar_rules);
  cache_options.compile.grammar.max_terminals = absl::GetFlag(FLAGS_max_grammar_terminals);
  cache_options.compile.grammar.max_symbols = absl::GetFlag(FLAGS_max_grammar_symbols);
  cache_options.compile.grammar.max_nesting = absl::GetFlag(FLAGS_max_grammar_nesting);
  cache_options.compile.grammar.max_repeat = absl::GetFlag(FLAGS_max_grammar_repeat);
  cache_options.compile.grammar_index.earley.max_chart_items =
      absl::GetFlag(FLAGS_max_grammar_chart_items);
  cache_options.compile.grammar_index.earley.max_items_per_position =
      absl::GetFlag(FLAGS_max_grammar_set_items);
  cache_options.compile.grammar_index.max_mask_work = absl::GetFlag(FLAGS_max_grammar_mask_work);
  cache_options.compile.grammar_index.max_parser_steps =
      absl::GetFlag(FLAGS_max_grammar_parser_steps);
  cache_options.compile.grammar_index.max_memo_bytes = absl::GetFlag(FLAGS_max_grammar_memo_bytes);
  auto cache = std::make_unique<IndexCache>(cache_options, &metrics);
  SessionTableOptions session_options;
  session_options.max_sessions = absl::GetFlag(FLAGS_max_sessions);
  session_options.max_sessions_per_client = absl::GetFlag(FLAGS_max_sessions_per_client);
  session_options.ttl = absl::GetFlag(FLAGS_session_ttl);
  session_options.rollback_window = absl::GetFlag(FLAGS_rollback_window);
  session_options.grammar_chart_budget =
      std::make_shared<MaskBudget>(absl::GetFlag(FLAGS_max_grammar_chart_bytes));
  session_options.on_sweep = [c = cache.get()] { c->Maintain(); };  // sessions die before cache
  auto sessions = std::make_unique<SessionTable>(session_options, &metrics);
  metrics.SetSessionsMax(session_options.max_sessions);
  StepLimits step_limits;
  step_limits.max_batch = absl::GetFlag(FLAGS_max_batch);
  step_limits.max_tokens_per_request = absl::GetFlag(FLAGS_max_request_tokens);
  step_limits.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  StepBatch step_batch(sessions.get(), &metrics, step_limits);
  ServiceLimits limits;
  limits.max_constraint_bytes = absl::GetFlag(FLAGS_max_regex_bytes);
  limits.max_grammar_bytes = absl::GetFlag(FLAGS_max_grammar_bytes);
  limits.max_streams = absl::GetFlag(FLAGS_max_streams);
  limits.max_streams_per_client = absl::GetFlag(FLAGS_max_streams_per_client);
  limits.client_identity = *client_identity;
  limits.stream_idle_timeout = absl::GetFlag(FLAGS_stream_idle_timeout);
  // Outlives the server: calls it has queued finish during Shutdown.
  WorkPool mask_pool({static_cast<size_t>(std::max(absl::GetFlag(FLAGS_mask_threads), 1)),
                      absl::GetFlag(FLAGS_max_pending_masks_per_client)});
  WorkPool step_pool(StepPoolOptions());
  MaskdService service(&tokenizers, cache.get(), sessions.get(), &step_batch, &metrics, limits,
                       MASKD_VERSION, &mask_pool, &step_pool);
  ShmServiceOptions shm_options;
  shm_options.allow_registration = absl::GetFlag(FLAGS_allow_shm);
  shm_options.key_prefix = absl::GetFlag(FLAGS_shm_prefix);
  shm_options.allow_tcp = absl::GetFlag(FLAGS_shm_allow_tcp);
  shm_options.max_regions_per_client = absl::GetFlag(FLAGS_max_shm_regions_per_client);
  shm_options.client_identity = *client_identity;
  if (shm_options.key_prefix.empty() || shm_options.key_prefix[0] != '/') {
    LogError("--shm_prefix must start with '/'");
    return 2;
  }
  SharedMemoryService shm_service(shm_options, &step_batch, &metrics, &step_pool);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  // Unix sockets, plaintext and TLS TCP: maskd's own listeners (listener.h),
  // bound before gRPC starts so that a taken address fails here. The rest
  // (unix-abstract:) goes to gRPC, without SO_REUSEPORT.
  ListenerOptions listener_options;
  {
    const std::string mode = absl::GetFlag(FLAGS_socket_mode);
    char* end = nullptr;
    long m = mode.empty() ? -1 : strtol(mode.c_str(), &end, 8);
    if (m < 0 || m > 0777 || *end != 0) {
      LogError(absl::StrCat("--socket_mode: want an octal mode like 0660, got '",
                            mode.substr(0, 64), "'"));
      return 2;
    }
    listener_options.socket_mode = static_cast<mode_t>(m);
  }
  listener_options.first_byte_timeout = absl::GetFlag(FLAGS_handshake_timeout);
  ConnectionLimit connection_limit(absl::GetFlag(FLAGS_max_connections));
  listener_options.limit = &connection_limit;
  // TLS: every TCP listener when --tls_cert is set (relayed to gRPC's private
  // TLS socket, below: fd hand-over is plaintext only). Otherwise plaintext
  // TCP on loopback only, unless --allow_insecure_tcp.
  std::shared_ptr<grpc::ServerCredentials> tls;
  {
    const std::string cert = absl::GetFlag(FLAGS_tls_cert), key = absl::GetFlag(FLAGS_tls_key),
                      ca = absl::GetFlag(FLAGS_tls_client_ca);
    if (cert.empty() != key.empty() || (!ca.empty() && cert.empty())) {
      LogError("--tls_cert and --tls_key go together; --tls_client_ca needs them");
      return 2;
    }
    if (!cert.empty()) {
      grpc::SslServerCredentialsOptions o(
          ca.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                     : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
      grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
      for (const auto& [flag, path, out] :
           {std::tuple<const char*, std::string, std::string*>{"--tls_cert", cert, &pair.cert_chain},
            {"--tls_key", key, &pair.private_key},
            {"--tls_client_ca", ca, &o.pem_root_certs}}) {
        if (path.empty()) continue;
        auto text = ReadSmallFile(path);
        if (!text.ok()) {
          LogError(absl::StrCat(flag, ": ", text.status().message()));
          return 2;
        }
        *out = *std::move(text);
      }
      o.pem_key_cert_pairs.push_back(pair);
      tls = grpc::SslServerCredentials(o);
    }
  }
  // The relay (relay.h): the rapid-reset guard of plaintext connections, and
  // the path of TLS connections to gRPC.
  std::unique_ptr<Relay> relay;
  Relay* reset_guard = nullptr;
  if (absl::GetFlag(FLAGS_max_resets_per_second) > 0 || tls) {
    RelayOptions o;
    o.resets_per_second = std::max(absl::GetFlag(FLAGS_max_resets_per_second), 0.0);
    o.reset_burst = 2 * o.resets_per_second;
    relay = std::make_unique<Relay>(o);
    if (o.resets_per_second > 0) reset_guard = relay.get();
  }
  // gRPC serves TLS on one private unix socket only, `tls.sock` in a fresh
  // directory of mode 0700 (nobody else can connect), removed at exit; each
  // TLS address is a Listener that relays to it, so that TLS connections get
  // the same connection cap, first-byte timeout and accept back-off as the
  // others (docs/reliability.md, Threat model).
  struct RemoveDir {
    std::string path;
    ~RemoveDir() {
      std::error_code ec;
      if (!path.empty()) std::filesystem::remove_all(path, ec);
    }
  } tls_dir;
  std::string tls_socket;
  int tls_port = 0;
  if (tls) {
    const char* tmpdir = getenv("TMPDIR");
    std::string tmpl = absl::StrCat(tmpdir != nullptr && *tmpdir != 0 ? tmpdir : "/tmp",
                                    "/maskd-tls-XXXXXX");
    if (tmpl.size() + sizeof "/tls.sock" > sizeof(sockaddr_un::sun_path)) {
      tmpl = "/tmp/maskd-tls-XXXXXX";  // a unix socket path has at most 107 bytes
    }
    if (mkdtemp(tmpl.data()) == nullptr) {
      LogError(absl::StrCat("cannot make the private TLS socket directory ", tmpl, ": ",
                            strerror(errno)));
      return 1;
    }
    tls_dir.path = tmpl;
    tls_socket = tmpl + "/tls.sock";
    builder.AddListeningPort("unix:" + tls_socket, tls, &tls_port);
    // gRPC's listener on it stops for good on EMFILE: leave it descriptors.
    listener_options.spare_fds = 8;
  }
  std::vector<std::unique_ptr<Listener>> listeners(listen.size());
  std::vector<int> ports(listen.size(), 0);
  for (size_t i = 0; i < listen.size(); ++i) {
    if (absl::StartsWith(listen[i], "unix-abstract:")) {
      builder.AddListeningPort(listen[i], grpc::InsecureServerCredentials(), &ports[i]);
      continue;
    }
    ListenerOptions options = listener_options;
    if (!IsUnixAddress(listen[i]) && tls) {
      // Resolve first: a malformed address gets listener.h's message (exit 2).
      auto r = ResolveForBind(listen[i]);
      if (!r.ok()) {
        LogError(std::string(r.status().message()));
        return 2;
      }
      options.relay = relay.get();
      options.upstream_path = tls_socket;
    } else if (!IsUnixAddress(listen[i])) {
      auto loopback = IsLoopbackTcp(listen[i]);
      if (!loopback.ok()) {
        LogError(std::string(loopback.status().message()));
        return 2;
      }
      if (!*loopback && !absl::GetFlag(FLAGS_allow_insecure_tcp)) {
        LogError(absl::StrCat("refusing plaintext TCP on non-loopback ", listen[i],
                              ": give --tls_cert/--tls_key, or --allow_insecure_tcp "
                              "(docs/reliability.md, Threat model)"));
        return 2;
      }
      options.relay = reset_guard;
    } else if (absl::GetFlag(FLAGS_reset_guard_unix)) {
      options.relay = reset_guard;
    }
    auto l = Listener::Bind(listen[i], options);
    if (!l.ok()) {
      LogError(std::string(l.status().message()));
      return 1;
    }
    listeners[i] = *std::move(l);
    ports[i] = listeners[i]->port();
  }
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // Connection and stream bounds (docs/reliability.md, Threat model).
  auto ms = [](absl::Duration d) {
    return d <= absl::ZeroDuration() ? INT_MAX
                                     : static_cast<int>(std::min<int64_t>(
                                           absl::ToInt64Milliseconds(d), INT_MAX));
  };
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS,
                             ms(absl::GetFlag(FLAGS_max_connection_idle)));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS,
                             ms(absl::GetFlag(FLAGS_max_connection_age)));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS,
                             ms(absl::GetFlag(FLAGS_max_connection_age_grace)));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, ms(absl::GetFlag(FLAGS_keepalive_time)));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                             ms(absl::GetFlag(FLAGS_keepalive_timeout)));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 2);
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS,
                             ms(absl::GetFlag(FLAGS_handshake_timeout)));
  builder.AddChannelArgument(
      GRPC_ARG_MAX_CONCURRENT_STREAMS,
      static_cast<int>(std::min<uint32_t>(absl::GetFlag(FLAGS_max_concurrent_streams), INT_MAX)));
  grpc::ResourceQuota quota("maskd");
  quota.Resize(static_cast<size_t>(absl::GetFlag(FLAGS_grpc_memory_bytes)));
  quota.SetMaxThreads(std::max(absl::GetFlag(FLAGS_grpc_max_threads), 2));
  builder.SetResourceQuota(quota);
  const int max_message = static_cast<int>(
      std::min<uint64_t>(absl::GetFlag(FLAGS_max_message_bytes), INT_MAX));
  builder.SetMaxReceiveMessageSize(max_message);
  builder.SetMaxSendMessageSize(max_message);
  builder.RegisterService(&service);
  builder.RegisterService(&shm_service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) {
    LogError(absl::StrCat("cannot listen on ", absl::StrJoin(listen, ",")));
    return 1;
  }
  if (tls && tls_port == 0) {
    LogError(absl::StrCat("cannot listen on the private TLS socket ", tls_socket));
    server->Shutdown();
    return 1;
  }
  for (size_t i = 0; i < listen.size(); ++i) {
    if (!listeners[i] && ports[i] == 0) {
      LogError(absl::StrCat("cannot listen on ", listen[i]));
      server->Shutdown();
      return 1;
    }
  }
  for (auto& l : listeners) {
    if (l) l->Start(server.get());
  }
  auto stop_listeners = [&] {
    for (auto& l : listeners) {
      if (l) l->Stop();
    }
  };
  grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
  health->SetServingStatus(false);

  std::vector<std::string> errors;
  auto loaded = tokenizers.LoadDir(tokenizer_dir, vocab_sizes, &errors);
  for (const auto& e : errors) LogError(e);
  if (!loaded.ok()) {
    LogError(std::string(loaded.status().message()));
    stop_listeners();
    server->Shutdown(absl::ToChronoTime(absl::Now()));
    return 1;
  }
  health->SetServingStatus(true);
  std::vector<std::string> shown;
  for (size_t i = 0; i < listen.size(); ++i) {
    if (listeners[i]) {
      shown.push_back(listeners[i]->shown());
      continue;
    }
    shown.push_back(listen[i].rfind("unix", 0) == 0 || ports[i] == 0
                        ? listen[i]
                        : absl::StrCat(listen[i].substr(0, listen[i].rfind(':')), ":", ports[i]));
  }
  LogInfo(absl::StrCat("start version=", MASKD_VERSION, " pid=", getpid(),
                       " listen=", absl::StrJoin(shown, ","),
                       " metrics=", metrics_addr.empty() ? "off" : metrics_addr,
                       " tokenizer_dir=", tokenizer_dir, " tokenizers=",
                       absl::StrJoin(*loaded, ","), " ready_ms=",
                       absl::ToInt64Milliseconds(absl::Now() - started)));

  // The transport's counts, polled into the metrics once a second.
  absl::Notification stop_transport_stats;
  std::thread transport_stats([&] {
    do {
      Metrics::TransportCounts t;
      t.open = connection_limit.open.load();
      t.refused = connection_limit.refused.load();
      for (const auto& l : listeners) {
        if (l) t.upstream_failures += l->upstream_failures();
      }
      if (relay) t.closed_for_resets = relay->closed_for_resets();
      metrics.SetTransport(t);
      metrics.SetWorkPool("mask", mask_pool.queued(), mask_pool.running());
      metrics.SetWorkPool("step", step_pool.queued(), step_pool.running());
    } while (!stop_transport_stats.WaitForNotificationWithTimeout(absl::Seconds(1)));
  });

  int sig = 0;
  sigwait(&sigs, &sig);
  stop_transport_stats.Notify();
  transport_stats.join();
  const absl::Time stop_at = absl::Now();
  health->SetServingStatus(false);
  absl::SleepFor(absl::GetFlag(FLAGS_drain_delay));
  const absl::Time deadline = absl::Now() + absl::GetFlag(FLAGS_grace_period);
  stop_listeners();  // no new connections; gRPC's Shutdown ends the open ones
  absl::Notification shut;
  std::thread shutdown([&] {
    server->Shutdown(absl::ToChronoTime(deadline));
    shut.Notify();
  });
  // Compilations some RPC waits for are cancelled at the deadline, so that
  // Shutdown (which waits for every call to finish) returns.
  if (!shut.WaitForNotificationWithDeadline(deadline)) {
    cache->CancelAll();
    shut.WaitForNotification();
  }
  shutdown.join();
  server->Wait();
  server.reset();
  sessions.reset();
  cache.reset();
  LogInfo(absl::StrCat("stop signal=", sig == SIGTERM ? "SIGTERM" : "SIGINT",
                       " drain_ms=", absl::ToInt64Milliseconds(absl::Now() - stop_at),
                       " uptime_s=", absl::ToInt64Seconds(absl::Now() - started)));
  return 0;
}

}  // namespace
}  // namespace maskd

int main(int argc, char** argv) { return maskd::Run(argc, argv); }
