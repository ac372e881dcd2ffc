// Child half of cuda_ipc_test: opens the parent's logits through the region
// registry (CUDA IPC) and its masks through a POSIX shm region, applies the
// kernel, and exits 0 on success.
//   cuda_ipc_child <handle hex> <device> <offset> <logits bytes> <shm key>
//                  <mask bytes> <rows> <vocab> <dtype int>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "kernels/apply_mask_cuda.h"
#include "shm/region_registry.h"

namespace {

int Fail(const std::string& what) {
  std::fprintf(stderr, "cuda_ipc_child: %s\n", what.c_str());
  return 1;
}

std::string FromHex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 10) return Fail("bad arguments");
  const std::string handle = FromHex(argv[1]);
  const int device = std::atoi(argv[2]);
  const uint64_t offset = std::strtoull(argv[3], nullptr, 10);
  const uint64_t logits_bytes = std::strtoull(argv[4], nullptr, 10);
  const std::string key = argv[5];
  const uint64_t mask_bytes = std::strtoull(argv[6], nullptr, 10);
  const int64_t rows = std::atoll(argv[7]);
  const int64_t vocab = std::atoll(argv[8]);
  const auto dtype = static_cast<maskd::LogitsDtype>(std::atoi(argv[9]));

  maskd::shm::RegionRegistry::Options o;
  o.allow_registration = true;
  maskd::shm::RegionRegistry reg(o);
  // Past the real allocation size: refused (and the handle closed again).
  absl::Status s = reg.RegisterCuda("too-big", handle, device, offset, 1ull << 40);
  if (s.code() != absl::StatusCode::kOutOfRange) return Fail("too-big: " + s.ToString());
  s = reg.RegisterCuda("logits", handle, device, offset, logits_bytes);
  if (!s.ok()) return Fail("RegisterCuda: " + s.ToString());
  s = reg.RegisterSystem("mask", key, 0, mask_bytes);
  if (!s.ok()) return Fail("RegisterSystem: " + s.ToString());
  auto logits = reg.Acquire("logits");
  auto mask = reg.Acquire("mask");
  if (!logits.ok() || !mask.ok()) return Fail("Acquire");
  if ((*logits)->kind() != maskd::shm::RegionKind::kCuda) return Fail("kind");
  if (cudaSetDevice(device) != cudaSuccess) return Fail("cudaSetDevice");
  void* d_words = nullptr;
  if (cudaMalloc(&d_words, mask_bytes) != cudaSuccess) return Fail("cudaMalloc");
  if (cudaMemcpy(d_words, (*mask)->data(), mask_bytes, cudaMemcpyHostToDevice) != cudaSuccess) {
    return Fail("cudaMemcpy");
  }
  // Unregister before using the leases: the mappings must stay valid.
  if (!reg.Unregister("").ok()) return Fail("Unregister");
  const int64_t wpr = (vocab + 31) / 32;
  s = maskd::ApplyTokenBitmaskInplaceCuda(
      {(*logits)->data(), dtype, rows, vocab, 0},
      {static_cast<const uint32_t*>(d_words), rows, wpr, vocab}, nullptr, nullptr);
  if (!s.ok()) return Fail("apply: " + s.ToString());
  if (cudaDeviceSynchronize() != cudaSuccess) return Fail("sync");
  cudaFree(d_words);
  logits->reset();  // last lease: cudaIpcCloseMemHandle
  mask->reset();
  return 0;
}
