// maskctl --addr ADDR compile ...: see tools/maskctl/online.h.
#include <cstdio>

#include "tools/maskctl/args.h"
#include "tools/maskctl/constraint_flags.h"
#include "tools/maskctl/online.h"
#include "tools/maskctl/online_util.h"

namespace maskctl {

Form OnlineCompileForm() {
  return OnlineConstraintForm(
      "compile --tokenizer NAME CONSTRAINT [--eager] [--eager-dfa] [--timeout-ms N] [--no-wait]",
      {"timeout-ms"}, {"eager", "eager-dfa", "no-wait"});
}

int RunOnlineCompile(const Context& ctx) {
  const Args* args = &ctx.args;
  auto req_or = CompileRequestFromFlags(*args);
  if (!req_or.ok()) return Fail("compile", std::string(req_or.status().message()));
  maskd::v1::CompileRequest req = *std::move(req_or);
  auto timeout = args->GetUint("timeout-ms", 0);
  if (!timeout.ok()) return Fail("compile", std::string(timeout.status().message()));
  req.mutable_options()->set_timeout_ms(static_cast<uint32_t>(*timeout));
  req.mutable_options()->set_eager(args->Has("eager"));
  req.mutable_options()->set_eager_dfa(args->Has("eager-dfa"));
  req.set_wait(!args->Has("no-wait"));
  auto client = OnlineConnect(ctx);
  if (!client.ok()) return Fail("compile", std::string(client.status().message()));
  auto resp = (*client)->Compile(req);
  if (!resp.ok()) return Fail("compile", resp.status().ToString());
  const char* state = resp->state() == maskd::v1::INDEX_STATE_READY       ? "ready"
                      : resp->state() == maskd::v1::INDEX_STATE_COMPILING ? "compiling"
                                                                          : "failed";
  std::printf(
      "{\"index_id\": %s, \"state\": \"%s\", \"route\": %s, \"dfa_states\": %u, "
      "\"compile_ms\": %.3f}\n",
      JsonString(resp->index_id()).c_str(), state, JsonString(resp->route()).c_str(),
      resp->dfa_states(), resp->compile_ms());
  return 0;
}

}  // namespace maskctl
