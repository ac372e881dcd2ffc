#include "client/shm_client.h"

#include "client/client.h"

namespace maskd {

ShmClient::ShmClient(std::shared_ptr<grpc::Channel> channel, absl::Duration timeout)
    : channel_(std::move(channel)),
      stub_(v1::SharedMemory::NewStub(channel_)),
      timeout_(timeout) {}

void ShmClient::Prepare(grpc::ClientContext* ctx) const {
  if (timeout_ > absl::ZeroDuration()) {
    ctx->set_deadline(absl::ToChronoTime(absl::Now() + timeout_));
  }
}

absl::Status ShmClient::RegisterSystemRegion(const std::string& name, const std::string& key,
                                             uint64_t offset, uint64_t byte_size) {
  v1::RegisterSystemRegionRequest req;
  req.set_name(name);
  req.set_key(key);
  req.set_offset(offset);
  req.set_byte_size(byte_size);
  v1::RegisterSystemRegionResponse resp;
  grpc::ClientContext ctx;
  Prepare(&ctx);
  return FromGrpc(stub_->RegisterSystemRegion(&ctx, req, &resp));
}

absl::Status ShmClient::RegisterCudaRegion(const std::string& name, const std::string& raw_handle,
                                           int device_id, uint64_t offset, uint64_t byte_size) {
  v1::RegisterCudaRegionRequest req;
  req.set_name(name);
  req.set_raw_handle(raw_handle);
  req.set_device_id(device_id);
  req.set_offset(offset);
  req.set_byte_size(byte_size);
  v1::RegisterCudaRegionResponse resp;
  grpc::ClientContext ctx;
  Prepare(&ctx);
  return FromGrpc(stub_->RegisterCudaRegion(&ctx, req, &resp));
}

absl::Status ShmClient::RegisterCudaRegion(const std::string& name,
                                           const shm::CudaIpcExport& exported,
                                           uint64_t byte_size) {
  return RegisterCudaRegion(name, exported.handle, exported.device_id, exported.offset,
                            byte_size);
}

absl::StatusOr<std::vector<v1::RegionStatus>> ShmClient::ListRegions(const std::string& name) {
  v1::ListRegionsRequest req;
  req.set_name(name);
  v1::ListRegionsResponse resp;
  grpc::ClientContext ctx;
  Prepare(&ctx);
  grpc::Status s = stub_->ListRegions(&ctx, req, &resp);
  if (!s.ok()) return FromGrpc(s);
  return std::vector<v1::RegionStatus>(resp.regions().begin(), resp.regions().end());
}

absl::Status ShmClient::UnregisterRegion(const std::string& name) {
  v1::UnregisterRegionRequest req;
  req.set_name(name);
  v1::UnregisterRegionResponse resp;
  grpc::ClientContext ctx;
  Prepare(&ctx);
  return FromGrpc(stub_->UnregisterRegion(&ctx, req, &resp));
}

absl::Status ShmClient::StepInRegion(const v1::StepInRegionRequest& req,
                                     v1::StepInRegionResponse* resp) {
  grpc::ClientContext ctx;
  Prepare(&ctx);
  return FromGrpc(stub_->StepInRegion(&ctx, req, resp));
}

}  // namespace maskd
