// maskctl's online subcommands: they talk to a running maskd at ctx.addr.
//
// `health`, `generate` and `bench` register themselves; `compile` is shared
// with the offline subcommand of the same name, which calls RunOnlineCompile
// when --addr is given. Output contract: one JSON object per line on stdout;
// errors one line on stderr and exit status 2.
#ifndef MASKD_TOOLS_MASKCTL_ONLINE_H_
#define MASKD_TOOLS_MASKCTL_ONLINE_H_

#include "tools/maskctl/command.h"

namespace maskctl {

// maskctl --addr ADDR compile --tokenizer NAME (--regex R | --json-schema S |
//   --grammar FILE [--format lark|gbnf|ebnf])
//   [--eager] [--no-wait] [--timeout-ms N]
// → {"index_id": "...", "state": "ready", "route": "regex", "dfa_states": n,
//    "compile_ms": x}
int RunOnlineCompile(const Context& ctx);

}  // namespace maskctl

#endif  // MASKD_TOOLS_MASKCTL_ONLINE_H_
