// Shared by the integration tests of the real maskd binary
// (tests/service/maskd_integration_*_test.cc): qwen3 ids, and MaskdTest, one
// server per test binary on a temporary unix socket with the bundled qwen3
// tokenizer, driven through maskd::Client.
#ifndef MASKD_TESTS_SERVICE_MASKD_INTEGRATION_TEST_UTIL_H_
#define MASKD_TESTS_SERVICE_MASKD_INTEGRATION_TEST_UTIL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "client/client.h"
#include "gtest/gtest.h"
#include "tests/service/server_harness.h"

namespace maskd::integration_test {

using ::maskd::testing::MaskdProcess;

// qwen3 ids (checked against the server by Detokenize in TokenIds).
constexpr uint32_t kOne = 16, kTwo = 17, kA = 64;
constexpr uint32_t kQwenVocab = 151669;

// The shared server: limits small enough to test, large enough for the rest.
inline const std::vector<std::string>& SharedFlags() {
  static const auto* flags = new std::vector<std::string>{
      "--max-batch=64",         "--max-sessions=300",       "--max-regex-bytes=65536",
      "--max-dfa-states=5000",  "--max-request-tokens=4096", "--max-message-bytes=8388608",
      "--max-tokenizers=3",     "--session-ttl=10m",         "--compile-threads=2"};
  return *flags;
}

class MaskdTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new MaskdProcess(SharedFlags());
    ASSERT_TRUE(server_->ok()) << server_->Log();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(server_ && server_->ok());
    client_ = server_->Connect();
  }

  v1::CompileRequest Regex(const std::string& regex) {
    v1::CompileRequest req;
    req.set_tokenizer("qwen3");
    req.set_regex(regex);
    req.set_wait(true);
    return req;
  }
  uint64_t NewSession(const std::string& regex) {
    auto s = client_->CreateSession(Regex(regex));
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? s->session_id() : 0;
  }
  // One-entry step.
  v1::StepResponse StepOne(uint64_t id, std::vector<uint32_t> tokens, uint32_t rollback = 0) {
    v1::StepRequest req;
    auto* e = req.add_entries();
    e->set_session_id(id);
    e->set_rollback(rollback);
    for (uint32_t t : tokens) e->add_tokens(t);
    v1::StepResponse resp;
    absl::Status s = client_->Step(req, &resp);
    EXPECT_TRUE(s.ok()) << s;
    return resp;
  }
  std::vector<uint32_t> EosIds() {
    auto list = client_->ListTokenizers();
    EXPECT_TRUE(list.ok());
    for (const auto& t : *list) {
      if (t.name() == "qwen3") return {t.eos_ids().begin(), t.eos_ids().end()};
    }
    return {};
  }

  static MaskdProcess* server_;
  std::unique_ptr<Client> client_;
};

inline MaskdProcess* MaskdTest::server_ = nullptr;

}  // namespace maskd::integration_test

#endif  // MASKD_TESTS_SERVICE_MASKD_INTEGRATION_TEST_UTIL_H_
