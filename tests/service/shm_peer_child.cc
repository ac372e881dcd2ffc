// shm_peer_child: one SharedMemory call, for tests that need a client running
// as another uid (the test forks, drops to that uid and execs this).
//
//   shm_peer_child ADDR register NAME KEY SIZE | step NAME | unregister NAME | list
//
// Prints "<grpc code> <region names, for list>" on stdout; exit 0 when the
// call was made, 2 on bad arguments.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "client/shm_client.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const std::string addr = argv[1], op = argv[2];
  auto channel = grpc::CreateChannel(addr, grpc::InsecureChannelCredentials());
  maskd::ShmClient shm(channel, absl::Seconds(30));
  absl::Status s;
  std::string names;
  if (op == "register" && argc == 6) {
    s = shm.RegisterSystemRegion(argv[3], argv[4], 0, std::strtoull(argv[5], nullptr, 10));
  } else if (op == "step" && argc == 4) {
    maskd::v1::StepInRegionRequest req;
    req.mutable_masks()->set_region(argv[3]);
    maskd::v1::StepInRegionResponse resp;
    s = shm.StepInRegion(req, &resp);
  } else if (op == "unregister" && argc == 4) {
    s = shm.UnregisterRegion(argv[3]);
  } else if (op == "list" && argc == 3) {
    auto list = shm.ListRegions();
    s = list.status();
    if (list.ok()) {
      for (const auto& r : *list) names += " " + r.name();
    }
  } else {
    return 2;
  }
  std::printf("%d%s\n", static_cast<int>(s.code()), names.c_str());
  std::fprintf(stderr, "%s\n", s.ToString().c_str());
  return 0;
}
