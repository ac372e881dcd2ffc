// GPU round trip THROUGH THE SERVER (label "gpu"): this process allocates
// logits with cudaMalloc, exports a CUDA IPC handle, registers it with a
// real maskd process (--allow_shm) as a CUDA region, calls StepInRegion, then
// copies the logits back and checks them against masks from Maskd.Step of
// twin sessions. Also: masks written into a CUDA region, and an IPC event the
// server's stream waits on. Skips when no GPU is visible.
#include <cuda_runtime.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "client/shm_client.h"
#include "gtest/gtest.h"
#include "kernels/apply_mask.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/service/server_harness.h"

namespace maskd {
namespace {

using ::maskd::testing::MaskdProcess;
constexpr uint32_t kQwenVocab = 151669;
const char kRegex[] = "[a-z]{1,12}( [a-z]{1,12}){0,8}";

uint32_t NegInf(LogitsDtype d) {
  return d == LogitsDtype::kFloat32 ? 0xFF800000u : d == LogitsDtype::kFloat16 ? 0xFC00u : 0xFF80u;
}
uint32_t GetElem(const void* base, size_t elem, size_t i) {
  uint32_t v = 0;
  std::memcpy(&v, static_cast<const char*>(base) + i * elem, elem);
  return v;
}

class ShmGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MASKD_SKIP_WITHOUT_GPU();
    server_ = std::make_unique<MaskdProcess>(std::vector<std::string>{"--allow_shm"});
    ASSERT_TRUE(server_->ok()) << server_->Log();
    client_ = server_->Connect();
    shm_ = std::make_unique<ShmClient>(client_->channel(), absl::Seconds(60));
  }
  std::vector<uint64_t> NewSessions(int n) {
    v1::CompileRequest req;
    req.set_tokenizer("qwen3");
    req.set_regex(kRegex);
    req.set_wait(true);
    std::vector<uint64_t> ids;
    for (int i = 0; i < n; ++i) {
      auto s = client_->CreateSession(req);
      EXPECT_TRUE(s.ok()) << s.status();
      ids.push_back(s.ok() ? s->session_id() : 0);
    }
    return ids;
  }

  // Apply through the server into device logits, `steps` steps.
  void RoundTrip(LogitsDtype dtype, bool with_event) {
    const int n = 4;
    std::vector<uint64_t> a = NewSessions(n), b = NewSessions(n);
    const size_t elem = LogitsDtypeSize(dtype);
    const uint32_t vocab = kQwenVocab + 267;
    const std::vector<int32_t> row_map = {1, -1, 0, 3, 2};
    const uint32_t rows = static_cast<uint32_t>(row_map.size());
    const size_t bytes = size_t{rows} * vocab * elem, pre = 4096;
    char* d_alloc = nullptr;
    MASKD_CUDA_OK(cudaMalloc(&d_alloc, pre + bytes + 4096));
    char* d_logits = d_alloc + pre;
    auto exported = shm::ExportCudaIpcHandle(d_logits);
    ASSERT_TRUE(exported.ok()) << exported.status();
    const std::string region = absl::StrCat("gpu-", LogitsDtypeName(dtype), with_event ? "-ev" : "");
    ASSERT_TRUE(shm_->RegisterCudaRegion(region, *exported, bytes).ok());
    auto list = shm_->ListRegions(region);
    ASSERT_TRUE(list.ok()) << list.status();
    EXPECT_EQ((*list)[0].kind(), v1::REGION_KIND_CUDA);
    EXPECT_EQ((*list)[0].device_id(), exported->device_id);

    cudaStream_t stream = nullptr;
    cudaEvent_t event = nullptr;
    std::string event_handle;
    if (with_event) {
      MASKD_CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
      MASKD_CUDA_OK(cudaEventCreateWithFlags(&event, cudaEventInterprocess | cudaEventDisableTiming));
      cudaIpcEventHandle_t h;
      MASKD_CUDA_OK(cudaIpcGetEventHandle(&h, event));
      event_handle.assign(reinterpret_cast<const char*>(&h), sizeof h);
    }
    v1::StepInRegionRequest sreq;
    auto* t = sreq.mutable_logits();
    t->set_region(region);
    t->set_dtype(dtype == LogitsDtype::kFloat32   ? v1::LOGITS_DTYPE_FP32
                 : dtype == LogitsDtype::kFloat16 ? v1::LOGITS_DTYPE_FP16
                                                  : v1::LOGITS_DTYPE_BF16);
    t->set_rows(rows);
    t->set_vocab(vocab);
    for (int32_t m : row_map) t->add_row_map(m);
    if (with_event) t->set_wait_event(event_handle);
    v1::StepRequest req;
    for (int i = 0; i < n; ++i) {
      sreq.add_entries()->set_session_id(a[i]);
      req.add_entries()->set_session_id(b[i]);
    }
    std::mt19937_64 rng(7);
    std::vector<uint8_t> host(bytes), got(bytes);
    for (int step = 0; step < 3; ++step) {
      for (auto& x : host) x = static_cast<uint8_t>(rng());
      for (size_t i = 0; i < bytes / elem; ++i) {
        if (GetElem(host.data(), elem, i) == NegInf(dtype)) host[i * elem] ^= 1;
      }
      if (with_event) {
        // The engine's producer: an async copy on its stream, then the event.
        MASKD_CUDA_OK(cudaMemcpyAsync(d_logits, host.data(), bytes, cudaMemcpyHostToDevice, stream));
        MASKD_CUDA_OK(cudaEventRecord(event, stream));
      } else {
        MASKD_CUDA_OK(cudaMemcpy(d_logits, host.data(), bytes, cudaMemcpyHostToDevice));
        MASKD_CUDA_OK(cudaDeviceSynchronize());
      }
      v1::StepInRegionResponse sresp;
      v1::StepResponse resp;
      absl::Status s = shm_->StepInRegion(sreq, &sresp);
      ASSERT_TRUE(s.ok()) << s << "\n" << server_->Log();
      ASSERT_TRUE(client_->Step(req, &resp).ok());
      MASKD_CUDA_OK(cudaMemcpy(got.data(), d_logits, bytes, cudaMemcpyDeviceToHost));
      for (uint32_t r = 0; r < rows; ++r) {
        for (uint32_t c = 0; c < vocab; ++c) {
          const size_t i = size_t{r} * vocab + c;
          uint32_t want = GetElem(host.data(), elem, i);
          if (row_map[r] >= 0 && !Allowed(MaskRow(resp, row_map[r]), c)) want = NegInf(dtype);
          ASSERT_EQ(GetElem(got.data(), elem, i), want)
              << LogitsDtypeName(dtype) << " step " << step << " row " << r << " col " << c;
        }
      }
      for (int i = 0; i < n; ++i) {
        ASSERT_EQ(sresp.results(i).status().code(), 0);
        auto allowed = AllowedTokens(MaskRow(resp, i));
        ASSERT_FALSE(allowed.empty());
        uint32_t tok = allowed[rng() % allowed.size()];
        sreq.mutable_entries(i)->clear_tokens();
        sreq.mutable_entries(i)->add_tokens(tok);
        req.mutable_entries(i)->clear_tokens();
        req.mutable_entries(i)->add_tokens(tok);
      }
    }
    EXPECT_TRUE(shm_->UnregisterRegion(region).ok());
    if (event) cudaEventDestroy(event);
    if (stream) cudaStreamDestroy(stream);
    cudaFree(d_alloc);
  }

