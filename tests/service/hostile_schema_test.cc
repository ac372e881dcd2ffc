// Issue #11 item 1 through the real binaries: a JSON Schema nested far beyond
// any real one (a `pattern` of 200,000 nested groups, about 400 KB; 1 MiB of
// nested groups; 1 MiB of nested `items`) used to kill maskd with SIGSEGV
// (and `maskctl schema-to-regex` with it). Now each Compile is refused with
// INVALID_ARGUMENT or RESOURCE_EXHAUSTED, a bounded message naming the
// offset, and the server keeps serving.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/service/server_harness.h"

namespace maskd {
namespace {

using ::maskd::testing::MaskdProcess;
using ::testing::AnyOf;
using ::testing::HasSubstr;

std::string Repeat(const std::string& s, size_t n) {
  std::string out;
  out.reserve(s.size() * n);
  for (size_t i = 0; i < n; ++i) out += s;
  return out;
}

// {"type":"string","pattern":"^((...(a)...))$"} with `depth` groups.
std::string DeepPatternSchema(size_t depth) {
  return absl::StrCat(R"({"type":"string","pattern":"^)", Repeat("(", depth), "a",
                      Repeat(")", depth), R"($"})");
}

// {"type":"array","items":{"type":"array","items":...{}...}} of about `bytes`.
std::string DeepItemsSchema(size_t bytes) {
  const std::string open = R"({"type":"array","items":)";
  const size_t depth = bytes / (open.size() + 1);
  return absl::StrCat(Repeat(open, depth), "{}", Repeat("}", depth));
}

v1::CompileRequest SchemaRequest(const std::string& schema) {
  v1::CompileRequest req;
  req.set_tokenizer("qwen3");
  req.set_json_schema(schema);
  req.set_wait(true);
  return req;
}

TEST(HostileSchema, DeepNestingIsRefusedAndTheServerKeepsServing) {
  // Constraints up to 2 MiB, so that only the nesting limits can refuse.
  MaskdProcess server({"--max-regex-bytes=2097152", "--compile-threads=2"});
  ASSERT_TRUE(server.ok()) << server.Log();
  auto client = server.Connect();
  const std::pair<const char*, std::string> cases[] = {
      {"pattern, 200,000 groups (400 KB)", DeepPatternSchema(200000)},
      {"pattern, 1 MiB of groups", DeepPatternSchema((1 << 20) / 2)},
      {"items, 1 MiB", DeepItemsSchema(1 << 20)},
  };
  for (const auto& [name, schema] : cases) {
    SCOPED_TRACE(name);
    ASSERT_LE(schema.size(), 2097152u);
    auto r = client->Compile(SchemaRequest(schema));
    ASSERT_FALSE(r.ok());
    EXPECT_THAT(r.status().code(), AnyOf(absl::StatusCode::kInvalidArgument,
                                         absl::StatusCode::kResourceExhausted))
        << r.status();
    EXPECT_THAT(r.status().message(), HasSubstr("nested too deeply"));
    EXPECT_THAT(r.status().message(), HasSubstr("offset"));
    EXPECT_LT(r.status().message().size(), 1024u);
    // Still serving: the process is alive and a small schema compiles.
    ASSERT_EQ(kill(server.pid(), 0), 0) << server.Log();
    auto ok = client->Compile(SchemaRequest(R"({"type":"string","pattern":"^((a)|b)$"})"));
    ASSERT_TRUE(ok.ok()) << ok.status() << "\n" << server.Log();
  }
}

// Item 10: a schema followed by a NUL byte and garbage used to compile (the
// JSON library stops at the NUL).
TEST(HostileSchema, TrailingBytesAreInvalidArgumentNamingTheOffset) {
  MaskdProcess server;
  ASSERT_TRUE(server.ok()) << server.Log();
  auto client = server.Connect();
  const std::string good = R"({"type":"integer"})";
  ASSERT_TRUE(client->Compile(SchemaRequest(good)).ok());
  auto r = client->Compile(SchemaRequest(good + std::string("\0garbage", 8)));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr(absl::StrCat("byte offset ", good.size())));
}

