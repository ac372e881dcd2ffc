// maskd's flags and their reading into ServerConfig (server_config.h). The
// flags' help text is what `maskd --help` prints; docs/service.md has the
// table of them.
#include "service/server_config.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>
#include <tuple>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "service/client_identity.h"
#include "service/listener.h"

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
ABSL_FLAG(int32_t, step_slice_ms, 20,
          "Milliseconds a grammar step batch runs on a step thread before, if other clients' "
          "batches wait, it hands the thread back: it goes on, long, on an extra thread of its "
          "own and a new thread serves the queue. 0: never (a batch keeps its thread to its end)");
ABSL_FLAG(uint64_t, max_long_steps, 0,
          "Grammar step batches running long (past --step-slice-ms, on extra threads) at once; "
          "one client holds at most its share (this / clients with step work, at least 1). A "
          "batch that would pass either at its slice fails RESOURCE_EXHAUSTED, its sessions "
          "unchanged. 0: twice the step threads");
ABSL_FLAG(int32_t, mask_slice_ms, 20,
          "As --step-slice-ms, for Mask calls on the mask threads");
ABSL_FLAG(uint64_t, max_long_masks, 0,
          "As --max-long-steps, for Mask calls on the mask threads. 0: twice the mask threads");
ABSL_FLAG(absl::Duration, slow_client_penalty, absl::Seconds(10),
          "After one of a client's Mask calls or grammar step batches goes long (or is refused) "
          "at its slice, the client's next ones start long, at --long_task_nice, for this long; "
          "0: never");
ABSL_FLAG(int32_t, long_task_nice, 10,
          "Added to the nice value of the thread of a long step batch or Mask call (past "
          "--step-slice-ms / --mask-slice-ms, on an extra thread), so that the OS gives the CPU "
          "to the threads serving other calls first (0 to 19; 0: same priority)");
ABSL_FLAG(absl::Duration, compile_timeout, absl::Seconds(30),
          "Compilation deadline (requests may ask for less)");
ABSL_FLAG(absl::Duration, failure_ttl, absl::Seconds(10), "How long a compile failure is cached");
ABSL_FLAG(uint64_t, max_pending_compiles, 256, "Compilations queued or running at most");
ABSL_FLAG(uint64_t, max_pending_compiles_per_client, 128,
          "Compilations queued or running at most per client (--client-identity); 0: no cap. "
          "While other clients hold compilations, also at most --max-pending-compiles / "
          "(clients holding compilations + 1)");
ABSL_FLAG(int32_t, compile_nice, 5,
          "Added to the nice value of the compile threads and the fast lane's, so that "
          "compilations yield the CPU to steps and masks when they compete (Linux; 0-19)");
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
ABSL_FLAG(uint64_t, max_structural_tag_bytes, uint64_t{16} << 20,
          "Structural tag document bytes at most (a tool list; there is no count of tags)");
ABSL_FLAG(uint64_t, max_structural_tag_symbols, uint64_t{4} << 20,
          "Rules, terminals and alternatives' symbols of a structural tag's tags' grammars "
          "together at most");
ABSL_FLAG(uint64_t, terminal_dfa_cache_bytes, uint64_t{256} << 20,
          "Bytes of grammar terminal DFAs kept for reuse by later compilations (tools sent "
          "again); 0: none kept");
ABSL_FLAG(uint64_t, schema_grammar_cache_bytes, uint64_t{64} << 20,
          "Bytes of structural tags' schemas lowered to grammars kept for reuse by later "
          "compilations (tools sent again); 0: none kept");
ABSL_FLAG(uint32_t, max_dfa_states, 100000, "DFA states at most per index");
ABSL_FLAG(uint32_t, max_nfa_states, 2000000, "NFA states at most per index");
ABSL_FLAG(uint64_t, auto_route_max_regex_bytes, maskd::CompileLimits::kDefaultAutoRouteMaxRegexBytes,
          "SCHEMA_ROUTE_AUTO: a JSON Schema whose regex would be over this many bytes takes the "
          "grammar route without trying the regex route (0: no cap)");
