// maskctl --addr ADDR health → {"status": "SERVING"}; exit 0 when SERVING,
// 3 when the server answers another status, 2 on errors.
#include "tools/maskctl/args.h"
#include "tools/maskctl/command.h"
#include "tools/maskctl/online.h"
#include "tools/maskctl/online_util.h"

#include <cstdio>

namespace maskctl {
namespace {

int Health(const Context& ctx) {
  const Args* args = &ctx.args;
  auto client = OnlineConnect(ctx);
  if (!client.ok()) return Fail("health", std::string(client.status().message()));
  auto status = (*client)->Health(args->Get("service").value_or(""));
  if (!status.ok()) return Fail("health", status.status().ToString());
  std::printf("{\"status\": %s}\n", JsonString(*status).c_str());
  return *status == "SERVING" ? 0 : 3;
}

}  // namespace
MASKCTL_COMMAND(health, "health", "the server's grpc.health.v1 status (exit 3 when not SERVING)",
                Form{}, Form{"health [--service NAME]", {"service"}, {}}, Health);

}  // namespace maskctl