// Found by json_schema_fuzzer: a number beyond double (1e400) threw an
// exception nothing caught, and the compile thread took the server down.
TEST(HostileSchema, NumberBeyondDoubleIsInvalidArgument) {
  MaskdProcess server;
  ASSERT_TRUE(server.ok()) << server.Log();
  auto client = server.Connect();
  auto r = client->Compile(SchemaRequest(R"({"const": 1e400})"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  ASSERT_EQ(kill(server.pid(), 0), 0) << server.Log();
  EXPECT_TRUE(client->Compile(SchemaRequest(R"({"type":"integer"})")).ok()) << server.Log();
}

// Issue #13: the schema converter ran without the compile deadline, so a
// schema that converts slowly held a compile thread for as long as it took.
// This one (3000 properties, each with an unanchored pattern whose search
// automaton needs a capped DFA build) takes over 10 s to convert; a Compile
// with a 300 ms timeout ends with DEADLINE_EXCEEDED soon after, from inside
// the conversion, and the server keeps serving.
TEST(HostileSchema, SlowConversionEndsAtTheCompileDeadline) {
  MaskdProcess server;
  ASSERT_TRUE(server.ok()) << server.Log();
  auto client = server.Connect();
  std::string props;
  for (int i = 0; i < 3000; ++i) {
    absl::StrAppend(&props, i ? "," : "", "\"p", i, R"(":{"type":"string","pattern":"q)", i,
                    R"(.{12}z"})");
  }
  v1::CompileRequest req =
      SchemaRequest(absl::StrCat(R"({"type":"object","properties":{)", props, "}}"));
  req.mutable_options()->set_timeout_ms(300);
  const absl::Time start = absl::Now();
  auto r = client->Compile(req);
  const absl::Duration took = absl::Now() - start;
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("JSON Schema conversion exceeded its deadline"));
  EXPECT_LT(took, absl::Seconds(5));
  ASSERT_EQ(kill(server.pid(), 0), 0) << server.Log();
  auto ok = client->Compile(SchemaRequest(R"({"type":"string","pattern":"^q1.{12}z"})"));
  EXPECT_TRUE(ok.ok()) << ok.status() << "\n" << server.Log();
}

// Runs maskctl with `args`; returns the raw wait status.
int RunMaskctl(const std::vector<std::string>& args) {
  pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> argv;
    std::string bin = std::string(MASKD_BIN_DIR) + "/maskctl";
    argv.push_back(bin.data());
    std::vector<std::string> copy = args;
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    freopen("/dev/null", "w", stdout);
    freopen("/dev/null", "w", stderr);
    execv(bin.c_str(), argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

TEST(HostileSchema, MaskctlSchemaToRegexExitsWithAnError) {
  char dir[] = "/tmp/maskd-hostile-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/deep.json";
  {
    std::ofstream out(path, std::ios::binary);
    out << DeepPatternSchema(200000);
  }
  int status = RunMaskctl({"schema-to-regex", path});
  EXPECT_FALSE(WIFSIGNALED(status)) << "killed by signal " << WTERMSIG(status);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 2);
  unlink(path.c_str());
  rmdir(dir);
}

// Issue #11: the nesting limits are flags that can only lower the parsers'
// stack-safe maxima. Each constraint compiles on a default server and is
// refused, INVALID_ARGUMENT naming the flag, where its flag is lowered.
TEST(HostileSchema, NestingFlagsLowerTheLimits) {
  struct Case {
    const char* flag;
    bool is_regex;
    std::string constraint;
  };
  const Case cases[] = {
      {"--max_regex_nesting", true, "((((a))))b"},  // 4 groups
      {"--max_schema_nesting", false,                // 8 levels of arrays and objects
       R"({"type":"object","properties":{"a":{"type":"array","items":)"
       R"({"type":"object","properties":{"b":{"enum":[[1]]}}}}}})"},
      {"--max_schema_depth", false,  // 5 subschemas
       R"({"type":"array","items":{"type":"array","items":{"type":"array","items":)"
       R"({"type":"array","items":{"type":"integer"}}}}})"},
      {"--max_pattern_nesting", false, R"({"type":"string","pattern":"^(((a)))$"})"},  // 3 groups
  };
  auto request = [](const Case& c) {
    v1::CompileRequest req = SchemaRequest(c.constraint);
    if (c.is_regex) req.set_regex(c.constraint);
    return req;
  };
  {
    MaskdProcess server;
    ASSERT_TRUE(server.ok()) << server.Log();
    auto client = server.Connect();
    for (const Case& c : cases) {
      auto r = client->Compile(request(c));
      EXPECT_TRUE(r.ok()) << c.flag << ": " << r.status();
    }
  }
  MaskdProcess low({"--max_regex_nesting=3", "--max_schema_nesting=7", "--max_schema_depth=4",
                    "--max_pattern_nesting=2"});
  ASSERT_TRUE(low.ok()) << low.Log();
  auto client = low.Connect();
  for (const Case& c : cases) {
    SCOPED_TRACE(c.flag);
    auto r = client->Compile(request(c));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    EXPECT_THAT(r.status().message(), HasSubstr(c.flag));
  }
  EXPECT_TRUE(client->Compile(SchemaRequest(R"({"type":"integer"})")).ok());
}

TEST(HostileSchema, NestingFlagAboveItsMaximumIsRefusedAtStartup) {
  for (const char* flag : {"--max_regex_nesting=1001", "--max_schema_nesting=257",
                           "--max_schema_depth=129", "--max_pattern_nesting=257",
                           "--max_regex_nesting=0"}) {
    SCOPED_TRACE(flag);
    MaskdProcess bad({flag}, /*wait_ready=*/false);
    EXPECT_EQ(bad.Wait(30), 2) << bad.Log();
    const std::string name(flag, std::string_view(flag).find('='));
    EXPECT_THAT(bad.Log(), HasSubstr(name));
    EXPECT_THAT(bad.Log(), HasSubstr("can only lower it"));
  }
}

}  // namespace
}  // namespace maskd
