// ReadServerConfig: maskd's command line into ServerConfig, each refusal
// with the message maskd logs (the integration tests grep the log for them).
#include "service/server_config.h"

#include <string>
#include <vector>

#include "absl/flags/reflection.h"
#include "gtest/gtest.h"

namespace maskd {
namespace {

// ReadServerConfig over `args` (after the program name), the flags restored
// to their defaults afterwards.
absl::StatusOr<ServerConfig> Read(std::vector<std::string> args) {
  absl::FlagSaver restore;
  args.insert(args.begin(), "maskd");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  return ReadServerConfig(static_cast<int>(argv.size()), argv.data());
}

TEST(ServerConfigTest, DefaultsAreTheFlagsDefaults) {
  absl::StatusOr<ServerConfig> c = Read({});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->transport.listen,
            (std::vector<std::string>{"unix:///tmp/maskd.sock", "127.0.0.1:50051"}));
  EXPECT_EQ(c->transport.socket_mode, 0660u);
  EXPECT_EQ(c->transport.max_connections, 4096u);
  EXPECT_TRUE(c->transport.tls.cert_chain.empty());
  EXPECT_EQ(c->transport.max_resets_per_second, 200);
  EXPECT_EQ(c->transport.grpc.max_message_bytes, uint64_t{64} << 20);
  EXPECT_EQ(c->metrics_listen, "127.0.0.1:9464");
  EXPECT_FALSE(c->tokenizer_dir.empty());
  EXPECT_EQ(c->cache.max_bytes, uint64_t{1} << 30);
  EXPECT_EQ(c->cache.compile.max_dfa_states, 100000u);
  EXPECT_EQ(c->cache.compile.eager_dfa_states, 1024u);
  EXPECT_EQ(c->cache.compile.eager_terminal_dfa_states, 64u);
  EXPECT_EQ(c->sessions.max_sessions, 100000u);
  ASSERT_NE(c->sessions.grammar_chart_budget, nullptr);
  EXPECT_EQ(c->step.max_batch, 1024u);
  EXPECT_EQ(c->service.client_identity, ClientIdentity::kConnection);
  EXPECT_EQ(c->shm.key_prefix, "/maskd-");
  EXPECT_EQ(c->mask_pool.threads, 2u);
  EXPECT_GE(c->step_pool.threads, 2u);
  EXPECT_EQ(c->step_pool.cap_flag, "--max-pending-steps-per-client");
  EXPECT_EQ(c->step_pool.slice, absl::Milliseconds(20));
  EXPECT_EQ(c->step_pool.max_long, 0u);  // the pool's 2 * threads
  EXPECT_EQ(c->step_pool.long_flag, "--max-long-steps");
  EXPECT_EQ(c->mask_pool.slice, absl::Milliseconds(20));
  EXPECT_EQ(c->mask_pool.long_flag, "--max-long-masks");
  EXPECT_EQ(c->step_pool.long_nice, 10);
  EXPECT_EQ(c->mask_pool.long_nice, 10);
  EXPECT_EQ(c->step_pool.thread_name, "maskd-step");
  EXPECT_EQ(c->mask_pool.thread_name, "maskd-mask");
  EXPECT_EQ(c->cache.compile_nice, 5);
  EXPECT_EQ(c->cache.compile.auto_route_max_regex_bytes, 262144u);
  EXPECT_EQ(c->cache.compile.auto_route_max_regex_nodes, 200000u);
  EXPECT_EQ(c->step_pool.penalty, absl::Seconds(10));
  EXPECT_EQ(c->mask_pool.penalty, absl::Seconds(10));
  EXPECT_EQ(c->grace_period, absl::Seconds(10));
}

// The pools' slices and long-task caps; a slice of 0 never hands back.
TEST(ServerConfigTest, PoolSlicesAndLongTaskCaps) {
  absl::StatusOr<ServerConfig> c = Read(
      {"--step-slice-ms=5", "--max-long-steps=3", "--mask-slice-ms=0", "--max-long-masks=1",
       "--long-task-nice=0", "--slow-client-penalty=0"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->step_pool.slice, absl::Milliseconds(5));
  EXPECT_EQ(c->step_pool.max_long, 3u);
  EXPECT_EQ(c->mask_pool.slice, absl::InfiniteDuration());
  EXPECT_EQ(c->mask_pool.max_long, 1u);
  EXPECT_EQ(c->step_pool.long_nice, 0);
  EXPECT_EQ(c->mask_pool.long_nice, 0);
  EXPECT_EQ(c->step_pool.penalty, absl::ZeroDuration());
  EXPECT_EQ(c->mask_pool.penalty, absl::ZeroDuration());
}

// --compile-nice is clamped to the OS's range.
TEST(ServerConfigTest, CompileNice) {
  absl::StatusOr<ServerConfig> c = Read({"--compile-nice=7"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->cache.compile_nice, 7);
  c = Read({"--compile-nice=40"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->cache.compile_nice, 19);
}

TEST(ServerConfigTest, DashesRepeatsAndCommas) {
  absl::StatusOr<ServerConfig> c =
      Read({"--listen=unix:/tmp/a.sock,127.0.0.1:0", "--listen", "localhost:0",
            "--max-sessions=7", "--vocab-size=a=1", "--vocab_size=b=2,c=3",
            "--socket-mode=0600", "--max-resets-per-second=-1", "--client-identity=uid",
            "--max-grammar-rules=12"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->transport.listen,
            (std::vector<std::string>{"unix:/tmp/a.sock", "127.0.0.1:0", "localhost:0"}));
  EXPECT_EQ(c->sessions.max_sessions, 7u);
  EXPECT_EQ(c->vocab_sizes, (std::map<std::string, uint32_t>{{"a", 1}, {"b", 2}, {"c", 3}}));
  EXPECT_EQ(c->transport.socket_mode, 0600u);
  EXPECT_EQ(c->transport.max_resets_per_second, 0);
  EXPECT_EQ(c->service.client_identity, ClientIdentity::kUid);
  EXPECT_EQ(c->shm.client_identity, ClientIdentity::kUid);
  EXPECT_EQ(c->cache.compile.grammar.max_rules, 12u);
}

TEST(ServerConfigTest, NonLoopbackPlaintextNeedsTheFlag) {
  absl::StatusOr<ServerConfig> c = Read({"--listen=0.0.0.0:0"});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            "refusing plaintext TCP on non-loopback 0.0.0.0:0: give --tls_cert/--tls_key, or "
            "--allow_insecure_tcp (docs/reliability.md, Threat model)");
  EXPECT_TRUE(Read({"--listen=0.0.0.0:0", "--allow-insecure-tcp"}).ok());
}

TEST(ServerConfigTest, EachRefusalNamesItsFlag) {
  const struct {
    std::vector<std::string> args;
    std::string message;
  } cases[] = {
      {{"stray"}, "unexpected argument 'stray'"},
      {{"--vocab-size=x"}, "--vocab-size: want name=N, got 'x'"},
      {{"--client-identity=bogus"},
       "--client_identity: want connection, uid, header or tls, got 'bogus'"},
      {{"--max-schema-depth=0"},
       "--max_schema_depth=0: want 1 to 128 (the maximum bounds the parser's stack depth; "
       "the flag can only lower it)"},
      {{"--shm-prefix=maskd"}, "--shm_prefix must start with '/'"},
      {{"--socket-mode=0999"}, "--socket_mode: want an octal mode like 0660, got '0999'"},
      {{"--tls-key=/k.pem"}, "--tls_cert and --tls_key go together; --tls_client_ca needs them"},
      {{"--tls-cert=/nonexistent/c.pem", "--tls-key=/nonexistent/k.pem"},
       "--tls_cert: cannot read /nonexistent/c.pem: No such file or directory"},
      {{"--listen=nonsense"}, "listen address 'nonsense': want host:port or [v6]:port"},
  };
  for (const auto& t : cases) {
    absl::StatusOr<ServerConfig> c = Read(t.args);
    ASSERT_FALSE(c.ok()) << t.message;
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << t.message;
    EXPECT_EQ(c.status().message(), t.message);
  }
}

}  // namespace
}  // namespace maskd