  std::unique_ptr<MaskdProcess> server_;
  std::unique_ptr<Client> client_;
  std::unique_ptr<ShmClient> shm_;
};

TEST_F(ShmGpuTest, ApplyInCudaRegionBf16) { RoundTrip(LogitsDtype::kBFloat16, false); }
TEST_F(ShmGpuTest, ApplyInCudaRegionFp32) { RoundTrip(LogitsDtype::kFloat32, false); }
TEST_F(ShmGpuTest, ApplyInCudaRegionFp16WaitsOnIpcEvent) { RoundTrip(LogitsDtype::kFloat16, true); }

TEST_F(ShmGpuTest, MasksIntoCudaRegion) {
  const int n = 3;
  std::vector<uint64_t> a = NewSessions(n), b = NewSessions(n);
  const uint32_t words = (kQwenVocab + 31) / 32;
  const size_t bytes = size_t{n} * words * 4;
  char* d = nullptr;
  MASKD_CUDA_OK(cudaMalloc(&d, bytes + 256));
  MASKD_CUDA_OK(cudaMemset(d, 0xAB, bytes + 256));
  auto exported = shm::ExportCudaIpcHandle(d);
  ASSERT_TRUE(exported.ok()) << exported.status();
  ASSERT_TRUE(shm_->RegisterCudaRegion("gpu-masks", *exported, bytes + 256).ok());
  v1::StepInRegionRequest sreq;
  sreq.mutable_masks()->set_region("gpu-masks");
  sreq.mutable_masks()->set_offset(128);
  v1::StepRequest req;
  for (int i = 0; i < n; ++i) {
    sreq.add_entries()->set_session_id(a[i]);
    req.add_entries()->set_session_id(b[i]);
  }
  v1::StepInRegionResponse sresp;
  v1::StepResponse resp;
  ASSERT_TRUE(shm_->StepInRegion(sreq, &sresp).ok());
  ASSERT_TRUE(client_->Step(req, &resp).ok());
  std::vector<char> got(bytes + 256);
  MASKD_CUDA_OK(cudaMemcpy(got.data(), d, got.size(), cudaMemcpyDeviceToHost));
  EXPECT_EQ(std::memcmp(got.data() + 128, resp.masks().data(), bytes), 0);
  for (size_t i = 0; i < 128; ++i) ASSERT_EQ(static_cast<uint8_t>(got[i]), 0xAB);
  for (size_t i = 128 + bytes; i < got.size(); ++i) ASSERT_EQ(static_cast<uint8_t>(got[i]), 0xAB);
  EXPECT_TRUE(shm_->UnregisterRegion("gpu-masks").ok());
  cudaFree(d);
}

}  // namespace
}  // namespace maskd
