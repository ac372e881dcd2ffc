// maskctl's online subcommands: they talk to a running maskd at ctx.addr.
//
// `health`, `generate`, `bench` and `shm-demo` register themselves; `compile`
// is registered with the offline subcommand of the same name
// (index_cmds.cc), which calls RunOnlineCompile when --addr is given. Output contract: one JSON object per line on stdout;
// errors one line on stderr and exit status 2.
#ifndef MASKD_TOOLS_MASKCTL_ONLINE_H_
#define MASKD_TOOLS_MASKCTL_ONLINE_H_

#include "tools/maskctl/command.h"

namespace maskctl {

// maskctl --addr ADDR compile --tokenizer NAME CONSTRAINT (constraint_flags.h)
//   [--eager] [--timeout-ms N] [--no-wait]
// → {"index_id": "...", "state": "ready", "route": "regex", "dfa_states": n,
//    "compile_ms": x}
int RunOnlineCompile(const Context& ctx);
// Its usage and flags.
Form OnlineCompileForm();

}  // namespace maskctl

#endif  // MASKD_TOOLS_MASKCTL_ONLINE_H_
