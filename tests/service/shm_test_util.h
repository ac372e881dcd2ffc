// Shared by the SharedMemory service tests (tests/service/shm_*_test.cc):
// ShmTest, the real maskd binary on a temporary unix socket (--allow_shm) with
// two tiny tokenizers besides qwen3, and POSIX shared-memory segments whose
// keys are unique to this process.
#ifndef MASKD_TESTS_SERVICE_SHM_TEST_UTIL_H_
#define MASKD_TESTS_SERVICE_SHM_TEST_UTIL_H_

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "client/shm_client.h"
#include "gtest/gtest.h"
#include "tests/service/server_harness.h"

namespace maskd::shm_test {

using ::maskd::testing::MaskdProcess;

constexpr uint32_t kQwenVocab = 151669;
constexpr uint32_t kQwenWords = (kQwenVocab + 31) / 32;
const char kRegex[] = "[a-z]{1,12}( [a-z]{1,12}){0,8}";

inline std::string Key(const std::string& tag) {
  static std::atomic<int> n{0};
  return absl::StrCat("/maskd-test-", getpid(), "-", tag, "-", n++);
}

inline shm::PosixShmSegment NewSegment(const std::string& tag, size_t bytes) {
  auto seg = shm::PosixShmSegment::Create(Key(tag), bytes);
  EXPECT_TRUE(seg.ok()) << seg.status();
  return seg.ok() ? *std::move(seg) : shm::PosixShmSegment();
}

class ShmTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new MaskdProcess({"--allow_shm", "--max-batch=64", "--max-message-bytes=67108864"});
    ASSERT_TRUE(server_->ok()) << server_->Log();
    // Two tiny tokenizers of different widths (40 ids: 2 words; 100 ids: 4).
    auto c = server_->Connect();
    for (uint32_t v : {40u, 100u}) {
      v1::RegisterTokenizerRequest req;
      req.set_name(absl::StrCat("tiny", v));
      req.set_tokenizer_json(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2},
        "merges": ["a b"]}, "added_tokens": [{"id": 3, "content": "<eos>", "special": true}],
        "decoder": {"type": "ByteLevel"}, "pre_tokenizer": {"type": "ByteLevel"}})");
      req.set_tokenizer_config_json(R"({"eos_token": "<eos>"})");
      req.set_vocab_size(v);
      auto t = c->RegisterTokenizer(req);
      ASSERT_TRUE(t.ok()) << t.status();
    }
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(server_ && server_->ok());
    client_ = server_->Connect();
    shm_ = std::make_unique<ShmClient>(client_->channel(), absl::Seconds(30));
  }
  void TearDown() override {
    if (shm_) (void)shm_->UnregisterRegion("");
  }

  uint64_t NewSession(const std::string& tokenizer = "qwen3", const std::string& regex = kRegex) {
    v1::CompileRequest req;
    req.set_tokenizer(tokenizer);
    req.set_regex(regex);
    req.set_wait(true);
    auto s = client_->CreateSession(req);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? s->session_id() : 0;
  }
  std::vector<uint64_t> NewSessions(int n, const std::string& tokenizer = "qwen3",
                                    const std::string& regex = kRegex) {
    std::vector<uint64_t> ids;
    for (int i = 0; i < n; ++i) ids.push_back(NewSession(tokenizer, regex));
    return ids;
  }
  uint64_t NumTokens(uint64_t id) {
    v1::StepRequest req;
    req.add_entries()->set_session_id(id);
    v1::StepResponse resp;
    EXPECT_TRUE(client_->Step(req, &resp).ok());
    return resp.results(0).num_tokens();
  }

  static MaskdProcess* server_;
  std::unique_ptr<Client> client_;
  std::unique_ptr<ShmClient> shm_;
};

inline MaskdProcess* ShmTest::server_ = nullptr;

}  // namespace maskd::shm_test

#endif  // MASKD_TESTS_SERVICE_SHM_TEST_UTIL_H_