ABSL_FLAG(uint64_t, auto_route_max_regex_nodes, maskd::CompileLimits::kDefaultAutoRouteMaxRegexNodes,
          "SCHEMA_ROUTE_AUTO: a JSON Schema whose regex has more syntax nodes than this, counted "
          "repeats expanded, takes the grammar route without building the regex route's "
          "automaton (0: no cap)");
ABSL_FLAG(uint32_t, eager_dfa_states, maskd::CompileLimits::kDefaultEagerDfaStates,
          "A regex's DFA is built whole (minimized) at compile when its subset construction "
          "fits this many states, else lazily as sessions reach its states; 0: always lazy");
ABSL_FLAG(uint32_t, eager_terminal_dfa_states, maskd::CompileLimits::kDefaultEagerTerminalDfaStates,
          "A grammar terminal's DFA is built whole (minimized) at compile when its subset "
          "construction fits this many states, else lazily as sessions reach its states; 0: "
          "always lazy");
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

// argv with '-' turned to '_' in every flag's name (absl spells names with
// underscores), its value untouched.
std::vector<std::string> UnderscoredArgs(int argc, char** argv) {
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
  return args;
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

// `maskd --help` lists the flags of this file; `--version` prints maskd's.
// Once per process (absl refuses a second usage message).
void SetUsage() {
  static std::once_flag once;
  std::call_once(once, [] {
    absl::SetProgramUsageMessage(
        "token masks for constrained generation over gRPC (docs/service.md)");
  });
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [](absl::string_view path) {
    return absl::EndsWith(path, "service/server_config.cc");
  };
  usage.contains_helpshort_flags = usage.contains_help_flags;
  usage.version_string = [] { return std::string("maskd ") + MASKD_VERSION + "\n"; };
  absl::SetFlagsUsageConfig(usage);
}

// "name=N" entries (a later name wins) into logits widths.
absl::StatusOr<std::map<std::string, uint32_t>> VocabSizes(
    const std::vector<std::string>& entries) {
  std::map<std::string, uint32_t> vocab_sizes;
  for (const auto& v : entries) {
    std::pair<std::string, std::string> kv = absl::StrSplit(v, absl::MaxSplits('=', 1));
    uint32_t n;
    if (kv.first.empty() || !absl::SimpleAtoi(kv.second, &n)) {
      return absl::InvalidArgumentError(absl::StrCat("--vocab-size: want name=N, got '", v, "'"));
    }
    vocab_sizes[kv.first] = n;
  }
  return vocab_sizes;
}

absl::StatusOr<ClientIdentity> ClientIdentityFlag() {
  const std::optional<ClientIdentity> identity =
      ParseClientIdentity(absl::GetFlag(FLAGS_client_identity));
  if (!identity) {
    return absl::InvalidArgumentError(
        absl::StrCat("--client_identity: want connection, uid, header or tls, got '",
                     absl::GetFlag(FLAGS_client_identity).substr(0, 64), "'"));
  }
  return *identity;
}

// Nesting limits: a flag may lower its parser's stack-safe maximum, never
// raise it.
absl::Status CheckNestingLimits() {
  for (auto [flag, value, max] :
       {std::tuple{"--max_regex_nesting", absl::GetFlag(FLAGS_max_regex_nesting), kMaxRegexNesting},
        std::tuple{"--max_schema_nesting", absl::GetFlag(FLAGS_max_schema_nesting),
                   kMaxSchemaNesting},
        std::tuple{"--max_schema_depth", absl::GetFlag(FLAGS_max_schema_depth), kMaxSchemaDepth},
        std::tuple{"--max_pattern_nesting", absl::GetFlag(FLAGS_max_pattern_nesting),
                   kMaxPatternNesting}}) {
    if (value < 1 || value > max) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, "=", value, ": want 1 to ", max,
                       " (the maximum bounds the parser's stack depth; the flag can only "
                       "lower it)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<mode_t> SocketModeFlag() {
  const std::string mode = absl::GetFlag(FLAGS_socket_mode);
  char* end = nullptr;
  long m = mode.empty() ? -1 : strtol(mode.c_str(), &end, 8);
  if (m < 0 || m > 0777 || *end != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--socket_mode: want an octal mode like 0660, got '", mode.substr(0, 64), "'"));
  }
  return static_cast<mode_t>(m);
}

// --tls_cert, --tls_key and --tls_client_ca, read (all empty: no TLS).
absl::StatusOr<TlsPem> TlsFlags() {
  const std::string cert = absl::GetFlag(FLAGS_tls_cert), key = absl::GetFlag(FLAGS_tls_key),
                    ca = absl::GetFlag(FLAGS_tls_client_ca);
  if (cert.empty() != key.empty() || (!ca.empty() && cert.empty())) {
    return absl::InvalidArgumentError(
        "--tls_cert and --tls_key go together; --tls_client_ca needs them");
  }
  TlsPem pem;
  for (const auto& [flag, path, out] :
       {std::tuple<const char*, std::string, std::string*>{"--tls_cert", cert, &pem.cert_chain},
        {"--tls_key", key, &pem.private_key},
        {"--tls_client_ca", ca, &pem.client_ca}}) {
    if (path.empty()) continue;
    auto text = ReadSmallFile(path);
    if (!text.ok()) return absl::InvalidArgumentError(absl::StrCat(flag, ": ", text.status().message()));
    *out = *std::move(text);
  }
  return pem;
}

// Every TCP address resolves (with TLS, that is all: it gets listener.h's
// message, not a bind failure); a plaintext one is loopback unless
// --allow_insecure_tcp.
absl::Status CheckListenAddresses(const std::vector<std::string>& listen, bool tls) {
  for (const std::string& addr : listen) {
    if (absl::StartsWith(addr, "unix-abstract:") || IsUnixAddress(addr)) continue;
    if (tls) {
      auto r = ResolveForBind(addr);
      if (!r.ok()) return absl::InvalidArgumentError(r.status().message());
      continue;
    }
    auto loopback = IsLoopbackTcp(addr);
    if (!loopback.ok()) return absl::InvalidArgumentError(loopback.status().message());
    if (!*loopback && !absl::GetFlag(FLAGS_allow_insecure_tcp)) {
      return absl::InvalidArgumentError(
          absl::StrCat("refusing plaintext TCP on non-loopback ", addr,
                       ": give --tls_cert/--tls_key, or --allow_insecure_tcp "
                       "(docs/reliability.md, Threat model)"));
    }
  }
  return absl::OkStatus();
}

GrpcServerBounds GrpcBoundsFlags() {
  GrpcServerBounds b;
  b.max_connection_idle = absl::GetFlag(FLAGS_max_connection_idle);
  b.max_connection_age = absl::GetFlag(FLAGS_max_connection_age);
  b.max_connection_age_grace = absl::GetFlag(FLAGS_max_connection_age_grace);
  b.keepalive_time = absl::GetFlag(FLAGS_keepalive_time);
  b.keepalive_timeout = absl::GetFlag(FLAGS_keepalive_timeout);
  b.handshake_timeout = absl::GetFlag(FLAGS_handshake_timeout);
  b.max_concurrent_streams = absl::GetFlag(FLAGS_max_concurrent_streams);
  b.memory_bytes = absl::GetFlag(FLAGS_grpc_memory_bytes);
  b.max_threads = absl::GetFlag(FLAGS_grpc_max_threads);
  b.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  return b;
}

// The transport flags, checked; `listen` is the --listen list in effect.
absl::StatusOr<TransportConfig> TransportFlags(std::vector<std::string> listen) {
  TransportConfig t;
  t.listen = std::move(listen);
  absl::StatusOr<mode_t> mode = SocketModeFlag();
  if (!mode.ok()) return mode.status();
  t.socket_mode = *mode;
  t.first_byte_timeout = absl::GetFlag(FLAGS_handshake_timeout);
  t.max_connections = absl::GetFlag(FLAGS_max_connections);
  absl::StatusOr<TlsPem> tls = TlsFlags();
  if (!tls.ok()) return tls.status();
  t.tls = *std::move(tls);
  if (absl::Status s = CheckListenAddresses(t.listen, !t.tls.cert_chain.empty()); !s.ok()) {
    return s;
  }
  t.max_resets_per_second = std::max(absl::GetFlag(FLAGS_max_resets_per_second), 0.0);
  t.reset_guard_unix = absl::GetFlag(FLAGS_reset_guard_unix);
  t.grpc = GrpcBoundsFlags();
  return t;
}

// The compile limits (--max-regex-*, --max-schema-*, --max-grammar-*, ...).
CompileLimits CompileLimitsFlags() {
  CompileLimits c;
  c.regex.max_nesting = absl::GetFlag(FLAGS_max_regex_nesting);
  c.max_schema_nesting = absl::GetFlag(FLAGS_max_schema_nesting);
  c.max_schema_depth = absl::GetFlag(FLAGS_max_schema_depth);
  c.max_pattern_nesting = absl::GetFlag(FLAGS_max_pattern_nesting);
  c.regex.max_pattern_bytes = absl::GetFlag(FLAGS_max_regex_bytes);
  c.regex.max_repeat = absl::GetFlag(FLAGS_max_regex_repeat);
  c.max_dfa_states = absl::GetFlag(FLAGS_max_dfa_states);
  c.max_nfa_states = absl::GetFlag(FLAGS_max_nfa_states);
  c.eager_dfa_states = absl::GetFlag(FLAGS_eager_dfa_states);
  c.eager_terminal_dfa_states = absl::GetFlag(FLAGS_eager_terminal_dfa_states);
  c.auto_route_max_regex_bytes = absl::GetFlag(FLAGS_auto_route_max_regex_bytes);
  c.auto_route_max_regex_nodes = absl::GetFlag(FLAGS_auto_route_max_regex_nodes);
  c.grammar.max_text_bytes = absl::GetFlag(FLAGS_max_grammar_bytes);
  c.grammar.max_rules = absl::GetFlag(FLAGS_max_grammar_rules);
  c.grammar.max_terminals = absl::GetFlag(FLAGS_max_grammar_terminals);
  c.grammar.max_symbols = absl::GetFlag(FLAGS_max_grammar_symbols);
  c.grammar.max_nesting = absl::GetFlag(FLAGS_max_grammar_nesting);
  c.grammar.max_repeat = absl::GetFlag(FLAGS_max_grammar_repeat);
  c.grammar_index.earley.max_chart_items = absl::GetFlag(FLAGS_max_grammar_chart_items);
  c.grammar_index.earley.max_items_per_position = absl::GetFlag(FLAGS_max_grammar_set_items);
  c.grammar_index.max_mask_work = absl::GetFlag(FLAGS_max_grammar_mask_work);
  c.grammar_index.max_parser_steps = absl::GetFlag(FLAGS_max_grammar_parser_steps);
  c.grammar_index.max_memo_bytes = absl::GetFlag(FLAGS_max_grammar_memo_bytes);
  c.max_structural_tag_bytes = absl::GetFlag(FLAGS_max_structural_tag_bytes);
  c.max_structural_tag_symbols = absl::GetFlag(FLAGS_max_structural_tag_symbols);
  c.terminal_dfa_bytes = absl::GetFlag(FLAGS_terminal_dfa_cache_bytes);
  c.schema_grammar_bytes = absl::GetFlag(FLAGS_schema_grammar_cache_bytes);
  return c;
}

IndexCacheOptions CacheFlags() {
  IndexCacheOptions o;
  o.compile = CompileLimitsFlags();
  o.max_bytes = absl::GetFlag(FLAGS_cache_bytes);
  o.max_mask_bytes = absl::GetFlag(FLAGS_max_mask_bytes);
  o.compile_threads = absl::GetFlag(FLAGS_compile_threads);
  o.compile_timeout = absl::GetFlag(FLAGS_compile_timeout);
  o.failure_ttl = absl::GetFlag(FLAGS_failure_ttl);
  o.max_pending = absl::GetFlag(FLAGS_max_pending_compiles);
  o.max_pending_per_client = absl::GetFlag(FLAGS_max_pending_compiles_per_client);
  o.fast_lane_budget = absl::GetFlag(FLAGS_compile_fast_lane);
  o.compile_nice = std::clamp(absl::GetFlag(FLAGS_compile_nice), 0, 19);
  return o;
}

SessionTableOptions SessionFlags() {
  SessionTableOptions o;
  o.max_sessions = absl::GetFlag(FLAGS_max_sessions);
  o.max_sessions_per_client = absl::GetFlag(FLAGS_max_sessions_per_client);
  o.ttl = absl::GetFlag(FLAGS_session_ttl);
  o.rollback_window = absl::GetFlag(FLAGS_rollback_window);
  o.grammar_chart_budget = std::make_shared<MaskBudget>(absl::GetFlag(FLAGS_max_grammar_chart_bytes));
  return o;
}

StepLimits StepFlags() {
  StepLimits l;
  l.max_batch = absl::GetFlag(FLAGS_max_batch);
  l.max_tokens_per_request = absl::GetFlag(FLAGS_max_request_tokens);
  l.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  return l;
}

ServiceLimits ServiceFlags(ClientIdentity client_identity) {
  ServiceLimits l;
  l.max_constraint_bytes = absl::GetFlag(FLAGS_max_regex_bytes);
  l.max_grammar_bytes = absl::GetFlag(FLAGS_max_grammar_bytes);
  l.max_structural_tag_bytes = absl::GetFlag(FLAGS_max_structural_tag_bytes);
  l.max_streams = absl::GetFlag(FLAGS_max_streams);
  l.max_streams_per_client = absl::GetFlag(FLAGS_max_streams_per_client);
  l.client_identity = client_identity;
  l.stream_idle_timeout = absl::GetFlag(FLAGS_stream_idle_timeout);
  return l;
}

absl::StatusOr<ShmServiceOptions> ShmFlags(ClientIdentity client_identity) {
  ShmServiceOptions o;
  o.allow_registration = absl::GetFlag(FLAGS_allow_shm);
  o.key_prefix = absl::GetFlag(FLAGS_shm_prefix);
  o.allow_tcp = absl::GetFlag(FLAGS_shm_allow_tcp);
  o.max_regions_per_client = absl::GetFlag(FLAGS_max_shm_regions_per_client);
  o.client_identity = client_identity;
  if (o.key_prefix.empty() || o.key_prefix[0] != '/') {
    return absl::InvalidArgumentError("--shm_prefix must start with '/'");
  }
  return o;
}

// A work pool's options: `threads`, its per-client cap, its slice (from
// --{mask,step}-slice-ms: 0 or less never hands back), its cap on long tasks
// (0: the pool's 2 * threads) and --long-task-nice, shared by both pools.
WorkPool::Options PoolOptions(size_t threads, uint64_t max_per_client, int32_t slice_ms,
                              uint64_t max_long) {
  WorkPool::Options o;
  o.threads = threads;
  o.max_per_client = max_per_client;
  o.slice = slice_ms > 0 ? absl::Milliseconds(slice_ms) : absl::InfiniteDuration();
  o.max_long = max_long;
  o.long_nice = std::clamp(absl::GetFlag(FLAGS_long_task_nice), 0, 19);
  o.penalty = std::max(absl::GetFlag(FLAGS_slow_client_penalty), absl::ZeroDuration());
  return o;
}

WorkPool::Options MaskPoolFlags() {
  return PoolOptions(static_cast<size_t>(std::max(absl::GetFlag(FLAGS_mask_threads), 1)),
                     absl::GetFlag(FLAGS_max_pending_masks_per_client),
                     absl::GetFlag(FLAGS_mask_slice_ms), absl::GetFlag(FLAGS_max_long_masks));
}

// The step pool's options from --step-threads (0: one per CPU, at least 2),
// --max-pending-steps-per-client, --step-slice-ms and --max-long-steps.
WorkPool::Options StepPoolFlags() {
  const int32_t threads = absl::GetFlag(FLAGS_step_threads);
  WorkPool::Options o = PoolOptions(
      threads > 0 ? static_cast<size_t>(threads)
                  : std::max<size_t>(std::thread::hardware_concurrency(), 2),
      absl::GetFlag(FLAGS_max_pending_steps_per_client), absl::GetFlag(FLAGS_step_slice_ms),
      absl::GetFlag(FLAGS_max_long_steps));
  o.tasks = "grammar step batches";
  o.cap_flag = "--max-pending-steps-per-client";
  o.long_flag = "--max-long-steps";
  o.thread_name = "maskd-step";
  return o;
}

// The flags once parsed, checked in the order maskd always reported them.
absl::StatusOr<ServerConfig> ConfigFromFlags(std::vector<std::string> listen,
                                             const std::vector<std::string>& vocab_entries) {
  ServerConfig c;
  absl::StatusOr<std::map<std::string, uint32_t>> vocab_sizes = VocabSizes(vocab_entries);
  if (!vocab_sizes.ok()) return vocab_sizes.status();
  c.vocab_sizes = *std::move(vocab_sizes);
  c.tokenizer_dir = absl::GetFlag(FLAGS_tokenizer_dir);
  if (c.tokenizer_dir.empty()) c.tokenizer_dir = DefaultTokenizerDir();
  c.metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
  absl::StatusOr<ClientIdentity> client_identity = ClientIdentityFlag();
  if (!client_identity.ok()) return client_identity.status();
  if (absl::Status s = CheckNestingLimits(); !s.ok()) return s;
  c.max_tokenizers = absl::GetFlag(FLAGS_max_tokenizers);
  c.loop_mask_bytes = absl::GetFlag(FLAGS_loop_mask_bytes);
  c.max_tokenizers_per_client = absl::GetFlag(FLAGS_max_tokenizers_per_client);
  c.cache = CacheFlags();
  c.sessions = SessionFlags();
  c.step = StepFlags();
  c.service = ServiceFlags(*client_identity);
  c.mask_pool = MaskPoolFlags();
  c.step_pool = StepPoolFlags();
  absl::StatusOr<ShmServiceOptions> shm = ShmFlags(*client_identity);
  if (!shm.ok()) return shm.status();
  c.shm = *std::move(shm);
  absl::StatusOr<TransportConfig> transport = TransportFlags(std::move(listen));
  if (!transport.ok()) return transport.status();
  c.transport = *std::move(transport);
  c.drain_delay = absl::GetFlag(FLAGS_drain_delay);
  c.grace_period = absl::GetFlag(FLAGS_grace_period);
  return c;
}

}  // namespace

absl::StatusOr<ServerConfig> ReadServerConfig(int argc, char** argv) {
  SetUsage();
  std::vector<std::string> vocab_entries = Repeated(argc, argv, "vocab_size");
  for (auto& v : Repeated(argc, argv, "vocab-size")) vocab_entries.push_back(v);
  std::vector<std::string> args = UnderscoredArgs(argc, argv);
  std::vector<char*> cargs;
  for (auto& a : args) cargs.push_back(a.data());
  std::vector<char*> positional = absl::ParseCommandLine(static_cast<int>(cargs.size()), cargs.data());
  if (positional.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", positional[1], "'"));
  }
  // absl keeps only a vector flag's last occurrence: these repeat.
  std::vector<std::string> listen = Repeated(static_cast<int>(cargs.size()), cargs.data(), "listen");
  if (listen.empty()) listen = absl::GetFlag(FLAGS_listen);
  if (vocab_entries.empty()) vocab_entries = absl::GetFlag(FLAGS_vocab_size);
  return ConfigFromFlags(std::move(listen), vocab_entries);
}

}  // namespace maskd
