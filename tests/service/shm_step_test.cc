// SharedMemory.StepInRegion against the real maskd binary (--allow_shm):
// masks and in-place logits written to a region equal Maskd.Step replies of
// twin sessions byte for byte (every dtype, row maps, padded strides, mixed
// widths), request errors step nothing, and maskctl shm-demo's output.
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <grp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "client/shm_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/apply_mask.h"
#include "nlohmann/json.hpp"
#include "tests/service/server_harness.h"
#include "tests/service/shm_test_util.h"

namespace maskd {
namespace {

using ::maskd::testing::MaskdProcess;
using ::maskd::testing::MetricValue;
using ::maskd::testing::SessionTokens;
using ::maskd::testing::WaitForAnyMetric;
using ::testing::HasSubstr;
using ::testing::Not;
using Code = absl::StatusCode;
using ::maskd::shm_test::kQwenVocab;
using ::maskd::shm_test::kQwenWords;
using ::maskd::shm_test::kRegex;
using ::maskd::shm_test::NewSegment;
using ::maskd::shm_test::ShmTest;

// Masks target: the region holds exactly the bytes of Step's reply.
TEST_F(ShmTest, MasksEqualStepReplyByteForByte) {
  const int n = 3;
  std::vector<uint64_t> a = NewSessions(n), b = NewSessions(n);
  const std::string metrics_before = server_->Metrics();
  const size_t offset = 64, bytes = size_t{n} * kQwenWords * 4;
  auto seg = NewSegment("masks", offset + bytes + 64);
  std::memset(seg.data(), 0xAB, seg.size());
  ASSERT_TRUE(shm_->RegisterSystemRegion("m", seg.key(), 0, seg.size()).ok());
  v1::StepInRegionRequest sreq;
  sreq.mutable_masks()->set_region("m");
  sreq.mutable_masks()->set_offset(offset);
  v1::StepRequest req;
  for (int i = 0; i < n; ++i) {
    sreq.add_entries()->set_session_id(a[i]);
    req.add_entries()->set_session_id(b[i]);
  }
  std::mt19937_64 rng(3);
  for (int step = 0; step < 6; ++step) {
    v1::StepInRegionResponse sresp;
    v1::StepResponse resp;
    ASSERT_TRUE(shm_->StepInRegion(sreq, &sresp).ok());
    ASSERT_TRUE(client_->Step(req, &resp).ok());
    ASSERT_EQ(sresp.words_per_row(), kQwenWords);
    ASSERT_EQ(resp.masks().size(), bytes);
    ASSERT_EQ(std::memcmp(static_cast<char*>(seg.data()) + offset, resp.masks().data(), bytes), 0)
        << "step " << step;
    for (size_t i = 0; i < offset; ++i) ASSERT_EQ(static_cast<uint8_t*>(seg.data())[i], 0xAB);
    for (size_t i = offset + bytes; i < seg.size(); ++i) {
      ASSERT_EQ(static_cast<uint8_t*>(seg.data())[i], 0xAB);
    }
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(sresp.results(i).status().code(), 0);
      EXPECT_EQ(sresp.results(i).accepting(), resp.results(i).accepting());
      EXPECT_EQ(sresp.results(i).forced(), resp.results(i).forced());
      EXPECT_EQ(sresp.results(i).num_tokens(), resp.results(i).num_tokens());
      std::vector<uint32_t> allowed = AllowedTokens(MaskRow(resp, i));
      ASSERT_FALSE(allowed.empty());
      uint32_t t = allowed[rng() % allowed.size()];
      sreq.mutable_entries(i)->clear_tokens();
      sreq.mutable_entries(i)->add_tokens(t);
      req.mutable_entries(i)->clear_tokens();
      req.mutable_entries(i)->add_tokens(t);
    }
  }
  // A bad session id in the batch: its row is all zero, the others written.
  sreq.mutable_entries(1)->set_session_id(12345);
  v1::StepInRegionResponse sresp;
  ASSERT_TRUE(shm_->StepInRegion(sreq, &sresp).ok());
  EXPECT_EQ(sresp.results(1).status().code(), static_cast<int>(Code::kNotFound));
  EXPECT_EQ(sresp.results(0).status().code(), 0);
  const uint32_t* row1 =
      reinterpret_cast<const uint32_t*>(static_cast<char*>(seg.data()) + offset) + kQwenWords;
  for (uint32_t w = 0; w < kQwenWords; ++w) ASSERT_EQ(row1[w], 0u);
  // StepInRegion calls count as Step calls in the metrics, with their batch size:
  // 7 StepInRegion + 6 Step calls of 3 entries each.
  const std::string m = server_->Metrics();
  auto delta = [&](const std::string& name) {  // an absent sample (-1) is 0
    return std::max(MetricValue(m, name), 0.0) - std::max(MetricValue(metrics_before, name), 0.0);
  };
  EXPECT_EQ(delta("maskd_step_batch_size_count"), 13) << m;
  EXPECT_EQ(delta("maskd_step_batch_size_sum"), 39);
  EXPECT_EQ(delta("maskd_client_step_entries_total{client=\"unknown\"}"), 39);
}

// A batch with a grammar session runs on the step pool (--step-threads), off
// the callback thread: its rows land in the region as a unary Step's reply
// carries them, with a regex session beside it in the same batch.
TEST_F(ShmTest, GrammarBatchMasksEqualStepReplyByteForByte) {
  v1::CompileRequest grammar;
  grammar.set_tokenizer("qwen3");
  grammar.mutable_grammar()->set_text("root ::= [0-9]+ (\"+\" [0-9]+)*\n");
  grammar.mutable_grammar()->set_format(v1::Grammar::FORMAT_GBNF);
  grammar.set_wait(true);
  auto ga = client_->CreateSession(grammar);
  auto gb = client_->CreateSession(grammar);
  ASSERT_TRUE(ga.ok() && gb.ok()) << ga.status() << gb.status();
  const uint64_t ra = NewSession(), rb = NewSession();
  const size_t bytes = size_t{2} * kQwenWords * 4;
  auto seg = NewSegment("grammar", bytes);
  ASSERT_TRUE(shm_->RegisterSystemRegion("g", seg.key(), 0, seg.size()).ok());
  v1::StepInRegionRequest sreq;
  sreq.mutable_masks()->set_region("g");
  sreq.add_entries()->set_session_id(ga->session_id());
  sreq.add_entries()->set_session_id(ra);
  v1::StepRequest req;
  req.add_entries()->set_session_id(gb->session_id());
  req.add_entries()->set_session_id(rb);
  std::mt19937_64 rng(5);
  for (int step = 0; step < 6; ++step) {
    std::memset(seg.data(), 0xAB, seg.size());
    v1::StepInRegionResponse sresp;
    v1::StepResponse resp;
    ASSERT_TRUE(shm_->StepInRegion(sreq, &sresp).ok());
    ASSERT_TRUE(client_->Step(req, &resp).ok());
    ASSERT_EQ(resp.masks().size(), bytes);
    ASSERT_EQ(std::memcmp(seg.data(), resp.masks().data(), bytes), 0) << "step " << step;
    for (int i = 0; i < 2; ++i) {
      ASSERT_EQ(sresp.results(i).status().code(), 0) << sresp.results(i).status().message();
      EXPECT_EQ(sresp.results(i).num_tokens(), resp.results(i).num_tokens());
      EXPECT_EQ(sresp.results(i).num_tokens(), static_cast<uint64_t>(step));
      std::vector<uint32_t> allowed = AllowedTokens(MaskRow(resp, i));
      ASSERT_FALSE(allowed.empty());
      const uint32_t t = allowed[rng() % allowed.size()];
      for (auto* e : {sreq.mutable_entries(i), req.mutable_entries(i)}) {
        e->clear_tokens();
        e->add_tokens(t);
      }
    }
  }
  EXPECT_TRUE(shm_->UnregisterRegion("g").ok());
}

TEST_F(ShmTest, StepInRegionRequestErrorsStepNothing) {
  uint64_t id = NewSession();
  uint64_t wide = NewSession("tiny100", "[ab]*"), narrow = NewSession("tiny40", "[ab]*");
  auto seg = NewSegment("reqerr", 1 << 20);
  ASSERT_TRUE(shm_->RegisterSystemRegion("r", seg.key(), 0, seg.size()).ok());
  auto call = [&](const v1::StepInRegionRequest& r) {
    v1::StepInRegionResponse resp;
    return shm_->StepInRegion(r, &resp);
  };
  v1::StepInRegionRequest base;
  auto* e = base.add_entries();
  e->set_session_id(id);
  auto allowed = AllowedTokens(MaskRow([&] {
    v1::StepRequest q;
    q.add_entries()->set_session_id(id);
    v1::StepResponse p;
    EXPECT_TRUE(client_->Step(q, &p).ok());
    return p;
  }(), 0));
  ASSERT_FALSE(allowed.empty());
  e->add_tokens(allowed[0]);  // would advance the session if stepped

  v1::StepInRegionRequest r = base;
  EXPECT_EQ(call(r).code(), Code::kInvalidArgument);  // no target
  r.mutable_masks()->set_region("unknown");
  EXPECT_EQ(call(r).code(), Code::kNotFound);
  r.mutable_masks()->set_region("r");
  r.mutable_masks()->set_offset(seg.size() - 100);
  EXPECT_EQ(call(r).code(), Code::kOutOfRange);
  r.mutable_masks()->set_offset(2);
  EXPECT_EQ(call(r).code(), Code::kInvalidArgument);  // misaligned
  // Mixed widths on a masks target.
  v1::StepInRegionRequest mixed;
  mixed.mutable_masks()->set_region("r");
  mixed.add_entries()->set_session_id(wide);
  mixed.add_entries()->set_session_id(narrow);
  absl::Status ms = call(mixed);
  EXPECT_EQ(ms.code(), Code::kInvalidArgument);
  EXPECT_THAT(std::string(ms.message()), HasSubstr("same mask width"));

  auto logits = [&] {
    v1::StepInRegionRequest l = base;
    auto* t = l.mutable_logits();
    t->set_region("r");
    t->set_dtype(v1::LOGITS_DTYPE_BF16);
    t->set_rows(1);
    t->set_vocab(kQwenVocab);
    return l;
  };
  r = logits();
  r.mutable_logits()->set_dtype(v1::LOGITS_DTYPE_UNSPECIFIED);
  EXPECT_EQ(call(r).code(), Code::kInvalidArgument);
  r = logits();
  r.mutable_logits()->set_rows(0);
  EXPECT_EQ(call(r).code(), Code::kInvalidArgument);
  r = logits();
  r.mutable_logits()->set_vocab(0);
  EXPECT_EQ(call(r).code(), Code::kInvalidArgument);
  r = logits();
  r.mutable_logits()->set_row_stride(kQwenVocab - 1);
  EXPECT_EQ(call(r).code(), Code::kInvalidArgument);
  r = logits();
  r.mutable_logits()->set_rows(4);  // 4 rows > 1 entry, no map; also past the region
  EXPECT_THAT(call(r).code(), ::testing::AnyOf(Code::kInvalidArgument, Code::kOutOfRange));
  r = logits();
  r.mutable_logits()->set_rows(2);
  EXPECT_EQ(call(r).code(), Code::kInvalidArgument);  // no map, 2 rows, 1 entry
  r.mutable_logits()->add_row_map(0);
  EXPECT_EQ(call(r).code(), Code::kInvalidArgument);  // map size != rows
  r.mutable_logits()->add_row_map(1);
  EXPECT_EQ(call(r).code(), Code::kInvalidArgument);  // entry 1 does not exist
  r = logits();
  r.mutable_logits()->set_offset(1);
  EXPECT_EQ(call(r).code(), Code::kInvalidArgument);  // misaligned bf16
  r = logits();
  r.mutable_logits()->set_offset(seg.size() - 1000);
  EXPECT_EQ(call(r).code(), Code::kOutOfRange);
  r = logits();
  r.mutable_logits()->set_row_stride(uint64_t{1} << 62);
  r.mutable_logits()->set_rows(5);
  r.mutable_logits()->add_row_map(0);
  r.mutable_logits()->add_row_map(0);
  r.mutable_logits()->add_row_map(0);
  r.mutable_logits()->add_row_map(0);
  r.mutable_logits()->add_row_map(0);
  EXPECT_EQ(call(r).code(), Code::kInvalidArgument);  // overflow
  r = logits();
  r.mutable_logits()->set_wait_event(std::string(64, 'e'));
  EXPECT_EQ(call(r).code(), Code::kInvalidArgument);  // event on a system region
  // None of these stepped the session.
  EXPECT_EQ(NumTokens(id), 0u);
  // And a good call does.
  r = logits();
  v1::StepInRegionResponse ok;
  ASSERT_TRUE(shm_->StepInRegion(r, &ok).ok());
  EXPECT_EQ(ok.results(0).status().code(), 0);
  EXPECT_EQ(ok.results(0).num_tokens(), 1u);
}

uint32_t NegInf(LogitsDtype d) {
  return d == LogitsDtype::kFloat32 ? 0xFF800000u : d == LogitsDtype::kFloat16 ? 0xFC00u : 0xFF80u;
}
v1::LogitsDtype ProtoDtype(LogitsDtype d) {
  return d == LogitsDtype::kFloat32   ? v1::LOGITS_DTYPE_FP32
         : d == LogitsDtype::kFloat16 ? v1::LOGITS_DTYPE_FP16
                                      : v1::LOGITS_DTYPE_BF16;
}
uint32_t GetElem(const void* base, size_t elem, size_t i) {
  uint32_t v = 0;
  std::memcpy(&v, static_cast<const char*>(base) + i * elem, elem);
  return v;
}

// Apply in place, every dtype: a row map with untouched rows, a padded row
// stride, logits wider than the tokenizer, and a bad session id whose row is
// left untouched.
void ApplyCase(ShmTest* t, Client* client, ShmClient* shm, LogitsDtype dtype,
               const std::vector<uint64_t>& a, const std::vector<uint64_t>& b) {
  const int n = static_cast<int>(a.size());
  const size_t elem = LogitsDtypeSize(dtype);
  const uint32_t vocab = kQwenVocab + 267;  // Qwen's real logits width: 151936
  const uint64_t stride = vocab + 64;
  const std::vector<int32_t> row_map = {2, -1, 0, 3, 1, -1, 2};  // entry 3: bad session
  const uint32_t rows = static_cast<uint32_t>(row_map.size());
  const size_t offset = 4096 + 8 * elem;
  const size_t count = (rows - 1) * stride + vocab;
  auto seg = NewSegment("apply", offset + count * elem + 4096);
  std::mt19937_64 rng(static_cast<uint64_t>(dtype) + 11);
  const std::string region = absl::StrCat("apply-", LogitsDtypeName(dtype));
  ASSERT_TRUE(shm->RegisterSystemRegion(region, seg.key(), 0, seg.size()).ok());

  v1::StepInRegionRequest sreq;
  auto* target = sreq.mutable_logits();
  target->set_region(region);
  target->set_offset(offset);
  target->set_dtype(ProtoDtype(dtype));
  target->set_rows(rows);
  target->set_vocab(vocab);
  target->set_row_stride(stride);
  for (int32_t m : row_map) target->add_row_map(m);
  v1::StepRequest req;
  for (int i = 0; i < n; ++i) {
    sreq.add_entries()->set_session_id(i == 3 ? 424242 : a[i]);
    req.add_entries()->set_session_id(b[i]);
  }
  req.set_words_per_row(0);
  char* logits = static_cast<char*>(seg.data()) + offset;
  for (int step = 0; step < 4; ++step) {
    // Random bits, never -inf, so that "untouched" and "masked" differ.
    std::vector<uint8_t> before(seg.size());
    for (auto& x : before) x = static_cast<uint8_t>(rng());
    for (size_t i = 0; i < before.size() / elem; ++i) {
      if (GetElem(before.data(), elem, i) == NegInf(dtype)) before[i * elem] ^= 1;
    }
    std::memcpy(seg.data(), before.data(), seg.size());
    v1::StepInRegionResponse sresp;
    v1::StepResponse resp;
    ASSERT_TRUE(shm->StepInRegion(sreq, &sresp).ok());
    ASSERT_TRUE(client->Step(req, &resp).ok());
    ASSERT_EQ(sresp.results(3).status().code(), static_cast<int>(Code::kNotFound));
    const char* want_base = reinterpret_cast<const char*>(before.data()) + offset;
    for (uint32_t r = 0; r < rows; ++r) {
      const int32_t m = row_map[r];
      for (uint64_t c = 0; c < stride && r * stride + c < count; ++c) {
        const size_t i = r * stride + c;
        uint32_t want = GetElem(want_base, elem, i);
        if (m >= 0 && m != 3 && c < vocab) {
          absl::Span<const uint32_t> mask = MaskRow(resp, m);
          if (!Allowed(mask, static_cast<uint32_t>(c))) want = NegInf(dtype);
        }
        ASSERT_EQ(GetElem(logits, elem, i), want)
            << LogitsDtypeName(dtype) << " step " << step << " row " << r << " col " << c;
      }
    }
    // Outside the logits: untouched.
    ASSERT_EQ(std::memcmp(seg.data(), before.data(), offset), 0);
    ASSERT_EQ(std::memcmp(logits + count * elem, want_base + count * elem,
                          seg.size() - offset - count * elem),
              0);
    for (int i = 0; i < n; ++i) {
      if (i == 3) continue;
      ASSERT_EQ(sresp.results(i).status().code(), 0);
      ASSERT_EQ(sresp.results(i).num_tokens(), resp.results(i).num_tokens());
      std::vector<uint32_t> allowed = AllowedTokens(MaskRow(resp, i));
      ASSERT_FALSE(allowed.empty());
      uint32_t tok = allowed[rng() % allowed.size()];
      sreq.mutable_entries(i)->clear_tokens();
      sreq.mutable_entries(i)->add_tokens(tok);
      req.mutable_entries(i)->clear_tokens();
      req.mutable_entries(i)->add_tokens(tok);
    }
  }
  (void)t;
}

TEST_F(ShmTest, ApplyInPlaceFp32) { ApplyCase(this, client_.get(), shm_.get(), LogitsDtype::kFloat32, NewSessions(4), NewSessions(4)); }
TEST_F(ShmTest, ApplyInPlaceBf16) { ApplyCase(this, client_.get(), shm_.get(), LogitsDtype::kBFloat16, NewSessions(4), NewSessions(4)); }
TEST_F(ShmTest, ApplyInPlaceFp16) { ApplyCase(this, client_.get(), shm_.get(), LogitsDtype::kFloat16, NewSessions(4), NewSessions(4)); }

// Logits narrower than a session's vocabulary: that entry fails, its row is
// untouched; a mixed-width batch applies (padding ids -inf).
TEST_F(ShmTest, MixedWidthsAndNarrowLogits) {
  uint64_t wide = NewSession("tiny100", "[ab]*"), narrow = NewSession("tiny40", "[ab]*");
  auto seg = NewSegment("narrow", 2 * 64 * 4);
  ASSERT_TRUE(shm_->RegisterSystemRegion("n", seg.key(), 0, seg.size()).ok());
  float* f = static_cast<float*>(seg.data());
  std::fill_n(f, 128, 1.0f);
  v1::StepInRegionRequest req;
  req.add_entries()->set_session_id(narrow);
  req.add_entries()->set_session_id(wide);
  auto* t = req.mutable_logits();
  t->set_region("n");
  t->set_dtype(v1::LOGITS_DTYPE_FP32);
  t->set_rows(2);
  t->set_vocab(64);
  v1::StepInRegionResponse resp;
  ASSERT_TRUE(shm_->StepInRegion(req, &resp).ok());
  EXPECT_EQ(resp.results(0).status().code(), 0);
  EXPECT_EQ(resp.results(1).status().code(), static_cast<int>(Code::kInvalidArgument));
  EXPECT_EQ(resp.words_per_row(), 4u);
  // Row 0 (tiny40, "[ab]*"): a (0), b (1), ab (2), <eos> (3) allowed; the rest -inf.
  for (int c = 0; c < 64; ++c) {
    if (c < 4) {
      EXPECT_EQ(f[c], 1.0f) << c;
    } else {
      EXPECT_EQ(f[c], -std::numeric_limits<float>::infinity()) << c;
    }
  }
  for (int c = 64; c < 128; ++c) EXPECT_EQ(f[c], 1.0f) << c;  // row 1 untouched
  EXPECT_EQ(NumTokens(wide), 0u);
}

// maskctl shm-demo: output contract.
std::string RunCapture(const std::string& cmd, int* status) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t k;
  while ((k = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, k);
  int st = pclose(p);
  *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

TEST_F(ShmTest, MaskctlShmDemoContract) {
  const std::string maskctl = std::string(MASKD_BIN_DIR) + "/maskctl";
  for (const char* dtype : {"fp32", "bf16", "fp16"}) {
    int status = -1;
    std::string out = RunCapture(maskctl + " --addr " + server_->addr() +
                                     " shm-demo --tokenizer qwen3 --regex '" + kRegex +
                                     "' --rows 3 --steps 4 --dtype " + dtype,
                                 &status);
    ASSERT_EQ(status, 0) << out;
    ASSERT_FALSE(out.empty());
    ASSERT_EQ(out.back(), '\n');
    auto j = nlohmann::json::parse(out);
    EXPECT_EQ(j["rows"], 3);
    EXPECT_EQ(j["steps"], 4);
    EXPECT_EQ(j["dtype"], dtype);
    EXPECT_EQ(j["mismatches"], 0);
    EXPECT_GT(j["apply_p50_us"].get<double>(), 0);
    EXPECT_GT(j["reply_p50_us"].get<double>(), 0);
    EXPECT_EQ(j.size(), 6u);
  }
  int status = -1;
  std::string out = RunCapture(maskctl + " --addr " + server_->addr() +
                                   " shm-demo --tokenizer nope --regex a --rows 1 --steps 1 2>&1",
                               &status);
  EXPECT_EQ(status, 2) << out;
  EXPECT_THAT(out, HasSubstr("maskctl shm-demo:"));
  out = RunCapture(maskctl + " --addr " + server_->addr() +
                       " shm-demo --tokenizer qwen3 --regex a --rows 1 --steps 1 --dtype fp64 2>&1",
                   &status);
  EXPECT_EQ(status, 2) << out;
}

}  // namespace
}  // namespace maskd
